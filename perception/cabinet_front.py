"""Where a cabinet's front is, from its points seen from wherever the robot stands: the cabinet's floor rectangle,
which of its four sides is the front (the one the target handle stands out of), which sides a viewpoint has
looked at squarely, and where the base stands to look at a side or to work at the front.

A long-horizon scene starts the robot beside or behind the cabinet (TidyIntoDrawer: 1-2.2 m from the
cabinet-table midpoint, any bearing); the cabinet trees' handle search assumes it starts in front. A PartNet-style
cabinet's front is where its handles stand proud of the body: the target drawer's handle lies on (or beyond) the
front side of the rectangle and inside the others by at least the body's wall, in front of the drawer's panel.
A side seen squarely without a target-handle point is not the front.

Plain numpy (world frame W, z up, metres); errors as :class:`~handleit.perception.place_targets.PlaceTargetError`
(a ``ValueError``) naming what is missing.
"""

from __future__ import annotations

import math

import numpy as np

from .place_targets import Footprint, PlaceTargetError
from .point_cloud import as_points

CABINET_MIN_POINTS = 50  # fewer cabinet points: no rectangle
CABINET_MIN_HALF_M = 0.15  # a rectangle seen from one face is grown to at least this half size, away from the viewer
THIN_M = 0.05  # a rectangle thinner than this is one face: its axes from the points' principal directions
PROMPT_MARGIN_M = 0.1  # the rectangle holds the prompt (the target part's centre) with this much to spare
HANDLE_MAX_INSIDE_M = 0.05  # a handle's centre lies at most this far inside the rectangle's front side ...
HANDLE_MIN_LEAD_M = 0.02  # ... and this much farther out of it than out of any other side (a corner: unsure)
FIT_ANGLE_STEP_RAD = math.radians(1.0)  # the rectangle's heading searched on this grid (over 90 degrees)
FIT_CLOSENESS_M = 0.01  # a point this close to a side counts fully toward that heading's score


def l_shape_axes(xy, angle_step_rad: float = FIT_ANGLE_STEP_RAD, closeness_m: float = FIT_CLOSENESS_M) -> np.ndarray:
    """The heading of a box seen in part, from its points' xy ([N, 2], m): unit rows [2, 2], the rectangle whose
    sides the points hug. The closeness criterion of "Efficient L-Shape Fitting for Vehicle Detection Using
    Laser Scanners" (Zhang, Xu, Zhao, Mertz; IEEE IV 2017): over headings on a grid, each point scores the
    inverse of its distance to the nearer side of the bounding rectangle at that heading (at least
    ``closeness_m``), and the best sum wins.

    A box seen from a corner shows two faces, an L. The smallest rectangle around an L is ambiguous: a right
    triangle's bounding rectangle along its hypotenuse has the area of the one along its legs, and numerical
    ties turned a cabinet's estimate 25-30 degrees (TidyIntoDrawer test seed 8). The L's points lie on the
    sides only at the true heading."""
    p = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    p = p - p.mean(axis=0)

    def best(theta: np.ndarray) -> float:
        e1 = np.stack([np.cos(theta), np.sin(theta)], axis=1)  # [A, 2]
        e2 = np.stack([-e1[:, 1], e1[:, 0]], axis=1)
        c1, c2 = p @ e1.T, p @ e2.T  # [N, A]
        d1 = np.minimum(c1.max(axis=0) - c1, c1 - c1.min(axis=0))
        d2 = np.minimum(c2.max(axis=0) - c2, c2 - c2.min(axis=0))
        score = (1.0 / np.maximum(np.minimum(d1, d2), closeness_m)).sum(axis=0)
        return float(theta[int(np.argmax(score))])

    coarse = 5.0 * angle_step_rad  # coarse to fine: a fifth of the headings scored
    theta = best(np.arange(0.0, math.pi / 2, coarse))
    theta = best(theta + np.arange(-coarse, coarse + 0.5 * angle_step_rad, angle_step_rad))
    e1 = np.array([math.cos(theta), math.sin(theta)])
    return np.stack([e1, np.array([-e1[1], e1[0]])])


def _unit2(v, name: str) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64).reshape(-1)[:2]
    n = float(np.linalg.norm(v))
    if not np.isfinite(n) or n < 1e-9:
        raise PlaceTargetError(f"{name} has no horizontal direction: {v}")
    return v / n


