"""PushChair: the procedural chairs (ids, determinism, sizes, URDF), the env's episode set-up and success
logic, and every chair of both splits standing still on its casters."""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import sapien

import handleit.envs
from handleit.envs.chair_generator import (
    NUM_CASTERS,
    SPLIT_COUNTS,
    backrest_top_S,
    chair_ids,
    chair_urdf,
    sample_chair,
    write_chair,
)
from handleit.envs.push_chair import START_TORSO_HEIGHT_M, load_chair
from handleit.envs.render_setup import new_scene
from tests.helpers import make_env, zero_action

SPLITS = list(SPLIT_COUNTS)
ALL_IDS = [model_id for split in SPLITS for model_id in chair_ids(split)]
GRIPPER_MAX_OPENING_M = 0.08


@pytest.fixture(scope="module")
def env():
    """One state-mode env shared by the tests that only reset and step (building one costs ~2 s)."""
    return make_env(task="PushChair")


# ---------------------------------------------------------------------------------------------- generator


def test_ids_match_split_counts_and_are_disjoint():
    assert SPLIT_COUNTS == {"train": 26, "test": 10}
    for split in SPLITS:
        ids = chair_ids(split)
        assert len(ids) == len(set(ids)) == SPLIT_COUNTS[split]
    assert not set(chair_ids("train")) & set(chair_ids("test"))
    assert chair_ids("train")[0] == "chair-train-000" and chair_ids("test")[-1] == "chair-test-009"


def test_bad_split_or_id_names_the_valid_ones():
    with pytest.raises(ValueError, match="train") as info:
        chair_ids("val")
    assert "test" in str(info.value)
    for bad in ["chair-train", "chair-train-7", "drawer-train-000", "chair-val-000", "", "chair-train-000x"]:
        with pytest.raises(ValueError, match="chair-train-000"):
            sample_chair(bad)
    with pytest.raises(ValueError, match="chair-test-009"):
        sample_chair("chair-test-010")  # well-formed, out of range
    with pytest.raises(ValueError, match="chair-train-000"):
        chair_urdf("chair-train-026")


def test_sampling_is_deterministic_and_serializable(tmp_path):
    for model_id in ["chair-train-000", "chair-test-009"]:
        spec = sample_chair(model_id)
        assert sample_chair(model_id) == spec
        assert json.loads(json.dumps(dataclasses.asdict(spec)))["model_id"] == model_id
        first = write_chair(spec, tmp_path / "a" / model_id)
        second = write_chair(sample_chair(model_id), tmp_path / "b" / model_id)
        for name in ["mobility.urdf", "meta.json"]:
            assert (first.parent / name).read_bytes() == (second.parent / name).read_bytes()
    assert sample_chair("chair-train-000") != sample_chair("chair-train-001")


def test_chair_urdf_is_cached_under_the_asset_cache():
    path = chair_urdf("chair-test-000")
    assert path.name == "mobility.urdf" and path.is_file()
    assert path.parent.parent.name == "chairs" and path.parent.name.startswith("chair-test-000-")
    assert {p.name for p in path.parent.iterdir()} == {"mobility.urdf", "meta.json"}
    mtime = path.stat().st_mtime_ns
    assert chair_urdf("chair-test-000") == path and path.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("split", SPLITS)
def test_sizes_masses_and_colors_in_range(split):
    specs = [sample_chair(model_id) for model_id in chair_ids(split)]
    for s in specs:
        assert 0.26 <= s.star_radius_m <= 0.34 and 0.025 <= s.wheel_radius_m <= 0.035
        assert 0.40 <= s.seat_height_m <= 0.55 and 0.40 <= s.seat_width_m <= 0.55
        assert 0.38 <= s.seat_depth_m <= 0.50 and 0.05 <= s.seat_thickness_m <= 0.10
        assert 0.30 <= s.backrest_height_m <= 0.60 and 0.35 <= s.backrest_width_m <= 0.55
        # Thin enough for the gripper to pinch the backrest's top edge, with room to spare.
        assert 0.02 <= s.backrest_thickness_m <= 0.06 < GRIPPER_MAX_OPENING_M
        assert 0.0 <= s.backrest_recline_rad <= math.radians(10)
        if s.has_armrests:
            assert 0.0 < s.armrest_height_m < 0.30
        assert 7.0 <= s.total_mass_kg <= 15.0, s.model_id
        for rgba in (s.fabric_rgba, s.backrest_rgba, s.frame_rgba, s.wheel_rgba):
            r, g, b, _ = rgba
            assert not (r > 0.6 and g < 0.3 and b < 0.3), f"{s.model_id}: {rgba} looks like the red target"
            assert not (max(r, g, b) < 0.35 and max(r, g, b) - min(r, g, b) < 0.08), f"{s.model_id}: dark grey"
    assert {s.has_armrests for s in specs} == {True, False}
    assert {s.leg_profile for s in specs} == {"box", "cylinder"}
    assert len({s.fabric_color for s in specs}) > 3


