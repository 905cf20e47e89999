"""Where a held object can be put down, estimated from point clouds: a table top (its plane and rectangle) and a
free spot on it, an open drawer's interior (the box opening seen from above), and where the mobile base stands
to reach a point on either.

Every function runs on plain numpy arrays (world frame W, z up, metres) and raises :class:`PlaceTargetError`
(a ``ValueError``) naming what is missing when the points cannot support an estimate: a behavior tree's node
turns it into a visible failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from .point_cloud import as_points
from .tabletop_objects import min_area_rectangle

MIN_TABLE_POINTS = 30  # fewer table-top points than this: no plane
BOX_TOP_LAYER_M = 0.01  # the layers a box's top face is looked for in
BOX_TOP_WINDOW_M = 0.015  # the top face's points: this close to its densest layer
TABLE_TOP_BAND_M = 0.015  # points this close below the highest dense layer are the top (a box table's sides are not)
MIN_DRAWER_FLOOR_POINTS = 20  # fewer floor points: the drawer's inside is not seen (closed, or out of view)
DRAWER_FRONT_DEPTH_M = 0.03  # the front panel's thickness and its reveal: points this close to the front are the front
DRAWER_FLOOR_BAND_M = 0.012  # floor points lie this close above the lowest layer inside the box
# A drawer part's points this close to a handle point are the handle's (a part's mask can hold its handle): not the
# front panel. With them the handle's outer face was taken for the front and the panel for the box behind it
# (TidyIntoDrawer test seeds 11, 43, 48: a fully open drawer's opening 1-3 mm deep, every place refused).
HANDLE_POINT_M = 0.003
MIN_OPENING_DEPTH_M = 0.05  # a box opening shallower than this (along outward) is not seen: closed, or from the front
ABOVE_PLANE_M = 0.01  # points this far above the table's plane (within its rectangle) stand on it: obstacles


class PlaceTargetError(ValueError):
    """The points do not support the estimate (too few, none at all, the drawer closed)."""


@dataclass(frozen=True)
class TableTop:
    """A horizontal support surface seen from its points: plane height ``height_z`` (m), unit ``normal_W``,
    and its top's rectangle: centre (xy, m), axes (unit rows, xy) and half sizes (m) along them."""

    center_W: np.ndarray  # [3]: rectangle centre on the plane
    axes_W: np.ndarray  # [2, 2]
    half_extent_m: np.ndarray  # [2]
    height_z: float
    normal_W: np.ndarray  # [3]

    def local_xy(self, p_W: np.ndarray) -> np.ndarray:
        """Coordinates (m) of world points' xy along the rectangle's axes, from its centre: [..., 2]."""
        return (np.asarray(p_W, dtype=np.float64)[..., :2] - self.center_W[:2]) @ self.axes_W.T


@dataclass(frozen=True)
class DrawerInterior:
    """The visible part of an open drawer's box: its floor rectangle (centre xy on the floor, axes ``outward``
    (horizontal, out of the cabinet) and ``lateral``, sizes along them, m), the floor height and the rim
    (the box walls' top) height (m)."""

    center_W: np.ndarray  # [3], z = floor
    outward_W: np.ndarray  # [3], horizontal unit
    lateral_W: np.ndarray  # [3], horizontal unit
    size_m: np.ndarray  # [2]: along outward, along lateral
    floor_z: float
    rim_z: float
    front_W: np.ndarray  # [3]: the front panel's outer face at the centre's height line (xy), floor z
    front_top_z: float | None = None  # the front panel's top (m); None: not measured (taken as the rim)

    @property
    def top_z(self) -> float:
        """What a hand or a held object passes over coming in from the front (m): the walls' rim or the
        front panel's top, whichever is higher."""
        return self.rim_z if self.front_top_z is None else max(self.rim_z, self.front_top_z)

    def fits(self, footprint_m: np.ndarray, margin_m: float = 0.01) -> bool:
        """Whether a footprint (sizes along outward and lateral, m) fits inside with ``margin_m`` each side."""
        return bool(np.all(np.asarray(footprint_m) + 2 * margin_m <= self.size_m))


