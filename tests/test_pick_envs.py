"""PickCube and PickObject: the stationary Panda and its controllers, observations and masks, episode sampling
(ManiSkill3 PickCube-v1's ranges), determinism, the success check, the generated objects (every one rests
on the table), mesh files as objects, and clear errors. Ground truth is read here, never by a solver."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
import sapien
import trimesh

import handleit.envs
from handleit.envs.object_generator import (
    GRASP_WIDTH_MAX_M,
    HEIGHT_MIN_M,
    SHAPES,
    SPLIT_COUNTS,
    object_ids,
    sample_object,
    write_object,
)
from handleit.envs.pick_cube import CUBE_HALF_SIZE_M
from handleit.envs.rigid_object import MeshError
from handleit.envs.stationary_panda import ARM_REST_QPOS, ROBOT_BASE_XYZ_M
from handleit.harness.sim_robot import SimRobot
from handleit.types import Command

ARM = list(range(7))
FINGERS = [7, 8]
GOAL_THRESH_M = 0.025
CAMERA_PIXELS = 128 * 128


def make(task="PickCube", **kwargs):
    kwargs.setdefault("obs_mode", "state")
    return handleit.envs.make(task, **kwargs)


def hold_object_at(env, p_W) -> None:
    """Ground truth: put the object's centre of mass at ``p_W``, at rest (as if a hand held it there)."""
    base = env.unwrapped
    offset = base.object_com_W() - base.obj.pose.p
    base.obj.set_pose(sapien.Pose(np.asarray(p_W) - offset, base.obj.pose.q))
    base.obj_body.set_linear_velocity(np.zeros(3))
    base.obj_body.set_angular_velocity(np.zeros(3))


@pytest.fixture(scope="module")
def cube_pc():
    env = make(obs_mode="pointcloud", render_mode="rgb_array")
    yield env
    env.close()


@pytest.fixture(scope="module")
def cube_state():
    env = make()
    yield env
    env.close()


@pytest.fixture(scope="module")
def objects_state():
    env = make("PickObject", split="train")
    yield env
    env.close()


# ---------------------------------------------------------------------------------------------- robot


def test_robot_is_the_stationary_panda_at_the_table_edge(cube_state):
    obs, _ = cube_state.reset(seed=0)
    base = cube_state.unwrapped
    assert base.robot.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8)) + (
        "panda_finger_joint1", "panda_finger_joint2")
    np.testing.assert_allclose(obs["agent"]["base_pose"], [*ROBOT_BASE_XYZ_M, 1, 0, 0, 0], atol=1e-6)
    assert cube_state.action_space.shape == (9,)
    # ManiSkill's rest keyframe plus N(0, 0.02) noise; gripper open.
    assert np.all(np.abs(obs["agent"]["qpos"][ARM] - ARM_REST_QPOS) < 0.1)
    np.testing.assert_allclose(obs["agent"]["qpos"][FINGERS], 0.04, atol=1e-6)
    # The TCP hangs above the table, pointing down.
    tcp = obs["agent"]["tcp_pose"]
    assert tcp.shape == (7,) and 0.1 < tcp[2] < 0.3
    R = sapien.Pose(tcp[:3], tcp[3:]).to_transformation_matrix()[:3, :3]
    assert R[:, 2] @ [0, 0, -1] > 0.95


def test_robot_model_and_sim_robot_without_base(cube_pc):
    robot = SimRobot(cube_pc)
    model = robot.model
    assert model.base_joint_names == () and model.base_link_name == "panda_link0"
    assert model.arm_joint_names == {"arm": tuple(f"panda_joint{i}" for i in range(1, 8))}
    assert model.tcp_link_names == {"arm": "panda_hand_tcp"}
    assert model.urdf_path.is_file() and model.srdf_path.is_file()
    observation = robot.reset(seed=3)
    assert set(observation.masks) == {"target", "target_link", "robot"}
    np.testing.assert_allclose(observation.goal_W, robot.env.unwrapped.goal_W, atol=1e-6)
    assert set(observation.X_WT) == {"arm"}
    qvel = np.zeros(9)
    qvel[0] = 1.57  # half the arm's velocity limit
    action = robot.action_of(Command(qvel=qvel, gripper={"arm": "close"}))
    np.testing.assert_allclose(action, [0.5, 0, 0, 0, 0, 0, 0, -1, -1], atol=1e-9)
    robot.act(Command(qvel=qvel, gripper={"arm": "close"}))
    assert robot.steps == 1


