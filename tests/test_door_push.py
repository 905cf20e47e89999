"""The door's handover from the held swing to a push on the leaf's inner side (issue 17): the leaf's free edge
from its points, the push's poses round the edge, and the tree's visible nodes."""

from __future__ import annotations

import math

import numpy as np
import pytest

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.behaviors.cabinet_trees import create_door_tree
from handleit.harness.sim_robot import SimRobot
from handleit.perception.open_state import free_edge_distance_m
from handleit.planning.trajectories import door_push_poses


def _leaf(angle_rad: float, width_m: float = 0.45, n_points: int = 2000, seed: int = 0):
    """Points of a vertical leaf hinged at the origin on a cabinet facing -x, closed along -y and opened by
    ``angle_rad`` outward (toward -x); with its direction from the hinge and its outward normal."""
    rng = np.random.default_rng(seed)
    u0, n0 = np.array([0.0, -1.0, 0.0]), np.array([-1.0, 0.0, 0.0])
    c, s = math.cos(angle_rad), math.sin(angle_rad)
    u, n = c * u0 + s * n0, -s * u0 + c * n0
    along = rng.uniform(0.0, width_m, n_points)
    height = rng.uniform(0.2, 0.8, n_points)
    points = along[:, None] * u + height[:, None] * np.array([0.0, 0.0, 1.0])
    return points, u, n


def test_a_push_approach_turned_less_points_between_the_leaf_and_its_inward_normal():
    _, u, n = _leaf(math.radians(30))
    axis = np.cross(u, n)
    R_now = np.column_stack([np.cross(u, -n), u, -n])
    yaw = 0.8
    *_, contact = door_push_poses(np.zeros(3), axis, n, 0.45, 0.5, 0.43, 0.02, 0.1, R_now, closing_vertical=False,
                                  approach_yaw_rad=yaw)
    assert np.allclose(contact[:3, 2], -(math.sin(yaw) * u + math.cos(yaw) * n), atol=1e-9)
    # The least turn from facing the leaf is a turn about the vertical by the yaw itself.
    angle = math.acos(np.clip((np.trace(R_now.T @ contact[:3, :3]) - 1) / 2, -1, 1))
    assert math.isclose(angle, yaw, abs_tol=1e-9)


def test_free_edge_is_the_far_end_of_the_leaf_along_its_direction():
    points, u, _ = _leaf(math.radians(50))
    edge = free_edge_distance_m(points, np.zeros(3), u)
    assert 0.43 < edge <= 0.45
    # A few stray points far beyond the edge (a noisy mask) do not move it.
    strays = np.tile(0.9 * u, (10, 1))
    assert abs(free_edge_distance_m(np.vstack([points, strays]), np.zeros(3), u) - edge) < 0.005
    with pytest.raises(ValueError):
        free_edge_distance_m(np.zeros((0, 3)), np.zeros(3), u)


@pytest.mark.parametrize("closing_vertical", [True, False])
def test_push_poses_go_round_the_free_edge_to_the_inner_side(closing_vertical):
    angle = math.radians(45)
    _, u, n = _leaf(angle)
    axis = np.cross(u, n)  # a positive turn about it moves the free edge along n: opens
    # The hand as it holds the handle: approach into the leaf (-n), closing axis along the leaf.
    R_now = np.column_stack([np.cross(u, -n), u, -n])
    edge, thickness = 0.45, 0.02
    beside, behind, contact = door_push_poses(np.zeros(3), axis, n, edge, 0.5, edge - 0.06, thickness, 0.1, R_now,
                                              closing_vertical=closing_vertical)
    for X in (beside, behind, contact):
        R = X[:3, :3]
        assert np.allclose(R.T @ R, np.eye(3), atol=1e-9) and np.isclose(np.linalg.det(R), 1.0)
        assert np.allclose(R[:, 2], -u, atol=1e-9)  # pointing along the leaf toward the hinge
        assert np.isclose(X[2, 3], 0.5)
    if closing_vertical:
        assert abs(contact[:3, 1] @ np.array([0.0, 0.0, 1.0])) > 0.999
    else:  # the least turn: a yaw, the closing axis stays horizontal
        assert abs(contact[:3, 1] @ np.array([0.0, 0.0, 1.0])) < 1e-6
    # Beside the edge in front of the leaf, then behind it, then inside the edge behind it.
    assert beside[:3, 3] @ u > edge and beside[:3, 3] @ n > 0.0
    assert behind[:3, 3] @ u > edge and behind[:3, 3] @ n < -thickness
    assert np.isclose(contact[:3, 3] @ u, edge - 0.06)
    # The hand's whole half extent along the normal lies behind the leaf's inner face.
    half = 0.035 * abs(contact[:3, 0] @ n) + 0.1 * abs(contact[:3, 1] @ n)
    assert np.isclose(-(contact[:3, 3] @ n), thickness + half)


def test_door_tree_shows_the_handover_and_its_checks_and_falls_back_to_the_swing():
    robot = SimRobot(handleit.envs.make("OpenCabinetDoor", obs_mode="pointcloud", split="test", max_episode_steps=50))
    solver = make_tree_solver("OpenCabinetDoor", robot.model)
    solver.reset(robot.reset(seed=0))
    names = [node.name for node in solver.root.iterate()]
    for node in ("door past handover angle?", "release handle", "move behind door leaf", "push leaf open",
                 "push contact?", "swing to handover", "swing open"):
        assert node in names, node
    # The fallback (the swing to the door's stop) comes after the push branch in one selector.
    selector = next(node for node in solver.root.iterate() if node.name == "open the door")
    assert [child.name for child in selector.children] == ["swing, then push", "swing open"]
    without = [node.name for node in create_door_tree(solver.tools, push=False).iterate()]
    assert "push contact?" not in without and "swing along hinge arc" in without
