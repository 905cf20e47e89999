"""Floor plans of the long-horizon tasks: where the cabinet, the table and the mobile robot stand.

Each piece of furniture and the robot is an oriented rectangle on the floor (:class:`Footprint`); a layout is
drawn by rejection until no two footprints overlap, with room between them for the robot to pass. The table
stands beside the cabinet, never in front of it (the robot needs that floor to open a drawer), and far
enough that the robot must drive its base from one to the other: this is the hand-off Habitat 2.0 found
hard ("Habitat 2.0: Training Home Assistants to Rearrange their Habitat", arXiv 2106.14405, Sec. 6.2: a
base parked where the next skill cannot reach). Pure numpy: no simulator.

Frames: the world W is the floor plane z = 0. A footprint's own frame has x along its heading; the cabinet's
front faces its -x (as in OpenCabinetDrawer), so its front direction in W is ``-R(yaw) e_x``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Where the pieces go (m, rad). The cabinet's centre anywhere near the origin, any heading.
CABINET_XY_RANGE_M = (-0.5, 0.5)
# The table's centre from the cabinet's centre, and its bearing from the cabinet's front direction: beside or
# in front of the cabinet at an angle, never behind its back panel.
TABLE_DISTANCE_RANGE_M = (1.8, 2.8)
TABLE_BEARING_RANGE_RAD = (-0.75 * math.pi, 0.75 * math.pi)
# Floor in front of the cabinet kept free of the table: a drawer pulled out (at most 0.45 m for the bundled
# cabinets) and the robot standing in front of it (its footprint is about 1 m deep with the arm at rest).
FRONT_CLEARANCE_M = 1.5
FRONT_SIDE_CLEARANCE_M = 0.3  # beyond each side of the cabinet's front
PASSAGE_M = 0.6  # between the table and the cabinet: a robot base (about 0.45 m across) drives through
# The robot's start: its base at this distance from the midpoint between cabinet and table, at a uniform
# bearing and heading (its three cameras see all around it).
ROBOT_DISTANCE_RANGE_M = (1.0, 2.2)
ROBOT_CLEARANCE_M = 0.1  # between the robot's start footprint and any furniture
# The mobile Panda at rest (arm folded), in its base frame B: the collision geometry's box, measured on the
# robot description (x -0.14..0.77 m, y -0.88..0.13 m) and grown by 5 cm.
ROBOT_FOOTPRINT_B_M = ((-0.19, 0.82), (-0.93, 0.18))
MAX_LAYOUT_DRAWS = 2000


@dataclass(frozen=True)
class Footprint:
    """An oriented rectangle on the floor: centre (m, W), heading (rad, about +z) and half sizes (m) along its
    own x and y."""

    center_xy: tuple[float, float]
    yaw: float
    half_size: tuple[float, float]

    def corners(self) -> np.ndarray:
        """[4, 2] corners in W, counter-clockwise."""
        hx, hy = self.half_size
        local = np.array([[hx, hy], [-hx, hy], [-hx, -hy], [hx, -hy]])
        return local @ _rotation(self.yaw).T + np.asarray(self.center_xy)

    def grown(self, margin_m: float) -> Footprint:
        return Footprint(self.center_xy, self.yaw, (self.half_size[0] + margin_m, self.half_size[1] + margin_m))

    def contains(self, xy_W) -> bool:
        local = (np.asarray(xy_W, dtype=np.float64) - np.asarray(self.center_xy)) @ _rotation(self.yaw)
        return bool(np.all(np.abs(local) <= np.asarray(self.half_size)))


def _rotation(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s], [s, c]])


def overlap(a: Footprint, b: Footprint) -> bool:
    """Whether two footprints intersect (separating axis theorem: two convex polygons are disjoint iff one of
    their edge normals separates their projections)."""
    ca, cb = a.corners(), b.corners()
    for yaw in (a.yaw, b.yaw):
        for axis in _rotation(yaw).T:  # the rectangle's own x and y axes in W
            pa, pb = ca @ axis, cb @ axis
            if pa.max() < pb.min() or pb.max() < pa.min():
                return False
    return True


def offset_footprint(x_range_m, y_range_m, xy_yaw) -> Footprint:
    """The rectangle [x_range] x [y_range] of a frame at pose ``xy_yaw`` = (x, y, yaw) in W."""
    x, y, yaw = xy_yaw
    cx, cy = (x_range_m[0] + x_range_m[1]) / 2, (y_range_m[0] + y_range_m[1]) / 2
    center = np.array([x, y]) + _rotation(yaw) @ np.array([cx, cy])
    half = ((x_range_m[1] - x_range_m[0]) / 2, (y_range_m[1] - y_range_m[0]) / 2)
    return Footprint((float(center[0]), float(center[1])), float(yaw), half)


@dataclass(frozen=True)
class FloorLayout:
    """Poses (x m, y m, yaw rad) in W: the cabinet's root (body centre on the floor, front toward its -x), the
    table's centre on the floor, the robot's base."""

    cabinet: tuple[float, float, float]
    table: tuple[float, float, float]
    robot: tuple[float, float, float]


def sample_floor_layout(rng: np.random.Generator, cabinet_half_m: tuple[float, float], drawer_reach_m: float,
                        table_half_m: tuple[float, float]) -> FloorLayout:
    """A layout for a cabinet of half depth and half width ``cabinet_half_m`` (its body, centred on its root),
    whose parts reach at most ``drawer_reach_m`` in front of its body (a pulled-out drawer and its handle), and
    a table of half length and half width ``table_half_m``. ``RuntimeError`` if no layout is found (it should
    not happen with room-sized ranges)."""
    hx, hy = cabinet_half_m
    for _ in range(MAX_LAYOUT_DRAWS):
        cabinet = (*(float(v) for v in rng.uniform(*CABINET_XY_RANGE_M, 2)), float(rng.uniform(-math.pi, math.pi)))
        front_W = -_rotation(cabinet[2])[:, 0]
        bearing = float(rng.uniform(*TABLE_BEARING_RANGE_RAD))
        distance = float(rng.uniform(*TABLE_DISTANCE_RANGE_M))
        table_xy = np.asarray(cabinet[:2]) + distance * (_rotation(bearing) @ front_W)
        table = (float(table_xy[0]), float(table_xy[1]), float(rng.uniform(-math.pi, math.pi)))
        robot_bearing = float(rng.uniform(-math.pi, math.pi))
        robot_distance = float(rng.uniform(*ROBOT_DISTANCE_RANGE_M))
        middle = (np.asarray(cabinet[:2]) + table_xy) / 2
        robot_xy = middle + robot_distance * np.array([math.cos(robot_bearing), math.sin(robot_bearing)])
        robot = (float(robot_xy[0]), float(robot_xy[1]), float(rng.uniform(-math.pi, math.pi)))

        body = offset_footprint((-hx, hx), (-hy, hy), cabinet)
        reach = offset_footprint((-hx - drawer_reach_m, hx), (-hy, hy), cabinet)  # with its parts pulled out
        front = offset_footprint((-hx - FRONT_CLEARANCE_M, -hx), (-hy - FRONT_SIDE_CLEARANCE_M,
                                                                  hy + FRONT_SIDE_CLEARANCE_M), cabinet)
        table_fp = Footprint(table[:2], table[2], table_half_m)
        robot_fp = offset_footprint(*ROBOT_FOOTPRINT_B_M, robot)
        if overlap(table_fp.grown(PASSAGE_M), body) or overlap(table_fp, front):
            continue
        if overlap(robot_fp.grown(ROBOT_CLEARANCE_M), reach) or overlap(robot_fp.grown(ROBOT_CLEARANCE_M), table_fp):
            continue
        return FloorLayout(cabinet, table, robot)
    raise RuntimeError(f"no floor layout without overlaps in {MAX_LAYOUT_DRAWS} draws (cabinet half sizes "
                       f"{cabinet_half_m} m, table half sizes {table_half_m} m)")