@pytest.mark.parametrize("model_id", ["chair-train-000", "chair-train-001", "chair-test-004"])
def test_urdf_structure(model_id):
    path = chair_urdf(model_id)
    root = ET.parse(path).getroot()
    links = {link.get("name"): link for link in root.iter("link")}
    casters = {f"caster_{i}_{part}" for i in range(NUM_CASTERS) for part in ("fork", "wheel")}
    assert set(links) == {"base", "seat"} | casters
    joints = {j.get("name"): j for j in root.iter("joint")}
    assert joints["seat_swivel"].find("parent").get("link") == "base"
    assert joints["seat_swivel"].find("axis").get("xyz") == "0 0 1"
    for i in range(NUM_CASTERS):
        assert joints[f"caster_{i}_swivel"].find("axis").get("xyz") == "0 0 1"
        assert joints[f"caster_{i}_roll"].find("axis").get("xyz") == "0 1 0"
        assert joints[f"caster_{i}_roll"].find("parent").get("link") == f"caster_{i}_fork"
    assert {j.get("type") for j in joints.values()} == {"continuous"}
    for name, link in links.items():
        assert float(link.find("inertial/mass").get("value")) > 0
        visuals, collisions = link.findall("visual"), link.findall("collision")
        assert [_geometry_key(v) for v in visuals] == [_geometry_key(c) for c in collisions]
        for visual in visuals:
            assert visual.find("geometry")[0].tag in {"box", "cylinder", "sphere"}
        names = [v.get("name") for v in visuals]
        if name == "base":
            assert all("leg" in n or "base" in n for n in names)
        elif name == "seat":
            assert {"seat_cushion", "backrest_panel"} <= set(names)
        else:
            assert all("wheel" in n for n in names)
            if name.endswith("_wheel"):
                assert [v.find("geometry")[0].tag for v in visuals] == ["sphere"]
    meta = json.loads((path.parent / "meta.json").read_text())
    assert meta["model_id"] == model_id and 7 <= meta["total_mass_kg"] <= 15


def _geometry_key(element: ET.Element) -> tuple:
    shape = element.find("geometry")[0]
    return element.get("name"), shape.tag, dict(shape.attrib), dict(element.find("origin").attrib)


@pytest.mark.parametrize("model_id", ["chair-train-000", "chair-train-001", "chair-test-009"])
def test_geometry_conventions_in_sapien(model_id):
    """Root origin on the swivel axis at floor level; wheels touch the floor; cushion centered on the axis
    with its top at the seat height; backrest behind (-x) the seat's center, its top where backrest_top_S says."""
    spec = sample_chair(model_id)
    scene = new_scene()
    chair = load_chair(scene, chair_urdf(model_id))
    chair.set_qpos(np.zeros(chair.dof, dtype=np.float32))
    chair.set_root_pose(sapien.Pose())
    links = {link.name: link for link in chair.links}
    lowest = min(link.compute_global_aabb_tight()[0][2] for link in chair.links)
    assert lowest == pytest.approx(0.0, abs=1e-4)
    for i in range(NUM_CASTERS):
        lo, hi = links[f"caster_{i}_wheel"].compute_global_aabb_tight()
        assert lo[2] == pytest.approx(0.0, abs=1e-4)
        assert np.linalg.norm((lo + hi)[:2] / 2) > spec.star_radius_m  # the wheel trails outward
    seat = links["seat"]
    np.testing.assert_allclose(seat.entity_pose.p, [0, 0, spec.seat_height_m], atol=1e-6)
    shapes = {s.name: s for s in seat.entity.find_component_by_type(sapien.render.RenderBodyComponent).render_shapes}
    cushion = (seat.entity_pose * shapes["seat_cushion"].local_pose).p
    assert cushion[:2] == pytest.approx([0, 0], abs=1e-6)
    assert cushion[2] + shapes["seat_cushion"].half_size[2] == pytest.approx(spec.seat_height_m, abs=1e-5)
    backrest = (seat.entity_pose * shapes["backrest_panel"].local_pose).p
    assert backrest[0] < -spec.seat_depth_m / 2 + spec.backrest_thickness_m
    top = backrest_top_S(spec)
    assert top[2] == pytest.approx(spec.backrest_height_m) and top[0] < 0
    lo, hi = seat.compute_global_aabb_tight()
    assert hi[2] == pytest.approx(spec.seat_height_m + spec.backrest_height_m, abs=0.5 * spec.backrest_thickness_m)
    total = sum(link.mass for link in chair.links)
    assert total == pytest.approx(spec.total_mass_kg, rel=1e-3)


