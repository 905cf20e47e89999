"""6-DoF antipodal grasps on partial clouds of synthetic table-top objects (no simulator)."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.perception.antipodal_grasps import (
    PANDA_HAND,
    evaluate_grasp_poses,
    hand_lowest_z_W,
    sample_antipodal_grasps,
)
from handleit.perception.grasp_predictors import available_grasp_predictors, get_grasp_predictor
from handleit.types import Grasp
from tests.synthetic_objects import make_tabletop_object

CLEARANCE_M = 0.005  # the sampler's default clearance on each side of the measured width


def points_in_hand(grasp: Grasp, points_W: np.ndarray) -> int:
    """Points inside the Panda hand's boxes (palm, fingers at the grasp's opening): an independent check."""
    p_G = (points_W - grasp.X_WG[:3, 3]) @ grasp.X_WG[:3, :3]
    count = 0
    for lower, upper in PANDA_HAND.boxes_G(grasp.width_m):
        count += int(np.all((p_G >= lower) & (p_G <= upper), axis=1).sum())
    return count


def closing_in_object(grasp: Grasp, scene) -> np.ndarray:
    """|closing axis| in the object's frame: [1, 0, 0] closes across the object's x faces."""
    return np.abs(scene.R_WO.T @ grasp.X_WG[:3, 1])


def run(scene, **kwargs):
    obj = scene.points_W[scene.is_object]
    table = scene.points_W[~scene.is_object]
    kwargs.setdefault("viewpoint_W", scene.camera_W[0])
    return sample_antipodal_grasps(obj, obstacle_points_W=table, table_z=scene.table_z, **kwargs)


def assert_valid_hand_placement(grasps, scene):
    for g in grasps:
        assert 0 < g.width_m <= 0.08 + 1e-9
        R = g.X_WG[:3, :3]
        assert np.allclose(R.T @ R, np.eye(3), atol=1e-9) and np.linalg.det(R) > 0.999
        assert hand_lowest_z_W(g.X_WG, g.width_m) >= scene.table_z  # nothing of the hand under the table
        assert points_in_hand(g, scene.points_W) == 0  # neither the table's nor the object's points


def test_box_from_one_view_is_grasped_across_two_faces():
    scene = make_tabletop_object(np.random.default_rng(3), "box", (0.05, 0.035, 0.06), view_azimuth_rad=-2.0)
    grasps = run(scene)
    assert len(grasps) >= 5 and all(isinstance(g, Grasp) for g in grasps)
    assert [g.score for g in grasps] == sorted((g.score for g in grasps), reverse=True)
    assert_valid_hand_placement(grasps, scene)
    assert grasps[0].X_WG[2, 2] < -0.7  # from above (within 45 degrees), as the default prior asks
    for g in grasps[:3]:
        across = closing_in_object(g, scene)
        axis = int(np.argmax(across))
        assert across[axis] > np.cos(np.arctan(0.4))  # along a face normal, within the friction cone
        assert g.width_m == pytest.approx(scene.size_m[axis] + 2 * CLEARANCE_M, abs=0.008)
        # The tool centre is inside the box, between its faces.
        p_O = scene.R_WO.T @ (g.X_WG[:3, 3] - scene.center_W)
        assert np.all(np.abs(p_O) < scene.size_m / 2)
    # The 3.5 cm side is the narrow one: the best grasp closes across it or across the 5 cm side (both fit).
    assert np.argmax(closing_in_object(grasps[0], scene)) in (0, 1)


def test_box_seen_from_two_sides_gives_antipodal_pairs_across_faces():
    rng = np.random.default_rng(4)
    scene = make_tabletop_object(rng, "box", (0.04, 0.10, 0.05), yaw_rad=0.3,
                                 cameras_W=[[0.6, 0.0, 0.5], [-0.6, 0.0, 0.5]])
    grasps = run(scene, viewpoint_W=None)  # two cameras: normals oriented away from the centroid
    assert grasps
    assert_valid_hand_placement(grasps, scene)
    best = grasps[0]
    # The 4 cm faces are both seen: an antipodal pair across them outranks everything else.
    assert closing_in_object(best, scene)[0] > np.cos(np.deg2rad(10))
    assert best.width_m == pytest.approx(0.04 + 2 * CLEARANCE_M, abs=0.006)
    assert best.score > 0.7


@pytest.mark.parametrize("shape", ["cylinder", "sphere"])
def test_round_objects_are_grasped_through_their_axis(shape):
    scene = make_tabletop_object(np.random.default_rng(5), shape, (0.06, 0.06, 0.10))
    grasps = run(scene)
    assert grasps
    assert_valid_hand_placement(grasps, scene)
    for rank, g in enumerate(grasps[:3]):
        closing_W = g.X_WG[:3, 1]
        # The closing line passes near the axis (a cylinder's: horizontal) or the centre (a sphere's):
        # the contacts' normals then lie within the friction cone.
        offset = g.X_WG[:3, 3] - scene.center_W
        offset -= (offset @ closing_W) * closing_W
        if shape == "cylinder":
            assert abs(closing_W[2]) < 0.5
            offset = offset[:2]
        assert np.linalg.norm(offset) < (0.012 if rank == 0 else 0.02)
        assert g.width_m <= 0.08
    assert grasps[0].width_m >= 0.06 - 0.008  # the best one opens around the whole diameter


def test_too_wide_box_gives_no_grasp_across_its_faces():
    scene = make_tabletop_object(np.random.default_rng(6), "box", (0.15, 0.15, 0.15), yaw_rad=0.4)
    grasps = run(scene)
    assert_valid_hand_placement(grasps, scene)
    for g in grasps:  # at most a pinch of an edge or corner, never across the box
        assert closing_in_object(g, scene).max() < np.cos(np.deg2rad(15))


def test_neighbouring_object_blocks_the_fingers():
    """A wall 1.5 cm beside the box: no finger may go into that gap, so nothing closes across the wall's side."""
    rng = np.random.default_rng(7)
    scene = make_tabletop_object(rng, "box", (0.04, 0.04, 0.06), yaw_rad=0.0, view_azimuth_rad=np.pi / 2)
    x_wall = scene.center_W[0] + 0.02 + 0.015
    wall = np.column_stack([np.full(3000, x_wall), scene.center_W[1] + rng.uniform(-0.1, 0.1, 3000),
                            rng.uniform(0.0, 0.12, 3000)])
    obj = scene.points_W[scene.is_object]
    obstacles = np.concatenate([scene.points_W[~scene.is_object], wall])
    grasps = sample_antipodal_grasps(obj, obstacle_points_W=obstacles, table_z=0.0, viewpoint_W=scene.camera_W[0])
    assert grasps
    for g in grasps:
        assert points_in_hand(g, wall) == 0
        assert abs(g.X_WG[0, 1]) < np.cos(np.deg2rad(30))  # a finger between box and wall would not fit
    free = sample_antipodal_grasps(obj, obstacle_points_W=scene.points_W[~scene.is_object], table_z=0.0,
                                   viewpoint_W=scene.camera_W[0])
    assert any(abs(g.X_WG[0, 1]) > 0.95 for g in free)  # without the wall, closing along x is offered


