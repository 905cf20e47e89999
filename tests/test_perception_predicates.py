"""Predicates from perception (perception/predicates.py) on synthetic clouds: no simulator."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.perception import predicates as P

RNG = np.random.default_rng(0)
NORMAL_W = np.array([-1.0, 0.0, 0.0])  # a cabinet facing -x, as the bundled ones


def _plane_x(x_m, y_range, z_range, n=600, noise_m=0.001):
    """Points of a vertical face at x = x_m (a front)."""
    y = RNG.uniform(*y_range, n)
    z = RNG.uniform(*z_range, n)
    return np.stack([x_m + RNG.normal(0, noise_m, n), y, z], axis=1)


def _box_surface(lower, upper, n=2000):
    """Points on the surface of an axis-aligned box (all six faces)."""
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    p = RNG.uniform(lower, upper, (n, 3))
    axis = RNG.integers(0, 3, n)
    side = RNG.integers(0, 2, n)
    p[np.arange(n), axis] = np.where(side, upper[axis], lower[axis])
    return p


def _drawer(opening_m, depth_m=0.35):
    """A drawer front (x = -0.25 - opening) with its box behind it, in a body whose front is at x = -0.25."""
    front_x = -0.25 - opening_m
    front = _plane_x(front_x, (-0.2, 0.2), (0.4, 0.6))
    box = _box_surface([front_x, -0.18, 0.42], [front_x + depth_m, 0.18, 0.55])
    visible = box[box[:, 0] < -0.25]  # the part of the box out of the body
    part = np.concatenate([front, visible])
    frame = np.concatenate([_plane_x(-0.25, (-0.3, -0.21), (0.3, 0.7), 300),
                            _plane_x(-0.25, (0.21, 0.3), (0.3, 0.7), 300), _plane_x(-0.25, (-0.3, 0.3), (0.61, 0.7), 300)])
    top = np.stack([RNG.uniform(-0.25, 0.25, 800), RNG.uniform(-0.3, 0.3, 800), np.full(800, 0.9)], axis=1)
    return part, np.concatenate([frame, top])


@pytest.mark.parametrize("opening_m", [0.0, 0.01, 0.12, 0.3])
def test_opening_is_the_front_out_of_the_body(opening_m):
    part, body = _drawer(opening_m)
    assert P.estimate_opening_m(part, body, NORMAL_W) == pytest.approx(opening_m, abs=0.004)


def test_opening_unknown_without_body_or_part_points():
    part, body = _drawer(0.1)
    assert P.estimate_opening_m(part, body[:5], NORMAL_W) is None
    assert P.estimate_opening_m(part[:10], body, NORMAL_W) is None
    far_body = body + np.array([0.0, 2.0, 0.0])  # not around the part: some other furniture
    assert P.estimate_opening_m(part, far_body, NORMAL_W) is None


def test_open_and_closed_thresholds():
    assert P.evaluate_closed(0.005).holds and not P.evaluate_closed(0.03).holds
    assert not P.evaluate_closed(None).holds
    assert "travel unknown" in P.evaluate_open(0.3, None).evidence and not P.evaluate_open(0.3, None).holds
    assert P.evaluate_open(0.29, 0.30).holds  # 97% of the travel
    assert not P.evaluate_open(0.20, 0.30).holds  # a drawer open only partly is not Open
    assert "cm" in P.evaluate_open(0.20, 0.30).evidence


def _gripper_at(p_W):
    X = np.eye(4)
    X[:3, :3] = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]]).T  # approach (z) along world +x, fingers along world z
    X[:3, 3] = p_W
    return X


def test_grasped_needs_the_object_between_the_fingers():
    X_WT = _gripper_at([0.5, 0.0, 0.5])
    cube = _box_surface([0.485, -0.015, 0.485], [0.515, 0.015, 0.515], 500)  # a 3 cm cube in the hand
    assert P.evaluate_grasped(0.03, 0.08, cube, X_WT).holds
    assert not P.evaluate_grasped(0.002, 0.08, cube, X_WT).holds  # closed on each other
    assert not P.evaluate_grasped(0.079, 0.08, cube, X_WT).holds  # wide open
    dropped = cube - np.array([0.0, 0.0, 0.3])  # the cube fell 30 cm
    result = P.evaluate_grasped(0.03, 0.08, dropped, X_WT)
    assert not result.holds and "0 object points" in result.evidence


def test_fingers_held_apart_on_something_hidden_by_the_hand():
    """Commanded closed and standing still apart, the fingers hold something: Grasped with the object at the hand,
    or nowhere in view when last seen at the hand; not with it seen elsewhere (dropped), nor unseen since it was
    last seen elsewhere (the fingers on a drawer's handle); never HandEmpty."""
    X_WT = _gripper_at([0.5, 0.0, 0.5])
    cube = _box_surface([0.485, -0.015, 0.485], [0.515, 0.015, 0.515], 500)
    hidden = np.zeros((0, 3))
    assert not P.evaluate_grasped(0.03, 0.08, hidden, X_WT).holds  # no evidence but the gap: not believed
    result = P.evaluate_grasped(0.03, 0.08, hidden, X_WT, held_apart=True, last_seen_at_hand=True)
    assert result.holds and result.observed and "not in view" in result.evidence
    # Last seen elsewhere (on the table behind the robot), the fingers on a drawer's handle: not the object.
    assert not P.evaluate_grasped(0.03, 0.08, hidden, X_WT, held_apart=True, last_seen_at_hand=False).holds
    assert P.object_at_hand(cube, X_WT) and not P.object_at_hand(cube + 0.5, X_WT)
    assert P.object_at_hand(hidden, X_WT) is None
    behind_the_hand = cube + np.array([-0.05, 0.0, 0.0])  # its far half seen, none between the pads' box
    assert P.evaluate_grasped(0.03, 0.08, behind_the_hand, X_WT, held_apart=True).holds
    dropped = cube - np.array([0.0, 0.0, 0.3])
    assert not P.evaluate_grasped(0.03, 0.08, dropped, X_WT, held_apart=True).holds
    assert not P.evaluate_grasped(0.002, 0.08, hidden, X_WT, held_apart=True).holds  # closed on each other
    assert P.evaluate_hand_empty(0.03, hidden, X_WT).holds
    result = P.evaluate_hand_empty(0.03, hidden, X_WT, held_apart=True)
    assert not result.holds and "apart on something" in result.evidence
    assert P.evaluate_hand_empty(0.002, hidden, X_WT, held_apart=True).holds


def test_hand_empty():
    X_WT = _gripper_at([0.5, 0.0, 0.5])
    cube = _box_surface([0.485, -0.015, 0.485], [0.515, 0.015, 0.515], 500)
    assert P.evaluate_hand_empty(0.002, cube, X_WT).holds
    assert not P.evaluate_hand_empty(0.03, cube, X_WT).holds
    assert P.evaluate_hand_empty(0.08, cube + np.array([0.3, 0, 0]), X_WT).holds


def test_inside_of_an_open_drawer():
    part, _ = _drawer(0.3)
    cube_in = _box_surface([-0.45, -0.03, 0.43], [-0.40, 0.03, 0.48], 300)
    cube_out = cube_in + np.array([-0.5, 0.0, 0.0])  # in front of the drawer
    cube_above = cube_in + np.array([0.0, 0.0, 0.4])  # held well above it
    assert P.evaluate_inside_of(cube_in, part, NORMAL_W).holds
    assert not P.evaluate_inside_of(cube_out, part, NORMAL_W).holds
    assert not P.evaluate_inside_of(cube_above, part, NORMAL_W).holds
    assert "object not seen" in P.evaluate_inside_of(cube_in[:2], part, NORMAL_W).evidence


def test_on_top_of_a_table():
    table = np.stack([RNG.uniform(0.3, 1.1, 3000), RNG.uniform(-0.4, 0.4, 3000),
                      0.75 + RNG.normal(0, 0.001, 3000)], axis=1)
    table = np.concatenate([table, _plane_x(0.3, (-0.4, 0.4), (0.0, 0.74), 500)])  # and its front panel
    cube_on = _box_surface([0.6, 0.0, 0.75], [0.64, 0.04, 0.79], 300)
    cube_on = cube_on[cube_on[:, 2] > 0.752]  # the bottom face is hidden by the table
    assert P.evaluate_on_top_of(cube_on, table).holds
    lifted = cube_on + np.array([0.0, 0.0, 0.1])
    result = P.evaluate_on_top_of(lifted, table)
    assert not result.holds and "above the plane" in result.evidence
    beside = cube_on + np.array([1.0, 0.0, 0.0])  # at table height, but off its edge
    assert not P.evaluate_on_top_of(beside, table).holds
    wall = _plane_x(0.0, (-1, 1), (0.7, 0.71), 1000)  # a vertical strip: no horizontal top
    assert "tilted" in P.evaluate_on_top_of(cube_on, wall).evidence
    # Seen from the side, a table's front panel holds more points than its top: the top still supports.
    side_heavy = np.concatenate([table[:300], _plane_x(0.3, (-0.4, 0.4), (0.0, 0.74), 3000)])
    assert P.evaluate_on_top_of(cube_on, side_heavy).holds


def test_inside_of_a_closed_drawer_is_not_observed():
    part, _ = _drawer(0.0)  # the front only
    cube = _box_surface([-0.20, -0.03, 0.43], [-0.15, 0.03, 0.48], 300)
    result = P.evaluate_inside_of(cube, part, NORMAL_W)
    assert not result.observed and "not seen" in result.evidence


def test_opening_tracker_bridges_steps_without_the_body():
    part, body = _drawer(0.10)
    tracker = P.OpeningTracker()
    assert tracker.update(part, body, NORMAL_W, displacement_m=None)[1] == "body front"
    opening, source = tracker.update(part, body, NORMAL_W, displacement_m=0.02)
    assert source == "body front" and opening == pytest.approx(0.10, abs=0.004)
    part2, _ = _drawer(0.25)  # pulled further, the body hidden by the arm
    opening, source = tracker.update(part2, body[:3], NORMAL_W, displacement_m=0.17)
    assert source == "displacement" and opening == pytest.approx(0.25, abs=0.005)
    assert P.OpeningTracker().update(part2, body[:3], NORMAL_W, 0.17) == (None, "not seen")


def test_an_opening_read_behind_the_body_is_not_a_measurement():
    """A drawer's front never stands behind the body's: a part whose front layer is unseen (only its box's
    back, 6 cm behind the body's front) gives no opening, not Closed."""
    part, body = _drawer(0.0)
    hidden_front = part[part[:, 0] > -0.19]  # nothing of the front: points 6 cm or more behind the body's front
    hidden_front = np.concatenate([hidden_front, _plane_x(-0.19, (-0.2, 0.2), (0.42, 0.55), 300)])
    assert P.estimate_opening_m(hidden_front, body, NORMAL_W) < -P.MAX_BEHIND_BODY_M
    tracker = P.OpeningTracker()
    assert tracker.update(hidden_front, body, NORMAL_W) == (None, "not seen")
    # Nor is a displacement that would put it there (the part's displacement misread from a new viewpoint).
    tracker.update(part, body, NORMAL_W, displacement_m=0.0)
    assert tracker.update(hidden_front, body[:3], NORMAL_W, displacement_m=-0.06) == (None, "not seen")
    assert not P.evaluate_closed(None).observed


def test_an_opening_seen_from_beside_the_cabinet_is_not_a_measurement():
    """Edge-on, the body's front and the drawer's front layer cannot be told apart: a view more than 75 degrees
    off the front's normal measures nothing, not even through the part's displacement."""
    part, body = _drawer(0.10)
    centre = part.mean(axis=0)
    in_front = centre + np.array([-1.0, 0.3, 0.8])
    beside = centre + np.array([0.1, 1.0, 0.8])  # a little behind the front's plane
    assert P.view_angle_rad(part, NORMAL_W, in_front) == pytest.approx(np.arctan2(0.3, 1.0), abs=1e-6)
    assert P.view_angle_rad(part, NORMAL_W, beside) > np.radians(90.0)
    tracker = P.OpeningTracker()
    opening, source = tracker.update(part, body, NORMAL_W, displacement_m=0.0, viewpoint_W=in_front)
    assert source == "body front" and opening == pytest.approx(0.10, abs=0.004)
    assert P.OpeningTracker().update(part, body, NORMAL_W, viewpoint_W=beside) == (None, "seen from beside")
    assert tracker.update(part, body, NORMAL_W, displacement_m=-0.1, viewpoint_W=beside) == (None, "seen from beside")
    assert P.evaluate_closed(None).observed is False  # the predicate keeps what it last saw
    with pytest.raises(ValueError, match="no part points"):
        P.view_angle_rad(np.zeros((0, 3)), NORMAL_W, in_front)
