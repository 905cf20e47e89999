"""The operator's prompt naming the target, as a person on a real robot gives it: a clicked point or a drawn box.

Every bundled env reports, in every observation, ``obs["extra"]["target_prompt_point"]`` ([3] float32, world
frame, m) and ``obs["extra"]["target_prompt_box"]`` ([2, 3] float32: min corner, max corner of an axis-aligned
world box). Both are computed once at reset from the simulator: the world bounding box of the target's visual
geometry (the cabinet's target link, the chair, the bucket, the pick object) at reset, and its centre, plus
Gaussian noise of std ``prompt_noise_m`` per coordinate of the point and per face of the box. They stay fixed
for the episode (an operator clicks once). The noise comes from a generator of its own, seeded from the reset
seed, so that the episode's physics and sampling are the same with any noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import sapien

DEFAULT_PROMPT_NOISE_M = 0.02
# Mixed into the reset seed so that the prompt's noise is a stream of its own, never the env's np_random.
_PROMPT_STREAM = 0x70524F4D  # "pROM"


def check_prompt_noise(noise_m) -> float:
    """``noise_m`` as a float std in m; ``ValueError`` unless finite and >= 0."""
    try:
        value = float(noise_m)
    except (TypeError, ValueError):
        raise ValueError(f"prompt_noise_m must be a finite std >= 0 m, got {noise_m!r}") from None
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"prompt_noise_m must be a finite std >= 0 m, got {noise_m!r}")
    return value


def prompt_rng(seed: int | None) -> np.random.Generator:
    """The prompt's noise generator for a reset seed (fresh entropy for None), independent of the env's
    ``np_random`` for the same seed."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence([int(seed), _PROMPT_STREAM]))


def shape_points_S(shape) -> np.ndarray:
    """Points spanning a render shape's extent, in the shape's own frame (SAPIEN primitives lie along x)."""
    r = sapien.render
    if isinstance(shape, r.RenderShapeTriangleMesh):
        return np.concatenate([np.asarray(m.vertices) for m in shape.parts]) * np.asarray(shape.scale)
    if isinstance(shape, r.RenderShapeBox):
        half = np.asarray(shape.half_size)
    elif isinstance(shape, r.RenderShapeSphere):
        half = np.full(3, shape.radius)
    elif isinstance(shape, r.RenderShapeCapsule):
        half = np.array([shape.half_length + shape.radius, shape.radius, shape.radius])
    elif isinstance(shape, r.RenderShapeCylinder):
        half = np.array([shape.half_length, shape.radius, shape.radius])
    else:
        return np.zeros((1, 3))
    return np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half


def visual_bounds_W(entities: Iterable[sapien.Entity], exclude_ids: Iterable[int] = ()) -> np.ndarray:
    """[2, 3] min and max corner (m, world) of the render shapes of ``entities`` (links or actors), leaving
    out shapes whose ``per_scene_id`` is in ``exclude_ids`` (marker shapes); ``ValueError`` when none is left."""
    exclude = set(int(i) for i in exclude_ids)
    points = []
    for entity in entities:
        body = entity.find_component_by_type(sapien.render.RenderBodyComponent)
        if body is None:
            continue
        X_WE = entity.pose
        for shape in body.render_shapes:
            if shape.per_scene_id in exclude:
                continue
            X = (X_WE * shape.local_pose).to_transformation_matrix()
            points.append(shape_points_S(shape) @ X[:3, :3].T + X[:3, 3])
    if not points:
        raise ValueError("the target has no visual geometry to put a prompt on")
    points = np.concatenate(points)
    return np.stack([points.min(axis=0), points.max(axis=0)])


def noisy_prompt(bounds_W: np.ndarray, noise_m: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(point [3], box [2, 3]) float32: the centre of ``bounds_W`` plus N(0, noise_m) per coordinate, and the
    box with N(0, noise_m) added to each of its six faces (re-ordered per axis if the noise crossed them)."""
    bounds_W = np.asarray(bounds_W, dtype=np.float64)
    point = bounds_W.mean(axis=0) + rng.normal(0.0, noise_m, 3)
    box = bounds_W + rng.normal(0.0, noise_m, (2, 3))
    box = np.stack([box.min(axis=0), box.max(axis=0)])
    return point.astype(np.float32), box.astype(np.float32)
