"""The long-horizon tasks TidyIntoDrawer and SetTable (envs/long_horizon.py): procedural scenes, initial states
sampled from predicates, the predicates' ground truth, success, observations and errors. Ground truth is read
here, never by a solver."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import sapien
from gymnasium.utils.env_checker import check_env

import handleit.envs
from handleit.envs.cabinet_generator import cabinet_ids
from handleit.envs.floor_layout import (FRONT_CLEARANCE_M, ROBOT_FOOTPRINT_B_M, Footprint, offset_footprint, overlap,
                                        sample_floor_layout)
from handleit.envs.initial_states import initial_state
from handleit.envs.long_horizon_models import layout_ids, placement_region_L, split_pair_id
from handleit.envs.markers import DEFAULT_MARKER_RGB, scene_render_shapes, shape_materials
from handleit.envs.object_generator import object_ids
from handleit.envs.predicate_truth import CLOSED_MAX_M, OPEN_MIN_FRACTION
from handleit.predicates import Predicate
from tests.helpers import make_env, set_target_joint, zero_action

SPHERE_PAIR = "drawer-train-000+object-train-002"  # a sphere 4.6 cm across: the gripper holds it any way round


def _settle(env, steps: int = 30):
    info = None
    for _ in range(steps):
        _, _, _, _, info = env.step(zero_action(env))
    return info


def _robot_facing(env, point_W, distance_m: float, bearing_W: float) -> None:
    """Put the robot's base ``distance_m`` from ``point_W`` along ``bearing_W``, facing the point (its yaw in
    [-pi, pi), inside the joint's limits), and take one step so that the links' poses follow."""
    base = env.unwrapped
    x, y = np.asarray(point_W[:2]) + distance_m * np.array([math.cos(bearing_W), math.sin(bearing_W)])
    base.robot.reset(base.robot.rest_qpos((x, y, bearing_W % (2 * math.pi) - math.pi)))
    obs, *_ = env.step(zero_action(env))
    return obs


# ------------------------------------------------------------------------------------------------ registration
def test_registered_with_the_long_horizon_default_and_pair_ids():
    for task, (env_id, _) in handleit.envs.LONG_HORIZON_TASKS.items():
        assert gym.spec(env_id).max_episode_steps == handleit.envs.LONG_HORIZON_MAX_EPISODE_STEPS == 3000
        ids = handleit.envs.model_ids(task, "test")
        assert ids == layout_ids("test") and len(ids) == 20
    env = handleit.envs.make("SetTable", obs_mode="state")
    assert env.unwrapped.control_freq == 100
    check_env(env.unwrapped, skip_render_check=True)
    assert env.unwrapped.goal == (Predicate("OnTopOf", ("object", "table")), Predicate("Closed", ("drawer",)))


def test_splits_use_their_own_cabinets_and_objects_and_cover_them_all():
    for split in ("train", "test"):
        pairs = [split_pair_id(i, split) for i in layout_ids(split)]
        assert {c for c, _ in pairs} == set(cabinet_ids("drawer", split))
        assert {o for _, o in pairs} == set(object_ids(split))
    assert not set(layout_ids("train")) & set(layout_ids("test"))
    env = make_env("TidyIntoDrawer", split="test")
    _, info = env.reset(seed=0)
    assert info["model_id"] in layout_ids("test")
    _, info_train = make_env("TidyIntoDrawer").reset(seed=0)
    assert info_train["model_id"] in layout_ids("train")


# ------------------------------------------------------------------------------------------------ sampling
def test_reset_is_deterministic_per_seed():
    a, b = make_env("SetTable"), make_env("SetTable")
    obs_a, info_a = a.reset(seed=7)
    a.reset(seed=8)  # another episode in between must not leak into the next
    obs_a, info_a = a.reset(seed=7)
    obs_b, info_b = b.reset(seed=7)
    assert info_a["model_id"] == info_b["model_id"] and info_a["target_link"] == info_b["target_link"]
    assert a.unwrapped.layout == b.unwrapped.layout
    assert np.array_equal(obs_a["state"], obs_b["state"])
    for key, value in obs_a["extra"].items():  # the operator's prompts too
        assert np.array_equal(value, obs_b["extra"][key]), key
    rng = np.random.default_rng(0)
    for _ in range(5):
        action = rng.uniform(-1, 1, a.action_space.shape).astype(np.float32)
        obs_a, *_ = a.step(action)
        obs_b, *_ = b.step(action)
    assert np.array_equal(obs_a["state"], obs_b["state"])
    layouts = {a.reset(seed=s)[1]["model_id"] + str(a.unwrapped.layout) for s in range(4)}
    assert len(layouts) == 4


@pytest.mark.parametrize("task, start", [
    ("TidyIntoDrawer", {"OnTopOf(object, table)": True, "InsideOf(object, drawer)": False}),
    ("SetTable", {"InsideOf(object, drawer)": True, "OnTopOf(object, table)": False}),
])
def test_initial_predicates_hold_after_reset(task, start):
    env = make_env(task)
    for seed in range(3):
        _, info = env.reset(seed=seed)
        truth = info["predicates"]
        for name, value in {**start, "Closed(drawer)": True, "Open(drawer)": False, "HandEmpty()": True,
                            "Grasped(object)": False}.items():
            assert truth[name] == value, (seed, name)
        assert not info["success"] and not info["goal_reached"]
        assert info["goal"] == handleit.envs.make(task).unwrapped.goal_text


def test_floor_layouts_keep_the_cabinet_front_free_and_the_pieces_apart():
    rng = np.random.default_rng(0)
    for _ in range(50):
        layout = sample_floor_layout(rng, (0.3, 0.5), 0.5, (0.5, 0.35))
        cabinet = offset_footprint((-0.3, 0.3), (-0.5, 0.5), layout.cabinet)
        front = offset_footprint((-0.3 - FRONT_CLEARANCE_M, -0.3), (-0.5, 0.5), layout.cabinet)
        table = Footprint(layout.table[:2], layout.table[2], (0.5, 0.35))
        robot = offset_footprint(*ROBOT_FOOTPRINT_B_M, layout.robot)
        assert not overlap(table, cabinet) and not overlap(table, front)
        assert not overlap(robot, cabinet) and not overlap(robot, table)
        assert np.hypot(*np.subtract(layout.table[:2], layout.cabinet[:2])) >= 1.8 - 1e-9


def test_initial_states_from_other_predicates():
    """A half-open drawer (a given fraction), an open drawer holding the object, the object on the table with
    the drawer open."""
    env = make_env("SetTable")
    _, info = env.reset(seed=1, options={"drawer_open_fraction": 0.5})
    assert info["open_fraction"] == pytest.approx(0.5, abs=0.01)
    truth = info["predicates"]
    assert not truth["Open(drawer)"] and not truth["Closed(drawer)"] and truth["InsideOf(object, drawer)"]
    _, info = env.reset(seed=2, options={"init": "Open(drawer)"})
    assert info["predicates"]["Open(drawer)"] and info["predicates"]["InsideOf(object, drawer)"]
    _, info = env.reset(seed=2, options={"init": "Open(drawer)", "drawer_open_fraction": OPEN_MIN_FRACTION})
    assert info["predicates"]["Open(drawer)"]  # exactly at the threshold is open
    _, info = env.reset(seed=3, options={"init": "OnTopOf(object, table) & not Closed(drawer)"})
    assert info["predicates"]["OnTopOf(object, table)"] and not info["predicates"]["Closed(drawer)"]
    env = make_env("TidyIntoDrawer", init="InsideOf(object, drawer)", drawer_open_fraction=1.0)
    _, info = env.reset(seed=4)
    assert info["predicates"]["InsideOf(object, drawer)"] and info["predicates"]["Open(drawer)"]
    assert not info["success"]  # the goal also needs the drawer closed


def test_initial_state_intervals():
    plan = initial_state("not Closed(drawer) & not Open(drawer)", "OnTopOf(object, table) & Closed(drawer)", 0.3)
    assert plan.object_on == "table"
    low, high = plan.drawer_fraction
    assert CLOSED_MAX_M / 0.3 < low < high < OPEN_MIN_FRACTION
    plan = initial_state(None, "InsideOf(object, drawer) & Closed(drawer)", 0.3, drawer_open_fraction=0.5)
    assert plan.drawer_fraction == (0.5, 0.5) and plan.object_on == "drawer"
    assert {str(p) for p in plan.predicates} >= {"not Closed(drawer)", "not Open(drawer)"}


# ------------------------------------------------------------------------------------------------ ground truth
def test_ground_truth_follows_states_set_by_hand():
    env = make_env("TidyIntoDrawer")
    env.reset(seed=0)
    base = env.unwrapped
    set_target_joint(env, 0.95)
    truth = base.evaluate_predicates("Open(drawer) & Closed(drawer)")
    assert truth == {"Open(drawer)": True, "Closed(drawer)": False}
    set_target_joint(env, 0.5)
    assert base.evaluate_predicates("not Open(drawer) & not Closed(drawer)") == {"not Open(drawer)": True,
                                                                                  "not Closed(drawer)": True}
    set_target_joint(env, 0.0)
    assert base.evaluate_predicates("Closed(drawer)")["Closed(drawer)"]

    # The object teleported into the (closed) drawer's box: InsideOf, no longer OnTopOf the table.
    assert base.evaluate_predicates("OnTopOf(object, table)")["OnTopOf(object, table)"]
    region = placement_region_L(base.cabinet_spec, base.part_index)
    X_WL = base.target.link.entity_pose.to_transformation_matrix()
    base._place(X_WL, 0.0 if region[1, 0] - region[0, 0] >= region[1, 1] - region[0, 1] else math.pi / 2,
                np.array([region[0, 0], region[0, 1], base.drawer_interior_L[0, 2] + 0.002]))
    info = _settle(env)
    assert info["predicates"]["InsideOf(object, drawer)"] and not info["predicates"]["OnTopOf(object, table)"]
    assert info["goal_reached"] and info["static"] and info["success"]  # InsideOf(object, drawer) & Closed(drawer)

    # Lifted 10 cm above the table top: neither on it nor inside the drawer.
    X_WT = base.X_WT()
    X_WT[2, 3] += 0.1
    base._place(X_WT, 0.0, np.array([-0.02, -0.02, 0.0]))
    base.obj_body.set_disable_gravity(True)
    env.step(zero_action(env))
    truth = base.evaluate_predicates(base.all_predicates())
    assert not truth["OnTopOf(object, table)"] and not truth["InsideOf(object, drawer)"]


def test_set_table_succeeds_with_the_object_on_the_table_and_the_drawer_closed():
    env = make_env("SetTable")
    _, info = env.reset(seed=5)
    assert not info["success"]
    base = env.unwrapped
    base._place(base.X_WT(), 0.3, np.array([-0.03, -0.03, 0.002]))
    set_target_joint(env, 0.6)
    info = _settle(env)
    assert info["predicates"]["OnTopOf(object, table)"] and not info["success"]  # the drawer is open
    set_target_joint(env, 0.0)
    info = _settle(env)
    assert info["goal_predicates"] == {"OnTopOf(object, table)": True, "Closed(drawer)": True} and info["success"]
    # Sliding over the table at 0.5 m/s is not static.
    base.obj_body.set_linear_velocity([0.5, 0.0, 0.0])
    _, _, _, _, info = env.step(zero_action(env))
    assert info["predicates"]["OnTopOf(object, table)"] and info["object_speed_mps"] > 0.1
    assert not info["static"] and not info["success"]


def test_grasped_and_hand_empty_from_finger_contacts():
    env = make_env("TidyIntoDrawer")
    env.reset(seed=0, options={"model_id": SPHERE_PAIR})
    base = env.unwrapped
    robot, side = base.robot, base.robot.sides[0]
    qpos = robot.qpos.copy()
    qpos[robot.finger_index[side]] = 0.04  # wide open
    robot.reset(qpos)
    base.obj_body.set_disable_gravity(True)
    com_O = base.obj_body.cmass_local_pose.p
    X_WT = robot.X_WT(side)
    base.obj.set_pose(sapien.Pose(X_WT.p - com_O, [1, 0, 0, 0]))
    assert base.evaluate_predicates("HandEmpty() & Grasped(object)") == {"HandEmpty()": True, "Grasped(object)": False}
    close = zero_action(env)
    close[robot.finger_index[side]] = -1.0
    for _ in range(40):
        _, _, _, _, info = env.step(close)
    assert info["predicates"]["Grasped(object)"] and not info["predicates"]["HandEmpty()"]
    release = zero_action(env)
    release[robot.finger_index[side]] = 1.0
    for _ in range(40):
        _, _, _, _, info = env.step(release)
    assert not info["predicates"]["Grasped(object)"] and info["predicates"]["HandEmpty()"]


# ------------------------------------------------------------------------------------------------ observations
def test_masks_and_prompts_of_every_entity():
    # The default rig's resolution: a thin bar handle 1.4 m away covers a few dozen of its pixels, none at 200x80.
    env = make_env("TidyIntoDrawer", obs_mode="pointcloud", init="Open(drawer)", camera_width=400, camera_height=160)
    obs, _ = env.reset(seed=0)
    base = env.unwrapped
    assert base.mask_names == ("target_handle", "target_link", "robot", "object", "table")
    for entity in ("drawer", "object", "table"):
        box = obs["extra"][f"{entity}_prompt_box"]
        assert box.shape == (2, 3) and np.all(box[0] <= box[1])
    assert np.array_equal(obs["extra"]["drawer_prompt_point"], obs["extra"]["target_prompt_point"])
    assert np.linalg.norm(obs["extra"]["object_prompt_point"] - base.object_com_W()) < 0.15

    # In front of the open drawer, facing it: its handle, the drawer and the robot in view.
    x, y, yaw = base.layout.cabinet
    front = -np.array([math.cos(yaw), math.sin(yaw)])
    pc = _robot_facing(env, np.array([x, y]), 1.4, math.atan2(front[1], front[0]))["pointcloud"]
    for name in ("target_handle", "target_link", "robot"):
        assert pc[name].sum() > 0, name
    assert np.all(pc["target_link"][pc["target_handle"]])  # the handle is part of the drawer
    # Beside the table, facing it: the object on it.
    pc = _robot_facing(env, np.array(base.layout.table[:2]), 1.4, base.layout.table[2] + math.pi / 2)["pointcloud"]
    for name in ("object", "table", "robot"):
        assert pc[name].sum() > 0, name
    assert not np.any(pc["object"] & pc["table"])


def test_marker_paints_the_target_handle_and_the_object_only():
    env = make_env("SetTable", target_marker_rgb=DEFAULT_MARKER_RGB)
    env.reset(seed=0)
    base = env.unwrapped
    marked = set(base.target.handle_shape_ids.tolist()) | set(base._labelled_shape_ids()["object"].tolist())
    assert base._marker_ids == marked
    for name, shape in scene_render_shapes(base.scene):
        colors = [tuple(np.round(m.base_color[:3], 5)) for m in shape_materials(shape)]
        is_marker = all(c == tuple(np.round(DEFAULT_MARKER_RGB, 5)) for c in colors)
        assert is_marker == (shape.per_scene_id in marked), name


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("options, problem", [
    ({"init": "Opened(drawer)"}, "unknown predicate 'Opened'"),
    ({"init": "Grasped(object)"}, "no sampler makes the initial predicate Grasped"),
    ({"init": "InsideOf(object, table)"}, "no sampler makes the initial predicate InsideOf"),
    ({"init": "InsideOf(object, drawer) & OnTopOf(object, table)"}, "the object must start in one place"),
    ({"init": "Open(drawer) & Closed(drawer)"}, "no drawer position makes"),
    ({"init": "Open(drawer)", "drawer_open_fraction": 0.5}, "drawer_open_fraction 0.5 contradicts Open"),
    ({"drawer_open_fraction": 1.5}, "must be in \\[0, 1\\]"),
    ({"model_id": "drawer-train-000"}, "named 'CABINET\\+OBJECT'"),
    ({"model_id": "drawer-test-000+object-train-000"}, "not a drawer cabinet of split 'train'"),
    ({"model_id": SPHERE_PAIR, "target_link": "link_9"}, "cannot be the target"),
])
def test_bad_input_is_named(options, problem):
    env = make_env("SetTable")
    with pytest.raises(ValueError, match=problem):
        env.reset(seed=0, options=options)


def test_bad_constructor_input_and_predicates_are_named():
    with pytest.raises(ValueError, match="unknown split"):
        make_env("SetTable", split="val")
    with pytest.raises(ValueError, match="unknown predicate"):
        make_env("SetTable", init="Ajar(drawer)")
    with pytest.raises(ValueError, match="no sampler makes the initial predicate Grasped"):
        make_env("SetTable", init="Grasped(object)")
    env = make_env("SetTable")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="only the drawer opens and closes"):
        env.unwrapped.evaluate_predicates("Open(table)")
    with pytest.raises(ValueError, match="unknown entity 'cupboard'"):
        env.unwrapped.evaluate_predicates("Closed(cupboard)")


def test_eval_refuses_a_tree_for_a_task_that_has_none(tmp_path, capsys):
    """`handleit eval --task TidyIntoDrawer` with the default tree solver: a clear error before any episode."""
    from handleit.harness.cli import main

    assert main(["eval", "--task", "TidyIntoDrawer", "--episodes", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no behavior tree for TidyIntoDrawer" in err and "goal:" in err
    assert not (tmp_path / "records.jsonl").exists()