def box_top_height_m(z_values, layer_m: float = BOX_TOP_LAYER_M, window_m: float = BOX_TOP_WINDOW_M) -> float:
    """The height (m) of a box's top face from the heights of its seen points, top and sides together, under
    depth noise: the densest ``layer_m`` layer (the sides spread their points evenly over their height, the top
    gathers its points at one height, spread only by the noise), then the median height of the points within
    ``window_m`` of that layer. A high percentile of the heights, the top otherwise, lies above the top by about
    one noise deviation: 2 cm for a box 1.7 m from a camera with 5 mm of noise at 1 m, by which a bucket was
    set down 3 cm above the MoveBucket platform and dropped."""
    z = np.asarray(z_values, dtype=np.float64).reshape(-1)
    z = z[np.isfinite(z)]
    if len(z) == 0:
        raise PlaceTargetError("box top: no points")
    edges = np.arange(z.min(), z.max() + layer_m, layer_m)
    if len(edges) < 2:
        return float(np.median(z))
    counts, edges = np.histogram(z, bins=edges)
    densest = int(np.argmax(counts[::-1]))  # the highest of equally dense layers
    layer = len(counts) - 1 - densest
    centre = 0.5 * (edges[layer] + edges[layer + 1])
    return float(np.median(z[np.abs(z - centre) <= window_m]))


def estimate_table_top(table_points_W, band_m: float = TABLE_TOP_BAND_M,
                       min_points: int = MIN_TABLE_POINTS) -> TableTop:
    """The table top from the table's points: the highest dense layer (its 95th height percentile, minus
    ``band_m``) is the top; a least-squares plane through it gives the normal, its median height the plane,
    the smallest rectangle around its xy the top's outline (seen part: a partial view gives a smaller one)."""
    p = as_points(table_points_W, "table_points_W")
    if len(p) < min_points:
        raise PlaceTargetError(f"table: {len(p)} points, need {min_points} to fit its top")
    z_top = float(np.percentile(p[:, 2], 95))
    top = p[p[:, 2] >= z_top - band_m]
    if len(top) < min_points:
        raise PlaceTargetError(f"table: {len(top)} points on its top, need {min_points}")
    centroid = top.mean(axis=0)
    _, _, vt = np.linalg.svd(top - centroid, full_matrices=False)
    normal = vt[-1] if vt[-1][2] >= 0 else -vt[-1]
    height = float(np.median(top[:, 2]))
    centre_xy, axes, sides = min_area_rectangle(top[:, :2])
    return TableTop(np.array([centre_xy[0], centre_xy[1], height]), axes, sides / 2, height, normal)


def free_spot_on_table(top: TableTop, radius_m: float, obstacle_points_W=None, prefer_W=None,
                       margin_m: float = 0.05, grid_m: float = 0.02) -> np.ndarray:
    """A point on the table top (on its plane) where a footprint of ``radius_m`` (m) fits: at least
    ``margin_m`` inside the top's edges and clear of every obstacle point standing on it (``obstacle_points_W``
    [K, 3]: what is not the table, the robot or the held object, standing more than 1 cm above the plane over
    the top), on a ``grid_m`` grid; the one nearest ``prefer_W`` ([3] or [2], e.g. where the robot stands;
    default the top's centre). PlaceTargetError when the top has no such spot."""
    room = top.half_extent_m - radius_m - margin_m
    if np.any(room < 0):
        raise PlaceTargetError(f"table top {np.round(2 * top.half_extent_m, 2)} m is too small for a footprint "
                               f"{2 * radius_m:.2f} m across with {margin_m} m margins")
    us = np.arange(-room[0], room[0] + 1e-9, grid_m) if room[0] > 0 else np.zeros(1)
    vs = np.arange(-room[1], room[1] + 1e-9, grid_m) if room[1] > 0 else np.zeros(1)
    uv = np.stack(np.meshgrid(us, vs, indexing="ij"), axis=-1).reshape(-1, 2)
    free = np.ones(len(uv), dtype=bool)
    if obstacle_points_W is not None:
        obstacles = as_points(obstacle_points_W, "obstacle_points_W")
        if len(obstacles):
            local = top.local_xy(obstacles)
            on_top = (obstacles[:, 2] > top.height_z + ABOVE_PLANE_M) & np.all(
                np.abs(local) <= top.half_extent_m + radius_m, axis=1)
            standing = local[on_top]
            if len(standing):
                d, _ = cKDTree(standing).query(uv)
                free = d > radius_m + margin_m
    if not free.any():
        raise PlaceTargetError(f"no free spot {2 * radius_m:.2f} m across on the table top: it is covered")
    target_xy = top.center_W[:2] if prefer_W is None else np.asarray(prefer_W, dtype=np.float64)[:2]
    target_uv = (target_xy - top.center_W[:2]) @ top.axes_W.T
    candidates = uv[free]
    best = candidates[int(np.argmin(np.linalg.norm(candidates - target_uv, axis=1)))]
    xy = top.center_W[:2] + best @ top.axes_W
    return np.array([xy[0], xy[1], top.height_z])


