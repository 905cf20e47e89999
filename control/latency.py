"""Latency compensation: the joint state now, predicted from a late measurement and the commands sent since.

A robot's joint states reach the tree late (sensor latency: 50-200 ms over a middleware and a driver stack),
and a feedback loop closed on a late state overshoots: at 100 ms the Let's Handle It (arXiv 2202.11792) gains that hold
the arm on a reference at 0 ms make it miss the handle. As a Smith predictor does, add to the measured positions what
the velocity commands sent since the measurement's stamp have moved the joints by (each command holds until the
next). The prediction ignores how the drives lag their commands, so it slightly over-predicts a starting move;
numpy in, numpy out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def predicted_joint_positions(qpos: np.ndarray, stamp_s: float, now_s: float,
                              commands: Sequence[tuple[float, np.ndarray]], joints: np.ndarray | None = None
                              ) -> np.ndarray:
    """``qpos`` measured at ``stamp_s``, moved on to ``now_s`` by the velocity commands sent in between.

    Args:
        qpos: ``[dof]`` joint positions measured at ``stamp_s`` (m or rad).
        stamp_s, now_s: the measurement's time and now, on one clock (s).
        commands: ``(t_sent_s, qvel)`` in time order, ``qvel`` ``[dof]`` (m/s or rad/s); each holds until the
            next one is sent, the last one until ``now_s``. Older ones are ignored where they end before
            ``stamp_s``.
        joints: indices of the joints to predict (e.g. base and arms, not the fingers); default all.
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
    moved = np.zeros(len(index))
    for i, (t_sent, qvel) in enumerate(commands):
        start = max(times[i], stamp_s)
        end = min(times[i + 1] if i + 1 < len(times) else now_s, now_s)
        if end > start:
            v = np.asarray(qvel, dtype=np.float64)
            if v.shape != q.shape:
                raise ValueError(f"command {i}: qvel has shape {v.shape}, qpos {q.shape}")
            moved += v[index] * (end - start)
    q[index] += moved
    return q