def test_same_seed_same_grasps():
    scene = make_tabletop_object(np.random.default_rng(8), "box", (0.05, 0.05, 0.05))
    a, b = run(scene, seed=3), run(scene, seed=3)
    assert len(a) == len(b) > 0
    for ga, gb in zip(a, b, strict=True):
        assert np.array_equal(ga.X_WG, gb.X_WG) and ga.width_m == gb.width_m and ga.score == gb.score


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="empty"):
        sample_antipodal_grasps(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="NaN"):
        sample_antipodal_grasps(np.array([[0.0, 0.0, np.nan]] * 10))
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        sample_antipodal_grasps(np.zeros((10, 2)))
    with pytest.raises(ValueError, match="X_WG"):
        evaluate_grasp_poses(np.eye(4), np.zeros((10, 3)))
    assert sample_antipodal_grasps(np.zeros((2, 3))) == []  # too few points to grasp anything


def test_evaluation_measures_width_and_recentres():
    """A top-down pose 1 cm off a 4 cm box's middle is moved to the middle and opened to 4 cm + clearance."""
    scene = make_tabletop_object(np.random.default_rng(9), "box", (0.04, 0.04, 0.05), yaw_rad=0.0)
    X = np.eye(4)
    X[:3, :3] = np.diag([1.0, -1.0, -1.0])  # z down, y along -world y, x along world x
    X[:3, 3] = scene.center_W + [0.0, 0.01, 0.0]
    ev = evaluate_grasp_poses(X[None], scene.points_W[scene.is_object], table_z=0.0)
    assert ev.width_m[0] == pytest.approx(0.04 + 2 * CLEARANCE_M, abs=0.003)
    assert ev.X_WG[0, 1, 3] == pytest.approx(scene.center_W[1], abs=0.002)
    assert ev.valid[0] and not ev.collides[0] and not ev.below_table[0]
    X_low = X.copy()
    X_low[2, 3] = 0.005  # fingertips 1.45 cm under the tool centre: below the table
    assert evaluate_grasp_poses(X_low[None], scene.points_W[scene.is_object], table_z=0.0).below_table[0]


def test_registered_predictor_uses_masks_and_context():
    assert "antipodal_6dof" in available_grasp_predictors() and "antipodal" in available_grasp_predictors()
    rng = np.random.default_rng(10)
    scene = make_tabletop_object(rng, "box", (0.045, 0.045, 0.05))
    # A robot gripper hovering right above the box: its points are ignored (masked as "robot").
    robot = scene.center_W + [0.0, 0.0, 0.06] + rng.uniform(-0.01, 0.01, (200, 3))
    points = np.concatenate([scene.points_W, robot])
    target = np.concatenate([scene.is_object, np.zeros(len(robot), bool)])
    is_robot = np.concatenate([np.zeros(len(scene.points_W), bool), np.ones(len(robot), bool)])
    predictor = get_grasp_predictor("antipodal_6dof", max_grasps=10)
    grasps = predictor.predict(points, {"target": target, "robot": is_robot}, table_z=0.0,
                               viewpoint_W=scene.camera_W[0], X_WB=np.eye(4))
    assert 0 < len(grasps) <= 10 and grasps[0].X_WG[2, 2] < -0.9
    same = predictor.predict(points, {"target_link": target, "robot": is_robot}, table_z=0.0,
                             viewpoint_W=scene.camera_W[0])
    assert np.array_equal(same[0].X_WG, grasps[0].X_WG)
    assert predictor.predict(points, {"target": np.zeros(len(points), bool)}) == []
    with pytest.raises(ValueError, match="masks need 'target' or 'target_link'"):
        predictor.predict(points, {"robot": is_robot})
    with pytest.raises(ValueError, match=r"masks\['target'\]: expected a bool array"):
        predictor.predict(points, {"target": target[:5]})