@pytest.mark.parametrize("mode, dim", [("normalized_joint_vel", 9), ("pd_joint_pos", 8),
                                       ("pd_joint_delta_pos", 8), ("pd_ee_delta_pose", 7)])
def test_control_modes_without_base(mode, dim):
    env = make(control_mode=mode)
    assert env.action_space.shape == (dim,)
    env.reset(seed=0)
    base = env.unwrapped
    tcp0 = base.robot.X_WT("arm").p.copy()
    q0 = base.robot.qpos.astype(np.float64)
    action = np.zeros(dim)
    if mode == "pd_joint_pos":
        action[:7] = q0[:7]
        action[7] = 1.0  # open
    elif mode == "pd_joint_delta_pos":
        action[3] = 0.5  # joint 4 toward its upper limit
    elif mode == "pd_ee_delta_pose":
        action[2] = 0.5  # TCP up, in the robot's base frame (its root link)
    else:
        action[3] = 0.3
    for _ in range(20):
        env.step(action)
    q1, tcp1 = base.robot.qpos.astype(np.float64), base.robot.X_WT("arm").p
    if mode == "pd_joint_pos":
        np.testing.assert_allclose(q1[:7], q0[:7], atol=2e-3)  # holds
    elif mode == "pd_ee_delta_pose":
        assert tcp1[2] - tcp0[2] > 0.02
        assert np.linalg.norm(tcp1[:2] - tcp0[:2]) < 0.01
    elif mode == "pd_joint_delta_pos":
        assert q1[3] - q0[3] > 0.02
    else:  # 0.3 of the 3.14 rad/s limit for 0.2 s: about 0.19 rad (the drive lags a few steps)
        assert q1[3] - q0[3] == pytest.approx(0.3 * 3.14 * 0.2, rel=0.1)
    env.close()


# ---------------------------------------------------------------------------------------------- PickCube


def test_pointcloud_shapes_masks_and_goal(cube_pc):
    obs, _ = cube_pc.reset(seed=1)
    assert cube_pc.observation_space.contains(obs)
    pc = obs["pointcloud"]
    assert pc["xyz"].shape == (CAMERA_PIXELS, 3) and pc["rgb"].shape == (CAMERA_PIXELS, 3)
    assert pc["frame"] == "world"
    base = cube_pc.unwrapped
    cube = base.object_com_W()
    target = pc["target"] & pc["valid"]
    np.testing.assert_array_equal(pc["target"], pc["target_link"])
    assert target.sum() > 10
    assert np.all(np.linalg.norm(pc["xyz"][target] - cube, axis=1) < CUBE_HALF_SIZE_M * np.sqrt(3) + 0.003)
    assert np.all(pc["rgb"][target][:, 0] > 100)  # red
    robot = pc["robot"] & pc["valid"]
    assert robot.sum() > 100 and not (robot & target).any()
    # The goal is given as a position, and its green marker is not in the cloud (render camera only).
    np.testing.assert_allclose(obs["extra"]["goal_pos"], base.goal_W, atol=1e-6)
    rgb = pc["rgb"].astype(int)
    assert not np.any((rgb[:, 1] > 150) & (rgb[:, 0] < 80) & (rgb[:, 2] < 80))
    image = cube_pc.render()
    assert image.shape == (480, 640, 3)
    assert np.any((image[..., 1] > 150) & (image[..., 0] < 80) & (image[..., 2] < 80))


def test_rgbd_and_hand_camera():
    env = make(obs_mode="rgbd", hand_camera=True, camera_width=64, camera_height=48)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert set(obs["cameras"]) == {"base_camera", "hand_camera"}
    for cam in obs["cameras"].values():
        assert cam["rgb"].shape == (48, 64, 3) and cam["depth"].shape == (48, 64)
        assert set(cam) >= {"target", "target_link", "robot"}
    # The hand camera looks along the approach, down at the table: it sees the cube's side of the table.
    depth = obs["cameras"]["hand_camera"]["depth"]
    assert 0.05 < np.median(depth[depth > 0]) < 0.4
    env.close()
    with pytest.raises(ValueError, match="unknown mount"):
        bad = dataclasses.replace(env.unwrapped.camera_configs[0], mount="no_such_link")
        make(obs_mode="rgbd", cameras=(bad,))


