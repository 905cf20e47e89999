"""Gripper trajectory primitives as sequences of 4x4 poses in the world frame, and the hinge of an opening door
estimated from the handle's observed motion.

Each primitive returns ``steps + 1`` poses ``X_WG`` (gripper tool centre G in world W): the first is where
the motion starts, the last where it ends, evenly spaced in between. The gripper frame follows
:class:`handleit.types.Grasp`: z is the approach direction, y the closing direction.

Numpy in, numpy out.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

# Hinge estimation refuses input it cannot fit reliably (ValueError, see estimate_hinge_from_motion).
MIN_HINGE_POINTS = 4  # 3 points always fit a circle; a 4th gives a residual to check against
MIN_HANDLE_TRAVEL_M = 0.01  # the handle must have moved at least this far
MAX_HINGE_RADIUS_M = 3.0  # a fitted radius beyond this means the path is (nearly) straight: no hinge
MIN_ARC_SAGITTA_RATIO = 0.02  # arc bulge / chord: a 10 degree arc has 0.022; below this the arc looks straight


def _check_pose(X, name: str) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.shape != (4, 4) or not np.all(np.isfinite(X)):
        raise ValueError(f"{name} must be a finite 4x4 pose, got shape {X.shape}")
    return X


def _check_steps(steps) -> int:
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps}")
    return int(steps)


def _unit(v, name: str) -> np.ndarray:
    v = np.asarray(v, dtype=float).reshape(3)
    n = float(np.linalg.norm(v))
    if not np.isfinite(n) or n < 1e-9:
        raise ValueError(f"{name} must be a finite non-zero 3-vector")
    return v / n


def pregrasp_approach(X_WG_grasp: np.ndarray, distance_m: float, steps: int) -> list[np.ndarray]:
    """Straight approach along the gripper's z axis (its approach direction) ending at the grasp.

    Args:
        X_WG_grasp: grasp pose (4x4) of the tool centre G in the world W.
        distance_m: how far (m) before the grasp the approach starts, backed off along -z_G.
        steps: number of segments; ``steps + 1`` poses are returned.

    Returns:
        Poses from the pregrasp pose (``distance_m`` behind the grasp) to ``X_WG_grasp`` itself, all with the
        grasp's orientation.
    """
    X_WG_grasp = _check_pose(X_WG_grasp, "X_WG_grasp")
    steps = _check_steps(steps)
    z_W = X_WG_grasp[:3, 2] / np.linalg.norm(X_WG_grasp[:3, 2])
    poses = []
    for k in range(steps + 1):
        X = X_WG_grasp.copy()
        X[:3, 3] = X_WG_grasp[:3, 3] - (1.0 - k / steps) * float(distance_m) * z_W
        poses.append(X)
    return poses


def linear_pull(X_WG_start: np.ndarray, axis_W: np.ndarray, distance_m: float, steps: int) -> list[np.ndarray]:
    """Straight pull (e.g. a drawer along its opening axis) keeping the gripper's orientation.

    Args:
        X_WG_start: tool-centre pose (4x4) in the world where the pull starts (the grasp).
        axis_W: direction of the pull in the world (normalized here); a drawer's opening direction.
        distance_m: pull length (m).
        steps: number of segments; ``steps + 1`` poses are returned.

    Returns:
        Poses from ``X_WG_start`` to it translated by ``distance_m`` along ``axis_W``.
    """
    X_WG_start = _check_pose(X_WG_start, "X_WG_start")
    steps = _check_steps(steps)
    a_W = _unit(axis_W, "axis_W")
    poses = []
    for k in range(steps + 1):
        X = X_WG_start.copy()
        X[:3, 3] = X_WG_start[:3, 3] + (k / steps) * float(distance_m) * a_W
        poses.append(X)
    return poses


def hinge_arc(X_WG_start: np.ndarray, hinge_point_W: np.ndarray, hinge_axis_W: np.ndarray,
              angle_rad: float, steps: int) -> list[np.ndarray]:
    """The gripper carried by a door turning about its hinge: position on the circle about the hinge axis,
    orientation turning with the door.

    Args:
        X_WG_start: tool-centre pose (4x4) in the world at the start (the grasp on the handle).
        hinge_point_W: any point (m) on the hinge axis, in the world.
        hinge_axis_W: hinge direction in the world (normalized here); positive angles turn by the right-hand
            rule about it (with :func:`estimate_hinge_from_motion`'s axis, positive opens further).
        angle_rad: total turn (rad).
        steps: number of segments; ``steps + 1`` poses are returned.

    Returns:
        Poses ``X_WG(k) = T(k) @ X_WG_start`` with ``T(k)`` the rotation by ``k / steps * angle_rad`` about the
        hinge line. Every pose keeps its distance to the axis and its height along it.
    """
    X_WG_start = _check_pose(X_WG_start, "X_WG_start")
    steps = _check_steps(steps)
    a_W = _unit(hinge_axis_W, "hinge_axis_W")
    p_WH = np.asarray(hinge_point_W, dtype=float).reshape(3)
    poses = []
    for k in range(steps + 1):
        R = Rotation.from_rotvec((k / steps) * float(angle_rad) * a_W).as_matrix()
        T = np.eye(4)
        T[:3, :3] = R
        T[:3, 3] = p_WH - R @ p_WH  # rotate about the line through p_WH, not about the origin
        poses.append(T @ X_WG_start)
    return poses


def estimate_hinge_from_motion(handle_positions_W: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Hinge of an opening door from the positions its handle went through.

    A plane is fitted to the positions (the handle turns in a plane normal to the hinge; the axis is
    estimated, not assumed vertical), then a circle to their projections onto it (algebraic fit refined by
    geometric least squares).

    Args:
        handle_positions_W: [T, 3] handle positions (m) in the world, in the order observed (T >= 4).

    Returns:
        ``(hinge_point_W, hinge_axis_W, radius_m)``: the circle's centre (a point on the hinge axis, at the
        handle's height), the unit axis, and the handle's distance to the axis. The axis's sign carries the
        opening direction: the handle went from its first to its last position by a *positive* rotation
        (right-hand rule) about ``hinge_axis_W``, so ``hinge_arc(..., hinge_axis_W, +angle, ...)`` keeps
        opening the door. :func:`swept_angle_rad` gives how far it turned.

    Raises:
        ValueError: too few points, non-finite values, a handle that barely moved, or a path too straight to
            show a circle (collinear points: a drawer, or too small an opening for the noise). Degenerate
            motion is an error the caller must handle (keep observing, or treat the part as prismatic), not
            a silent ``None``.
    """
    p = np.asarray(handle_positions_W, dtype=float)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"handle_positions_W must be [T, 3], got shape {p.shape}")
    if len(p) < MIN_HINGE_POINTS:
        raise ValueError(f"need at least {MIN_HINGE_POINTS} handle positions to fit a hinge, got {len(p)}")
    if not np.all(np.isfinite(p)):
        raise ValueError("handle_positions_W has non-finite values")
    centroid = p.mean(axis=0)
    _, singular, Vt = np.linalg.svd(p - centroid)
    extent_m = float(np.max(np.linalg.norm(p - p[0], axis=1)))
    if extent_m < MIN_HANDLE_TRAVEL_M:
        raise ValueError(f"the handle moved only {extent_m:.4f} m (< {MIN_HANDLE_TRAVEL_M} m): no hinge to fit")
    # Plane of the motion: spanned by the two main directions; its normal is the hinge direction.
    u, v, normal = Vt[0], Vt[1], Vt[2]
    xy = np.column_stack([(p - centroid) @ u, (p - centroid) @ v])
    # Collinear (or nearly) points: the second direction is only noise, and no plane or circle is defined.
    chord = xy[-1] - xy[0]
    chord_len = float(np.linalg.norm(chord))
    span = max(chord_len, float(2 * singular[0] / math.sqrt(len(p))))
    bulge = _max_distance_to_line(xy, xy[0], xy[-1]) if chord_len > 1e-9 else 0.0
    if bulge < MIN_ARC_SAGITTA_RATIO * span:
        raise ValueError(
            f"the handle's path is (nearly) straight (bulge {bulge:.4f} m over {span:.3f} m): cannot fit a hinge; "
            "a prismatic joint, or too little of the arc seen yet")
    center_2d, radius_m = _fit_circle(xy)
    if not np.isfinite(radius_m) or radius_m > MAX_HINGE_RADIUS_M:
        raise ValueError(f"fitted hinge radius {radius_m:.2f} m is implausible (> {MAX_HINGE_RADIUS_M} m)")
    hinge_point_W = centroid + center_2d[0] * u + center_2d[1] * v
    # Orient the axis so that the motion first -> last is a positive turn about it.
    r0 = p[0] - hinge_point_W
    r1 = p[-1] - hinge_point_W
    if np.dot(np.cross(r0, r1), normal) < 0:
        normal = -normal
    return hinge_point_W, normal / np.linalg.norm(normal), float(radius_m)


