"""Latency compensation: the joint state now, predicted from a late measurement and the commands sent since.

A robot's joint states reach the tree late (sensor latency: 50-200 ms over a middleware and a driver stack),
and a feedback loop closed on a late state overshoots: at 100 ms the Let's Handle It (arXiv 2202.11792) gains that hold
the arm on a reference at 0 ms make it miss the handle. As a Smith predictor does, add to the measured positions what
the velocity commands sent since the measurement's stamp have moved the joints by (each command holds until the
next). Where the robot's drives lag their commands (``RobotModel.drive_time_constants_s``: a mobile base of 34 kg
follows a command with a 34 ms lag) the velocity is integrated from the measured one as a first-order lag: without
it the prediction missed the 2-3 cm a base at 0.8 m/s still covers after its command stops, and the pregrasp
overshot and stalled 4-5 cm aside at 100 ms of latency. Numpy in, numpy out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def predicted_joint_positions(qpos: np.ndarray, stamp_s: float, now_s: float,
                              commands: Sequence[tuple[float, np.ndarray]], joints: np.ndarray | None = None,
                              qvel: np.ndarray | None = None, time_constants_s: np.ndarray | None = None
                              ) -> np.ndarray:
    """``qpos`` measured at ``stamp_s``, moved on to ``now_s`` by the velocity commands sent in between.

    Args:
        qpos: ``[dof]`` joint positions measured at ``stamp_s`` (m or rad).
        stamp_s, now_s: the measurement's time and now, on one clock (s).
        commands: ``(t_sent_s, qvel)`` in time order, ``qvel`` ``[dof]`` (m/s or rad/s); each holds until the
            next one is sent, the last one until ``now_s``. Older ones are ignored where they end before
            ``stamp_s``.
        joints: indices of the joints to predict (e.g. base and arms, not the fingers); default all.
        qvel: ``[dof]`` joint velocities measured at ``stamp_s``: with ``time_constants_s``, where each joint's
            velocity starts from.
        time_constants_s: ``[dof]`` each drive's first-order lag (s; ``RobotModel.drive_time_constants_s``): the
            velocity moves from ``qvel`` toward each command as ``u + (v - u) exp(-t / tau)``, integrated exactly
            per command. None, or 0 for a joint: the command's velocity at once (``qvel`` unused).
    Returns:
        ``[dof]`` predicted positions.
    """
    q = np.asarray(qpos, dtype=np.float64).copy()
    if not (np.isfinite(stamp_s) and np.isfinite(now_s)):
        raise ValueError(f"stamp_s ({stamp_s}) and now_s ({now_s}) must be finite")
    if now_s <= stamp_s or not commands:
        return q
    index = np.arange(len(q)) if joints is None else np.asarray(joints, dtype=int)
    times = [float(t) for t, _ in commands]
    if any(b < a for a, b in zip(times, times[1:])):
        raise ValueError("commands must be in time order")
    tau = np.zeros(len(index))
    if time_constants_s is not None:
        tau = np.asarray(time_constants_s, dtype=np.float64)[index]
        if np.any(~np.isfinite(tau)) or np.any(tau < 0):
            raise ValueError(f"time_constants_s must be finite and >= 0, got {time_constants_s}")
    lagged = tau > 0
    v = np.zeros(len(index))
    if qvel is not None and lagged.any():
        v = np.asarray(qvel, dtype=np.float64)[index].copy()
        if not np.all(np.isfinite(v)):
            raise ValueError("qvel has a NaN or inf")
    # The command in effect at stamp_s (sent before it) drives the joints from stamp_s on.
    moved = np.zeros(len(index))
    safe_tau = np.where(lagged, tau, 1.0)
    for i, (t_sent, command) in enumerate(commands):
        start = max(times[i], stamp_s)
        end = min(times[i + 1] if i + 1 < len(times) else now_s, now_s)
        if end <= start:
            continue
        u = np.asarray(command, dtype=np.float64)
        if u.shape != q.shape:
            raise ValueError(f"command {i}: qvel has shape {u.shape}, qpos {q.shape}")
        u, d = u[index], end - start
        decay = np.exp(-d / safe_tau)
        moved += np.where(lagged, u * d + (v - u) * safe_tau * (1 - decay), u * d)
        v = np.where(lagged, u + (v - u) * decay, u)
    q[index] += moved
    return q
