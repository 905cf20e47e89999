"""MoveBucket: the procedural buckets (ids, determinism, ranges, both rim classes per split, the ball fits),
the env's API, episode sampling and success flags, and every bundled bucket standing still with its ball."""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import sapien

from handleit.envs import TASKS
from handleit.envs.bucket_generator import (
    BALL_RADIUS_M,
    SPLIT_COUNTS,
    THIN_RIM_MAX_M,
    bucket_ids,
    bucket_urdf,
    lying_handle_clearances,
    sample_bucket,
    write_bucket,
)
from handleit.envs.move_bucket import (
    HANDLE_DAMPING_RANGE,
    HANDLE_FRICTION_RANGE,
    START_TORSO_HEIGHT_M,
    MoveBucketEnv,
)
from tests.helpers import make_env, zero_action

SPLITS = list(SPLIT_COUNTS)
ALL_IDS = [model_id for split in SPLITS for model_id in bucket_ids(split)]
MASS_RANGE_KG = {"thin": (0.6, 2.5), "thick": (2.0, 5.0)}


# ---------------------------------------------------------------------------------------------- generator


def test_ids_match_split_counts_and_are_disjoint():
    assert SPLIT_COUNTS == {"train": 29, "test": 10}  # ManiSkill2 (arXiv 2302.04659) Appendix C.6
    for split in SPLITS:
        ids = bucket_ids(split)
        assert len(ids) == len(set(ids)) == SPLIT_COUNTS[split]
    assert not set(bucket_ids("train")) & set(bucket_ids("test"))
    assert bucket_ids("train")[7] == "bucket-train-007"


def test_bad_split_and_ids_name_valid_ones():
    with pytest.raises(ValueError, match="train") as info:
        bucket_ids("val")
    assert "test" in str(info.value)
    for bad in ["bucket-train", "bucket-train-7", "drawer-train-001", "bucket-val-000", "", "bucket-test-010"]:
        with pytest.raises(ValueError, match="bucket-"):
            sample_bucket(bad)


def test_sampling_is_deterministic(tmp_path):
    for model_id in ["bucket-train-000", "bucket-test-009"]:
        spec = sample_bucket(model_id)
        assert sample_bucket(model_id) == spec
        first = write_bucket(spec, tmp_path / "a" / model_id).parent
        second = write_bucket(sample_bucket(model_id), tmp_path / "b" / model_id).parent
        files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
        for name in files:
            assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert sample_bucket("bucket-train-000") != sample_bucket("bucket-train-001")


def test_bucket_urdf_is_cached():
    path = bucket_urdf("bucket-test-000")
    assert path.name == "mobility.urdf" and path.is_file() and path.parent.name.startswith("bucket-test-000-")
    mtime = path.stat().st_mtime_ns
    assert bucket_urdf("bucket-test-000") == path and path.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_sizes_masses_and_colors_are_in_range(model_id):
    s = sample_bucket(model_id)
    json.dumps(dataclasses.asdict(s))  # json-serializable
    assert 24 <= s.num_segments <= 32
    assert 0.20 <= s.height_m <= 0.36
    assert 0.13 <= s.top_radius_m <= 0.22
    assert 0.75 <= s.bottom_radius_m / s.top_radius_m <= 1.0
    low, high = {"thin": (0.006, 0.03), "thick": (0.075, 0.11)}[s.wall_class]
    assert low <= s.wall_thickness_m <= high
    assert s.rim_is_thin == (s.wall_class == "thin") == (s.wall_thickness_m < THIN_RIM_MAX_M)
    low, high = MASS_RANGE_KG[s.wall_class]
    assert low <= s.mass_kg <= high
    assert s.body_mass_kg + s.handle_mass_kg == pytest.approx(s.mass_kg, abs=2e-4)
    assert 0 < s.handle_mass_kg < 0.15 * s.mass_kg  # a light handle barely shifts the centre of mass
    assert 0.008 <= s.handle_thickness_m <= 0.015
    assert math.pi / 2 - 0.1 <= s.handle_limit_rad < math.pi / 2
    for rgba in (s.body_rgba, s.handle_rgba):
        rgb = np.array(rgba[:3])
        assert np.linalg.norm(rgb - [0, 1, 1]) > 0.5, "too close to the cyan ball"
        assert rgb.max() > 0.45, "too close to the robot's dark hand"


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_ball_fits_and_handle_clears_the_wall(model_id):
    s = sample_bucket(model_id)
    # At the floor of the bucket the inner wall (polygon faces) is at least 1 cm from the ball.
    expected = s.outer_radius_at(s.bottom_thickness_m) - s.wall_thickness_m
    assert s.inner_bottom_radius_m == pytest.approx(expected, abs=1e-4)
    assert s.inner_bottom_radius_m - BALL_RADIUS_M >= 0.01
    assert s.height_m - s.bottom_thickness_m > 2 * BALL_RADIUS_M + 0.05
    wall_gap, below_rim = lying_handle_clearances(s)
    assert wall_gap >= 0.003 and below_rim >= 0.005
    assert s.height_m - 0.06 <= s.pivot_height_m <= s.height_m - 0.03
    assert s.pivot_height_m + s.handle_radius_m - s.height_m >= 0.08  # upright: well above the rim


