"""Gripper pose sequences (approach, pull, hinge arc) and hinge estimation from handle motion."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from handleit.planning.trajectories import (
    estimate_hinge_from_motion,
    hinge_arc,
    linear_pull,
    pregrasp_approach,
    swept_angle_rad,
)


def _pose(rotvec, p):
    X = np.eye(4)
    X[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    X[:3, 3] = p
    return X


X_GRASP = _pose([0.0, np.pi / 2, 0.0], [1.0, 0.2, 0.6])  # approach (z_G) along +x, towards a cabinet


def test_pregrasp_approach_is_a_straight_line_along_the_approach_axis():
    poses = pregrasp_approach(X_GRASP, 0.1, 5)
    assert len(poses) == 6
    np.testing.assert_allclose(poses[-1], X_GRASP)
    np.testing.assert_allclose(poses[0][:3, 3], X_GRASP[:3, 3] - 0.1 * X_GRASP[:3, 2])
    steps = np.diff([X[:3, 3] for X in poses], axis=0)
    np.testing.assert_allclose(steps, np.repeat((0.02 * X_GRASP[:3, 2])[None], 5, axis=0), atol=1e-12)
    for X in poses:
        np.testing.assert_allclose(X[:3, :3], X_GRASP[:3, :3])


def test_linear_pull_along_the_opening_axis():
    poses = linear_pull(X_GRASP, [-2.0, 0.0, 0.0], 0.3, 3)  # axis normalized
    assert len(poses) == 4
    np.testing.assert_allclose(poses[0], X_GRASP)
    np.testing.assert_allclose(poses[-1][:3, 3], X_GRASP[:3, 3] + [-0.3, 0.0, 0.0])
    np.testing.assert_allclose(poses[1][:3, 3], X_GRASP[:3, 3] + [-0.1, 0.0, 0.0])
    for X in poses:
        np.testing.assert_allclose(X[:3, :3], X_GRASP[:3, :3])
    with pytest.raises(ValueError):
        linear_pull(X_GRASP, [0.0, 0.0, 0.0], 0.3, 3)
    with pytest.raises(ValueError):
        linear_pull(X_GRASP, [1.0, 0.0, 0.0], 0.3, 0)


def test_hinge_arc_keeps_the_radius_and_turns_the_orientation_with_the_door():
    hinge_point = np.array([1.0, 0.7, 0.0])  # vertical hinge 0.5 m to the left of the handle
    axis = np.array([0.0, 0.0, 1.0])
    angle = -np.pi / 3
    poses = hinge_arc(X_GRASP, hinge_point, axis * 3.0, angle, 12)
    assert len(poses) == 13
    np.testing.assert_allclose(poses[0], X_GRASP, atol=1e-12)
    for k, X in enumerate(poses):
        radial = X[:3, 3] - hinge_point
        radial -= (radial @ axis) * axis
        assert np.linalg.norm(radial) == pytest.approx(0.5, abs=1e-9)  # distance to the axis
        assert X[2, 3] == pytest.approx(X_GRASP[2, 3], abs=1e-12)  # height along the axis
        R_rel = X[:3, :3] @ X_GRASP[:3, :3].T
        np.testing.assert_allclose(Rotation.from_matrix(R_rel).as_rotvec(), axis * angle * k / 12, atol=1e-9)
        # The gripper's pose relative to the door stays the same: radial vector turned by the same rotation.
        np.testing.assert_allclose(X[:3, 3] - hinge_point, R_rel @ (X_GRASP[:3, 3] - hinge_point), atol=1e-9)


def _door_handle_path(hinge_point, axis, radius, start_angle, swept, n, noise_m, seed=0):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    e1 = np.cross(axis, [1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(axis, e1)
    t = start_angle + np.linspace(0.0, swept, n)
    p = hinge_point + radius * (np.cos(t)[:, None] * e1 + np.sin(t)[:, None] * e2)
    return p + np.random.default_rng(seed).normal(0.0, noise_m, p.shape)


@pytest.mark.parametrize("axis", [[0.0, 0.0, 1.0], [0.0, 0.0, -1.0], [0.05, -0.03, 1.0]])
def test_hinge_estimate_recovers_a_known_hinge_from_noisy_handle_positions(axis):
    hinge_point = np.array([1.2, 0.6, 0.7])
    radius = 0.45
    swept = 0.6  # 34 degrees of opening seen
    points = _door_handle_path(hinge_point, axis, radius, 0.3, swept, 30, noise_m=0.002)
    p_est, a_est, r_est = estimate_hinge_from_motion(points)
    a_true = np.asarray(axis) / np.linalg.norm(axis)
    assert np.degrees(np.arccos(np.clip(a_est @ a_true, -1, 1))) < 3.0  # sign: the handle turned positively
    offset = p_est - hinge_point
    assert np.linalg.norm(offset - (offset @ a_true) * a_true) < 0.02  # on the true axis
    assert r_est == pytest.approx(radius, abs=0.02)
    assert swept_angle_rad(points, p_est, a_est) == pytest.approx(swept, abs=0.05)
    # Continuing the arc from the last handle position keeps opening: further along the same circle.
    X_last = np.eye(4)
    X_last[:3, 3] = points[-1]
    ahead = hinge_arc(X_last, p_est, a_est, 0.2, 1)[-1][:3, 3]
    assert swept_angle_rad(np.vstack([points, ahead]), hinge_point, a_true) > swept + 0.1


def test_hinge_estimate_rejects_degenerate_input():
    with pytest.raises(ValueError, match="at least"):
        estimate_hinge_from_motion(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="moved"):
        estimate_hinge_from_motion(np.tile([1.0, 0.5, 0.7], (10, 1)))
    straight = np.linspace([1.0, 0.0, 0.7], [0.7, 0.0, 0.7], 20)  # a drawer: collinear positions
    with pytest.raises(ValueError, match="straight"):
        estimate_hinge_from_motion(straight)
    noisy_straight = straight + np.random.default_rng(1).normal(0.0, 0.001, straight.shape)
    with pytest.raises(ValueError):
        estimate_hinge_from_motion(noisy_straight)
    with pytest.raises(ValueError):
        estimate_hinge_from_motion(np.array([[0.0, 0.0, np.nan]] * 5))
    with pytest.raises(ValueError):
        estimate_hinge_from_motion(np.zeros((5, 2)))
