"""Objects on a table, from their observed (partial) points: the supporting surface's height, the object's
centre, its top.

A camera above a table sees an object's top and near sides, so the mean of its points lies high and toward
the camera. For the object's centre, the middle of its extent seen from above (the smallest rectangle around
its points in xy: a box's footprint even from a few dozen points) and halfway from the table to its top is
closer to the truth (exact for boxes and upright cylinders resting on the table). A footprint that does not
fill its rectangle (an L-shape) is centred instead by the mean of its top surface's points (the camera
samples a flat top evenly, so their mean is the top's centroid: a prism's centre of mass).

Measured on the 60 PickObject train objects (one camera, 128x128), the error of the centre (horizontal and
vertical together): median 0.45 cm with the rectangle alone, L-shapes 1.4-2.5 cm; the top's points bring
the L-shapes to 0.3-1.2 cm, except two whose far arm is hidden (2.4-2.7 cm).

All positions are in the world frame W (z up), in metres.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull, QhullError, cKDTree

from handleit.perception.point_cloud import as_points
from handleit.types import Grasp

SUPPORT_RADIUS_M = 0.15  # the surface is measured within this horizontal distance of the object
SUPPORT_BAND_M = 0.01  # surface points lie no higher than this above the object's lowest seen point
MIN_SUPPORT_POINTS = 10
# A footprint whose points' cells (1.5 point spacings wide) cover less than this of its smallest rectangle is
# concave (PickObject train: every L-shape 0.48-0.77, boxes, cylinders, plates, capsules, hulls 0.83-1.0).
CONCAVE_FILL = 0.8
TOP_BAND_M = 0.006  # points this close below the highest are the top surface (at least one point spacing)


@dataclass(frozen=True)
class TabletopObject:
    """An object resting on (or held above) a horizontal surface, estimated from its points."""

    points_W: np.ndarray  # [N, 3] the points it was estimated from
    center_W: np.ndarray  # [3] footprint centre (xy), halfway between the support and the top (z)
    top_z: float  # highest observed point (m)
    support_z: float  # height of the surface under it (m)
    footprint_axes_W: np.ndarray  # [2, 2] the footprint rectangle's axes (unit, xy)
    footprint_extent_m: np.ndarray  # [2] the rectangle's side lengths along those axes (m)
    footprint_fill: float  # fraction of the rectangle the points cover, seen from above (< CONCAVE_FILL: concave)

    @property
    def height_m(self) -> float:
        return self.top_z - self.support_z


def min_area_rectangle(xy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The smallest rectangle around 2D points (one side lies along an edge of their convex hull).

    Args:
        xy: ``[N, 2]`` points (m).
    Returns:
        (centre [2], axes [2, 2] unit rows, side lengths [2]) in the points' frame. For collinear points (a
        closed drawer's front seen from above, a line of 2 points): the first axis along their line, the second
        side of length 0; for one point, or all at one place, the frame's axes.
    """
    p = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if len(p) == 0:
        raise ValueError("min_area_rectangle: no points")
    axes = np.eye(2)
    try:
        hull = p[ConvexHull(p).vertices]
        edges = np.roll(hull, -1, axis=0) - hull
        length = np.linalg.norm(edges, axis=1)
        u = edges[length > 1e-6] / length[length > 1e-6, None]
        if len(u):
            v = np.stack([-u[:, 1], u[:, 0]], axis=1)
            area = np.ptp(hull @ u.T, axis=0) * np.ptp(hull @ v.T, axis=0)
            k = int(np.argmin(area))
            axes = np.stack([u[k], v[k]])
    except (QhullError, ValueError):  # degenerate: along their line (axis-aligned, it took a turned line's box)
        centred = p - p.mean(axis=0)
        if np.abs(centred).max(initial=0.0) > 1e-9:
            u = np.linalg.svd(centred, full_matrices=False)[2][0]
            axes = np.stack([u, [-u[1], u[0]]])
    along = p @ axes.T
    lo, hi = along.min(axis=0), along.max(axis=0)
    return 0.5 * (lo + hi) @ axes, axes, hi - lo