@pytest.mark.parametrize("split", SPLITS)
def test_each_split_has_thin_and_thick_rims(split):
    specs = [sample_bucket(m) for m in bucket_ids(split)]
    thick = [s for s in specs if s.wall_class == "thick"]
    assert 0.25 <= len(thick) / len(specs) <= 0.4
    assert all(s.wall_thickness_m >= 0.075 for s in thick)
    assert any(s.wall_class == "thin" for s in specs)
    assert len({s.body_color for s in specs}) >= 4


def test_straight_and_tapered_walls_both_occur():
    ratios = [sample_bucket(m).bottom_radius_m / sample_bucket(m).top_radius_m for m in ALL_IDS]
    assert any(r == 1.0 for r in ratios) and any(r < 0.85 for r in ratios)


@pytest.mark.parametrize("model_id", ["bucket-train-000", "bucket-train-002", "bucket-test-005"])
def test_urdf_structure(model_id):
    path = bucket_urdf(model_id)
    root = ET.parse(path).getroot()
    links = {link.get("name"): link for link in root.iter("link")}
    assert set(links) == {"bucket", "handle"}
    (joint,) = list(root.iter("joint"))
    assert joint.get("name") == "handle_joint" and joint.get("type") == "revolute"
    assert joint.find("parent").get("link") == "bucket" and joint.find("child").get("link") == "handle"
    assert joint.find("axis").get("xyz") == "0 1 0"
    lower, upper = float(joint.find("limit").get("lower")), float(joint.find("limit").get("upper"))
    assert lower == -upper and math.pi / 2 - 0.1 <= upper < math.pi / 2
    spec = sample_bucket(model_id)
    masses = {name: float(link.find("inertial/mass").get("value")) for name, link in links.items()}
    assert masses["bucket"] == pytest.approx(spec.body_mass_kg, rel=1e-3)
    assert masses["handle"] == pytest.approx(spec.handle_mass_kg, rel=1e-3)
    for name, link in links.items():
        visuals, collisions = link.findall("visual"), link.findall("collision")
        assert [v.get("name") for v in visuals] == [c.get("name") for c in collisions]
        assert all(("handle" in v.get("name")) == (name == "handle") for v in visuals)
        for mesh in link.iter("mesh"):
            assert (path.parent / mesh.get("filename")).is_file()
    meta = json.loads((path.parent / "meta.json").read_text())
    assert meta["model_id"] == model_id and meta["seed"] == spec.seed and meta["wall_class"] == spec.wall_class


# ---------------------------------------------------------------------------------------------- env


