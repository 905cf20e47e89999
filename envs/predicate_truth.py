"""Ground truth of the shared predicates (``handleit/predicates.py``) from simulator quantities: thresholds and
pure functions over numpy arrays. For the long-horizon tasks' success and for evaluating what perception
says; never read by a solver.

The predicates follow iGibson 2.0's logical states ("iGibson 2.0: Object-Centric Simulation for Robot
Learning of Everyday Household Tasks", arXiv 2108.03272, Sec. 3 and its appendix): Open from the joint
position against its range, InsideOf as containment in the container's box, OnTopOf as an object resting on
the surface from above. iGibson decides InsideOf and OnTopOf by ray casting and touching; here the container
(a drawer's box) and the surface (a table top) are boxes known exactly, so plain geometry decides them. Each
threshold below carries its unit and where it comes from.
"""

from __future__ import annotations

import numpy as np

# Closed(drawer): the joint within 1 cm of its closed limit. A drawer that far out is shut to the eye, and
# the bundled drawers' fronts sit 2-4 mm in front of the cabinet's face (cabinet_generator's reveal gaps).
CLOSED_MAX_M = 0.01
# Open(drawer): opened to at least 90% of the joint's range, OpenCabinetDrawer's success (ManiSkill1's
# challenge, Let's Handle It (arXiv 2202.11792) Sec. 2.1), so that the cabinet tree solves the goal Open(drawer)
# as it solves that task. A drawer between the two is ajar: neither Open nor Closed (Habitat 2.0's "drawer
# opened only partly").
OPEN_MIN_FRACTION = 0.9
# PhysX keeps joint positions in float32: a drawer set to exactly 0.9 of its range may read 0.9 less 1e-7.
FLOAT32_SLACK = 1e-6
# InsideOf(object, drawer): every point of the object's collision geometry inside the drawer's interior (its
# box from the floor up to the compartment's top, under which the drawer closes), give or take this much:
# contacts penetrate by up to a few mm in PhysX.
INSIDE_TOLERANCE_M = 0.005
# OnTopOf(object, table): the object's centre of mass above the table top's rectangle and its lowest point
# within this band about the top's plane: resting on it (touching, up to PhysX's contact offset and
# penetration), not hovering above it or fallen past its edge.
ON_TOP_MAX_GAP_M = 0.01
ON_TOP_MAX_SINK_M = 0.005
# Grasped(object) and HandEmpty(): from finger contact forces, ManiSkill's is_grasping rule
# (envs/grasp_contacts.py: each finger pressed with >= 0.5 N within 85 degrees of its opening direction).
# HandEmpty is true when the gripper holds no entity at all: a gripper closed on the drawer's handle is not empty.
# Static (success): object and drawer slower than ManiSkill1's static thresholds for the cabinets (OpenCabinet).
STATIC_LIN_MPS, STATIC_ANG_RADPS = 0.1, 1.0


def is_closed(q: float, q_closed: float) -> bool:
    """Closed: a prismatic joint at ``q`` (m) within ``CLOSED_MAX_M`` of its closed limit ``q_closed`` (m)."""
    return abs(float(q) - float(q_closed)) <= CLOSED_MAX_M + FLOAT32_SLACK


def open_fraction(q: float, q_range: tuple[float, float]) -> float:
    lo, hi = q_range
    return (float(q) - lo) / (hi - lo)


def is_open(q: float, q_range: tuple[float, float]) -> bool:
    """Open: at least ``OPEN_MIN_FRACTION`` of the joint's range ``q_range`` (closed, open limits)."""
    return open_fraction(q, q_range) >= OPEN_MIN_FRACTION - FLOAT32_SLACK


def is_inside_box(points_L: np.ndarray, interior_L: np.ndarray, tolerance_m: float = INSIDE_TOLERANCE_M) -> bool:
    """InsideOf: all ``points_L`` [n, 3] (m, in the container's frame L) within the axis-aligned box
    ``interior_L`` [2, 3] (min, max corner in L) grown by ``tolerance_m``."""
    points_L = np.asarray(points_L, dtype=np.float64)
    lo, hi = np.asarray(interior_L, dtype=np.float64)
    return bool(np.all(points_L >= lo - tolerance_m) and np.all(points_L <= hi + tolerance_m))


def is_on_top(points_T: np.ndarray, com_T: np.ndarray, top_half_size_m) -> bool:
    """OnTopOf: an object's points ``points_T`` [n, 3] and centre of mass ``com_T`` [3] in the surface frame T
    (origin at the top's centre, z up, the top the rectangle |x| <= hx, |y| <= hy of z = 0, half sizes
    ``top_half_size_m``): the centre over the rectangle and the lowest point within the band
    [-ON_TOP_MAX_SINK_M, ON_TOP_MAX_GAP_M] of the plane."""
    points_T = np.asarray(points_T, dtype=np.float64)
    com_T = np.asarray(com_T, dtype=np.float64)
    hx, hy = top_half_size_m
    over = abs(com_T[0]) <= hx and abs(com_T[1]) <= hy
    lowest = float(points_T[:, 2].min())
    return bool(over and -ON_TOP_MAX_SINK_M <= lowest <= ON_TOP_MAX_GAP_M)
