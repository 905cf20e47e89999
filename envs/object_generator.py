"""Procedural rigid objects for PickObject, written as mesh folders (``visual.obj``, ``collision/*.obj``,
``meta.json``) under the asset cache.

Each object of the two splits (60 train, 20 test) is sampled from its id (``object-train-007``),
deterministically (the seed is the crc32 of the id). Shapes cycle with the id's index, so every split holds
each of them: boxes, cylinders, spheres, capsules, random convex hulls, L-shapes (two boxes) and thin plates.

Conventions (PickObject and its ground truth rely on them), in the object frame O:

- the meshes are stored in the object's resting orientation, +z up: one of its stable poses on a plane
  (``trimesh.poses.compute_stable_poses``), drawn with the probabilities of a random drop, so the env places
  an object with a yaw only;
- the origin is the centre of mass (uniform density);
- ``collision/part_NN.obj`` are convex pieces (one per box of an L-shape, one otherwise); ``visual.obj`` is
  their union, the render geometry (low-poly: at most a few hundred triangles).

Graspable by the Panda (fingers 0.08 m apart when open) from above: in its resting orientation every object
(for an L-shape: one of its arms) is at most ``GRASP_WIDTH_MAX_M`` = 7 cm across in some horizontal
direction, and at least
``HEIGHT_MIN_M`` = 1.5 cm tall, so that the finger pads (about 1.8 cm long) close on its side above the
table. Boxes and convex hulls have two of their three extents at most 6.5 cm, so that whichever face they rest
on, a horizontal extent fits the gripper; thin plates (1.5-2.5 cm thick, 4-7 cm wide, 10-16 cm long) lie
flat and are grasped across their width, not pinched off the table by an edge. Sizes that could break this
rule are drawn again.

Mass: a uniform density in [250, 1200] kg/m^3 (foam-filled plastic to hardwood) times the volume: 5 g to
0.45 kg over the two splits (median 0.09 kg); the Panda carries all of them. ``mass_kg`` in ``meta.json`` is
computed from the exact meshes; PhysX's cooked hulls of the rounded shapes hold up to ~3% less.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trimesh
from scipy.spatial import ConvexHull

from .asset_cache import build_once, cache_dir
from .procedural import choice as _choice
from .procedural import jittered_rgba as _jittered_rgba
from .procedural import uniform as _uniform
from .rigid_object import RigidObjectAsset, read_object_folder

GENERATOR_VERSION = "1"
SPLIT_COUNTS = {"train": 60, "test": 20}
SHAPES = ("box", "cylinder", "sphere", "capsule", "convex_hull", "l_shape", "plate")
GRASP_WIDTH_MAX_M = 0.07  # narrowest horizontal width of a resting object's part (the gripper opens 0.08 m)
HEIGHT_MIN_M = 0.015  # resting height: room for the finger pads above the table
DENSITY_RANGE_KG_M3 = (250.0, 1200.0)

# Sizes (m) per shape.
_BOX_SMALL_RANGE_M = (0.025, 0.065)  # two of the three extents
_BOX_LONG_RANGE_M = (0.025, 0.12)  # the third
_CYLINDER_RADIUS_RANGE_M = (0.015, 0.033)
_CYLINDER_HEIGHT_RANGE_M = (0.03, 0.14)
_CYLINDER_SECTIONS = 16
_SPHERE_RADIUS_RANGE_M = (0.02, 0.033)
_SPHERE_SUBDIVISIONS = 1  # 80 triangles: facets broad enough to rest on
_CAPSULE_RADIUS_RANGE_M = (0.015, 0.03)
_CAPSULE_LENGTH_RANGE_M = (0.03, 0.10)  # between the two hemisphere centres
_CAPSULE_COUNT = (12, 6)  # sections around, rings per hemisphere
_HULL_POINTS_RANGE = (10, 24)
_L_BAR_LENGTH_RANGE_M = (0.08, 0.14)
_L_LEG_LENGTH_RANGE_M = (0.04, 0.09)  # beyond the bar
_L_SECTION_RANGE_M = (0.025, 0.045)  # width and height of both arms
_PLATE_LENGTH_RANGE_M = (0.10, 0.16)
_PLATE_WIDTH_RANGE_M = (0.04, 0.07)
_PLATE_THICKNESS_RANGE_M = (0.015, 0.025)
_MAX_DRAWS = 100
_FLAT_SHAPES = ("l_shape", "plate")  # always rest on their broad side

_COLORS = {
    "red": (0.80, 0.15, 0.12),
    "orange": (0.95, 0.52, 0.10),
    "yellow": (0.95, 0.82, 0.18),
    "blue": (0.16, 0.32, 0.75),
    "purple": (0.52, 0.28, 0.62),
    "pink": (0.92, 0.48, 0.62),
    "white": (0.92, 0.92, 0.90),
    "cyan": (0.15, 0.70, 0.80),
    "brown": (0.55, 0.36, 0.22),
}  # no dark grey: the Panda's hand and fingers are dark
_ID_PATTERN = re.compile(r"^object-(train|test)-(\d{3})$")


@dataclass(frozen=True)
class ObjectSpec:
    """One object, sampled and derived, as plain data (``dataclasses.asdict`` is json-serializable).
    Lengths in m; extents in the object frame O (resting orientation)."""

    model_id: str
    split: str
    seed: int
    shape: str  # one of SHAPES
    params: dict[str, float]  # the shape's sampled dimensions (m), by name
    extents_m: tuple[float, float, float]  # bounding box of the resting object along O's x, y, z
    grasp_width_m: float  # narrowest horizontal width of a convex part of the resting object
    volume_m3: float
    density_kg_m3: float
    mass_kg: float
    num_parts: int  # convex collision pieces
    color: str
    rgba: tuple[float, float, float, float]


def object_ids(split: str) -> list[str]:
    """Ids of one split, e.g. ``object-train-007``; split in {train, test}."""
    if split not in SPLIT_COUNTS:
        raise ValueError(f"unknown split {split!r}; valid splits: {sorted(SPLIT_COUNTS)}")
    return [f"object-{split}-{i:03d}" for i in range(SPLIT_COUNTS[split])]


def sample_object(model_id: str) -> ObjectSpec:
    """The object of ``model_id`` (an id from ``object_ids``), deterministically from the id."""
    return _generate(model_id)[0]


def object_parts(model_id: str) -> list[trimesh.Trimesh]:
    """The convex collision pieces of ``model_id`` in the object frame O (resting, centre of mass at 0)."""
    return _generate(model_id)[1]


def write_object(model_id: str, folder: Path) -> Path:
    """Write ``visual.obj``, ``collision/part_NN.obj`` and ``meta.json`` of ``model_id`` into ``folder``."""
    spec, parts = _generate(model_id)
    folder = Path(folder)
    (folder / "collision").mkdir(parents=True, exist_ok=True)
    collision_files = []
    for i, part in enumerate(parts):
        name = f"collision/part_{i:02d}.obj"
        part.export(folder / name)
        collision_files.append(name)
    trimesh.util.concatenate(parts).export(folder / "visual.obj")
    meta = {
        "generator_version": GENERATOR_VERSION,
        "visual": "visual.obj",
        "collision": collision_files,
        **dataclasses.asdict(spec),
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return folder


def object_asset(model_id: str) -> RigidObjectAsset:
    """The mesh folder of ``model_id``, generated once under the asset cache."""
    sample_object(model_id)  # validates the id before anything is written
    folder = build_once(cache_dir() / "objects" / f"{model_id}-v{GENERATOR_VERSION}",
                        lambda tmp: write_object(model_id, tmp))
    return read_object_folder(folder)


# ---------------------------------------------------------------------------------------------- sampling


def _generate(model_id: str) -> tuple[ObjectSpec, list[trimesh.Trimesh]]:
    match = _ID_PATTERN.match(model_id) if isinstance(model_id, str) else None
    if match is None:
        raise ValueError(f"malformed object id {model_id!r}; expected 'object-<train|test>-<NNN>', "
                         "e.g. 'object-train-000'")
    split, index = match.group(1), int(match.group(2))
    if index >= SPLIT_COUNTS[split]:
        ids = object_ids(split)
        raise ValueError(f"object id {model_id!r} out of range: split {split!r} has {ids[0]} .. {ids[-1]}")
    seed = zlib.crc32(model_id.encode("utf-8"))  # crc32, not hash(): Python salts str hashes per process
    rng = np.random.default_rng(seed)
    shape = SHAPES[index % len(SHAPES)]
    for _ in range(_MAX_DRAWS):
        params, parts = _SHAPE_SAMPLERS[shape](rng)
        parts = _rest(parts, rng, flat=shape in _FLAT_SHAPES)
        if parts is not None:
            break
    else:  # pragma: no cover - the ranges above make a graspable draw likely
        raise RuntimeError(f"no graspable {shape} for {model_id!r} in {_MAX_DRAWS} draws")

    whole = trimesh.util.concatenate(parts)
    volume = float(sum(p.volume for p in parts))
    density = _uniform(rng, *DENSITY_RANGE_KG_M3)
    color = _choice(rng, sorted(_COLORS))
    lo, hi = whole.bounds
    spec = ObjectSpec(
        model_id=model_id,
        split=split,
        seed=seed,
        shape=shape,
        params=params,
        extents_m=tuple(round(float(e), 4) for e in hi - lo),
        grasp_width_m=round(_grasp_width(parts), 4),
        volume_m3=round(volume, 9),
        density_kg_m3=density,
        mass_kg=round(density * volume, 4),
        num_parts=len(parts),
        color=color,
        rgba=_jittered_rgba(rng, _COLORS[color]),
    )
    return spec, parts


def _rest(parts: list[trimesh.Trimesh], rng: np.random.Generator, flat: bool) -> list[trimesh.Trimesh] | None:
    """The parts turned into a stable resting pose, the most likely one when ``flat`` (L-shapes and plates
    lie on their broad side), else drawn with the pose probabilities of a random drop, and moved so that the
    centre of mass is the origin; None when that pose is not graspable from above."""
    whole = trimesh.util.concatenate(parts)
    com = _center_of_mass(parts)
    transforms, probabilities = trimesh.poses.compute_stable_poses(whole, center_mass=com)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if flat:
        k = int(np.argmax(probabilities))
    else:
        k = int(rng.choice(len(probabilities), p=probabilities / probabilities.sum()))
    rotation = np.eye(4)
    rotation[:3, :3] = transforms[k][:3, :3]
    turned = [p.copy().apply_transform(rotation) for p in parts]
    com_O = rotation[:3, :3] @ com
    for p in turned:
        p.apply_translation(-com_O)
    height = float(np.ptp(np.concatenate([p.vertices for p in turned])[:, 2]))
    if _grasp_width(turned) > GRASP_WIDTH_MAX_M or height < HEIGHT_MIN_M:
        return None
    return turned


def _grasp_width(parts: list[trimesh.Trimesh]) -> float:
    """Narrowest horizontal width of any convex part: a gripper closing across that part holds the object
    (an L-shape is held across one of its arms)."""
    return min(_min_width_xy(p.vertices) for p in parts)


def _center_of_mass(parts: list[trimesh.Trimesh]) -> np.ndarray:
    """Centre of mass of disjoint convex parts of one uniform density."""
    volumes = np.array([p.volume for p in parts])
    centers = np.array([p.center_mass for p in parts])
    return volumes @ centers / volumes.sum()


def _min_width_xy(points: np.ndarray) -> float:
    """Narrowest width of the points' projection on the xy plane (rotating calipers over hull edges)."""
    xy = np.asarray(points)[:, :2]
    hull = xy[ConvexHull(xy).vertices]
    edges = np.roll(hull, -1, axis=0) - hull
    normals = np.stack([-edges[:, 1], edges[:, 0]], axis=1)
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    extents = hull @ normals.T  # [vertices, edges]
    return float(np.min(extents.max(axis=0) - extents.min(axis=0)))