def estimate_drawer_interior(drawer_points_W, outward_W=None, handle_points_W=None,
                             front_depth_m: float = DRAWER_FRONT_DEPTH_M, floor_band_m: float = DRAWER_FLOOR_BAND_M,
                             min_floor_points: int = MIN_DRAWER_FLOOR_POINTS) -> DrawerInterior:
    """An open drawer's interior from the drawer part's points (its front panel, box walls and floor).

    The outward direction (horizontal, out of the cabinet) is ``outward_W`` when given, else from the box's
    centroid to the handle's (``handle_points_W``), snapped to the nearest side of the points' footprint
    rectangle. The handle's own points (where the part's mask holds them) are left out; the front panel is what
    lies within ``front_depth_m`` of the outermost points left. Behind it, the lowest dense layer is the floor
    (within ``floor_band_m``; its median height). The opening runs along outward from the box's back (the
    farthest points behind the panel) to the panel's inner face, not over the floor seen only: a camera looking
    over the panel sees the back of the floor, the panel hides its front (TidyIntoDrawer test seed 9: 15 of the
    box's 41 cm seen), and a drawer at 0.9 m shows no floor at all, only the back wall's foot. Across, it is the
    floor's extent (the walls', where the floor seen is a line). The rim is the 98th height percentile of the
    walls; the front panel's top, that of its points. PlaceTargetError: no direction, too few points behind the
    front or on the floor, or an opening under ``MIN_OPENING_DEPTH_M`` deep (a closed drawer shows its front
    only)."""
    p = as_points(drawer_points_W, "drawer_points_W")
    has_handle = handle_points_W is not None and len(handle_points_W) > 0
    if has_handle and len(p):
        handle_tree = cKDTree(as_points(handle_points_W, "handle_points_W"))
        distance, _ = handle_tree.query(p, distance_upper_bound=HANDLE_POINT_M)
        p = p[~np.isfinite(distance)]
    if len(p) < min_floor_points:
        raise PlaceTargetError(f"drawer: {len(p)} points, need {min_floor_points} (not in view?)")
    if outward_W is None:
        if not has_handle:
            raise PlaceTargetError("drawer: no outward direction and no handle points to find its front")
        outward_W = np.asarray(handle_points_W, dtype=np.float64).mean(axis=0) - p.mean(axis=0)
    rough = np.array([outward_W[0], outward_W[1]], dtype=np.float64)
    if np.linalg.norm(rough) < 1e-6:
        raise PlaceTargetError("drawer: the outward direction is vertical or zero")
    # A rough direction (handle minus part centroids is off by degrees) snapped to the nearest side of the
    # points' footprint rectangle: the box's sides, or a closed front's plane and its normal.
    _, axes, _ = min_area_rectangle(p[:, :2])
    k = int(np.argmax(np.abs(axes @ rough)))
    snapped = axes[k] * np.sign(axes[k] @ rough)
    out = np.array([snapped[0], snapped[1], 0.0])
    lateral = np.array([-out[1], out[0], 0.0])
    along = p @ out
    front = float(along.max())
    panel = along >= front - front_depth_m
    behind = p[~panel]
    if len(behind) < min_floor_points:
        raise PlaceTargetError(f"drawer: {len(behind)} points behind its front, need {min_floor_points}: closed or "
                               "seen from the front only")
    z_floor = float(np.percentile(behind[:, 2], 5))
    floor = behind[behind[:, 2] <= z_floor + floor_band_m]
    if len(floor) < min_floor_points:
        raise PlaceTargetError(f"drawer: {len(floor)} floor points, need {min_floor_points}")
    # Robust percentiles: stray points.
    a_lo, a_hi = float(np.percentile(behind @ out, 2)), front - front_depth_m
    if a_hi - a_lo < MIN_OPENING_DEPTH_M:
        raise PlaceTargetError(f"drawer: its box seen {100 * (a_hi - a_lo):.1f} cm deep behind its front, need "
                               f"{100 * MIN_OPENING_DEPTH_M:.0f}: closed or seen from the front only")
    b_lo, b_hi = np.percentile(floor @ lateral, [2, 98])
    if b_hi - b_lo < MIN_OPENING_DEPTH_M:  # the floor seen is a line along outward: the walls say how wide
        b_lo, b_hi = np.percentile(behind @ lateral, [2, 98])
    floor_z = float(np.median(floor[:, 2]))
    walls = behind[behind[:, 2] > z_floor + floor_band_m]
    rim_z = float(np.percentile(walls[:, 2], 98)) if len(walls) else z_floor
    front_top_z = float(np.percentile(p[panel, 2], 98))
    centre_xy = 0.5 * (a_lo + a_hi) * out[:2] + 0.5 * (b_lo + b_hi) * lateral[:2]
    front_xy = front * out[:2] + 0.5 * (b_lo + b_hi) * lateral[:2]
    return DrawerInterior(np.array([centre_xy[0], centre_xy[1], floor_z]), out, lateral,
                          np.array([a_hi - a_lo, b_hi - b_lo]), floor_z, max(rim_z, floor_z),
                          np.array([front_xy[0], front_xy[1], floor_z]), front_top_z)