@pytest.fixture(scope="module")
def env():
    return make_env(task="MoveBucket", max_episode_steps=1000)


def test_registered_and_constructor_checks():
    assert TASKS["MoveBucket"] == ("handleit/MoveBucket-v0", "handleit.envs.move_bucket:MoveBucketEnv")
    with pytest.raises(ValueError, match="train"):
        MoveBucketEnv(split="val", obs_mode="state")
    with pytest.raises(ValueError, match="bucket-test-000"):
        MoveBucketEnv(split="test", model_ids=["bucket-train-000"], obs_mode="state")


def test_reset_and_step_in_state_mode(env):
    base = env.unwrapped
    assert base.robot.dof == 22 and env.action_space.shape == (22,)
    obs, info = env.reset(seed=0)
    assert obs["state"].shape == env.observation_space["state"].shape
    assert env.observation_space["state"].shape == (2 * 22 + 7 + 14 + MoveBucketEnv.task_state_dim,)
    assert MoveBucketEnv.task_state_dim == 19
    task_state = obs["state"][-19:]
    np.testing.assert_allclose(task_state[:3], base.bucket_link.entity_pose.p, atol=1e-6)
    np.testing.assert_allclose(task_state[14:17], base.ball.pose.p, atol=1e-6)
    np.testing.assert_allclose(task_state[17:], [0, 0])
    assert task_state[13] == pytest.approx(-base.bucket_spec.handle_limit_rad, abs=1e-3)  # handle lying down
    assert info["model_id"] in bucket_ids("train")
    assert info["balls_in_bucket"] and info["bucket_standing"] and info["bucket_static"]
    assert not info["bucket_above_platform"] and not info["success"]
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert obs["state"].shape == env.observation_space["state"].shape and np.all(np.isfinite(obs["state"]))
    assert reward == 0.0 and not terminated and not truncated and info["elapsed_steps"] == 1


def test_episode_sampling_follows_maniskill2(env):
    base = env.unwrapped
    for seed in range(8):
        obs, info = env.reset(seed=seed)
        X_WB = base.bucket_link.entity_pose
        bucket_xy = X_WB.p[:2]
        assert 0.8 <= np.linalg.norm(bucket_xy) <= 1.2
        assert abs(X_WB.p[2]) < 2e-3 and info["bucket_tilt"] < 1e-3  # upright on the floor after settling
        x, y, yaw, height = obs["agent"]["qpos"][:4]
        offset = np.array([x, y]) - bucket_xy
        assert 0.6 <= np.linalg.norm(offset) <= 0.8
        # On the far side from the platform, facing the bucket.
        bearing_gap = _angle(math.atan2(offset[1], offset[0]) - math.atan2(bucket_xy[1], bucket_xy[0]))
        assert abs(bearing_gap) <= 0.4 * np.pi + 1e-6
        assert abs(_angle(yaw - math.atan2(-offset[1], -offset[0]))) <= 0.05 * np.pi + 1e-6
        assert height == pytest.approx(START_TORSO_HEIGHT_M, abs=1e-4)
        joint = base.handle_joint
        assert HANDLE_FRICTION_RANGE[0] <= joint.friction <= HANDLE_FRICTION_RANGE[1]
        assert HANDLE_DAMPING_RANGE[0] <= joint.damping <= HANDLE_DAMPING_RANGE[1]
        geometry = base.bucket_geometry()
        ball_B = X_WB.inv() * sapien.Pose(geometry["ball_W"])
        np.testing.assert_allclose(ball_B.p, [0, 0, base.bucket_spec.bottom_thickness_m + BALL_RADIUS_M], atol=3e-3)
        assert np.linalg.norm(base.ball_body.linear_velocity) < 0.01  # settled inside reset


def _angle(a: float) -> float:
    return (a + np.pi) % (2 * np.pi) - np.pi


