"""The robot's states by stamp (behaviors/state_history.py): a cloud put beside the state when it was taken."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from handleit.behaviors.state_history import StateHistory, interpolate_pose, observation_at_cloud
from handleit.types import Observation, RobotState


def pose(x: float, yaw_rad: float) -> np.ndarray:
    X = np.eye(4)
    X[:3, :3] = Rotation.from_euler("z", yaw_rad).as_matrix()
    X[0, 3] = x
    return X


def observation(t: float, points_time_s: float | None = None, state_stamp_s: float | None = None) -> Observation:
    """The base at x = t m and yaw = t rad, the hand 0.5 m ahead of it, joint 0 at t."""
    s = t if state_stamp_s is None else state_stamp_s
    X_WB = pose(s, s)
    X_BT = np.eye(4)
    X_BT[0, 3] = 0.5
    return Observation(time_s=t, points=np.zeros((1, 3), np.float32), colors=np.zeros((1, 3), np.uint8), masks={},
                       frame="world", joint_names=("x",), qpos=np.array([s]), qvel=np.array([1.0]), X_WB=X_WB,
                       X_WT={"right": X_WB @ X_BT}, points_time_s=points_time_s, state_stamp_s=state_stamp_s)


def test_the_state_at_a_stamp_between_two_is_interpolated():
    history = StateHistory()
    for k in range(11):
        history.add(observation(0.01 * k))
    state = history.at(0.034)
    assert state.time_s == pytest.approx(0.034)
    np.testing.assert_allclose(state.qpos, [0.034])
    np.testing.assert_allclose(state.X_WB, pose(0.034, 0.034), atol=1e-9)
    np.testing.assert_allclose(state.X_WT["right"][:3, 3], pose(0.034, 0.034)[:3, 3] + 0.5 * pose(0, 0.034)[:3, 0],
                               atol=1e-5)


def test_stamps_the_history_does_not_reach_give_none():
    history = StateHistory(horizon_s=0.05)
    assert history.at(0.0) is None
    for k in range(11):
        history.add(observation(0.01 * k))
    assert len(history) == 6  # 0.05-0.10: the horizon
    assert history.at(0.02) is None  # older than the history
    assert history.at(0.11) is not None  # within STAMP_SLACK_S of the newest: the newest
    assert history.at(0.2) is None  # newer than the newest by far
    assert history.at(float("nan")) is None


def test_repeated_and_backward_stamps_are_not_kept():
    history = StateHistory()
    history.add(observation(0.1))
    history.add(observation(0.1))
    history.add(observation(0.05))
    assert len(history) == 1


def test_the_observation_at_its_clouds_stamp():
    history = StateHistory()
    for k in range(21):
        history.add(observation(0.01 * k))
    now = observation(0.2, points_time_s=0.1)
    at_cloud = observation_at_cloud(now, history)
    assert at_cloud.time_s == now.time_s and at_cloud.state_time_s == pytest.approx(0.1)
    np.testing.assert_allclose(at_cloud.qpos, [0.1])
    np.testing.assert_allclose(at_cloud.X_WB, pose(0.1, 0.1), atol=1e-9)
    assert at_cloud.points is now.points
    assert observation_at_cloud(observation(0.2), history) is None  # no stamp on the cloud
    assert observation_at_cloud(observation(0.2, points_time_s=-1.0), history) is None  # too old
    same = observation(0.2, points_time_s=0.2)
    assert observation_at_cloud(same, history) is same


def test_a_predicted_state_is_kept_at_the_moment_it_was_predicted_to():
    history = StateHistory()
    history.add(observation(0.0, state_stamp_s=0.1))  # measured at 0.0, moved on to 0.1 (latency compensation)
    history.add(observation(0.01, state_stamp_s=0.11))
    np.testing.assert_allclose(history.at(0.105).qpos, [0.105])
    assert history.at(0.005) is None


def test_a_measured_state_is_kept_rather_than_its_prediction():
    """Latency compensation hands on a prediction and the measurement it came from: the history keeps the
    measurement, exact at its stamp (predictions 200 ms ahead were a centimetre off)."""
    history = StateHistory()
    for k in range(3):
        measured = observation(0.01 * k)
        predicted = dataclasses.replace(observation(0.01 * k, state_stamp_s=0.01 * k + 0.2),
                                        measured_state=RobotState(measured.time_s, measured.qpos, measured.qvel,
                                                                  measured.X_WB, measured.X_WT))
        history.add(predicted)
    np.testing.assert_allclose(history.at(0.015).qpos, [0.015])
    assert history.at(0.2) is None


def test_pose_interpolation_ends_at_its_ends():
    X_a, X_b = pose(0.0, 0.0), pose(1.0, 1.0)
    np.testing.assert_allclose(interpolate_pose(X_a, X_b, 0.0), X_a, atol=1e-12)
    np.testing.assert_allclose(interpolate_pose(X_a, X_b, 1.0), X_b, atol=1e-12)
    np.testing.assert_allclose(interpolate_pose(X_a, X_b, 0.5), pose(0.5, 0.5), atol=1e-12)
    with pytest.raises(ValueError, match="horizon_s"):
        StateHistory(horizon_s=0)