def _box(rng):
    small = [_uniform(rng, *_BOX_SMALL_RANGE_M) for _ in range(2)]
    extents = [*small, _uniform(rng, *_BOX_LONG_RANGE_M)]
    order = rng.permutation(3)
    extents = [extents[i] for i in order]
    return dict(zip(("x", "y", "z"), extents)), [trimesh.creation.box(extents)]


def _cylinder(rng):
    radius, height = _uniform(rng, *_CYLINDER_RADIUS_RANGE_M), _uniform(rng, *_CYLINDER_HEIGHT_RANGE_M)
    return {"radius": radius, "height": height}, [
        trimesh.creation.cylinder(radius=radius, height=height, sections=_CYLINDER_SECTIONS)
    ]


def _sphere(rng):
    radius = _uniform(rng, *_SPHERE_RADIUS_RANGE_M)
    return {"radius": radius}, [trimesh.creation.icosphere(subdivisions=_SPHERE_SUBDIVISIONS, radius=radius)]


def _capsule(rng):
    radius, length = _uniform(rng, *_CAPSULE_RADIUS_RANGE_M), _uniform(rng, *_CAPSULE_LENGTH_RANGE_M)
    return {"radius": radius, "length": length}, [
        trimesh.creation.capsule(height=length, radius=radius, count=list(_CAPSULE_COUNT))
    ]