def test_episode_sampling_follows_pickcube_v1(cube_state):
    goals, cubes = [], []
    for seed in range(10):
        obs, _ = cube_state.reset(seed=seed)
        base = cube_state.unwrapped
        cube, goal = base.object_com_W(), obs["extra"]["goal_pos"]
        assert np.all(np.abs(cube[:2]) <= 0.1 + 1e-6) and cube[2] == pytest.approx(CUBE_HALF_SIZE_M, abs=1e-5)
        assert np.all(np.abs(goal[:2]) <= 0.1 + 1e-6)
        assert CUBE_HALF_SIZE_M - 1e-6 <= goal[2] <= CUBE_HALF_SIZE_M + 0.3 + 1e-6
        up = base.obj.pose.to_transformation_matrix()[:3, 2]
        assert up @ [0, 0, 1] == pytest.approx(1.0, abs=1e-6)  # flat, yaw only
        goals.append(goal)
        cubes.append(cube)
    assert len({tuple(np.round(g, 5)) for g in goals}) == 10
    assert np.ptp(np.array(cubes)[:, 0]) > 0.05


def _rollout(env, seed, steps=15):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(7)
    arrays = []
    for _ in range(steps):
        obs, *_ = env.step(rng.uniform(-1, 1, env.action_space.shape))
        arrays.append(obs["agent"]["qpos"])
        arrays.append(obs["extra"]["goal_pos"])
        if "pointcloud" in obs:
            arrays += [obs["pointcloud"]["xyz"].ravel(), obs["pointcloud"]["target"].astype(np.float32)]
        else:
            arrays.append(obs["state"])
    return np.concatenate(arrays)


@pytest.mark.parametrize("obs_mode", ["state", "pointcloud"])
def test_same_seed_gives_the_same_episode(obs_mode, cube_state, cube_pc):
    env = cube_state if obs_mode == "state" else cube_pc
    a = _rollout(env, 5)
    _rollout(env, 6)
    b = _rollout(env, 5)
    c = _rollout(make(obs_mode=obs_mode), 5)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_success_needs_the_cube_at_the_goal_and_a_static_robot(cube_state):
    env = cube_state
    _, info = env.reset(seed=2)
    assert not info["success"] and not info["is_grasped"]
    goal = env.unwrapped.goal_W.copy()
    # Held 3 cm beside the goal: not placed.
    hold_object_at(env, goal + [0.03, 0.0, 0.0])
    _, _, terminated, _, info = env.step(np.zeros(9))
    assert not info["is_obj_placed"] and not info["success"] and not terminated
    # Held at the goal with the robot moving: placed, but the robot is not static.
    moving = np.zeros(9)
    moving[0] = 0.5  # 1.57 rad/s on joint 1
    for _ in range(3):
        hold_object_at(env, goal)
        _, _, terminated, _, info = env.step(moving)
    assert info["is_obj_placed"] and not info["is_robot_static"] and not info["success"] and not terminated
    # Held at the goal, the robot still: success, and the episode ends (ManiSkill's convention).
    for _ in range(10):
        hold_object_at(env, goal)
        _, reward, terminated, _, info = env.step(np.zeros(9))
        if terminated:
            break
    assert info["success"] and info["is_robot_static"] and info["obj_to_goal_dist"] < GOAL_THRESH_M
    assert terminated and reward == 1.0


def test_a_real_grasp_holds_the_cube_and_is_detected(cube_state):
    """Cube between the fingers (ground truth set-up), gripper closed: is_grasped, and the cube stays."""
    env = cube_state
    env.reset(seed=0)
    base = env.unwrapped
    qpos = base.robot.qpos.astype(np.float64)
    qpos[FINGERS] = CUBE_HALF_SIZE_M + 0.002
    base.robot.reset(qpos)
    base.controller.reset()
    X_WT = base.robot.X_WT("arm")
    base.obj.set_pose(sapien.Pose(X_WT.p, X_WT.q))  # faces square to the fingers
    close = np.zeros(9)
    close[FINGERS] = -1.0
    for _ in range(5):
        _, _, _, _, info = env.step(close)
    assert info["is_grasped"]
    start = base.object_com_W()
    for _ in range(50):
        _, _, _, _, info = env.step(close)
    assert info["is_grasped"]
    assert np.linalg.norm(base.object_com_W() - start) < 0.01


