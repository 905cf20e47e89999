"""The drives' lag (RobotModel.drive_time_constants_s) against the simulator's step response, and latency compensation
that uses it: the tool poses moved on with the predicted joints by forward kinematics."""

from __future__ import annotations

import numpy as np
import pytest

import handleit.envs
from handleit.harness.realtime_runner import RealtimeRunner
from handleit.harness.sim_robot import SimRobot
from handleit.planning.whole_body_ik import WholeBodyIK
from handleit.types import Command


@pytest.fixture(scope="module")
def drawer_robot():
    robot = SimRobot(handleit.envs.make("OpenCabinetDrawer", obs_mode="pointcloud", split="test"))
    robot.reset(seed=0)
    yield robot
    robot.env.close()


def test_the_bases_lag_is_its_mass_over_its_damping_as_the_simulator_steps_it(drawer_robot):
    robot = drawer_robot
    m = robot.model
    taus = m.drive_time_constants_s
    assert taus.shape == (len(m.joint_names),) and np.all(taus >= 0)
    x = int(m.index(m.base_joint_names[:1])[0])
    assert 0.02 < taus[x] < 0.06  # 34 kg over 1000 N s/m
    robot.reset(seed=0)
    u = np.zeros(len(m.joint_names))
    u[x] = 0.3
    measured = []
    for _ in range(15):
        robot.act(Command(qvel=u, gripper={s: "hold" for s in m.finger_joint_names}))
        measured.append(robot.observe().qvel[x] / 0.3)
    t = np.arange(1, 16) * m.control_dt_s
    predicted = 1 - np.exp(-t / taus[x])
    np.testing.assert_allclose(measured, predicted, atol=0.06)


class _Robot:
    def __init__(self, model):
        self.model = model


def test_predicted_tool_poses_follow_the_predicted_arm(drawer_robot):
    """An arm joint commanded at 1 rad/s for the 100 ms since the stamp: the tool pose handed to the tree is the
    forward kinematics at the predicted joints (moved from the measured pose), not the 100 ms old pose."""
    robot = drawer_robot
    obs = robot.reset(seed=0)
    m = robot.model
    runner = RealtimeRunner(_Robot(m), solver=None, rate_hz=100)
    joint = int(m.index(m.arm_joint_names["right"][:1])[0])
    u = np.zeros(len(m.joint_names))
    u[joint] = 1.0
    runner._sent = [(obs.time_s, u)]
    predicted = runner._predicted(obs, obs.time_s + 0.1)
    assert predicted.time_s == obs.time_s and predicted.state_stamp_s == pytest.approx(obs.time_s + 0.1)
    assert predicted.qpos[joint] == pytest.approx(obs.qpos[joint] + 0.1)
    kin = WholeBodyIK.from_robot_model(m)
    X_BT = np.linalg.inv(kin.base_pose(predicted.qpos)) @ kin.tcp_pose(predicted.qpos, "right")
    np.testing.assert_allclose(predicted.X_WT["right"], obs.X_WB @ X_BT, atol=2e-3)
    moved = np.linalg.norm(predicted.X_WT["right"][:3, 3] - obs.X_WT["right"][:3, 3])
    assert moved > 0.02  # the hand swung centimetres in those 100 ms


def test_commands_past_the_limits_are_predicted_as_the_robot_applies_them(drawer_robot):
    """A P term on a large lag asks for more than a joint's limit; the robot moves at the limit. The runner keeps
    each command as the robot applies it (saturated, the base's planar velocity scaled as a whole in its own
    frame), so that the prediction lands where the robot is, not where the raw commands would have put it."""
    robot = drawer_robot
    obs0 = robot.reset(seed=0)
    m = robot.model
    runner = RealtimeRunner(_Robot(m), solver=None, rate_hz=100)
    x, y = (int(i) for i in m.index(m.base_joint_names[:2]))
    height = int(m.index(m.base_joint_names[3:4])[0])
    low, high = m.joint_limits[height]
    u = np.zeros(len(m.joint_names))
    u[x], u[y] = 2.0 * m.velocity_limits[x], 1.0 * m.velocity_limits[y]  # the world's x, y: past the limits
    u[height] = 3.0 * m.velocity_limits[height] * (1.0 if obs0.qpos[height] < (low + high) / 2 else -1.0)
    command = Command(qvel=u, gripper={s: "hold" for s in m.finger_joint_names})
    obs, sent = obs0, []
    for _ in range(8):
        sent.append((obs.time_s, runner._applied(command, obs)))
        robot.act(command)
        obs = robot.observe()
    applied = sent[0][1]
    assert abs(applied[height]) == pytest.approx(m.velocity_limits[height])
    assert np.max(np.abs(applied[[x, y]])) <= np.max(m.velocity_limits[[x, y]]) + 1e-9
    runner._sent = sent
    predicted = runner._predicted(obs0, obs.time_s)
    joints = [x, y, height]
    np.testing.assert_allclose(predicted.qpos[joints], obs.qpos[joints], atol=0.006)
    raw = obs0.qpos[joints] + u[joints] * (obs.time_s - obs0.time_s)  # the commands as sent, integrated
    assert np.max(np.abs(raw - obs.qpos[joints])) > 0.05


def test_the_runner_checks_its_predictions_against_the_measurements_at_their_moments(drawer_robot):
    """Each tick predicts the joints to now; when a measurement stamped at that moment arrives, the runner keeps how
    far off the prediction was (report.prediction_errors), per joint: latency compensation checked on the robot."""
    robot = drawer_robot
    obs0 = robot.reset(seed=0)
    m = robot.model
    runner = RealtimeRunner(_Robot(m), solver=None, rate_hz=1.0 / m.control_dt_s)
    joint = int(m.index(m.arm_joint_names["right"][:1])[0])
    u = np.zeros(len(m.joint_names))
    u[joint] = 0.5
    command = Command(qvel=u, gripper={s: "hold" for s in m.finger_joint_names})
    observations = [obs0]
    for _ in range(10):
        runner._sent.append((observations[-1].time_s, runner._applied(command, observations[-1])))
        robot.act(command)
        observations.append(robot.observe())
    runner._predicted(obs0, observations[10].time_s)  # a tick at the 10th step, its newest measurement obs0's
    assert runner.report.prediction_errors == []  # nothing measured at that moment yet
    runner._predicted(observations[10], observations[10].time_s + 0.05)  # now it arrives
    assert len(runner.report.prediction_errors) == 1
    error = runner.report.prediction_errors[0]
    assert error.shape == (len(m.joint_names),) and 0.0 <= error[joint] < 0.01  # the arm follows its commands
    stats = runner.report.prediction_error_stats()
    assert stats["joints"] == list(m.joint_names) and stats["n"] == 1 and len(stats["max"]) == len(m.joint_names)