@dataclass(frozen=True)
class Footprint:
    """A rectangle on the floor that the base keeps out of (a cabinet with its open drawer): centre (xy, m),
    axes (unit rows, xy: out of the cabinet, then along its front) and half sizes (m) along them."""

    center_W: np.ndarray  # [2]
    axes_W: np.ndarray  # [2, 2]
    half_extent_m: np.ndarray  # [2]


CABINET_MIN_POINTS = 100  # fewer cabinet points: no footprint
CABINET_MIN_DEPTH_M = 0.4  # seen from the front, a cabinet is at least this deep behind its front face


def estimate_cabinet_footprint(cabinet_points_W, outward_W, min_depth_m: float = CABINET_MIN_DEPTH_M) -> Footprint:
    """The floor rectangle of a cabinet (its body, parts and handles: ``cabinet_points_W`` [N, 3], m, world),
    aligned with its outward direction (``outward_W``, [2] or [3], horizontal): the 1st-99th percentile extent
    of the points along it and across, reaching at least ``min_depth_m`` behind the front-most points (seen
    from the front, the back is hidden). Raises PlaceTargetError with fewer than :data:`CABINET_MIN_POINTS`."""
    p = as_points(cabinet_points_W, "cabinet_points_W")
    if len(p) < CABINET_MIN_POINTS:
        raise PlaceTargetError(f"cabinet: {len(p)} points, need {CABINET_MIN_POINTS}")
    out = np.asarray(outward_W, dtype=np.float64)[:2]
    norm = float(np.linalg.norm(out))
    if not np.isfinite(norm) or norm < 1e-9:
        raise PlaceTargetError(f"cabinet: outward direction {outward_W} has no horizontal part")
    out = out / norm
    axes = np.stack([out, np.array([-out[1], out[0]])])
    local = p[:, :2] @ axes.T
    lo, hi = np.percentile(local, 1, axis=0), np.percentile(local, 99, axis=0)
    lo[0] = min(lo[0], hi[0] - min_depth_m)
    centre_local = 0.5 * (lo + hi)
    return Footprint(centre_local @ axes, axes, 0.5 * (hi - lo))


def standoff_base_xy_yaw(target_W, robot_xy, distance_m: float, top: TableTop | None = None,
                         outward_W=None, clearance_m: float = 0.0) -> tuple[np.ndarray, float]:
    """Where the mobile base stands to work at ``target_W`` ([3] or [2], m), facing it: (xy [2], yaw rad).

    With ``outward_W`` (a drawer's), on that side, ``distance_m`` from the target. With a table top ``top``, off
    the edge nearest the target (ties broken toward ``robot_xy``), ``clearance_m`` beyond the edge or
    ``distance_m`` from the target, whichever is farther. Otherwise ``distance_m`` from the target toward
    ``robot_xy``."""
    t = np.asarray(target_W, dtype=np.float64)[:2]
    r = np.asarray(robot_xy, dtype=np.float64)[:2]
    if outward_W is not None:
        d = np.asarray(outward_W, dtype=np.float64)[:2]
        d = d / max(np.linalg.norm(d), 1e-9)
        xy = t + distance_m * d
    elif top is not None:
        local = top.local_xy(t)
        best = None
        for k in range(2):
            for sign in (1.0, -1.0):
                edge = float(top.half_extent_m[k] - sign * local[k])  # from the target to that edge (m)
                direction = sign * top.axes_W[k]
                xy = t + max(edge + clearance_m, distance_m) * direction
                cost = edge + 0.1 * float(np.linalg.norm(xy - r))
                if best is None or cost < best[0]:
                    best = (cost, xy)
        xy = best[1]
    else:
        d = r - t
        n = np.linalg.norm(d)
        d = d / n if n > 1e-9 else np.array([1.0, 0.0])
        xy = t + distance_m * d
    facing = t - xy
    return xy, math.atan2(facing[1], facing[0])