def test_bad_input_is_named():
    env = make()
    with pytest.raises(RuntimeError, match="reset"):
        env.unwrapped.step(np.zeros(9))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([0, 0, np.nan, 0, 0, 0, 0, 0, 0]))
    with pytest.raises(ValueError, match=r"shape \(13,\)"):
        env.step(np.zeros(13))
    with pytest.raises(ValueError, match="unknown model_id"):
        env.reset(seed=0, options={"model_id": "sphere"})
    env.close()
    with pytest.raises(ValueError, match="split"):
        make(split="val")
    with pytest.raises(ValueError, match="robot_init_qpos_noise"):
        make(robot_init_qpos_noise=-1.0)
    with pytest.raises(ValueError, match="object-train-000"):
        make("PickObject", model_ids=["object-train-999"])


# ---------------------------------------------------------------------------------------------- objects


def test_object_ids_splits_and_shapes():
    assert SPLIT_COUNTS == {"train": 60, "test": 20}
    train, test = object_ids("train"), object_ids("test")
    assert len(set(train)) == 60 and len(set(test)) == 20 and not set(train) & set(test)
    assert handleit.envs.model_ids("PickObject", "test") == test
    assert handleit.envs.model_ids("PickCube", "train") == ["cube"]
    specs = [sample_object(m) for m in train + test]
    assert len({s.seed for s in specs}) == 80
    for split in ("train", "test"):
        assert {s.shape for s in specs if s.split == split} == set(SHAPES)
    for s in specs:
        assert s.grasp_width_m <= GRASP_WIDTH_MAX_M, s
        assert s.extents_m[2] >= HEIGHT_MIN_M, s
        assert 0.001 < s.mass_kg < 1.0 and s.density_kg_m3 > 0, s
        assert s.num_parts == (2 if s.shape == "l_shape" else 1)
    # Varied: sizes and masses spread.
    assert np.ptp([s.mass_kg for s in specs]) > 0.2
    assert np.ptp([max(s.extents_m) for s in specs]) > 0.06
    with pytest.raises(ValueError, match="object-<train|test>-<NNN>"):
        sample_object("cube-train-000")
    with pytest.raises(ValueError, match="out of range"):
        sample_object("object-test-020")


def test_generated_files_are_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_object("object-test-005", a)
    write_object("object-test-005", b)
    for path in sorted(a.rglob("*")):
        if path.is_file():
            assert path.read_bytes() == (b / path.relative_to(a)).read_bytes(), path
    parts = [trimesh.load(p, force="mesh") for p in sorted((a / "collision").glob("*.obj"))]
    assert len(parts) == 2 and all(p.is_convex for p in parts)  # object-test-005 is an L-shape
    # The centre of mass is the origin, the resting face at the bottom.
    whole = trimesh.util.concatenate(parts)
    np.testing.assert_allclose(sum(p.volume * p.center_mass for p in parts) / whole.volume, 0, atol=1e-6)


@pytest.mark.parametrize("split", ["train", "test"])
def test_every_object_rests_on_the_table(objects_state, split):
    """Each generated object, placed by reset, stays where it is for 100 zero-action steps (1 s)."""
    env = objects_state
    base = env.unwrapped
    moved = {}
    for model_id in object_ids(split):
        base.models.setdefault(model_id, None)  # the env was made for train; a test id is added here
        _, info = env.reset(seed=0, options={"model_id": model_id})
        assert info["model_id"] == model_id
        start = base.object_com_W()
        assert start[2] == pytest.approx(base.rest_com_height_m, abs=2e-3)
        for _ in range(100):
            env.step(np.zeros(9))
        lower, _ = base.obj_body.compute_global_aabb_tight()
        moved[model_id] = float(np.linalg.norm(base.object_com_W() - start))
        assert -3e-3 < lower[2] < 3e-3, (model_id, lower[2])  # on the table top
    assert max(moved.values()) < 3e-3, {k: v for k, v in moved.items() if v >= 3e-3}


