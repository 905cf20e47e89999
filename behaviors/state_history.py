"""The robot's recent states by stamp, so that a cloud is compared with the robot as it was when the cloud was taken.

In real time a cloud is older than the newest joint states (a camera at 10-30 Hz, sensor latency). A node that
compares the robot as the cameras see it with its model (the hand-eye corrections: behaviors/camera_correction.py,
RefineGrasp) must put the model at the joints of the cloud's stamp, as tf2 looks a transform up at a message's
stamp rather than at the newest one. :class:`StateHistory` keeps the states of the last ``horizon_s``; the tree
solver adds each tick's observation. :func:`observation_at_cloud` returns the observation with its joint
positions, velocities, base and tool poses at the cloud's stamp (``Observation.points_time_s``), linearly
interpolated between the two states around it (rotations by spherical interpolation), or None where the history
does not reach the stamp: the node then waits for a cloud taken at rest (behaviors/background.py).
"""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from handleit.types import Observation, RobotState

HISTORY_S = 2.0  # states kept (s of the robot's clock): a cloud older than this is not placed
# A stamp this far beyond the newest state (a cloud stamped after the joint states: their latency larger) is taken
# at the newest state; farther, the history does not reach it.
STAMP_SLACK_S = 0.015


class StateHistory:
    """States by their stamp, the last ``horizon_s`` of them, oldest first: each observation's measured state
    (``Observation.measured_state``, where latency compensation predicted the one handed on), else its state at
    ``Observation.state_time_s``."""

    def __init__(self, horizon_s: float = HISTORY_S):
        if horizon_s <= 0:
            raise ValueError(f"horizon_s must be > 0, got {horizon_s}")
        self.horizon_s = horizon_s
        self._states: deque[RobotState] = deque()

    def __len__(self) -> int:
        return len(self._states)

    def clear(self) -> None:
        self._states.clear()

    def add(self, observation: Observation) -> None:
        """Keep the observation's state; a stamp not later than the newest one replaces nothing and is dropped
        (a repeated observation: the tick ran faster than the joint states came)."""
        state = observation.measured_state
        if state is None:
            state = RobotState(float(observation.state_time_s), observation.qpos, observation.qvel, observation.X_WB,
                               observation.X_WT)
        t = float(state.time_s)
        if not np.isfinite(t) or (self._states and t <= self._states[-1].time_s):
            return
        self._states.append(RobotState(t, np.array(state.qpos, dtype=np.float64), np.array(state.qvel, dtype=np.float64),
                                       np.array(state.X_WB), {s: np.array(X) for s, X in state.X_WT.items()}))
        while self._states and self._states[0].time_s < t - self.horizon_s:
            self._states.popleft()

    def at(self, t_s: float) -> RobotState | None:
        """The state at ``t_s``, interpolated between the two around it; None where the history does not reach."""
        if not self._states or not np.isfinite(t_s):
            return None
        newest = self._states[-1]
        if t_s >= newest.time_s:
            return newest if t_s - newest.time_s <= STAMP_SLACK_S else None
        if t_s < self._states[0].time_s:
            return None
        times = np.fromiter((s.time_s for s in self._states), dtype=np.float64, count=len(self._states))
        j = int(np.searchsorted(times, t_s, side="right"))  # times[j-1] <= t_s < times[j]
        a, b = self._states[j - 1], self._states[j]
        w = (t_s - a.time_s) / (b.time_s - a.time_s)
        return RobotState(float(t_s), (1 - w) * a.qpos + w * b.qpos, (1 - w) * a.qvel + w * b.qvel,
                          interpolate_pose(a.X_WB, b.X_WB, w),
                          {s: interpolate_pose(a.X_WT[s], b.X_WT[s], w) for s in a.X_WT if s in b.X_WT})


def interpolate_pose(X_a: np.ndarray, X_b: np.ndarray, w: float) -> np.ndarray:
    """The pose ``w`` (0-1) of the way from ``X_a`` to ``X_b``: translation linear, rotation by slerp."""
    X = np.eye(4)
    X[:3, 3] = (1 - w) * X_a[:3, 3] + w * X_b[:3, 3]
    X[:3, :3] = Slerp([0.0, 1.0], Rotation.from_matrix(np.stack([X_a[:3, :3], X_b[:3, :3]])))([w]).as_matrix()[0]
    return X


def observation_at_cloud(observation: Observation, history: StateHistory) -> Observation | None:
    """The observation with the robot's state at its cloud's stamp, or None where the cloud carries no stamp or
    the history does not reach it. A cloud stamped with the joint states is the observation itself."""
    t_cloud = observation.points_time_s
    if t_cloud is None:
        return None
    if abs(t_cloud - observation.state_time_s) < 1e-9:
        return observation
    state = history.at(t_cloud)
    if state is None:
        return None
    return dataclasses.replace(observation, state_stamp_s=state.time_s, qpos=state.qpos, qvel=state.qvel,
                               X_WB=state.X_WB, X_WT=state.X_WT, measured_state=None)
