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