# ---------------------------------------------------------------------------------------------- env API


def test_registered_and_bad_arguments_name_the_problem():
    assert handleit.envs.TASKS["PushChair"][0] == "handleit/PushChair-v0"
    with pytest.raises(ValueError, match="train"):
        make_env(task="PushChair", split="val")
    with pytest.raises(ValueError, match="chair-test-000"):
        make_env(task="PushChair", split="test", model_ids=["chair-train-000"])


def test_reset_and_step_in_state_mode(env):
    obs, info = env.reset(seed=0)
    base = env.unwrapped
    assert env.action_space.shape == (22,)
    assert base.task_state_dim == 16
    assert obs["state"].shape == env.observation_space["state"].shape == (2 * 22 + 7 + 2 * 7 + 16,)
    assert env.observation_space.contains(obs)
    for key in ["success", "chair_close_to_target", "chair_standing", "chair_static", "dist_chair_to_target",
                "chair_tilt", "model_id"]:
        assert key in info
    assert info["chair_standing"] and info["chair_static"] and not info["success"]
    obs, reward, terminated, _, info = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs) and reward == 0.0 and not terminated
    # The task state: root pose, its velocities, the seat swivel angle, the target.
    task = obs["state"][-16:]
    np.testing.assert_allclose(task[:3], base.chair_center_W(), atol=1e-6)
    np.testing.assert_allclose(task[-2:], [0, 0])


def test_episode_set_up_follows_maniskill(env):
    for seed in range(8):
        _, info = env.reset(seed=seed)
        base = env.unwrapped
        chair_xy = base.chair_center_W()[:2]
        assert 0.8 <= np.linalg.norm(chair_xy) <= 1.2 and info["dist_chair_to_target"] == pytest.approx(
            np.linalg.norm(chair_xy))
        # The chair's front (seat +x) faces the target within 0.4 pi; the backrest is on the far side.
        to_target = math.atan2(-chair_xy[1], -chair_xy[0])
        assert abs(_wrap(base.chair_yaw_rad() - to_target)) <= 0.4 * math.pi + 1e-3
        assert np.linalg.norm(base.backrest_top_W()[:2]) > np.linalg.norm(chair_xy)
        # The robot behind the chair, facing it, torso at its start height.
        qpos = base.robot.qpos
        robot_xy = qpos[:2]
        assert 0.8 - 1e-3 <= np.linalg.norm(robot_xy - chair_xy) <= 1.2 + 1e-3
        bearing = math.atan2(*(robot_xy - chair_xy)[::-1])
        assert abs(_wrap(bearing - (base.chair_yaw_rad() + math.pi))) <= 0.2 * math.pi + 1e-2
        facing = math.atan2(*(chair_xy - robot_xy)[::-1])
        assert abs(_wrap(qpos[2] - facing)) <= 0.05 * math.pi + 1e-3
        assert qpos[3] == pytest.approx(START_TORSO_HEIGHT_M, abs=1e-4)
        # Joint dynamics drawn per episode (caster damping is this project's range, see push_chair.py).
        for joint in base.chair.active_joints:
            if joint.name == "seat_swivel":
                assert 0.05 <= joint.friction <= 0.15 and 5 <= joint.damping <= 15
            else:
                assert 0.0 <= joint.friction <= 0.1 and 0.0 <= joint.damping <= 0.005
        # Settled at rest on the casters, nothing touching the robot.
        assert np.linalg.norm(base.chair.get_qvel()) == 0.0
        assert abs(base.chair_center_W()[2]) < 2e-3
        robot_links = {link.entity.name for link in base.robot.articulation.links}
        chair_links = {link.entity.name for link in base.chair.links}
        assert not robot_links & chair_links
        env.step(zero_action(env))
        for contact in base.scene.get_contacts():
            names = {body.entity.name for body in contact.bodies}
            assert not (names & robot_links and names & chair_links), names
    # The target marker is seen, never touched.
    marker = base.target_indicator
    assert marker.find_component_by_type(sapien.render.RenderBodyComponent) is not None
    assert not any(isinstance(c, sapien.physx.PhysxRigidBaseComponent) and c.collision_shapes
                   for c in marker.components)


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def test_deterministic_under_a_seed(env):
    actions = np.random.default_rng(0).uniform(-1, 1, size=(20, *env.action_space.shape)).astype(np.float32)
    runs = []
    for _ in range(2):
        obs, info = env.reset(seed=11)
        states = [obs["state"]]
        for action in actions:
            obs, _, _, _, info = env.step(action)
            states.append(obs["state"])
        runs.append((info["model_id"], np.stack(states)))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    other, _ = env.reset(seed=12)
    assert not np.array_equal(other["state"], runs[0][1][0])


