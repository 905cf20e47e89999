"""The mobile robot's pick and place subtrees (issue 19): the place-target estimators on synthetic numpy points,
the trees' construction and printing with their checks visible, and bad input (no object points, an empty
cloud, a closed drawer) failing in a named node with a clear reason. Whole episodes:
benchmarks/pick_place_skills.py (minutes each)."""

from __future__ import annotations

import math

import numpy as np
import py_trees
import pytest

import handleit.envs
from handleit.behaviors.mobile_pick_nodes import (
    MOBILE_PICK_BLACKBOARD,
    RETREAT_M,
    PerceivePlaceRegion,
    PlaceRegionSeen,
    PlanRetreat,
)
from handleit.behaviors.mobile_pick_trees import create_pick_tree, create_place_tree
from handleit.behaviors.pick_trees import PICK_BLACKBOARD
from handleit.behaviors.skills import BACK_OFF_M, PLACE_KEYS, Forget, PlanBackOff
from handleit.behaviors.tree_solver import TreeSolver
from handleit.harness.sim_robot import robot_model_of
from handleit.perception.place_targets import (
    PlaceTargetError,
    estimate_drawer_interior,
    estimate_table_top,
    free_spot_on_table,
    standoff_base_xy_yaw,
)
from handleit.types import Observation

RNG = np.random.default_rng(0)