def _convex_hull(rng):
    """Random points in a box whose extents follow the box rule (two of three at most 6.5 cm)."""
    extents = np.array([_uniform(rng, *_BOX_SMALL_RANGE_M), _uniform(rng, *_BOX_SMALL_RANGE_M),
                        _uniform(rng, 0.03, _BOX_LONG_RANGE_M[1])])[rng.permutation(3)]
    n = int(rng.integers(_HULL_POINTS_RANGE[0], _HULL_POINTS_RANGE[1] + 1))
    points = rng.uniform(-0.5, 0.5, size=(n, 3)) * extents
    points = np.round(points, 5)  # 0.01 mm: the stored files stay byte-identical
    hull = trimesh.convex.convex_hull(points)
    return {"box_x": float(extents[0]), "box_y": float(extents[1]), "box_z": float(extents[2]),
            "points": n}, [hull]


def _l_shape(rng):
    """A bar along x and a leg along y from one of its ends, the same section; both lie on z = 0."""
    bar, leg = _uniform(rng, *_L_BAR_LENGTH_RANGE_M), _uniform(rng, *_L_LEG_LENGTH_RANGE_M)
    width, height = _uniform(rng, *_L_SECTION_RANGE_M), _uniform(rng, *_L_SECTION_RANGE_M)
    bar_box = trimesh.creation.box([bar, width, height])
    leg_box = trimesh.creation.box([width, leg, height])
    leg_box.apply_translation([(bar - width) / 2, (width + leg) / 2, 0.0])
    return {"bar_length": bar, "leg_length": leg, "width": width, "height": height}, [bar_box, leg_box]


def _plate(rng):
    length, width = _uniform(rng, *_PLATE_LENGTH_RANGE_M), _uniform(rng, *_PLATE_WIDTH_RANGE_M)
    thickness = _uniform(rng, *_PLATE_THICKNESS_RANGE_M)
    return {"length": length, "width": width, "thickness": thickness}, [
        trimesh.creation.box([length, width, thickness])
    ]


_SHAPE_SAMPLERS = {
    "box": _box,
    "cylinder": _cylinder,
    "sphere": _sphere,
    "capsule": _capsule,
    "convex_hull": _convex_hull,
    "l_shape": _l_shape,
    "plate": _plate,
}