def _move_chair(env, xy, tilt_rad: float = 0.0, velocity=(0.0, 0.0, 0.0)):
    """Put the chair (ground truth, for tests only) at ``xy`` on the floor, tilted about x."""
    base = env.unwrapped
    q = [math.cos(tilt_rad / 2), math.sin(tilt_rad / 2), 0.0, 0.0]
    base.chair.set_root_pose(sapien.Pose([*xy, base.chair_center_W()[2] + 0.3 * abs(math.sin(tilt_rad))], q))
    base.chair.set_root_linear_velocity(np.asarray(velocity, dtype=np.float32))


def test_success_needs_close_standing_and_static(env):
    env.reset(seed=3)
    _move_chair(env, (0.05, -0.05))
    env.step(zero_action(env))  # the jump counts as motion for one step
    _, reward, terminated, _, info = env.step(zero_action(env))
    assert info["chair_close_to_target"] and info["chair_standing"] and info["chair_static"]
    assert info["success"] and reward == 1.0 and terminated
    assert info["dist_chair_to_target"] == pytest.approx(math.hypot(0.05, 0.05), abs=5e-3)

    env.reset(seed=3)
    _move_chair(env, (0.2, 0.0))  # 0.2 m away: too far
    env.step(zero_action(env))
    _, _, _, _, info = env.step(zero_action(env))
    assert info["chair_static"] and info["chair_standing"]
    assert not info["chair_close_to_target"] and not info["success"]

    env.reset(seed=3)
    _move_chair(env, (0.0, 0.0), velocity=(0.5, 0.0, 0.0))  # rolling through the target
    _, _, _, _, info = env.step(zero_action(env))
    assert not info["chair_static"] and not info["success"]

    env.reset(seed=3)
    _move_chair(env, (0.0, 0.0), tilt_rad=math.pi / 2)  # lying on its side
    _, _, _, _, info = env.step(zero_action(env))
    assert info["chair_tilt"] > 0.05 * math.pi
    assert not info["chair_standing"] and not info["success"]


def test_pointcloud_masks_mark_the_chair_and_no_handle():
    env = make_env(task="PushChair", obs_mode="pointcloud")
    obs, _ = env.reset(seed=1)
    pc = obs["pointcloud"]
    assert env.observation_space.contains(obs)
    valid = pc["valid"].astype(bool)
    chair = pc["target_link"].astype(bool) & valid
    assert chair.sum() > 50
    assert not pc["target_handle"].any()
    assert not (chair & pc["robot"].astype(bool)).any()
    # Chair points lie around the chair, within its reach about the swivel axis.
    base = env.unwrapped
    dist = np.linalg.norm(pc["xyz"][chair][:, :2] - base.chair_center_W()[:2], axis=1)
    assert dist.max() < base.footprint_radius_m + 0.02
    # The red target is in view but in no mask.
    red = valid & (pc["rgb"][:, 0] > 200) & (pc["rgb"][:, 1] < 60) & (pc["rgb"][:, 2] < 60)
    assert not (red & (chair | pc["robot"].astype(bool))).any()


# ---------------------------------------------------------------------------------------------- physics


@pytest.mark.parametrize("split", SPLITS)
def test_every_chair_stands_still_under_zero_action(split):
    """Every generated chair of both splits loads in PushChair and, over 200 steps of zero action, stands on
    its casters: upright (tilt < 0.05 pi), its root moving less than 2 cm, nothing NaN."""
    env = make_env(task="PushChair", split=split)
    for model_id in chair_ids(split):
        obs, info = env.reset(seed=0, options={"model_id": model_id})
        base = env.unwrapped
        assert info["model_id"] == model_id
        center0 = base.chair_center_W()
        max_tilt_rad = max_shift_m = 0.0
        for _ in range(200):
            obs, _, _, _, info = env.step(zero_action(env))
            max_tilt_rad = max(max_tilt_rad, info["chair_tilt"])
            max_shift_m = max(max_shift_m, float(np.linalg.norm(base.chair_center_W() - center0)))
        assert np.all(np.isfinite(obs["state"])), model_id
        assert np.all(np.isfinite(base.chair.get_qpos())), model_id
        assert max_tilt_rad < 0.05 * math.pi, model_id
        assert max_shift_m < 0.02, model_id
        assert info["chair_static"] and info["chair_standing"] and not info["success"], model_id
