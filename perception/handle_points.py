"""Handle points: merged over time steps, and the handle's frame (centroid, PCA axes, extents, shape).

A handle seen from 1-2 m is often 10-60 points in one frame, so the paper merges points over time steps and
waits for "at least 50 points or ten steps, whichever comes first" before computing the centroid
(Let's Handle It (arXiv 2202.11792) Sec. 2.3). :class:`HandleAccumulator` does that, deduplicating repeated views of the
same surface with a voxel grid; :func:`estimate_handle_frame` gives the centroid, principal axes, extents and
the shape class that picks the grasp orientation.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

import numpy as np

from handleit.perception.point_cloud import (
    Z_W,
    as_points,
    as_pose,
    horizontal_direction,
    invert_pose,
    transform_points,
    voxel_keys,
)

HandleShape = Literal["horizontal", "vertical", "compact"]

MIN_POINTS = 50  # Let's Handle It Sec. 2.3: at least 50 points ...
MIN_STEPS = 10  # ... or ten steps, whichever comes first
# Knob heads are 2.5-4.5 cm across; bars and lips are at least 8 cm long: 6 cm splits them with margin.
COMPACT_MAX_M = 0.06
MIN_ELONGATION = 2.0  # a bar's length over its thickness is > 3; a knob's head is round (about 1)
# Views kept with their cameras' centres for denoising along the rays (perception.depth_denoise): the last
# 20 steps, when the arm reaches its pregrasp, are views from within a few centimetres of where it stands.
RECENT_STEPS = 20


@dataclass(frozen=True)
class HandleFrame:
    """A handle's frame H from its points, in the world W.

    Axes (columns of ``axes_W``): principal (the bar's direction), secondary, third; right-handed. With a
    front normal, the third axis is that (outward) normal and the first two lie in the front's plane.
    """

    centroid_W: np.ndarray  # [3] mean of the points, m
    # [3] middle of the points' extent along each axis, m. Along a bar it estimates the bar's middle
    # better than the mean: with 40 points on a 20 cm bar the mean strays ~1 cm, the middle ~0.5 cm, and
    # the bar's nearer end, sampled more densely, does not pull it.
    center_W: np.ndarray
    axes_W: np.ndarray  # [3, 3] unit axes as columns
    extents_m: np.ndarray  # [3] extent of the points along each axis (max - min), m
    shape: HandleShape  # "horizontal" | "vertical" bar or lip, "compact" (knob-like)
    n_points: int

    @property
    def principal_axis_W(self) -> np.ndarray:
        return self.axes_W[:, 0]

    @property
    def X_WH(self) -> np.ndarray:
        """4x4 pose of the handle frame H (origin at ``center_W``) in the world."""
        X = np.eye(4)
        X[:3, :3] = self.axes_W
        X[:3, 3] = self.center_W
        return X


def classify_handle_shape(principal_axis_W, extent_along_m: float, extent_across_m: float, *,
                          compact_max_m: float = COMPACT_MAX_M, min_elongation: float = MIN_ELONGATION) -> HandleShape:
    """Shape class of a handle from its in-plane extents (m) and principal axis (world, z up).

    "compact" (knob-like) when the handle is short (``extent_along_m < compact_max_m``) or hardly
    elongated (along / across < ``min_elongation``); otherwise "vertical" when the principal axis is within
    45 degrees of world z, else "horizontal".
    """
    axis = np.asarray(principal_axis_W, dtype=np.float64)
    if extent_along_m < compact_max_m or extent_along_m < min_elongation * max(extent_across_m, 1e-6):
        return "compact"
    return "vertical" if abs(axis @ Z_W) > np.sqrt(0.5) * np.linalg.norm(axis) else "horizontal"


def _canonical(axis: np.ndarray) -> np.ndarray:
    """Pick a repeatable sign for an axis from PCA (its sign is arbitrary): up if steep, else +x/+y."""
    main = 2 if abs(axis[2]) > np.sqrt(0.5) else int(np.argmax(np.abs(axis[:2])))
    return axis if axis[main] >= 0 else -axis


def estimate_handle_frame(points_W, front_normal_W=None, *, compact_max_m: float = COMPACT_MAX_M,
                          min_elongation: float = MIN_ELONGATION) -> HandleFrame:
    """Centroid, principal axes (PCA), extents and shape class of handle points.

    Args:
        points_W: ``[N, 3]`` handle points in the world (z up), m; at least one.
        front_normal_W: outward normal of the front the handle sits on (world). When given, the PCA runs in
            the front's plane, so a knob's stem or a lip's protrusion (along the normal) does not count as
            length; recommended for one-sided views.
    Returns:
        A :class:`HandleFrame`. With fewer than 3 points the axes fall back to the front's plane (or the
        world axes) and the shape is "compact".
    Raises:
        ValueError on an empty or invalid point set.
    """
    p = as_points(points_W, "points_W", allow_empty=False)
    centroid = p.mean(axis=0)
    q = p - centroid
    if front_normal_W is not None:
        n = horizontal_direction(front_normal_W, "front_normal_W")
        e_h = np.cross(Z_W, n)  # horizontal, in the front's plane
        basis = np.stack([e_h, Z_W], axis=1)  # [3, 2]
        uv = q @ basis
        if len(p) >= 3:
            _, vectors = np.linalg.eigh(np.cov(uv.T))
            a1 = _canonical(basis @ vectors[:, 1])
        else:
            a1 = e_h
        a3 = n
        a2 = np.cross(a3, a1)
    elif len(p) >= 3:
        _, vectors = np.linalg.eigh(np.cov(q.T))
        a1, a2 = _canonical(vectors[:, 2]), _canonical(vectors[:, 1])
        a3 = np.cross(a1, a2)
    else:
        a1, a2, a3 = np.eye(3)
    axes = np.stack([a1, a2, a3], axis=1)
    coords = q @ axes
    extents = coords.max(axis=0) - coords.min(axis=0)
    center = centroid + axes @ (0.5 * (coords.max(axis=0) + coords.min(axis=0)))
    if len(p) < 3:
        shape: HandleShape = "compact"
    else:
        shape = classify_handle_shape(a1, extents[0], extents[1], compact_max_m=compact_max_m,
                                      min_elongation=min_elongation)
    return HandleFrame(centroid, center, axes, extents, shape, len(p))


@dataclass(frozen=True)
class _VoxelSums:
    """Points reduced to voxels: key, sum and count per occupied voxel (merges without the raw points)."""

    keys: np.ndarray  # [M] int64, sorted
    sums: np.ndarray  # [M, 3]
    counts: np.ndarray  # [M]

    @staticmethod
    def empty() -> _VoxelSums:
        return _VoxelSums(np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros(0))

    @staticmethod
    def of(points: np.ndarray, voxel_m: float) -> _VoxelSums:
        return _VoxelSums.merge([_VoxelSums(voxel_keys(points, voxel_m), points, np.ones(len(points)))])

    @staticmethod
    def merge(parts: list[_VoxelSums]) -> _VoxelSums:
        keys = np.concatenate([part.keys for part in parts])
        if len(keys) == 0:
            return _VoxelSums.empty()
        sums = np.concatenate([part.sums for part in parts])
        counts = np.concatenate([part.counts for part in parts])
        unique, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.reshape(-1)
        size = len(unique)
        summed = np.stack([np.bincount(inverse, weights=sums[:, i], minlength=size) for i in range(3)], axis=1)
        return _VoxelSums(unique, summed, np.bincount(inverse, weights=counts, minlength=size))

    def means(self) -> np.ndarray:
        return self.sums / self.counts[:, None] if len(self.keys) else np.zeros((0, 3))


class HandleAccumulator:
    """Merges a handle's points over control steps until there are enough for a grasp.

    ``ready`` follows Let's Handle It Sec. 2.3: at least ``min_points`` merged points or ``min_steps`` calls of
    :meth:`add`, whichever comes first (and at least one point). Merged points are deduplicated on a voxel
    grid (the mean per voxel), so a static view repeated ten times counts once, not ten times.

    A moving part smears its points in the world. Call :meth:`reset` when the part moves (e.g. after the
    grasp), keep only the last ``max_steps`` steps, or pass the part's pose ``X_WP`` with every
    :meth:`add`: points are then stored in the part frame P and returned in the world at the latest pose.

    Cost: an :meth:`add` merges the step's points into the running voxel sums (a few hundred to a few
    thousand voxels), well under 1 ms.
    """

    def __init__(self, min_points: int = MIN_POINTS, min_steps: int = MIN_STEPS, voxel_m: float = 0.003,
                 max_steps: int | None = None, recent_steps: int = RECENT_STEPS):
        """
        Args:
            min_points: merged (deduplicated) points that make the handle ready (Let's Handle It: 50).
            min_steps: steps after which it is ready anyway, if any point was seen (Let's Handle It: 10).
            voxel_m: deduplication voxel (m); 3 mm is below the cameras' point spacing at 1-2 m (4-8 mm),
                so distinct points of one view stay distinct.
            max_steps: keep only the points of the last this many steps (None: all since the last reset).
            recent_steps: the raw points of the last this many steps that came with their cameras' centres
                (``origins_W``) are kept as they were seen, for :meth:`recent_views`.
        """
        if min_points < 1 or min_steps < 1:
            raise ValueError(f"min_points and min_steps must be >= 1, got {min_points} and {min_steps}")
        if not voxel_m > 0:
            raise ValueError(f"voxel_m must be positive, got {voxel_m}")
        self.min_points = int(min_points)
        self.min_steps = int(min_steps)
        self.voxel_m = float(voxel_m)
        self.max_steps = max_steps
        self.recent_steps = int(recent_steps)
        self.reset()

    def reset(self) -> None:
        """Forget all points and steps (e.g. when the part has moved or a new episode starts)."""
        self._frames: deque[_VoxelSums] = deque(maxlen=self.max_steps)
        self._total = _VoxelSums.empty()
        self._n_steps = 0
        self._in_part_frame: bool | None = None
        self._X_WP: np.ndarray | None = None
        self._recent: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=self.recent_steps)

    def add(self, points_W, X_WP=None, origins_W=None) -> None:
        """Add one step's handle points.

        Args:
            points_W: ``[N, 3]`` handle points in the world, m (N may be 0: the step still counts).
            X_WP: optional 4x4 pose of the part (drawer/door) frame P in the world at this step. Give it
                with every call or with none.
            origins_W: optional ``[N, 3]`` (or ``[3]``) centre of the camera that saw each point, world (m):
                the step's points are then also kept as seen, for :meth:`recent_views` (not with ``X_WP``).
        """
        p_W = as_points(points_W, "points_W")
        if origins_W is not None and X_WP is None and len(p_W):
            o = np.broadcast_to(np.asarray(origins_W, dtype=np.float64), p_W.shape).copy()
            self._recent.append((p_W.copy(), o))
        if self._in_part_frame is None:
            self._in_part_frame = X_WP is not None
        elif self._in_part_frame != (X_WP is not None):
            raise ValueError("HandleAccumulator.add: give X_WP with every call or with none (since the last reset)")
        if X_WP is not None:
            self._X_WP = as_pose(X_WP, "X_WP")
            p_W = transform_points(invert_pose(self._X_WP), p_W) if len(p_W) else p_W  # stored as p_P
        frame = _VoxelSums.of(p_W, self.voxel_m)
        if self.max_steps is None:  # a running total: the cost stays that of the merged points
            self._total = _VoxelSums.merge([self._total, frame])
        else:  # a window: re-merge the kept steps
            self._frames.append(frame)
            self._total = _VoxelSums.merge(list(self._frames))
        self._n_steps += 1

    def recent_views(self) -> tuple[np.ndarray, np.ndarray]:
        """The raw points of the last ``recent_steps`` steps added with ``origins_W``, ``[M, 3]``, and the
        camera centre each was seen from, ``[M, 3]`` (world, m); empty arrays when there are none."""
        if not self._recent:
            return np.zeros((0, 3)), np.zeros((0, 3))
        return (np.concatenate([p for p, _ in self._recent]), np.concatenate([o for _, o in self._recent]))

    @property
    def n_steps(self) -> int:
        """Calls of :meth:`add` since the last reset."""
        return self._n_steps

    @property
    def n_points(self) -> int:
        """Merged (voxel-deduplicated) points."""
        return len(self._total.keys)

    @property
    def ready(self) -> bool:
        """Enough points for a grasp: ``min_points`` merged points or ``min_steps`` steps, and any point."""
        return self.n_points > 0 and (self.n_points >= self.min_points or self._n_steps >= self.min_steps)

    @property
    def points(self) -> np.ndarray:
        """Merged handle points ``[M, 3]`` in the world, m (at the latest part pose if ``X_WP`` was given)."""
        merged = self._total.means()
        if self._in_part_frame and len(merged):
            return transform_points(self._X_WP, merged)
        return merged

    def handle_frame(self, front_normal_W=None) -> HandleFrame:
        """The merged handle's frame (see :func:`estimate_handle_frame`); ValueError when no point was seen."""
        if self.n_points == 0:
            raise ValueError("HandleAccumulator.handle_frame: no handle points yet")
        return estimate_handle_frame(self.points, front_normal_W)
