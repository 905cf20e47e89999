"""Joint velocity targets to the env's normalized action, and the frames the base velocity is expressed in.

The env's default controller (``normalized_joint_vel``, Let's Handle It (arXiv 2202.11792) footnote 2) maps an action
``a`` in [-1, 1] per joint to the velocity ``(upper - lower) / 2 * a + (upper + lower) / 2``, with [lower, upper] the
joint's velocity limits; :func:`normalize_velocity` is its inverse. The base's x/y velocities in that action
are ego-centric (x forward, y left, in the base frame B), while the base's x/y joint positions, and so a
PID's output on them, are world coordinates (frame W): :func:`world_to_base_velocity` converts.

Numpy in, numpy out; nothing here knows of a simulator.
"""

from __future__ import annotations

import math

import numpy as np

from handleit.types import GripperCommand

FINGERS_PER_GRIPPER = 2  # the Panda's two independent finger joints
OPENING_TIME_CONSTANT_S = 0.02  # an opening command closes the gap to its target at 1/this rate (then the limit)


def normalize_velocity(qvel, lower, upper) -> np.ndarray:
    """The normalized action in [-1, 1] that asks for joint velocities ``qvel`` (m/s or rad/s).

    ``lower``, ``upper``: the velocity limits (scalars or arrays broadcasting with ``qvel``, lower < upper).
    Velocities outside [lower, upper] are clipped to the nearest limit (action -1 or 1), as the env would.
    """
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    a = (2.0 * np.asarray(qvel, dtype=np.float64) - (upper + lower)) / (upper - lower)
    return np.minimum(np.maximum(a, -1.0), 1.0)


def denormalize_velocity(action, lower, upper) -> np.ndarray:
    """The joint velocities (m/s or rad/s) the env applies for normalized ``action``: the action is clipped
    to [-1, 1] (as the env does) and mapped by ``(upper - lower) / 2 * a + (upper + lower) / 2``."""
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    a = np.minimum(np.maximum(np.asarray(action, dtype=np.float64), -1.0), 1.0)
    return (upper - lower) / 2.0 * a + (upper + lower) / 2.0


def gripper_velocity(command: GripperCommand, limit_mps: float, n_fingers: int = FINGERS_PER_GRIPPER,
                     finger_q_m=None) -> np.ndarray:
    """[n_fingers] finger joint velocities (m/s) for a gripper command: ``"open"`` at +``limit_mps``,
    ``"close"`` at -``limit_mps``, ``"hold"`` at 0, and a number: the opening (m, between the fingers) to
    move to, proportionally (time constant ``OPENING_TIME_CONSTANT_S``) and at most at the limit. An opening
    needs the fingers' positions ``finger_q_m``.

    Each Panda finger joint is prismatic with q = its distance from the hand's centre line, so a positive
    velocity opens the gripper for both fingers. Closing at full speed keeps pressing once the fingers touch
    the handle: the velocity drive's force limit, not the speed, sets the grip. An opening a little wider
    than the handle, set on the way in, leaves the fingers a short close.
    """
    if isinstance(command, str):
        if command == "open":
            v = limit_mps
        elif command == "close":
            v = -limit_mps
        elif command == "hold":
            v = 0.0
        else:
            raise ValueError(f"unknown gripper command {command!r}; choose 'open', 'close', 'hold' or an opening (m)")
        return np.full(n_fingers, v, dtype=np.float64)
    opening = float(command)
    if not math.isfinite(opening) or opening < 0:
        raise ValueError(f"gripper opening must be a finite width >= 0 m, got {command!r}")
    if finger_q_m is None:
        raise ValueError("a gripper opening command needs the finger positions (finger_q_m)")
    finger_q_m = np.asarray(finger_q_m, dtype=np.float64)
    if finger_q_m.shape != (n_fingers,):
        raise ValueError(f"finger_q_m has shape {finger_q_m.shape}, expected ({n_fingers},)")
    v = (opening / n_fingers - finger_q_m) / OPENING_TIME_CONSTANT_S
    return np.clip(v, -limit_mps, limit_mps)


def world_to_base_velocity(v_xy_W, yaw_rad) -> np.ndarray:
    """Planar base velocity [..., 2] (m/s) in the world frame W to the base frame B (x forward, y left).

    ``yaw_rad``: the base's yaw in the world (the yaw joint position), scalar or broadcasting with
    ``v_xy_W[..., 0]``. ``v_B = R(yaw)^T v_W``.
    """
    v = np.asarray(v_xy_W, dtype=np.float64)
    if v.shape == (2,) and np.ndim(yaw_rad) == 0:  # the per-step case, without array overhead
        c, s = math.cos(yaw_rad), math.sin(yaw_rad)
        return np.array([c * v[0] + s * v[1], -s * v[0] + c * v[1]])
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    out = np.empty(np.broadcast_shapes(v.shape, np.shape(c) + (2,)))
    out[..., 0] = c * v[..., 0] + s * v[..., 1]
    out[..., 1] = -s * v[..., 0] + c * v[..., 1]
    return out


def base_to_world_velocity(v_xy_B, yaw_rad) -> np.ndarray:
    """Planar base velocity [..., 2] (m/s) in the base frame B to the world frame W: ``v_W = R(yaw) v_B``,
    what the env does with the ego-centric x/y of its action. Inverse of :func:`world_to_base_velocity`."""
    v = np.asarray(v_xy_B, dtype=np.float64)
    if v.shape == (2,) and np.ndim(yaw_rad) == 0:
        c, s = math.cos(yaw_rad), math.sin(yaw_rad)
        return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    out = np.empty(np.broadcast_shapes(v.shape, np.shape(c) + (2,)))
    out[..., 0] = c * v[..., 0] - s * v[..., 1]
    out[..., 1] = s * v[..., 0] + c * v[..., 1]
    return out


def saturated_velocity(qvel, velocity_limits, base_xy=None, yaw_rad: float = 0.0) -> np.ndarray:
    """``[dof]`` the joint velocities a robot applies for the command ``qvel`` (m/s or rad/s): each joint's
    clipped to its limit, except the base's planar velocity (``base_xy``: the indices of its x and y joints, in
    the world frame as the trees command them), which is scaled as a whole in the base frame (``yaw_rad``) until
    each of its axes is within its limit, so that saturation does not bend its direction. What the bundled envs
    do with an action (``SimRobot.action_of``), and what latency compensation integrates: a command past a limit
    (a P term on a large lag) moves the joint at the limit only."""
    v = np.asarray(qvel, dtype=np.float64).copy()
    limits = np.asarray(velocity_limits, dtype=np.float64)
    if v.shape != limits.shape:
        raise ValueError(f"qvel has shape {v.shape}, velocity_limits {limits.shape}")
    planar = np.zeros(len(v), dtype=bool)
    if base_xy is not None:
        xy = np.asarray(base_xy, dtype=int)
        planar[xy] = True
        v_B = world_to_base_velocity(v[xy], yaw_rad)
        excess = float(np.max(np.abs(v_B) / limits[xy]))
        if excess > 1.0:
            v[xy] = v[xy] / excess
    v[~planar] = np.clip(v[~planar], -limits[~planar], limits[~planar])
    return v