def estimate_support_height(points_W, object_points_W, radius_m: float = SUPPORT_RADIUS_M,
                            band_m: float = SUPPORT_BAND_M, min_points: int = MIN_SUPPORT_POINTS) -> float | None:
    """Height (m) of the surface an object rests on: the median height of the scene's points within
    ``radius_m`` (horizontally) of the object and no higher than ``band_m`` above its lowest seen point.

    Args:
        points_W: ``[N, 3]`` scene points without the object (and without the robot), world, m.
        object_points_W: ``[M, 3]`` the object's points, world, m.
    Returns:
        The height, or None when fewer than ``min_points`` points qualify (no surface seen near it).
    """
    scene = as_points(points_W, "points_W")
    obj = as_points(object_points_W, "object_points_W", allow_empty=False)
    centre_xy = obj[:, :2].mean(axis=0)
    near = np.linalg.norm(scene[:, :2] - centre_xy, axis=1) < radius_m
    below = scene[:, 2] <= obj[:, 2].min() + band_m
    z = scene[near & below, 2]
    if len(z) < min_points:
        return None
    # The highest dense layer: the table, not the floor far below it that the camera may also see.
    top_layer = z[z >= np.percentile(z, 90) - 2 * band_m]
    return float(np.median(top_layer))


def estimate_tabletop_object(object_points_W, support_z: float | None = None) -> TabletopObject:
    """The object's centre, top and footprint from its observed points (see the module docstring).

    Args:
        object_points_W: ``[N, 3]`` the object's points, world, m (at least one).
        support_z: the height (m) of the surface under it (:func:`estimate_support_height`); None: its lowest
            observed point.
    """
    p = as_points(object_points_W, "object_points_W", allow_empty=False)
    centre_xy, axes, extent = min_area_rectangle(p[:, :2])
    top = float(p[:, 2].max())
    support = float(p[:, 2].min()) if support_z is None else float(support_z)
    spacing = _point_spacing_m(p)
    fill = _rectangle_fill(p[:, :2], centre_xy, axes, extent, 1.5 * spacing)
    if fill < CONCAVE_FILL:
        centre_xy = p[p[:, 2] >= top - max(TOP_BAND_M, spacing), :2].mean(axis=0)
    centre = np.array([centre_xy[0], centre_xy[1], 0.5 * (support + top)])
    return TabletopObject(p, centre, top, support, axes, extent, fill)


def _point_spacing_m(p: np.ndarray, least_m: float = 0.004) -> float:
    """Median nearest-neighbour distance of the points (m), at least ``least_m``."""
    if len(p) < 2:
        return least_m
    d, _ = cKDTree(p).query(p, k=2)
    return max(least_m, float(np.median(d[:, 1])))


def _rectangle_fill(xy: np.ndarray, centre: np.ndarray, axes: np.ndarray, extent: np.ndarray, cell_m: float) -> float:
    """Fraction of the rectangle's grid cells (about ``cell_m`` wide) that hold at least one point."""
    n = np.maximum(1, np.ceil(extent / cell_m)).astype(int)
    local = (xy - centre) @ axes.T + extent / 2
    ij = np.clip(np.floor(local / np.maximum(extent / n, 1e-12)).astype(int), 0, n - 1)
    return len(np.unique(ij, axis=0)) / float(n[0] * n[1])


def top_down_grasps(obj: TabletopObject, max_opening_m: float = 0.08, clearance_m: float = 0.005,
                    fingertip_clearance_m: float = 0.016) -> list:
    """Grasps from straight above across the object's footprint rectangle: the tool centre over its centre,
    the fingers closing along each side of the rectangle that fits the open hand (the shorter side first),
    the opening that side plus ``clearance_m`` on each side (m).

    The tool centre sits at the object's mid-height, but at least ``fingertip_clearance_m`` above the support
    (the Panda's fingertips reach 9.5 mm below the tool centre) and 1 cm below the top. A simple grasp for
    box-like objects, for when a grasp predictor finds none (ManiSkill's own motion-planning solutions grasp
    cubes this way, from their privileged oriented bounding box).

    Returns:
        ``[Grasp]`` (``handleit.types.Grasp``, score 0), possibly empty.
    """
    z = float(np.clip(obj.center_W[2], obj.support_z + fingertip_clearance_m,
                      max(obj.top_z - 0.01, obj.support_z + fingertip_clearance_m)))
    approach = np.array([0.0, 0.0, -1.0])
    grasps = []
    for k in np.argsort(obj.footprint_extent_m):
        width = float(obj.footprint_extent_m[k]) + 2 * clearance_m
        if width > max_opening_m:
            continue
        closing = np.array([obj.footprint_axes_W[k, 0], obj.footprint_axes_W[k, 1], 0.0])
        X = np.eye(4)
        X[:3, 0], X[:3, 1], X[:3, 2] = np.cross(closing, approach), closing, approach
        X[:3, 3] = [obj.center_W[0], obj.center_W[1], z]
        grasps.append(Grasp(X_WG=X, width_m=width, score=0.0))
    return grasps
