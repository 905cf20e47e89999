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