def estimate_cabinet_rectangle(cabinet_points_W, prompt_W=None, viewpoint_xy=None,
                               min_points: int = CABINET_MIN_POINTS, min_half_m: float = CABINET_MIN_HALF_M,
                               prompt_margin_m: float = PROMPT_MARGIN_M) -> Footprint:
    """The cabinet's floor rectangle from its points (``cabinet_points_W`` [N, 3]: body, parts, handles; m, W):
    the rectangle their xy hug (:func:`l_shape_axes`), its extents the 1st-99th percentiles along its axes
    (stray points), grown to hold the prompt's xy (``prompt_W`` [3], the target part's centre) with
    ``prompt_margin_m`` to spare, and each half size to at least ``min_half_m``, the growth away from
    ``viewpoint_xy`` (the back of a face seen from the front is hidden). Axes: unit rows, the first the longer
    side. PlaceTargetError with fewer than ``min_points`` points."""
    p = as_points(cabinet_points_W, "cabinet_points_W")
    if len(p) < min_points:
        raise PlaceTargetError(f"cabinet: {len(p)} points, need {min_points} for its rectangle")
    xy = p[:, :2] - p[:, :2].mean(axis=0)
    _, vecs = np.linalg.eigh(xy.T @ xy)
    principal = np.stack([vecs[:, 1], vecs[:, 0]])
    if np.ptp(xy @ principal[1]) < THIN_M:  # one face seen: a line, whose hull is degenerate
        axes = principal
    else:
        axes = l_shape_axes(p[:, :2])
    local = p[:, :2] @ axes.T
    lo, hi = np.percentile(local, 1, axis=0), np.percentile(local, 99, axis=0)
    if prompt_W is not None:
        q = np.asarray(prompt_W, dtype=np.float64).reshape(-1)[:2] @ axes.T
        lo, hi = np.minimum(lo, q - prompt_margin_m), np.maximum(hi, q + prompt_margin_m)
    view = None if viewpoint_xy is None else np.asarray(viewpoint_xy, dtype=np.float64)[:2] @ axes.T
    for k in range(2):
        short = 2 * min_half_m - (hi[k] - lo[k])
        if short > 0:
            centre_k = 0.5 * (lo[k] + hi[k])
            if view is None:
                lo[k], hi[k] = lo[k] - short / 2, hi[k] + short / 2
            elif view[k] < centre_k:  # seen from the low side: the hidden part lies toward high
                hi[k] += short
            else:
                lo[k] -= short
    if hi[1] - lo[1] > hi[0] - lo[0]:
        axes, lo, hi = axes[::-1].copy(), lo[::-1].copy(), hi[::-1].copy()
    centre = 0.5 * (lo + hi) @ axes
    return Footprint(centre, axes, 0.5 * (hi - lo))


def side_normals(rect: Footprint) -> tuple[np.ndarray, np.ndarray]:
    """The rectangle's four sides: outward unit normals [4, 2] (+axis 0, -axis 0, +axis 1, -axis 1) and the
    distance (m) from the centre to each side [4]."""
    a = np.asarray(rect.axes_W, dtype=np.float64)
    h = np.asarray(rect.half_extent_m, dtype=np.float64)
    return np.stack([a[0], -a[0], a[1], -a[1]]), np.array([h[0], h[0], h[1], h[1]])


def front_side(rect: Footprint, handle_points_W, part_points_W=None, max_inside_m: float = HANDLE_MAX_INSIDE_M,
               min_lead_m: float = HANDLE_MIN_LEAD_M) -> int | None:
    """Which side of ``rect`` (index into :func:`side_normals`) the target part's handle stands out of: the side
    the handle's centre lies farthest beyond (a handle stands proud of the front; on the other sides it lies
    inside by at least the body's wall). None when that is ambiguous: the handle more than ``max_inside_m``
    inside every side, or the best side ahead of the next by less than ``min_lead_m`` (at a corner), or the
    handle behind the part's points along that side's normal (``part_points_W``, when given: the front panel
    the handle stands on). PlaceTargetError: no handle points."""
    handle = as_points(handle_points_W, "handle_points_W")
    if not len(handle):
        raise PlaceTargetError("front: no handle points")
    h = handle.mean(axis=0)[:2]
    normals, dist = side_normals(rect)
    beyond = (h - np.asarray(rect.center_W, dtype=np.float64)[:2]) @ normals.T - dist
    order = np.argsort(beyond)[::-1]
    k = int(order[0])
    if beyond[k] < -max_inside_m or beyond[k] - beyond[order[1]] < min_lead_m:
        return None
    if part_points_W is not None:
        part = as_points(part_points_W, "part_points_W")
        if len(part) and float((h - part.mean(axis=0)[:2]) @ normals[k]) < 0.0:
            return None
    return k


def sides_seen_from(rect: Footprint, viewpoint_xy, min_distance_m: float = 0.3,
                    max_angle_rad: float = math.radians(50.0)) -> np.ndarray:
    """Which sides (bool [4], as :func:`side_normals`) a camera at ``viewpoint_xy`` looks at squarely: it stands
    at least ``min_distance_m`` out from the side, within ``max_angle_rad`` of its normal (seen from the
    side's centre)."""
    v = np.asarray(viewpoint_xy, dtype=np.float64).reshape(-1)[:2]
    normals, dist = side_normals(rect)
    seen = np.zeros(4, dtype=bool)
    for k in range(4):
        face_centre = np.asarray(rect.center_W, dtype=np.float64)[:2] + dist[k] * normals[k]
        r = v - face_centre
        out = float(r @ normals[k])
        if out >= min_distance_m and out >= math.cos(max_angle_rad) * float(np.linalg.norm(r)):
            seen[k] = True
    return seen


def side_standoff_xy_yaw(rect: Footprint, side: int, distance_m: float, target_W=None) -> tuple[np.ndarray, float]:
    """Where the base stands ``distance_m`` out from side ``side`` (index into :func:`side_normals`) of the
    rectangle, facing it: (xy [2], yaw rad). In line with ``target_W`` (e.g. the handle; its projection on the
    side) when given, else with the side's centre."""
    if side not in range(4):
        raise ValueError(f"side must be 0-3, got {side!r}")
    if distance_m <= 0:
        raise ValueError(f"distance_m must be > 0, got {distance_m}")
    normals, dist = side_normals(rect)
    n = normals[side]
    centre = np.asarray(rect.center_W, dtype=np.float64)[:2]
    face = centre + dist[side] * n
    if target_W is not None:
        t = np.asarray(target_W, dtype=np.float64).reshape(-1)[:2]
        lateral = np.array([-n[1], n[0]])
        face = face + float((t - face) @ lateral) * lateral
    xy = face + distance_m * n
    return xy, math.atan2(-n[1], -n[0])