def test_deterministic_under_a_seed(env):
    actions = np.random.default_rng(0).uniform(-1, 1, size=(10, 22)).astype(np.float32)
    runs = []
    for _ in range(2):
        obs, _ = env.reset(seed=5)
        states = [obs["state"]]
        for a in actions:
            states.append(env.step(a)[0]["state"])
        runs.append(np.array(states))
    np.testing.assert_array_equal(runs[0], runs[1])
    obs, _ = env.reset(seed=6)
    assert not np.array_equal(obs["state"], runs[0][0])


def test_bucket_geometry_and_handle_conventions(env):
    base = env.unwrapped
    env.reset(seed=1, options={"model_id": "bucket-train-002"})
    spec = base.bucket_spec
    g = base.bucket_geometry()
    assert g["rim_height_W_m"] == pytest.approx(spec.height_m, abs=2e-3)
    assert g["rim_thickness_m"] == spec.wall_thickness_m and g["rim_is_thin"] is False  # index 2: thick
    assert g["rim_outer_radius_m"] == spec.top_radius_m
    np.testing.assert_allclose(g["axis_W"], [0, 0, 1], atol=1e-3)
    np.testing.assert_allclose(g["rim_center_W"][:2], base.bucket_link.entity_pose.p[:2], atol=1e-6)
    # Lying down at the lower limit: on the bucket's -x side, below the rim; upright: above the rim; q > 0
    # tips it toward +x. A semicircle's centre of mass is 2 r / pi from its centre.
    X_BW = base.bucket_link.entity_pose.inv()
    arm_m = 2 * spec.handle_radius_m / np.pi
    p_B = (X_BW * base.handle_link.entity_pose * base.handle_link.cmass_local_pose).p
    assert p_B[0] == pytest.approx(-arm_m * np.sin(spec.handle_limit_rad), abs=2e-3)
    assert base.handle_link.compute_global_aabb_tight()[1][2] < g["rim_height_W_m"]
    base.bucket.set_qpos(np.zeros(1, dtype=np.float32))
    assert base.handle_link.compute_global_aabb_tight()[1][2] > g["rim_height_W_m"] + 0.08
    base.bucket.set_qpos(np.array([0.5], dtype=np.float32))
    p_B = (X_BW * base.handle_link.entity_pose * base.handle_link.cmass_local_pose).p
    assert p_B[0] == pytest.approx(arm_m * np.sin(0.5), abs=2e-3)


def _move_bucket(env, xy, tilt_rad: float = 0.0) -> None:
    """Teleport the bucket (and the ball with it) to ``xy``, tilted about its x axis (tests only)."""
    base = env.unwrapped
    X_WB = base.bucket_link.entity_pose
    ball_B = X_WB.inv() * base.ball.pose
    X_WB_new = sapien.Pose([xy[0], xy[1], 0.1 + 1e-3], X_WB.q) * sapien.Pose(
        q=[math.cos(tilt_rad / 2), math.sin(tilt_rad / 2), 0, 0]
    )
    base.bucket.set_root_pose(X_WB_new)
    base.ball.set_pose(X_WB_new * ball_B)