def test_pick_object_success_and_sampling(objects_state):
    env = objects_state
    obs, info = env.reset(seed=4, options={"model_id": "object-train-005"})
    base = env.unwrapped
    com = base.object_com_W()
    assert np.all(np.abs(com[:2]) <= 0.1 + 2e-3)
    goal = obs["extra"]["goal_pos"]
    assert base.rest_com_height_m - 1e-6 <= goal[2] <= base.rest_com_height_m + 0.3 + 1e-6
    assert not info["success"]
    for _ in range(5):
        hold_object_at(env, goal)
        _, _, terminated, _, info = env.step(np.zeros(9))
        if terminated:
            break
    assert info["success"] and terminated


def test_pointcloud_masks_the_generated_object():
    env = make("PickObject", split="test", obs_mode="pointcloud")
    obs, _ = env.reset(seed=0, options={"model_id": "object-test-001"})
    pc = obs["pointcloud"]
    target = pc["target"] & pc["valid"]
    assert target.sum() > 10
    base = env.unwrapped
    extent = max(sample_object("object-test-001").extents_m)
    assert np.all(np.linalg.norm(pc["xyz"][target] - base.object_com_W(), axis=1) < extent)
    env.close()


def _write_box_obj(path, extents):
    trimesh.creation.box(extents).export(path)
    return path


def test_any_mesh_file_is_an_object(tmp_path):
    # A box in millimetres, scaled to metres.
    path = _write_box_obj(tmp_path / "block.obj", [40.0, 50.0, 60.0])
    env = make("PickObject", model_path=path, scale=0.001, density_kg_m3=500.0)
    obs, info = env.reset(seed=0)
    base = env.unwrapped
    assert info["model_id"] == "block"
    assert base.obj_body.mass == pytest.approx(500.0 * 0.04 * 0.05 * 0.06, rel=0.02)
    lower, upper = base.obj_body.compute_global_aabb_tight()
    assert upper[2] - lower[2] == pytest.approx(0.06, abs=1e-3) and abs(lower[2]) < 1e-3
    for _ in range(30):
        _, _, _, _, info = env.step(np.zeros(9))
    assert base.object_com_W()[2] == pytest.approx(0.03, abs=2e-3)
    hold_object_at(env, obs["extra"]["goal_pos"])
    _, _, _, _, info = env.step(np.zeros(9))
    assert info["success"]
    env.close()
    # STL too, and a non-uniform scale.
    stl = tmp_path / "block.stl"
    trimesh.creation.box([1.0, 1.0, 1.0]).export(stl)
    env = make("PickObject", model_path=stl, scale=(0.03, 0.04, 0.05), collision="hull")
    env.reset(seed=0)
    lower, upper = env.unwrapped.obj_body.compute_global_aabb_tight()
    assert upper[2] - lower[2] == pytest.approx(0.05, abs=1e-3)
    env.close()


def test_bad_mesh_files_are_named(tmp_path):
    missing = tmp_path / "nothing.obj"
    with pytest.raises(FileNotFoundError, match="nothing.obj"):
        make("PickObject", model_path=missing)
    garbage = tmp_path / "garbage.stl"
    garbage.write_bytes(b"\x00\x01 not a mesh at all")
    with pytest.raises(MeshError, match="garbage.stl"):
        make("PickObject", model_path=garbage)
    empty = tmp_path / "empty.obj"
    empty.write_text("# no faces\nv 0 0 0\n")
    with pytest.raises(MeshError, match="empty.obj"):
        make("PickObject", model_path=empty)
    box = _write_box_obj(tmp_path / "box.obj", [0.04, 0.04, 0.04])
    with pytest.raises(ValueError, match="scale"):
        make("PickObject", model_path=box, scale=(1.0, 2.0))
    with pytest.raises(ValueError, match="collision"):
        make("PickObject", model_path=box, collision="vhacd")


# ---------------------------------------------------------------------------------------------- speed


def test_step_speed_is_reported(cube_state, cube_pc, capsys):
    """Steps per second in state and pointcloud modes (one 128x128 camera): measured, not asserted."""
    rates = {}
    for name, env in (("state", cube_state), ("pointcloud", cube_pc)):
        env.reset(seed=0)
        env.step(np.zeros(9))  # first render outside the timing
        start = time.perf_counter()
        for _ in range(100):
            env.step(np.zeros(9))
        rates[name] = 100 / (time.perf_counter() - start)
    with capsys.disabled():
        print(f"\nPickCube env.step: {rates['state']:.0f} steps/s (state), {rates['pointcloud']:.0f} steps/s "
              f"(pointcloud, 1 x 128x128)")
    assert all(r > 0 for r in rates.values())
