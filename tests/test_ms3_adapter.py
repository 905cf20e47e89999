"""The ManiSkill3 adapter on real ManiSkill3 envs: observation conversion (shapes, frames, masks), the
command-to-action map, scripted motion, success from ManiSkill3's info, and episodes through the harness.

Object poses are read here, in the test, to check the masks and success; the adapter never reads them.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("mani_skill")

from handleit.harness.evaluation import episode_specs, run_episodes
from handleit.harness.ms3_adapter import (
    SIDE,
    TRAIN_SEED_OFFSET,
    ManiSkill3Robot,
    episode_seeds,
    make_env,
    ms3_env_id,
)
from handleit.types import Command, RobotInterface

ARM = [f"panda_joint{i}" for i in range(1, 8)]


@pytest.fixture(scope="module")
def pick_cube():
    env = make_env("ms3:PickCube-v1", max_episode_steps=40)
    robot = ManiSkill3Robot(env)
    yield env, robot
    env.close()


def _zero(robot, **gripper) -> Command:
    return Command(qvel=np.zeros(len(robot.model.joint_names)), gripper=gripper)


def _position(actor) -> np.ndarray:
    return np.asarray(actor.pose.p).reshape(3)  # ground truth: tests only


def test_robot_model_is_the_maniskill_panda(pick_cube):
    _, robot = pick_cube
    m = robot.model
    assert isinstance(robot, RobotInterface)
    assert m.joint_names == tuple(ARM) + ("panda_finger_joint1", "panda_finger_joint2")
    assert m.urdf_path.name == "panda_v2.urdf" and m.srdf_path.exists()
    assert m.base_joint_names == () and m.arm_joint_names == {SIDE: tuple(ARM)}
    assert m.tcp_link_names == {SIDE: "panda_hand_tcp"}
    np.testing.assert_allclose(m.velocity_limits, [1.0] * 7 + [0.2, 0.2])  # pd_joint_vel range; URDF fingers
    assert m.joint_limits.shape == (9, 2) and np.all(m.joint_limits[:, 0] < m.joint_limits[:, 1])
    assert m.gripper_max_opening_m == pytest.approx(0.08)
    assert m.control_dt_s == pytest.approx(0.05)  # ManiSkill3's 20 Hz control


def test_observation_is_world_frame_with_labelled_masks(pick_cube):
    env, robot = pick_cube
    obs = robot.reset(seed=3)
    n = len(obs.points)
    assert obs.frame == "world" and n > 1000
    assert obs.points.dtype == np.float32 and obs.points.shape == (n, 3)
    assert obs.colors.dtype == np.uint8 and obs.colors.shape == (n, 3)
    assert obs.qpos.shape == obs.qvel.shape == (9,) and obs.time_s == 0.0
    named = ("robot", "table", "ground", "target")
    for name in named + ("objects",):
        assert obs.masks[name].shape == (n,) and obs.masks[name].dtype == bool
        assert obs.masks[name].any(), name
    stacked = np.stack([obs.masks[k] for k in named])
    assert stacked.sum(0).max() == 1  # disjoint
    assert np.array_equal(obs.masks["objects"], obs.masks["target"])  # the cube is PickCube's only object

    base = env.unwrapped
    # The target mask is the cube: its points lie on the 4 cm cube (centre read here only, as ground truth).
    cube = obs.points[obs.masks["target"]]
    assert np.max(np.linalg.norm(cube - _position(base.cube), axis=1)) < 0.02 * np.sqrt(3) + 0.005
    # Robot points: the arm between its base (X_WB, the root at x = -0.615 m) and the tool centre.
    p_WB, p_WT = obs.X_WB[:3, 3], obs.X_WT[SIDE][:3, 3]
    np.testing.assert_allclose(p_WB, [-0.615, 0.0, 0.0], atol=1e-6)
    arm = obs.points[obs.masks["robot"]]
    assert np.min(np.linalg.norm(arm - p_WT, axis=1)) < 0.05
    assert np.all(np.linalg.norm(arm - p_WB, axis=1) < 1.2)  # the Panda reaches ~0.86 m
    np.testing.assert_allclose(obs.X_WT[SIDE][:3, 3], np.asarray(base.agent.tcp.pose.p).reshape(3), atol=1e-5)
    # The table top is z = 0 in ManiSkill3's table scene; the ground lies below it.
    assert np.all(np.abs(obs.points[obs.masks["table"]][:, 2]) < 0.01)
    assert np.all(obs.points[obs.masks["ground"]][:, 2] < -0.5)
    # The goal comes from obs["extra"]["goal_pos"]; the goal sphere is hidden from the cameras.
    np.testing.assert_allclose(obs.goal_W, _position(base.goal_site), atol=1e-6)


def test_commands_map_to_the_pd_joint_vel_action(pick_cube):
    _, robot = pick_cube
    robot.reset(seed=0)
    qvel = np.zeros(9)
    qvel[:7] = [0.5, -0.25, 2.0, -3.0, 0.0, 0.1, 1.0]
    qvel[7:] = 5.0  # finger entries are ignored
    a = robot.action_of(Command(qvel=qvel))
    assert a.dtype == np.float32 and a.shape == (8,)
    np.testing.assert_allclose(a[:7], [0.5, -0.25, 1.0, -1.0, 0.0, 0.1, 1.0], atol=1e-6)  # clipped at 1 rad/s
    assert a[7] == pytest.approx(1.0)  # "hold" at reset: the fingers stay open (0.04 m each)
    # Gripper: action -1..1 is the finger target -0.01..0.04 m.
    assert robot.action_of(_zero(robot, arm="close"))[7] == -1.0
    assert robot.action_of(_zero(robot))[7] == -1.0  # no entry: repeat the last command
    assert robot.action_of(_zero(robot, arm="open"))[7] == 1.0
    assert robot.action_of(_zero(robot, arm=0.04))[7] == pytest.approx(0.2)  # 0.02 m per finger
    assert robot.action_of(_zero(robot, arm=0.2))[7] == 1.0  # wider than the gripper: clipped


def test_bad_commands_are_refused_with_the_reason(pick_cube):
    _, robot = pick_cube
    robot.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(7,\), expected \(9,\)"):
        robot.action_of(Command(qvel=np.zeros(7)))
    qvel = np.zeros(9)
    qvel[2] = np.nan
    with pytest.raises(ValueError, match="panda_joint3"):
        robot.action_of(Command(qvel=qvel))
    with pytest.raises(ValueError, match="unknown gripper side"):
        robot.action_of(_zero(robot, right="open"))
    with pytest.raises(ValueError, match="unknown gripper command 'squeeze'"):
        robot.action_of(_zero(robot, arm="squeeze"))
    with pytest.raises(ValueError, match="opening must be a finite width"):
        robot.action_of(_zero(robot, arm=-0.01))


def test_scripted_commands_move_the_arm_and_gripper(pick_cube):
    _, robot = pick_cube
    obs0 = robot.reset(seed=1)
    qvel = np.zeros(9)
    qvel[0] = 0.5  # rad/s on joint 1 (the vertical axis)
    for _ in range(8):
        robot.act(Command(qvel=qvel, gripper={SIDE: "close"}))
    obs = robot.observe()
    moved = obs.qpos[:7] - obs0.qpos[:7]
    assert moved[0] == pytest.approx(0.5 * 8 * robot.model.control_dt_s, rel=0.15)
    assert np.all(np.abs(moved[1:]) < 0.03)
    assert np.all(obs.qpos[7:] < 0.005)  # closed on nothing
    assert obs.time_s == pytest.approx(8 * robot.model.control_dt_s) and robot.steps == 8
    for _ in range(6):
        robot.act(_zero(robot, arm="open"))
    assert np.all(robot.observe().qpos[7:] > 0.035)
    assert not robot.done and robot.success is False


def test_success_is_maniskill3s_and_ends_the_episode(pick_cube):
    """Success comes from ManiSkill3's info: with the cube put at the goal (a test-only shortcut through
    ground truth) and the arm still, ManiSkill3 reports success and ends the episode at once."""
    import sapien

    env, robot = pick_cube
    obs = robot.reset(seed=2)
    env.unwrapped.cube.set_pose(sapien.Pose(p=obs.goal_W))
    robot.act(_zero(robot))
    assert robot.success and robot.done
    with pytest.raises(RuntimeError, match="call reset"):
        robot.act(_zero(robot))


def test_stack_cube_masks_both_cubes():
    env = make_env("ms3:StackCube-v1")
    try:
        robot = ManiSkill3Robot(env)
        obs = robot.reset(seed=0)
        base = env.unwrapped
        assert robot.model.urdf_path.name == "panda_v3.urdf"  # StackCube's Panda carries a hand camera
        assert obs.goal_W is None
        for mask, actor in (("target", base.cubeA), ("place_target", base.cubeB)):
            points = obs.points[obs.masks[mask]]
            assert len(points) > 10
            assert np.max(np.linalg.norm(points - _position(actor), axis=1)) < 0.02 * np.sqrt(3) + 0.005
        assert not (obs.masks["target"] & obs.masks["place_target"]).any()
    finally:
        env.close()


def test_task_names_splits_and_seeds():
    assert ms3_env_id("ms3:PickCube-v1") == "PickCube-v1"
    with pytest.raises(ValueError, match="unknown ManiSkill3 env 'PickFridge-v1'"):
        ms3_env_id("ms3:PickFridge-v1")
    assert episode_seeds("test", 3, seed=5) == [5, 6, 7]
    assert episode_seeds("train", 2) == [TRAIN_SEED_OFFSET, TRAIN_SEED_OFFSET + 1]
    with pytest.raises(ValueError, match="unknown split 'val'"):
        episode_seeds("val", 1)
    specs = episode_specs("ms3:PickCube-v1", "test", 3, "idle", 50, seed=10)
    assert [s.seed for s in specs] == [10, 11, 12] and {s.model_id for s in specs} == {"PickCube-v1"}


def test_harness_runs_a_maniskill3_task_with_the_idle_solver(tmp_path):
    specs = episode_specs("ms3:PickCube-v1", "test", 2, "idle", max_steps=3)
    records = run_episodes(specs, tmp_path / "records.jsonl", workers=1, episode_timeout_s=300, progress=False)
    assert [r.error for r in records] == [None, None]
    assert all(r.steps == 3 and not r.success and r.failed_node == "timeout" for r in records)
    lines = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert sorted(line["seed"] for line in lines) == [0, 1]
