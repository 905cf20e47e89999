"""Latency compensation: late joint states moved on by the commands sent since their stamp."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.control.latency import predicted_joint_positions


def test_commands_since_the_stamp_move_the_measured_positions():
    q = np.array([0.0, 1.0, 0.5])
    commands = [(0.00, np.array([1.0, 0.0, 0.0])),   # before the stamp from 0.00 to 0.05: ignored there
                (0.10, np.array([0.0, -2.0, 0.0])),
                (0.15, np.array([0.5, 0.0, 0.0]))]   # holds until now
    out = predicted_joint_positions(q, stamp_s=0.05, now_s=0.20, commands=commands)
    # joint 0: 1.0 m/s from 0.05 to 0.10, then 0.5 m/s from 0.15 to 0.20; joint 1: -2 rad/s for 0.05 s
    np.testing.assert_allclose(out, [0.05 + 0.025, 1.0 - 0.1, 0.5])
    np.testing.assert_allclose(q, [0.0, 1.0, 0.5])  # the input is not changed


def test_only_the_named_joints_move_and_a_fresh_state_is_unchanged():
    q = np.zeros(3)
    commands = [(0.0, np.ones(3))]
    np.testing.assert_allclose(predicted_joint_positions(q, 0.0, 0.1, commands, joints=[0, 2]), [0.1, 0.0, 0.1])
    np.testing.assert_allclose(predicted_joint_positions(q, 0.1, 0.1, commands), q)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="time order"):
        predicted_joint_positions(np.zeros(2), 0.0, 1.0, [(0.5, np.zeros(2)), (0.2, np.zeros(2))])
    with pytest.raises(ValueError, match="shape"):
        predicted_joint_positions(np.zeros(2), 0.0, 1.0, [(0.5, np.zeros(3))])
    with pytest.raises(ValueError, match="finite"):
        predicted_joint_positions(np.zeros(2), float("nan"), 1.0, [])


def simulated_lag(v0: float, tau: float, segments: list[tuple[float, float]], dt: float = 1e-6) -> float:
    """Distance covered by a first-order drive (velocity v0 at the start), integrated with a tiny step."""
    v, x = v0, 0.0
    for u, duration in segments:
        for _ in range(int(round(duration / dt))):
            v += (u - v) * dt / tau
            x += v * dt
    return x


def test_a_lagging_drive_is_integrated_from_its_measured_velocity():
    """A base at 0.8 m/s with a 34 ms lag, commanded to stop: it still covers 2.7 cm, which the command alone says
    it does not; a start from rest covers less than the command says."""
    tau = np.array([0.034, 0.0])
    commands = [(0.0, np.array([0.0, 0.0]))]
    out = predicted_joint_positions(np.zeros(2), 0.0, 0.1, commands, qvel=np.array([0.8, 0.8]), time_constants_s=tau)
    assert out[0] == pytest.approx(simulated_lag(0.8, 0.034, [(0.0, 0.1)]), abs=1e-5)
    assert out[0] == pytest.approx(0.8 * 0.034 * (1 - np.exp(-0.1 / 0.034)))
    assert out[1] == 0.0  # no lag: the command at once (the measured velocity unused)
    commands = [(0.0, np.array([1.0, 1.0])), (0.05, np.array([-0.5, -0.5]))]
    out = predicted_joint_positions(np.zeros(2), 0.0, 0.1, commands, qvel=np.zeros(2), time_constants_s=tau)
    assert out[0] == pytest.approx(simulated_lag(0.0, 0.034, [(1.0, 0.05), (-0.5, 0.05)]), abs=1e-5)
    assert out[1] == pytest.approx(0.05 - 0.025)
    with pytest.raises(ValueError, match="time_constants_s"):
        predicted_joint_positions(np.zeros(2), 0.0, 0.1, commands, qvel=np.zeros(2), time_constants_s=[-1.0, 0.0])
    with pytest.raises(ValueError, match="qvel"):
        predicted_joint_positions(np.zeros(2), 0.0, 0.1, commands, qvel=[np.nan, 0.0], time_constants_s=tau)
