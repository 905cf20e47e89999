"""A camera on the mobile robot's hand (``hand_camera=True``), what the trees make of it, and the drawer pick's
geometry: the camera rides on the hand, is left out of the base cameras' calibration, and the pick tree looks
into a drawer with it only where the robot has one; an object seen only from above is grasped across its
footprint."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import py_trees
import pytest

import handleit.envs
from handleit.behaviors.camera_calibration_nodes import CalibrateCameras
from handleit.behaviors.common import cameras_on_hands
from handleit.behaviors.mobile_pick_nodes import (
    MOBILE_PICK_BLACKBOARD,
    ApproachStandoff,
    PlanMobileGrasp,
    _front_keep_out,
)
from handleit.behaviors.mobile_pick_trees import create_pick_tree
from handleit.behaviors.pick_trees import PICK_BLACKBOARD
from handleit.behaviors.tree_solver import TreeSolver
from handleit.harness.evaluation import _EpisodeRunner, episode_specs
from handleit.harness.sim_robot import SimRobot, robot_model_of
from handleit.perception.place_targets import DrawerInterior
from handleit.perception.tabletop_objects import estimate_tabletop_object
from handleit.types import Observation


@pytest.fixture(scope="module")
def set_table():
    env = handleit.envs.make("SetTable", obs_mode="pointcloud", split="test", hand_camera=True)
    yield env
    env.close()


def test_hand_camera_true_puts_a_camera_on_the_hand(set_table):
    configs = set_table.unwrapped.camera_configs
    assert [c.name for c in configs] == ["base_camera_0", "base_camera_1", "base_camera_2", "right_hand_camera"]
    assert configs[-1].mount == "right_panda_hand"
    robot = SimRobot(set_table, sim_masks=True)
    obs = robot.reset(seed=0)
    assert robot.model.hand_camera_sides == ("right",)
    # The hand camera's centre rides 10-15 cm from the tool centre; the base cameras' 1.5 m up.
    distance = np.linalg.norm(obs.sensor_origins - obs.X_WT["right"][:3, 3], axis=1)
    assert distance[3] < 0.2 and np.all(distance[:3] > 0.5)
    assert list(np.flatnonzero(cameras_on_hands(obs, ("right",)))) == [3]
    seen = np.isin(obs.sensor_index, [3]) & np.isfinite(obs.points).all(axis=1)
    assert seen.sum() > 1000  # it sees something in front of its fingers


def test_by_default_the_mobile_robot_has_the_three_base_cameras():
    for task, kwargs in (("SetTable", {}), ("OpenCabinetDrawer", {}), ("TidyIntoDrawer", {"hand_camera": False})):
        env = handleit.envs.make(task, obs_mode="state", **kwargs)
        try:
            assert len(env.unwrapped.camera_configs) == 3
            assert robot_model_of(env).hand_camera_sides == ()
        finally:
            env.close()


def test_a_camera_on_an_unknown_link_is_named():
    env = handleit.envs.make("OpenCabinetDrawer", obs_mode="state")
    bad = dataclasses.replace(env.unwrapped.camera_configs[0], mount="no_such_link")
    env.close()
    with pytest.raises(ValueError, match="unknown mount 'no_such_link'"):
        handleit.envs.make("OpenCabinetDrawer", obs_mode="state", cameras=(bad,))


def test_calibration_leaves_a_camera_on_the_hand_out():
    rng = np.random.default_rng(0)
    origins = np.array([[0.0, 0.0, 1.5], [0.6, 0.1, 0.6]])  # the base's camera, and one 6 cm from the hand
    points = np.concatenate([origins[0] + rng.uniform(0.5, 2.0, (500, 1)) * np.array([0.7, 0.0, -0.7]),
                             origins[1] + rng.uniform(0.1, 0.5, (500, 1)) * np.array([0.0, 0.0, -1.0])])
    X_WT = np.eye(4)
    X_WT[:3, 3] = [0.6, 0.1, 0.54]
    cloud = SimpleNamespace(points=points.astype(np.float32), sensor_index=np.repeat([0, 1], 500), X_WB=np.eye(4),
                            sensor_origins=origins, X_WT={"right": X_WT})
    calibrate = CalibrateCameras.__new__(CalibrateCameras)  # the identification needs no tools or blackboard
    calibrate.cameras_B = []
    ids, counts = calibrate._camera_ids(cloud)
    assert ids == [0, -1] and len(calibrate.cameras_B) == 1 and list(counts) == [500, 500]
    X_WT[:3, 3] = [0.0, 0.9, 0.5]  # the hand moved away: the same camera, still on the hand
    cloud.sensor_origins = np.array([[0.0, 0.0, 1.5], [0.05, 0.9, 0.56]])
    assert calibrate._camera_ids(cloud)[0] == [0, -1] and len(calibrate.cameras_B) == 1


def test_the_front_keep_out_stands_for_the_half_plane_beyond_the_drawer():
    interior = DrawerInterior(center_W=np.array([1.0, 0.0, 0.1]), outward_W=np.array([-1.0, 0.0, 0.0]),
                              lateral_W=np.array([0.0, 1.0, 0.0]), size_m=np.array([0.3, 0.4]), floor_z=0.1,
                              rim_z=0.25, front_W=np.array([0.8, 0.0, 0.1]))
    centre, radius = _front_keep_out(interior, clearance_m=0.25)

    def allowed(xy):
        return np.linalg.norm(np.asarray(xy) - centre[:2]) >= radius

    assert allowed([0.8 - 0.26, 0.0]) and not allowed([0.8 - 0.24, 0.0])  # straight out: 25 cm beyond the front
    assert allowed([0.8 - 0.3, 0.4]) and not allowed([0.8 - 0.2, 0.4])  # 40 cm aside: 21 cm, not less
    assert not allowed([1.0, 0.0]) and not allowed([0.9, 0.6])  # the drawer, the cabinet beside it


def _model_with(model, sides):
    return dataclasses.replace(model, hand_camera_sides=sides)


def _solver(model):
    return TreeSolver("SetTable", model, create_pick_tree, grasp_predictor="antipodal_6dof",
                      blackboard={**PICK_BLACKBOARD, **MOBILE_PICK_BLACKBOARD, "q_back_off": None,
                                  "cabinet_front_W": None})


def _observation(model, points, masks, qpos=None) -> Observation:
    q = np.zeros(len(model.joint_names)) if qpos is None else qpos
    q[-2:] = 0.04
    X_WT = np.eye(4)
    X_WT[:3, 3] = [0.5, -0.2, 0.9]
    return Observation(time_s=0.0, points=np.asarray(points, dtype=np.float32),
                       colors=np.zeros((len(points), 3), dtype=np.uint8), masks=masks, frame="world",
                       joint_names=model.joint_names, qpos=q, qvel=np.zeros_like(q), X_WB=np.eye(4),
                       X_WT={"right": X_WT})


def test_the_pick_looks_from_the_hand_only_with_a_camera_there(set_table):
    model = robot_model_of(set_table)
    empty = {"robot": np.zeros(0, dtype=bool)}
    for sides, looks in (((), False), (("right",), True)):
        solver = _solver(_model_with(model, sides))
        solver.reset(_observation(model, np.zeros((0, 3)), empty))
        text = solver.unicode_tree(show_status=False)
        for node in ("look from the hand", "object on the table?", "plan the look (IK)", "hand over the drawer in time?",
                     "object seen from the hand?", "without the hand's view"):
            assert (node in text) == looks, (sides, node)


class NoGrasps:
    """A grasp predictor that finds nothing (as the antipodal one on a top seen alone: no jaw pair, SetTable test
    seed 0 in a low drawer)."""

    def predict(self, points_W, masks, **context):
        return []


def test_an_object_seen_only_from_above_is_grasped_across_its_footprint(set_table):
    """In a drawer, with or without a look from the hand: a 3 x 6 cm top, 3 cm above the drawer's floor, no side
    seen, and no grasp from the predictor. The plan closes straight down across the top's shorter side, comes in
    over the drawer's rim with the fingers opened to the grasp's width and 2 cm, and keeps the base beyond the
    drawer's front (perception input: the object's points, and the drawer as the look saw it)."""
    model = robot_model_of(set_table)
    xs, ys = np.meshgrid(np.linspace(-0.015, 0.015, 7), np.linspace(-0.03, 0.03, 13))
    top = np.column_stack([0.75 + xs.ravel(), ys.ravel(), np.full(xs.size, 0.53)])
    masks = {"object": np.ones(len(top), dtype=bool), "robot": np.zeros(len(top), dtype=bool),
             "target_link": np.zeros(len(top), dtype=bool), "target_handle": np.zeros(len(top), dtype=bool)}
    qpos = np.zeros(len(model.joint_names))
    qpos[3] = 0.5  # torso
    qpos[4:11] = [0.0, 0.3, 0.0, -2.0, 0.0, 2.3, 0.8]
    obs = _observation(model, top, masks, qpos)
    solver = _solver(_model_with(model, ()))
    solver.reset(obs)
    node = PlanMobileGrasp("plan grasp", solver.tools, grasp_predictor=NoGrasps())
    obj = estimate_tabletop_object(top, support_z=0.5)
    drawer = DrawerInterior(center_W=np.array([0.8, 0.0, 0.5]), outward_W=np.array([-1.0, 0.0, 0.0]),
                            lateral_W=np.array([0.0, 1.0, 0.0]), size_m=np.array([0.3, 0.4]), floor_z=0.5,
                            rim_z=0.6, front_W=np.array([0.62, 0.0, 0.5]))
    snap = {"observation": obs, "object": obj, "support_z": 0.5, "table_top": None, "attempt": 0}
    # Off the table, without a look (the top seen over the drawer's front from the base's cameras): the
    # footprint too.
    kind, value = node.plan({**snap, "look_interior": None})
    assert kind == "plan" and value[-1].startswith("footprint grasp"), value
    kind, value = node.plan({**snap, "look_interior": drawer})
    assert kind == "plan", value
    grasp, X_WG, X_WP, q_pre, why = value[0], value[1], value[2], value[3], value[-1]
    assert why.startswith("footprint grasp"), why
    assert np.allclose(X_WG[:3, 2], [0.0, 0.0, -1.0], atol=1e-6)  # straight down
    assert abs(X_WG[1, 1]) < 1e-6 and abs(abs(X_WG[0, 1]) - 1.0) < 1e-6  # closing across the 3 cm side (x)
    assert 0.035 < grasp.width_m < 0.045
    assert X_WP[2, 3] >= 0.66 - 1e-6  # the pregrasp 6 cm over the rim
    assert value[9] == pytest.approx(grasp.width_m + 0.02)  # the fingers' opening on the way in
    base_x = q_pre[list(model.joint_names).index(model.base_joint_names[0])]
    assert base_x <= 0.62 - 0.25 + 1e-3  # the base origin 25 cm beyond the drawer's front


def test_an_empty_cloud_looks_nowhere_and_says_why(set_table):
    model = robot_model_of(set_table)
    solver = _solver(_model_with(model, ("right",)))
    obs = _observation(model, np.zeros((0, 3)), {"robot": np.zeros(0, dtype=bool)})
    solver.reset(obs)
    node = next(n for n in solver.root.iterate() if type(n).__name__ == "PlanHandLook")
    kind, why = node.plan({"observation": obs, "object": None})
    assert kind == "fail" and why.startswith("no drawer interior to look into"), why
    assert isinstance(solver.root, py_trees.behaviour.Behaviour)


def test_an_evaluation_can_give_every_env_the_hand_camera():
    runner = _EpisodeRunner({"hand_camera": True})
    spec = episode_specs("SetTable", "test", 1, "goal:OnTopOf(object, table) & Closed(drawer)", 50)[0]
    env = runner.env(spec)
    try:
        assert [c.name for c in env.unwrapped.camera_configs][-1] == "right_hand_camera"
    finally:
        env.close()
    # Not for the real-time simulator, which makes its own env: the episode records the error and names it.
    late = dataclasses.replace(spec, perturb="latency=0.1")
    record = runner.run(late)
    assert not record.success and "env options ['hand_camera'] are for lockstep episodes" in record.error


def _open_drawer_points(rng, front_x: float, floor_z: float) -> tuple[np.ndarray, np.ndarray]:
    """A drawer pulled out towards -x: floor 0.3 x 0.4 m behind a front panel at ``front_x``, walls 0.1 m, the
    panel 0.14 m tall; and a handle 4 cm out of the panel. (drawer points, handle points), world."""
    back = front_x + 0.3
    floor = rng.uniform([front_x, -0.2, floor_z], [back, 0.2, floor_z], (600, 3))
    sides = np.concatenate([rng.uniform([front_x, y, floor_z], [back, y, floor_z + 0.1], (150, 3))
                            for y in (-0.2, 0.2)])
    panel = rng.uniform([front_x - 0.02, -0.22, floor_z - 0.02], [front_x - 0.02, 0.22, floor_z + 0.12], (300, 3))
    handle = rng.uniform([front_x - 0.06, -0.05, floor_z + 0.06], [front_x - 0.05, 0.05, floor_z + 0.07], (40, 3))
    return np.concatenate([floor, sides, panel]), handle


def test_the_look_into_a_drawer_stands_off_the_drawer_as_seen_not_the_prompt(set_table):
    """The object's prompt was given with the drawer shut; the drawer has since come out 0.3 m towards the robot.
    The drive to the object, before the object is seen, aims at the drawer's open box as the cameras see it, and
    faces it from its front; with the drawer out of view, at the prompt."""
    model = robot_model_of(set_table)
    drawer, handle = _open_drawer_points(np.random.default_rng(3), front_x=0.6, floor_z=0.4)
    points = np.concatenate([drawer, handle])
    n, m = len(drawer), len(handle)
    masks = {"target_link": np.r_[np.ones(n, bool), np.zeros(m, bool)],
             "target_handle": np.r_[np.zeros(n, bool), np.ones(m, bool)],
             "object": np.zeros(n + m, bool), "robot": np.zeros(n + m, bool)}
    prompt = np.array([1.05, 0.0, 0.45])  # where the object sat in the shut drawer
    obs = dataclasses.replace(_observation(model, points, masks), prompts_W={"object": prompt})
    solver = _solver(model)
    solver.reset(obs)
    node = ApproachStandoff("drive to the object", solver.tools, "object")
    point, top, outward = node._target(obs)
    assert top is None
    assert np.allclose(point[:2], [0.75, 0.0], atol=0.02)  # the open box's centre, 0.3 m out from the prompt
    assert np.allclose(outward, [-1.0, 0.0, 0.0], atol=1e-6)
    unseen = {k: np.zeros(n + m, bool) for k in masks}
    point, _, _ = node._target(dataclasses.replace(obs, masks=unseen))
    assert np.allclose(point, prompt)