def test_success_needs_ball_platform_standing_and_static(env):
    base = env.unwrapped
    env.reset(seed=2)
    _move_bucket(env, (0.1, -0.05))
    for _ in range(30):
        _, reward, terminated, _, info = env.step(zero_action(env))
        if info["success"]:
            break
    assert info["success"] and reward == 1.0 and terminated
    assert info["bucket_above_platform"] and info["dist_bucket_to_target"] < 0.3
    assert info["bucket_height_m"] == pytest.approx(0.1, abs=3e-3)

    # Moving: finite differences over the last control step.
    base.bucket.set_root_linear_velocity(np.array([0.0, 0.0, 1.0]))
    _, _, _, _, info = env.step(zero_action(env))
    assert not info["bucket_static"] and not info["success"]

    # On the platform, but its origin 0.31 m from the platform centre (the limit is 0.3 m).
    env.reset(seed=2)
    _move_bucket(env, (0.22, 0.22))
    for _ in range(30):
        _, _, _, _, info = env.step(zero_action(env))
    assert info["balls_in_bucket"] and info["bucket_standing"] and info["bucket_static"]
    assert info["dist_bucket_to_target"] > 0.3 and not info["bucket_above_platform"] and not info["success"]

    env.reset(seed=2)
    _move_bucket(env, (0.0, 0.0))
    base.ball.set_pose(sapien.Pose([5.0, 5.0, BALL_RADIUS_M]))  # ball out
    for _ in range(30):
        _, _, _, _, info = env.step(zero_action(env))
    assert info["bucket_above_platform"] and info["bucket_static"] and not info["balls_in_bucket"]
    assert not info["success"]

    env.reset(seed=2)
    _move_bucket(env, (0.0, 0.0), tilt_rad=0.35 * np.pi)
    info = base.evaluate()
    assert info["bucket_tilt"] == pytest.approx(0.35 * np.pi, abs=1e-3)
    assert not info["bucket_standing"] and not info["success"]


def test_pointcloud_masks_label_bucket_and_handle():
    env = make_env(task="MoveBucket", obs_mode="pointcloud")
    obs, _ = env.reset(seed=3)
    base = env.unwrapped
    pc = obs["pointcloud"]
    link, handle, robot = pc["target_link"], pc["target_handle"], pc["robot"]
    assert link.sum() > 50 and handle.sum() > 0 and robot.sum() > 0
    assert np.all(link[handle]) and not np.any(link & robot)
    # Labelled points belong to the bucket: near its axis, at most as high as the upright handle.
    g = base.bucket_geometry()
    xyz = pc["xyz"][link]
    radial = np.linalg.norm(xyz[:, :2] - g["rim_center_W"][:2], axis=1)
    assert radial.max() <= base.footprint_radius_m + 0.01 and xyz[:, 2].max() <= g["rim_height_W_m"] + 0.01
    # The ball and the platform carry no label.
    ball = np.linalg.norm(pc["xyz"] - g["ball_W"], axis=1) < BALL_RADIUS_M - 0.005
    platform = (np.abs(pc["xyz"][:, :2]).max(axis=1) < 0.29) & (np.abs(pc["xyz"][:, 2] - 0.1) < 0.005)
    assert platform.any()
    assert not np.any((link | handle | robot)[ball | platform])


@pytest.mark.parametrize("split", SPLITS)
def test_every_bucket_stands_still_with_its_ball(split):
    """Every generated bucket of both splits loads, stands still for 200 steps of zero action (tilt below
    0.05 pi, root moving less than 2 cm), and keeps its ball; the robot starts clear of it."""
    env = make_env(task="MoveBucket", split=split)
    for seed, model_id in enumerate(bucket_ids(split)):
        obs, _ = env.reset(seed=seed, options={"model_id": model_id})  # a different episode each
        base = env.unwrapped
        p0 = base.bucket_link.entity_pose.p.copy()
        robot_q0 = obs["agent"]["qpos"].copy()
        for _ in range(200):
            obs, _, _, _, info = env.step(zero_action(env))
        assert np.all(np.isfinite(obs["state"])), model_id
        assert info["bucket_tilt"] < 0.05 * np.pi, model_id
        assert np.linalg.norm(base.bucket_link.entity_pose.p - p0) < 0.02, model_id
        assert info["balls_in_bucket"] and info["bucket_static"], model_id
        g = base.bucket_geometry()
        assert g["ball_W"][2] < g["rim_height_W_m"], model_id
        assert np.abs(obs["agent"]["qpos"] - robot_q0).max() < 1e-3, f"{model_id}: the robot was pushed"
        total_kg = sum(link.mass for link in base.bucket.links)
        low, high = MASS_RANGE_KG[base.bucket_spec.wall_class]
        assert low - 1e-3 <= total_kg <= high + 1e-3, model_id