def swept_angle_rad(handle_positions_W: np.ndarray, hinge_point_W: np.ndarray, hinge_axis_W: np.ndarray) -> float:
    """Signed angle (rad) the handle turned about the hinge from its first to its last position (positive
    about ``hinge_axis_W`` by the right-hand rule), summed step by step so it can exceed pi."""
    p = np.asarray(handle_positions_W, dtype=float).reshape(-1, 3)
    a_W = _unit(hinge_axis_W, "hinge_axis_W")
    r = p - np.asarray(hinge_point_W, dtype=float).reshape(3)
    r = r - np.outer(r @ a_W, a_W)
    total = 0.0
    for r0, r1 in zip(r[:-1], r[1:]):
        total += math.atan2(float(np.dot(np.cross(r0, r1), a_W)), float(np.dot(r0, r1)))
    return total


def _max_distance_to_line(xy: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    d = (b - a) / np.linalg.norm(b - a)
    rel = xy - a
    return float(np.max(np.abs(rel[:, 0] * d[1] - rel[:, 1] * d[0])))


def _fit_circle(xy: np.ndarray) -> tuple[np.ndarray, float]:
    """Circle through 2-D points: algebraic (Kasa) fit, refined by geometric least squares."""
    A = np.column_stack([2 * xy, np.ones(len(xy))])
    b = np.sum(xy**2, axis=1)
    sol, *_ = np.linalg.lstsq(A, b, rcond=None)
    center = sol[:2]
    radius = math.sqrt(max(sol[2] + center @ center, 0.0))

    def residuals(params):
        return np.linalg.norm(xy - params[:2], axis=1) - params[2]

    refined = least_squares(residuals, np.array([*center, radius]), method="lm")
    return refined.x[:2], float(abs(refined.x[2]))