def _rot(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _box_face(lo, hi, n) -> np.ndarray:
    return RNG.uniform(lo, hi, size=(n, 3))


def _drawer_points(yaw: float, centre_xy, floor_z: float, open_: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """An open drawer in its own frame (x outward, y lateral): floor 0.40 x 0.50 m at ``floor_z``, walls 0.10 m
    high, a front panel 0.02 m thick and 0.16 m tall at x = 0.20..0.22; then turned by ``yaw`` and moved.
    Returns (drawer points, handle points), world."""
    a, b, h = 0.20, 0.25, 0.10
    parts = [_box_face([-a, -b, 0.0], [a, b, 0.0], 800),  # floor
             _box_face([-a, -b, 0.0], [a, -b, h], 200), _box_face([-a, b, 0.0], [a, b, h], 200),  # sides
             _box_face([-a, -b, 0.0], [-a, b, h], 200),  # back
             _box_face([a + 0.02, -b - 0.01, -0.03], [a + 0.02, b + 0.01, 0.13], 400)]  # front panel's face
    if not open_:
        parts = parts[-1:]
    p = np.vstack(parts)
    handle = _box_face([a + 0.05, -0.05, 0.05], [a + 0.06, 0.05, 0.06], 40)
    R = _rot(yaw)
    shift = np.array([centre_xy[0], centre_xy[1], floor_z])
    return p @ R.T + shift, handle @ R.T + shift


def test_drawer_interior_from_synthetic_points():
    yaw, centre, floor_z = 0.7, (1.2, -0.4), 0.31
    drawer, handle = _drawer_points(yaw, centre, floor_z)
    interior = estimate_drawer_interior(drawer, handle_points_W=handle)
    assert np.allclose(interior.center_W[:2], centre, atol=0.015)
    assert abs(interior.floor_z - floor_z) < 0.005 and abs(interior.rim_z - (floor_z + 0.10)) < 0.01
    # The front panel stands 3 cm over the walls: a hand coming in from the front passes over the panel.
    assert abs(interior.front_top_z - (floor_z + 0.13)) < 0.01 and interior.top_z == interior.front_top_z
    assert np.allclose(interior.size_m, [0.40, 0.50], atol=0.03)
    assert abs(interior.outward_W @ np.array([math.cos(yaw), math.sin(yaw), 0.0]) - 1.0) < 1e-3
    assert interior.fits(np.array([0.2, 0.3])) and not interior.fits(np.array([0.45, 0.1]))
    # The same with the outward direction given instead of the handle.
    given = estimate_drawer_interior(drawer, outward_W=[math.cos(yaw), math.sin(yaw), 0.3])
    assert np.allclose(given.center_W, interior.center_W, atol=0.01)


def test_drawer_interior_refuses_a_closed_drawer_and_empty_input():
    front, handle = _drawer_points(0.0, (0.0, 0.0), 0.3, open_=False)
    with pytest.raises(PlaceTargetError, match="behind its front"):
        estimate_drawer_interior(front, handle_points_W=handle)
    with pytest.raises(PlaceTargetError, match="0 points"):
        estimate_drawer_interior(np.zeros((0, 3)), handle_points_W=handle)
    with pytest.raises(PlaceTargetError, match="no outward direction"):
        estimate_drawer_interior(_drawer_points(0.0, (0.0, 0.0), 0.3)[0])


def test_drawer_interior_reaches_the_panel_where_the_panel_hides_the_floor_and_the_mask_holds_the_handle():
    """Seen over the front panel, a drawer shows the back of its floor only (TidyIntoDrawer test seed 9: 15 of its
    41 cm), or none, only the back wall's foot (seed 48, a drawer at 0.9 m); and the part's mask can hold the handle's
    points (seeds 9, 48). The opening is the box, from its back to the panel's inner face, not the handle's face
    taken for the front (seed 48: 3 mm deep) nor the floor seen (seed 9: 13 cm)."""
    yaw, centre, floor_z = -0.4, (0.6, 0.9), 0.52
    drawer, handle = _drawer_points(yaw, centre, floor_z)
    R, shift = _rot(yaw), np.array([centre[0], centre[1], floor_z])
    local = (drawer - shift) @ R  # back in the drawer's frame: x outward
    floor = np.abs(local[:, 2]) < 1e-9
    for seen_floor_to_x, name in ((-0.05, "back 15 cm of the floor"), (-0.195, "the back wall's foot")):
        kept = np.vstack([drawer[~floor | (local[:, 0] <= seen_floor_to_x)], handle])  # the handle in the mask
        interior = estimate_drawer_interior(kept, outward_W=[math.cos(yaw), math.sin(yaw), 0.0],
                                            handle_points_W=handle)
        lo = (interior.center_W - shift) @ interior.outward_W - interior.size_m[0] / 2
        hi = lo + interior.size_m[0]
        assert abs(lo + 0.20) < 0.01 and abs(hi - 0.19) < 0.01, (name, lo, hi)  # box -0.20..0.20, panel 0.22
        assert abs(interior.size_m[1] - 0.50) < 0.03, name
        assert abs(interior.floor_z - floor_z) < 0.012, name
    # The panel alone, the handle in its mask: no opening (it would be the handle's 3 cm).
    panel_only = drawer[local[:, 0] > 0.21]
    with pytest.raises(PlaceTargetError, match="behind its front"):
        estimate_drawer_interior(np.vstack([panel_only, handle]), handle_points_W=handle)


def test_the_place_region_merges_the_last_views_of_the_drawer(model):
    """Driving up with the object held over a low drawer, the arm and the object hide most of it (TidyIntoDrawer
    test seeds 5, 35, 41: the opening seen 1-6 cm wide, every place refused): the interior comes from the drawer's
    points merged over the last views, and a new placement forgets them."""
    from handleit.behaviors.mobile_pick_nodes import FUSE_EVERY_STEPS, PerceivePlaceRegion

    drawer, handle = _drawer_points(0.0, (1.2, 0.0), 0.3)
    hidden = drawer[(drawer[:, 1] > 0.2) | (drawer[:, 0] > 1.41)]  # a 5 cm strip of floor and wall, and the panel

    def observation(points):
        masks = {"target_link": np.r_[np.ones(len(points), bool), np.zeros(len(handle), bool)],
                 "target_handle": np.r_[np.zeros(len(points), bool), np.ones(len(handle), bool)]}
        masks["robot"] = np.zeros(len(points) + len(handle), bool)
        both = np.vstack([points, handle])
        return Observation(**{**_empty_observation(model).__dict__, "points": both, "masks": masks,
                              "colors": np.zeros((len(both), 3), np.uint8)})

    solver = _solver(model, lambda tools: PerceivePlaceRegion("perceive place", tools, "inside"))
    solver.reset(observation(drawer))
    solver.step(observation(drawer))  # a full view first
    for _ in range(FUSE_EVERY_STEPS):
        solver.step(observation(hidden))  # then views the arm hides
    region = solver.bb.get("place_region")
    assert region is not None and np.allclose(region.size_m, [0.39, 0.50], atol=0.03), region
    # Alone, the hidden view's opening is the 5 cm strip.
    alone = estimate_drawer_interior(hidden, outward_W=[1.0, 0.0, 0.0], handle_points_W=handle)
    assert alone.size_m[1] < 0.07
    # Planned: the region stays; the next placement's views start afresh.
    solver.bb.set("place_goal_W", np.array([1.2, 0.0, 0.35]), overwrite=True)
    solver.step(observation(hidden))
    solver.bb.set("place_goal_W", None, overwrite=True)
    solver.step(observation(hidden))
    assert solver.bb.get("place_region").size_m[1] < 0.07


def _table_points(yaw: float, centre_xy, height: float, half=(0.5, 0.3)) -> np.ndarray:
    top = _box_face([-half[0], -half[1], height], [half[0], half[1], height], 3000)
    side = _box_face([half[0], -half[1], 0.0], [half[0], half[1], height], 1500)
    p = np.vstack([top, side])
    p[:, :2] = p[:, :2] @ _rot(yaw)[:2, :2].T + np.asarray(centre_xy)
    return p


def test_table_top_plane_and_a_free_spot_clear_of_what_stands_on_it():
    yaw, centre, height = -0.4, (2.0, 1.0), 0.62
    top = estimate_table_top(_table_points(yaw, centre, height))
    assert abs(top.height_z - height) < 1e-6 and top.normal_W[2] > 0.999
    assert np.allclose(top.center_W[:2], centre, atol=0.01)
    assert np.allclose(np.sort(top.half_extent_m), [0.3, 0.5], atol=0.01)
    # A box standing on the top, near the corner the robot is at: the spot keeps clear of it.
    corner = np.asarray(centre) + _rot(yaw)[:2, :2] @ np.array([0.35, 0.15])
    clutter = _box_face([corner[0] - 0.05, corner[1] - 0.05, height], [corner[0] + 0.05, corner[1] + 0.05, height + 0.1], 300)
    prefer = np.array([corner[0], corner[1], 0.0])
    spot = free_spot_on_table(top, 0.04, clutter, prefer_W=prefer)
    assert abs(spot[2] - height) < 1e-9
    assert np.min(np.linalg.norm(clutter[:, :2] - spot[:2], axis=1)) > 0.04 + 0.05 - 1e-9
    assert np.all(np.abs(top.local_xy(spot)) <= top.half_extent_m - 0.04 - 0.05 + 1e-9)
    assert np.linalg.norm(spot[:2] - corner) < 0.2  # the nearest free spot, not the far side
    # Base stand-off off the nearest edge, facing the spot.
    xy, heading = standoff_base_xy_yaw(spot, prefer[:2] + 2.0, 0.8, top=top, clearance_m=0.6)
    assert np.all(np.abs(top.local_xy(np.array([*xy, 0.0]))) > 0) and np.max(
        np.abs(top.local_xy(np.array([*xy, 0.0]))) - top.half_extent_m) >= 0.6 - 1e-9
    facing = spot[:2] - xy
    assert abs(math.remainder(heading - math.atan2(facing[1], facing[0]), 2 * math.pi)) < 1e-9


def test_table_estimators_refuse_too_little():
    with pytest.raises(PlaceTargetError, match="table: 0 points"):
        estimate_table_top(np.zeros((0, 3)))
    top = estimate_table_top(_table_points(0.0, (0.0, 0.0), 0.5, half=(0.12, 0.12)))
    with pytest.raises(PlaceTargetError, match="too small"):
        free_spot_on_table(top, 0.1)
    covered = _box_face([-0.12, -0.12, 0.5], [0.12, 0.12, 0.6], 2000)
    small = estimate_table_top(_table_points(0.0, (0.0, 0.0), 0.5, half=(0.3, 0.3)))
    with pytest.raises(PlaceTargetError, match="covered"):
        free_spot_on_table(small, 0.05, np.vstack([covered, covered * [2, 2, 1]]))


# ------------------------------------------------------------------------------------------------ trees
@pytest.fixture(scope="module")
def model():
    env = handleit.envs.make("TidyIntoDrawer", obs_mode="state")
    yield robot_model_of(env)
    env.close()


def _solver(model, build):
    return TreeSolver("TidyIntoDrawer", model, build, grasp_predictor="antipodal_6dof",
                      blackboard={**PICK_BLACKBOARD, **MOBILE_PICK_BLACKBOARD, "q_back_off": None,
                                  "cabinet_front_W": None})


def _arm_bent_forward(qpos: np.ndarray) -> np.ndarray:
    """``qpos`` with the Panda arm bent forward (a posture whose hand IK can back off from)."""
    q = np.array(qpos, dtype=float)
    q[4:11] = [0.0, 0.3, 0.0, -2.0, 0.0, 2.3, 0.8]
    return q


def _empty_observation(model, prompts=None) -> Observation:
    q = np.zeros(len(model.joint_names))
    q[-2:] = 0.04  # fingers open
    return Observation(time_s=0.0, points=np.zeros((0, 3), dtype=np.float32), colors=np.zeros((0, 3), dtype=np.uint8),
                       masks={"robot": np.zeros(0, dtype=bool)}, frame="world", joint_names=model.joint_names,
                       qpos=q, qvel=np.zeros_like(q), X_WB=np.eye(4), X_WT={"right": np.eye(4)},
                       prompts_W=dict(prompts or {}))


def test_trees_build_and_print_their_checks(model):
    solver = _solver(model, lambda tools: py_trees.composites.Sequence("both", memory=True, children=[
        create_pick_tree(tools), create_place_tree(tools, "inside"), create_place_tree(tools, "on")]))
    solver.reset(_empty_observation(model))
    text = solver.unicode_tree(show_status=False)
    for node in ("perceive object", "drive to the object in time?", "object seen?", "plan grasp (whole-body IK)",
                 "raise arm in time?", "drive to pregrasp in time?", "grasp in time?", "close gripper",
                 "grasp closed on object?", "object in gripper?", "lifted?", "perceive place region",
                 "carry to the drawer", "plan tuck (IK)", "tuck arm in time?", "drawer opening seen?", "plan placement (IK)", "carry over the drawer",
                 "released?", "retreat in time?", "object left behind?", "carry to the table", "table top seen?"):
        assert node in text, node
    with pytest.raises(ValueError, match="'inside'"):
        create_place_tree(solver.tools, "under")


def test_no_object_points_and_an_empty_cloud_fail_in_a_named_node(model):
    solver = _solver(model, create_pick_tree)
    obs = _empty_observation(model)
    solver.reset(obs)
    for _ in range(3):
        solver.step(obs)
    assert any(r.startswith("drive to the object: object: neither seen nor prompted") for r in solver.tools.failures
               + solver.tools.failure_reasons), solver.tools.failure_reasons
    # Prompted but never seen: the drive ends at the stand-off, then "object seen?" fails, saying why.
    solver = _solver(model, create_pick_tree)
    obs = _empty_observation(model, {"object": np.array([1.3, 0.0, 0.6])})
    obs = Observation(**{**obs.__dict__, "qpos": np.concatenate([[0.15, 0.0, 0.0], obs.qpos[3:]])})
    solver.reset(obs)
    for _ in range(105):  # "object seen?" waits a second (100 steps) for points
        solver.step(obs)
    assert any(r.startswith("object seen?: no object points") for r in solver.tools.failure_reasons), \
        solver.tools.failure_reasons


def test_a_closed_drawer_fails_the_place_in_its_check(model):
    """Perception input to the place subtree's check node: the estimator's reason is the node's feedback."""
    front, handle = _drawer_points(0.0, (1.0, 0.0), 0.3, open_=False)
    points = np.vstack([front, handle]).astype(np.float32)
    n_front = len(front)
    masks = {"robot": np.zeros(len(points), dtype=bool), "target_link": np.arange(len(points)) < n_front,
             "target_handle": np.arange(len(points)) >= n_front}
    solver = _solver(model, lambda tools: py_trees.composites.Sequence("place check", memory=True, children=[
        PerceivePlaceRegion("perceive place region", tools, "inside"), PlaceRegionSeen("drawer opening seen?", tools)]))
    obs = _empty_observation(model)
    obs = Observation(**{**obs.__dict__, "points": points, "colors": np.zeros((len(points), 3), dtype=np.uint8),
                         "masks": masks})
    solver.reset(obs)
    solver.step(obs)
    assert solver.tools.failure_reasons and solver.tools.failure_reasons[-1].startswith(
        "drawer opening seen?: drawer:"), solver.tools.failure_reasons
    assert "closed" in solver.tools.failure_reasons[-1]


def test_sim_robot_hands_on_each_entitys_prompt():
    from handleit.harness.sim_robot import SimRobot, _entity_prompts
    from tests.helpers import make_env

    extra = {"object_prompt_box": np.ones((2, 3)), "object_prompt_point": np.zeros(3),
             "target_prompt_box": np.full((2, 3), 2.0), "table_prompt_box": np.full((2, 3), 3.0)}
    assert set(_entity_prompts(extra, "box")) == {"object", "table"}  # the drawer's copy as target is no entity
    assert set(_entity_prompts(extra, "point")) == {"object"} and _entity_prompts(extra, "none") == {}
    env = make_env("TidyIntoDrawer", obs_mode="pointcloud")
    obs = SimRobot(env, prompt="point").reset(seed=0)
    assert set(obs.prompts_W) == {"drawer", "object", "table"}
    assert np.allclose(obs.prompts_W["drawer"], obs.target_prompt_W)
    assert obs.prompts_W["object"].shape == (3,)
    env.close()


def test_base_route_goes_around_the_table():
    from handleit.planning.base_routes import route_around_rectangle, segment_hits_rectangle

    centre, axes, half = np.array([0.0, 0.0]), np.eye(2), np.array([0.5, 0.3])
    assert segment_hits_rectangle([-2, 0], [2, 0], centre, axes, half)
    assert not segment_hits_rectangle([-2, 1], [2, 1], centre, axes, half)
    assert len(route_around_rectangle([-2, 1], [2, 1], centre, axes, half, 0.5)) == 1  # clear: straight
    route = route_around_rectangle([-2.0, 0.1], [2.0, 0.0], centre, axes, half, 0.5)
    assert len(route) == 3 and np.allclose(route[-1], [2.0, 0.0])
    legs = [np.array([-2.0, 0.1]), *route]
    assert not any(segment_hits_rectangle(legs[i], legs[i + 1], centre, axes, half + 0.25) for i in range(len(route)))
    # From the table's edge: straight out first.
    route = route_around_rectangle([0.0, -0.5], [0.0, 2.0], centre, axes, half, 0.5)
    assert np.allclose(route[0], [0.0, -0.82]) and np.allclose(route[-1], [0.0, 2.0])


def test_the_retreat_raises_the_hand_by_the_torso_alone(model):
    """After the release the hand rises straight up by the torso, from where the robot stands (a joint-space
    line to an IK retreat swung the hand into the drawer's walls)."""
    solver = _solver(model, lambda tools: PlanRetreat("plan retreat (torso up)", tools))
    obs = _empty_observation(model)
    q = obs.qpos.copy()
    q[:4] = [0.3, -0.2, 0.5, 0.1]  # base x, y, yaw, torso
    obs = Observation(**{**obs.__dict__, "qpos": q})
    solver.reset(obs)
    X_release = np.eye(4)
    X_release[2, 3] = 0.40
    X_above = X_release.copy()
    X_above[2, 3] = 0.55
    solver.bb.X_WG_release, solver.bb.X_WG_above = X_release, X_above
    solver.step(obs)
    expected = q.copy()
    expected[3] = 0.1 + 0.15 + RETREAT_M
    np.testing.assert_allclose(solver.bb.get("q_retreat"), expected)


def test_a_skill_started_again_forgets_what_its_last_run_planned(model):
    solver = _solver(model, lambda tools: Forget("forget the last place", tools, PLACE_KEYS))
    obs = _empty_observation(model)
    solver.reset(obs)
    solver.bb.set("place_goal_W", np.ones(3), overwrite=True)
    solver.bb.set("place_error", "old", overwrite=True)
    solver.step(obs)
    assert solver.bb.get("place_goal_W") is None and solver.bb.get("place_error") is None


def test_the_release_backs_the_hand_off_along_its_approach_and_forgets_the_grasp(model):
    solver = _solver(model, lambda tools: PlanBackOff("plan back-off (IK)", tools))
    obs = _empty_observation(model)
    q = _arm_bent_forward(obs.qpos)
    solver.reset(obs)
    X_WT = solver.tools.ik.tcp_pose(q, "right")
    obs = Observation(**{**obs.__dict__, "qpos": q, "X_WT": {"right": X_WT}})
    solver.bb.set("grasped", True, overwrite=True)
    solver.step(obs)
    assert solver.bb.get("grasped") is False
    q_back = solver.bb.get("q_back_off")
    assert q_back is not None, solver.tools.failure_reasons
    np.testing.assert_allclose(q_back[:3], q[:3])  # the base stays
    X_back = solver.tools.ik.tcp_pose(q_back, "right")
    np.testing.assert_allclose(X_back[:3, 3], X_WT[:3, 3] - BACK_OFF_M * X_WT[:3, 2], atol=0.01)


def test_the_release_backs_the_base_off_where_the_arm_alone_cannot(model):
    """The hand out of the arm's reach with the base held (a drawer pulled to its end stretched the arm): the
    base backs off along the approach's horizontal part, the arm held; a hand pointing straight down gets no
    such back-off and fails saying why."""
    solver = _solver(model, lambda tools: PlanBackOff("plan back-off (IK)", tools))
    obs = _empty_observation(model)
    solver.reset(obs)
    X_WT = np.eye(4)
    X_WT[:3, :3] = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # approach along +x
    X_WT[:3, 3] = [2.5, 0.0, 0.6]  # 2.5 m ahead of the base: no arm reaches it
    solver.step(Observation(**{**obs.__dict__, "X_WT": {"right": X_WT}}))
    q_back = solver.bb.get("q_back_off")
    assert q_back is not None, solver.tools.failure_reasons
    base = solver.tools.base_index
    np.testing.assert_allclose(q_back[base[:2]], obs.qpos[base[:2]] + [-BACK_OFF_M, 0.0], atol=1e-9)
    np.testing.assert_allclose(np.delete(q_back, base[:2]), np.delete(obs.qpos, base[:2]))
    down = X_WT.copy()
    down[:3, :3] = np.diag([1.0, -1.0, -1.0])
    solver.bb.set("q_back_off", None, overwrite=True)
    solver.step(Observation(**{**obs.__dict__, "X_WT": {"right": down}}))
    assert solver.bb.get("q_back_off") is None
    assert any("no IK for the back-off" in r for r in solver.tools.failure_reasons), solver.tools.failure_reasons


def test_base_route_goes_around_the_table_and_the_cabinet():
    from handleit.planning.base_routes import route_around_rectangles, segment_hits_rectangle

    axes = np.eye(2)
    table = (np.array([0.0, 0.0]), axes, np.array([0.5, 0.3]))
    cabinet = (np.array([0.0, 1.6]), axes, np.array([0.3, 0.5]))
    # Clear of both: straight.
    assert len(route_around_rectangles([-2.0, -1.0], [2.0, -1.0], [table, cabinet], 0.4)) == 1
    # Between them lies no way through at this margin: around the cabinet, never through either (grown by half).
    route = route_around_rectangles([-2.0, 1.6], [2.0, 1.6], [table, cabinet], 0.4)
    legs = [np.array([-2.0, 1.6]), *route]
    assert len(route) > 1 and np.allclose(route[-1], [2.0, 1.6])
    for c, a, h in (table, cabinet):
        assert not any(segment_hits_rectangle(legs[k], legs[k + 1], c, a, h + 0.2) for k in range(len(route)))
    # A goal within half the margin of the cabinet (a stand-off by its corner): reached straight in from the
    # nearest edge's margin, every leg before that clear of both grown by half the margin.
    goal = np.array([0.45, 2.0])
    for start in ([3.0, 3.0], [-2.0, 1.6]):
        route = route_around_rectangles(start, goal, [table, cabinet], 0.4)
        legs = [np.array(start), *route]
        assert len(route) >= 2 and np.allclose(route[-1], goal)
        np.testing.assert_allclose(route[-2], [0.3 + 0.4 + 0.02, 2.0])  # the x edge, its margin and 2 cm
        for c, a, h in (table, cabinet):
            assert not any(segment_hits_rectangle(legs[k], legs[k + 1], c, a, h + 0.2) for k in range(len(route) - 1))
    # Walled in (no corner reachable): the goal alone, for the drive's own blocked check.
    assert len(route_around_rectangles([0.0, 0.8], [5.0, 0.8], [table, cabinet], 10.0)) >= 1
    with pytest.raises(ValueError, match="margin_m"):
        route_around_rectangles([0, 0], [1, 1], [table], -0.1)


def test_cabinet_footprint_from_its_front_reaches_behind_it():
    from handleit.perception.place_targets import PlaceTargetError, estimate_cabinet_footprint

    rng = np.random.default_rng(0)
    # A cabinet front at x = 1.0 facing -x (its points 2 cm deep), 0.8 m wide, and an open drawer out to x = 0.6.
    front = np.stack([rng.uniform(1.0, 1.02, 800), rng.uniform(-0.4, 0.4, 800), rng.uniform(0.05, 0.9, 800)], axis=1)
    drawer = np.stack([rng.uniform(0.6, 1.0, 300), rng.uniform(-0.2, 0.2, 300), rng.uniform(0.4, 0.5, 300)], axis=1)
    fp = estimate_cabinet_footprint(np.vstack([front, drawer]), np.array([-1.0, 0.0, 0.0]))
    np.testing.assert_allclose(fp.axes_W[0], [-1.0, 0.0])
    lo = fp.center_W @ fp.axes_W.T - fp.half_extent_m
    hi = fp.center_W @ fp.axes_W.T + fp.half_extent_m
    assert hi[0] == pytest.approx(-0.6, abs=0.02)  # the open drawer's front, along outward (-x)
    assert hi[0] - lo[0] >= 0.4 - 1e-9  # at least the minimum depth behind it
    assert fp.half_extent_m[1] == pytest.approx(0.4, abs=0.02)
    with pytest.raises(PlaceTargetError, match="points"):
        estimate_cabinet_footprint(front[:10], np.array([-1.0, 0.0]))
    with pytest.raises(PlaceTargetError, match="horizontal"):
        estimate_cabinet_footprint(front, np.array([0.0, 0.0, 1.0]))


def test_the_cabinet_is_found_from_its_prompt_and_looked_for_from_another_side(model):
    """Before the drawer is seen: its prompt, not the nearest thing (the table); an approach that ended without
    a handle point is followed by one from the next side (90 degrees about the target)."""
    from handleit.behaviors.cabinet_nodes import ApproachPart, target_point_W
    from handleit.perception.handle_points import HandleAccumulator

    table = np.array([[0.5, 0.0, 0.6], [0.6, 0.1, 0.6]] * 10)
    obs = _empty_observation(model)
    masks = {"robot": np.zeros(len(table), bool), "target_link": np.zeros(len(table), bool),
             "target_handle": np.zeros(len(table), bool), "table": np.ones(len(table), bool)}
    obs = Observation(**{**obs.__dict__, "points": table, "colors": np.zeros((len(table), 3), np.uint8),
                         "masks": masks, "target_prompt_W": np.array([[2.0, -0.2, 0.3], [2.4, 0.2, 0.5]])})
    np.testing.assert_allclose(target_point_W(obs, HandleAccumulator()), [2.2, 0.0, 0.4])
    unprompted = Observation(**{**obs.__dict__, "target_prompt_W": None})
    assert target_point_W(unprompted, HandleAccumulator()) is None  # the table is no candidate

    solver = _solver(model, lambda tools: ApproachPart("approach cabinet", tools))
    solver.reset(obs)
    node = solver.root if isinstance(solver.root, ApproachPart) else next(
        n for n in solver.root.iterate() if isinstance(n, ApproachPart))
    solver.step(obs)
    np.testing.assert_allclose(node.side_W, [-1.0, 0.0, 0.0], atol=1e-9)  # toward the robot at the origin
    node.stop(py_trees.common.Status.FAILURE)  # the approach ended (its timeout) with no handle point
    solver.step(obs)
    np.testing.assert_allclose(node.side_W, [0.0, -1.0, 0.0], atol=1e-9)  # then 90 degrees about the target


def test_a_lowering_stalled_short_lets_go_only_over_the_opening(model):
    from handleit.behaviors.mobile_pick_nodes import HeldOverPlace
    from handleit.perception.place_targets import DrawerInterior

    interior = DrawerInterior(np.array([1.0, 0.0, 0.3]), np.array([-1.0, 0.0, 0.0]), np.array([0.0, -1.0, 0.0]),
                              np.array([0.3, 0.4]), 0.3, 0.42, np.array([0.85, 0.0, 0.3]))
    for hand_xy, holds in (((1.05, 0.1), True), ((1.3, 0.0), False)):
        solver = _solver(model, lambda tools: HeldOverPlace("held over the place?", tools, "inside"))
        X_WT = np.eye(4)
        X_WT[:3, 3] = [*hand_xy, 0.5]
        obs = _empty_observation(model)
        obs = Observation(**{**obs.__dict__, "X_WT": {"right": X_WT}})
        solver.reset(obs)
        solver.bb.set("place_region", interior, overwrite=True)
        solver.step(obs)
        assert bool(solver.tools.failure_reasons) != holds, solver.tools.failure_reasons


def test_a_base_stopped_short_of_the_place_gets_the_arm_replanned_from_where_it_stands(model):
    """The drive over the place stalled 3-4.5 cm short (TidyIntoDrawer test seeds 1 and 2): the arm is solved
    again, the base where it stands, for the same hand poses over the place and at the release."""
    from handleit.behaviors.mobile_pick_nodes import ReplanArmFromBase

    solver = _solver(model, lambda tools: ReplanArmFromBase("re-plan arm (base where it stopped)", tools))
    obs = _empty_observation(model)
    q_planned = _arm_bent_forward(obs.qpos)
    solver.reset(obs)
    X_above = solver.tools.ik.tcp_pose(q_planned, "right")
    X_release = X_above.copy()
    X_release[2, 3] -= 0.06
    solver.step(obs)  # nothing planned yet: a named failure
    assert solver.tools.failure_reasons[-1].endswith("no planned place poses to reach")
    q_short = q_planned.copy()
    q_short[0] -= 0.04  # the base 4 cm short along x
    obs = Observation(**{**obs.__dict__, "qpos": q_short})
    solver.reset(obs)
    solver.bb.set("X_WG_above", X_above, overwrite=True)
    solver.bb.set("X_WG_release", X_release, overwrite=True)
    solver.step(obs)
    q_above, q_release = solver.bb.get("q_above"), solver.bb.get("q_release")
    assert q_above is not None and q_release is not None, solver.tools.failure_reasons
    np.testing.assert_allclose(q_above[:3], q_short[:3])  # the base stays where it stopped
    np.testing.assert_allclose(q_release[:3], q_short[:3])
    np.testing.assert_allclose(solver.tools.ik.tcp_pose(q_above, "right")[:3, 3], X_above[:3, 3], atol=0.01)
    np.testing.assert_allclose(solver.tools.ik.tcp_pose(q_release, "right")[:3, 3], X_release[:3, 3], atol=0.01)


def _cabinet_scene(model, base_xy_yaw, with_handle: bool):
    """A box cabinet 0.5 m deep, 0.8 m wide at the origin, its front toward -x with a drawer panel and a
    handle; the robot's base at ``base_xy_yaw``; the drawer's prompt at its centre."""
    rng = np.random.default_rng(0)
    n = 300
    z = rng.uniform(0.05, 0.8, n)
    faces = [np.stack([np.full(n, x), rng.uniform(-0.4, 0.4, n), z], axis=1) for x in (-0.25, 0.25)]
    faces += [np.stack([rng.uniform(-0.25, 0.25, n), np.full(n, y), z], axis=1) for y in (-0.4, 0.4)]
    body = np.vstack(faces)
    panel = np.stack([np.full(100, -0.26), rng.uniform(-0.2, 0.2, 100), rng.uniform(0.5, 0.7, 100)], axis=1)
    handle = np.stack([np.full(20, -0.29), rng.uniform(-0.06, 0.06, 20), np.full(20, 0.6)], axis=1)
    parts = [body, panel] + ([handle] if with_handle else [])
    points = np.vstack(parts)
    link = np.zeros(len(points), bool)
    link[len(body):len(body) + len(panel)] = True
    handle_mask = np.zeros(len(points), bool)
    if with_handle:
        handle_mask[-len(handle):] = True
    masks = {"robot": np.zeros(len(points), bool), "target_link": link, "target_handle": handle_mask,
             "table": np.zeros(len(points), bool), "object": np.zeros(len(points), bool)}
    obs = _empty_observation(model, prompts={"drawer": np.array([0.0, 0.0, 0.6])})
    q = obs.qpos.copy()
    q[:3] = base_xy_yaw
    X_WB = np.eye(4)
    c, s = math.cos(base_xy_yaw[2]), math.sin(base_xy_yaw[2])
    X_WB[:2, :2] = [[c, -s], [s, c]]
    X_WB[:2, 3] = base_xy_yaw[:2]
    return Observation(**{**obs.__dict__, "points": points, "colors": np.zeros((len(points), 3), np.uint8),
                          "masks": masks, "qpos": q, "X_WB": X_WB})


def test_the_cabinet_front_is_reached_at_once_from_in_front_and_looked_for_from_behind(model):
    from handleit.behaviors.cabinet_front_nodes import VIEW_TICKS, GoToCabinetFront

    def front_solver():
        return _solver(model, lambda tools: GoToCabinetFront("go to the cabinet's front", tools))

    # In front, the handle in view: SUCCESS once the same side has been named for a few views.
    solver = front_solver()
    obs = _cabinet_scene(model, (-1.6, 0.1, 0.0), with_handle=True)
    solver.reset(obs)
    for _ in range(5):
        solver.step(obs)
    node = next(n for n in solver.root.iterate() if isinstance(n, GoToCabinetFront))
    assert node.status == py_trees.common.Status.SUCCESS, node.feedback_message
    np.testing.assert_allclose(node.front_W, [-1.0, 0.0, 0.0], atol=1e-6)
    assert solver.bb.get("cabinet_front_W") is not None
    # Behind it, no handle in view: it drives off to look from another side, and rules the back out once it
    # has looked at it squarely long enough.
    solver = front_solver()
    obs = _cabinet_scene(model, (1.6, 0.0, math.pi), with_handle=False)
    solver.reset(obs)
    for _ in range(VIEW_TICKS + 2):
        command = solver.step(obs)
    node = next(n for n in solver.root.iterate() if isinstance(n, GoToCabinetFront))
    assert node.status == py_trees.common.Status.RUNNING and node.front_W is None
    assert len(node.ruled_out) == 1 and node.ruled_out[0] @ np.array([1.0, 0.0]) > 0.9, node.ruled_out
    assert np.linalg.norm(command.qvel[:2]) > 0  # the base drives
    assert "to look at side" in node.feedback_message
    # At a look-out with the handle in view but too little of its part to name the front: that side is left
    # undecided after VIEW_TICKS ticks, for another (the base had waited there for the skill's 2000 steps).
    solver = front_solver()
    obs = _cabinet_scene(model, (-0.29 - 1.3, 0.0, 0.0), with_handle=True)
    link = obs.masks["target_link"].copy()
    link[np.flatnonzero(link)[10:]] = False  # 10 panel points, fewer than the front needs
    obs = Observation(**{**obs.__dict__, "masks": {**obs.masks, "target_link": link}})
    solver.reset(obs)
    for _ in range(VIEW_TICKS + 3):
        solver.step(obs)
    node = next(n for n in solver.root.iterate() if isinstance(n, GoToCabinetFront))
    assert node.front_W is None and len(node.undecided) == 1 and node.undecided[0] @ np.array([-1.0, 0.0]) > 0.9
    assert node.status == py_trees.common.Status.RUNNING and "1 undecided" in node.feedback_message
    # With no prompt and no part in view: a named failure.
    solver = front_solver()
    bare = _empty_observation(model)
    solver.reset(bare)
    solver.step(bare)
    assert solver.tools.failure_reasons[-1].endswith("nowhere to look for the cabinet")


def test_the_pick_skill_clears_the_hand_before_it_drives(model):
    """The pick skill backs the hand off and tucks the arm before its drive (an open's hand left by the handle
    swept the drawer shut on the way to the table); without IK it goes on, the step shown as succeeded."""
    from handleit.behaviors.skills import pick_subtree

    solver = _solver(model, lambda tools: pick_subtree(tools, "object"))
    obs = _empty_observation(model)
    solver.reset(obs)
    names = [n.name for n in solver.root.iterate()]
    order = [names.index(n) for n in ("forget the last pick", "plan back-off (IK)", "back off", "plan tuck (IK)",
                                      "tuck arm", "drive to the object in time?")]
    assert order == sorted(order) and "clear the hand" in names, names


def test_a_drive_round_the_cabinet_is_not_called_blocked_on_a_long_leg(model):
    """The base carries an object to the table's stand-off round a cabinet: legs of 2.4-2.8 m after the first,
    each longer than the blocked check's 300 steps at the carrying speed. The base follows its commands
    (integrated here, no obstacle): the drive reaches the stand-off and never fails "blocked" (it did once a
    waypoint was passed, measured against the passed waypoint's distance: TidyIntoDrawer test seed 7)."""
    from handleit.behaviors.mobile_pick_nodes import BLOCKED_STEPS, ApproachStandoff
    from handleit.perception.place_targets import Footprint, TableTop

    solver = TreeSolver("TidyIntoDrawer", model, lambda tools: ApproachStandoff("drive to the table", tools, "table",
                                                                                  "close"),
                        blackboard={**PICK_BLACKBOARD, **MOBILE_PICK_BLACKBOARD}, calibrate_cameras=False)
    obs = _empty_observation(model)
    base = np.array([model.joint_names.index(n) for n in model.base_joint_names[:3]])
    obs.qpos[base] = [-4.0, 0.0, 0.0]
    solver.reset(obs)
    axes = np.eye(2)
    solver.bb.set("table_top", TableTop(center_W=np.array([5.0, 0.0, 0.7]), axes_W=axes,
                                        half_extent_m=np.array([0.5, 0.4]), height_z=0.7,
                                        normal_W=np.array([0.0, 0.0, 1.0])), overwrite=True)
    solver.bb.set("cabinet_footprint", (Footprint(np.array([0.0, 0.0]), axes, np.array([0.3, 0.5])), 500),
                  overwrite=True)
    dt, q, waypoints = model.control_dt_s, obs.qpos.copy(), set()
    node = solver.root if isinstance(solver.root, ApproachStandoff) else next(
        n for n in solver.root.iterate() if isinstance(n, ApproachStandoff))
    for step in range(5000):
        X_WB = np.eye(4)
        X_WB[:3, :3] = _rot(q[base[2]])
        X_WB[:2, 3] = q[base[:2]]
        obs = Observation(**{**obs.__dict__, "qpos": q.copy(), "X_WB": X_WB, "time_s": step * dt})
        command = solver.step(obs)
        if node.status != py_trees.common.Status.RUNNING:
            break
        waypoints.add(node.feedback_message.split("from ")[-1])
        q = q + dt * command.qvel
        obs = Observation(**{**obs.__dict__, "qvel": command.qvel})
    assert node.status == py_trees.common.Status.SUCCESS, (node.feedback_message, solver.tools.failure_reasons)
    assert len(waypoints) >= 2  # it went round: more than one leg
    assert step > 2 * BLOCKED_STEPS  # long legs, as in the episodes
    np.testing.assert_allclose(q[base[:2]], [5.0 - 0.5 - 0.95, 0.0], atol=0.1)  # off the table's near edge

