"""Grasps on synthetic handles seen one-sided (front and above only), sparse and noisy, as the robot's cameras
see them: horizontal and vertical bars, knobs, lips, on fronts facing -x and on yawed cabinets."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.perception.handle_grasps import (
    PANDA_MAX_OPENING_M,
    flipped_grasp_pose,
    pregrasp_pose,
    sample_handle_grasps,
)
from handleit.types import Grasp

NOISE_M = 0.001
FRONT_X_M = -0.3  # the front's surface in the world when the cabinet is not yawed
CAMERA_C = np.array([-1.5, 0.3, 1.5])  # a robot camera, 1.5 m high, in front of the cabinet (cabinet frame)


# ---------------------------------------------------------------------------------------------- synthetic scenes
# Cabinet frame C: the front's surface is x = 0 with outward normal -x, z up, floor at z = 0. Shapes are
# sampled on their whole surface, then back-face culled toward the camera: for convex parts that is exactly
# the one-sided view (the underside and the back are never seen).


def _box(center, size, n, rng):
    center, size = np.asarray(center, float), np.asarray(size, float)
    areas = np.array([size[1] * size[2], size[0] * size[2], size[0] * size[1]])
    axis = rng.choice(3, size=n, p=np.repeat(areas, 1) / areas.sum())
    sign = rng.choice([-1.0, 1.0], size=n)
    local = rng.uniform(-0.5, 0.5, size=(n, 3)) * size
    normals = np.zeros((n, 3))
    local[np.arange(n), axis] = sign * size[axis] / 2
    normals[np.arange(n), axis] = sign
    return center + local, normals


def _cylinder(center, axis, radius, length, n, rng):
    """A capped cylinder around axis 0/1/2 (x/y/z)."""
    theta = rng.uniform(0, 2 * np.pi, n)
    along = rng.uniform(-length / 2, length / 2, n)
    others = [i for i in range(3) if i != axis]
    local, normals = np.zeros((n, 3)), np.zeros((n, 3))
    local[:, axis] = along
    local[:, others[0]] = radius * np.cos(theta)
    local[:, others[1]] = radius * np.sin(theta)
    normals[:, others[0]] = np.cos(theta)
    normals[:, others[1]] = np.sin(theta)
    return np.asarray(center, float) + local, normals


def _sphere(center, radius, n, rng):
    normals = rng.normal(size=(n, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    return np.asarray(center, float) + radius * normals, normals


def _seen(parts, n_visible, rng):
    """Back-face culling toward the camera, then ``n_visible`` points with depth noise."""
    points = np.concatenate([p for p, _ in parts])
    normals = np.concatenate([n for _, n in parts])
    facing = np.einsum("ij,ij->i", normals, CAMERA_C - points) > 0
    points = points[facing]
    points = points[rng.choice(len(points), size=min(n_visible, len(points)), replace=False)]
    return points + rng.normal(scale=NOISE_M, size=points.shape)


def handle_points_C(shape, rng, n_visible=40, z0=0.7):
    """(points, true grasp centre, front-most x of the handle) of one handle in the cabinet frame."""
    if shape in ("horizontal_bar", "vertical_bar"):
        thick, standoff, length = 0.02, 0.035, 0.2
        axis = 1 if shape == "horizontal_bar" else 2
        centre = np.array([-(standoff + thick / 2), 0.0, z0])
        bar = _cylinder(centre, axis, thick / 2, length, 4000, rng)
        posts = []
        for sign in (-1, 1):
            c = np.array([-standoff / 2, 0.0, z0])
            c[axis] += sign * (length / 2 - 0.005)
            posts.append(_cylinder(c, 0, 0.006, standoff, 400, rng))
        parts = [bar, *posts]
        return _seen(parts, n_visible, rng), centre, -(standoff + thick)
    if shape == "knob":
        standoff, r = 0.035, 0.018
        centre = np.array([-(standoff + r), 0.0, z0])
        parts = [_sphere(centre, r, 3000, rng), _cylinder([-standoff / 2, 0, z0], 0, 0.006, standoff, 300, rng)]
        return _seen(parts, n_visible, rng), centre, -(standoff + 2 * r)
    if shape in ("drawer_lip", "door_lip"):
        protrusion, thick, length = 0.03, 0.015, 0.3
        size = (protrusion, length, thick) if shape == "drawer_lip" else (protrusion, thick, length)
        centre = np.array([-protrusion / 2, 0.0, z0])
        return _seen([_box(centre, size, 6000, rng)], n_visible, rng), centre, -protrusion
    raise ValueError(shape)


def front_points_C(rng, n=2000, z0=0.7):
    """The front panel around a handle: y in +-0.25 m, z0 +- 0.2 m, at x = 0."""
    y = rng.uniform(-0.25, 0.25, n)
    z = rng.uniform(z0 - 0.2, z0 + 0.2, n)
    return np.stack([rng.normal(scale=NOISE_M, size=n), y, z], axis=1)


def X_WC(yaw_rad=0.0):
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    X = np.eye(4)
    X[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    X[:3, 3] = [FRONT_X_M, 0.1, 0.0]
    return X


def to_W(X, p_C):
    return p_C @ X[:3, :3].T + X[:3, 3]


def scene(shape, yaw_rad=0.0, seed=0, n_visible=40):
    rng = np.random.default_rng(seed)
    p_C, centre_C, front_x_C = handle_points_C(shape, rng, n_visible)
    X = X_WC(yaw_rad)
    normal_W = X[:3, :3] @ np.array([-1.0, 0.0, 0.0])
    link_W = np.concatenate([to_W(X, front_points_C(rng)), to_W(X, p_C)])
    return to_W(X, p_C), link_W, to_W(X, centre_C), front_x_C, normal_W, X


def check_frame(grasp: Grasp):
    R = grasp.X_WG[:3, :3]
    assert np.allclose(R.T @ R, np.eye(3), atol=1e-9)
    assert np.isclose(np.linalg.det(R), 1.0)
    assert np.allclose(R[:, 0], np.cross(R[:, 1], R[:, 2]))  # x = y cross z
    assert np.allclose(grasp.X_WG[3], [0, 0, 0, 1])


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("yaw_deg", [0.0, 20.0, -20.0])
@pytest.mark.parametrize("given_normal", [True, False])
def test_horizontal_bar_grasped_at_its_centre_closing_vertically(yaw_deg, given_normal):
    handle_W, link_W, centre_W, front_x_C, normal_W, X = scene("horizontal_bar", np.radians(yaw_deg))
    grasps = sample_handle_grasps(handle_W, normal_W if given_normal else None, link_points_W=link_W)
    assert grasps, "no grasp on a plain horizontal bar"
    best = grasps[0]
    check_frame(best)
    R, p_WG = best.X_WG[:3, :3], best.X_WG[:3, 3]
    assert abs(R[:, 1] @ [0, 0, 1]) > 0.999  # closing axis vertical
    assert R[:, 2] @ -normal_W > 0.999  # approach into the front (+x for a front facing -x)
    if yaw_deg == 0.0:
        assert R[:, 2] @ [1, 0, 0] > 0.999
    # In the front's plane the grasp is at the bar's centre; in depth, between its front surface and axis-ish.
    p_C = (p_WG - X[:3, 3]) @ X[:3, :3]
    centre_C = (centre_W - X[:3, 3]) @ X[:3, :3]
    assert np.linalg.norm(p_C[1:] - centre_C[1:]) < 0.01
    assert front_x_C < p_C[0] < -0.01  # behind the handle's front, fingertips clear of the panel
    assert 0.02 <= best.width_m <= PANDA_MAX_OPENING_M
    assert [g.score for g in grasps] == sorted((g.score for g in grasps), reverse=True)


@pytest.mark.parametrize("yaw_deg", [0.0, 20.0])
def test_vertical_bar_closes_horizontally_along_the_front(yaw_deg):
    handle_W, link_W, centre_W, _, normal_W, _ = scene("vertical_bar", np.radians(yaw_deg))
    grasps = sample_handle_grasps(handle_W, normal_W, link_points_W=link_W)
    assert grasps
    R = grasps[0].X_WG[:3, :3]
    check_frame(grasps[0])
    assert abs(R[:, 1][2]) < 1e-9  # closing axis horizontal ...
    assert abs(R[:, 1] @ normal_W) < 1e-9  # ... and parallel to the front
    assert R[:, 2] @ -normal_W > 0.999
    in_plane = grasps[0].X_WG[:3, 3] - centre_W
    in_plane -= (in_plane @ normal_W) * normal_W
    assert np.linalg.norm(in_plane) < 0.01


def test_knob_gets_both_orientations_at_its_centre():
    handle_W, link_W, centre_W, front_x_C, normal_W, X = scene("knob", n_visible=30)
    grasps = sample_handle_grasps(handle_W, normal_W, link_points_W=link_W)
    closings = {round(abs(g.X_WG[2, 1])) for g in grasps}  # 1: vertical closing, 0: horizontal
    assert closings == {0, 1}
    best = grasps[0]
    assert np.linalg.norm(best.X_WG[1:3, 3] - centre_W[1:3]) < 0.01
    assert best.width_m <= PANDA_MAX_OPENING_M
    p_C = (best.X_WG[:3, 3] - X[:3, 3]) @ X[:3, :3]
    assert front_x_C < p_C[0] < -0.01


@pytest.mark.parametrize("shape, vertical_closing", [("drawer_lip", True), ("door_lip", False)])
def test_lips_close_across_their_thickness_without_touching_the_front(shape, vertical_closing):
    handle_W, link_W, centre_W, front_x_C, normal_W, X = scene(shape, n_visible=60)
    grasps = sample_handle_grasps(handle_W, normal_W, link_points_W=link_W)
    assert grasps
    best = grasps[0]
    assert (abs(best.X_WG[2, 1]) > 0.999) == vertical_closing
    p_C = (best.X_WG[:3, 3] - X[:3, 3]) @ X[:3, :3]
    # The tool centre is inside the 3 cm lip and at least 1.5 cm off the front (the fingertips reach 1 cm).
    assert front_x_C < p_C[0] <= -0.015 + 1e-9
    # Across the lip, centred on its 1.5 cm thickness (within a few mm); along it, near the middle.
    across = 2 if vertical_closing else 1
    assert abs(p_C[across] - (centre_W - X[:3, 3])[across]) < 0.005
    assert best.width_m < 0.05


def test_sparse_handle_still_gives_grasps():
    handle_W, link_W, centre_W, _, normal_W, _ = scene("horizontal_bar", n_visible=10, seed=3)
    grasps = sample_handle_grasps(handle_W, normal_W, link_points_W=link_W)
    assert grasps and abs(grasps[0].X_WG[2, 1]) > 0.999
    assert np.linalg.norm(grasps[0].X_WG[1:3, 3] - centre_W[1:3]) < 0.02


def test_too_wide_or_empty_gives_no_grasp():
    normal_W = np.array([-1.0, 0.0, 0.0])
    assert sample_handle_grasps(np.zeros((0, 3)), normal_W) == []
    # A 12 cm square block: no closing direction fits in 8 cm.
    rng = np.random.default_rng(0)
    block = rng.uniform([-0.35, -0.06, 0.64], [-0.33, 0.06, 0.76], size=(200, 3))
    assert sample_handle_grasps(block, normal_W) == []


def test_link_points_that_fit_no_front_give_no_grasp():
    """No front normal given, and the part seen as a few scattered points: no front to approach, no grasps; an
    invalid point to orient the normal by is still named."""
    handle_W, *_ = scene("horizontal_bar")
    scattered = np.random.default_rng(0).uniform([-0.6, -0.3, 0.2], [-0.1, 0.3, 0.8], (14, 3))
    assert sample_handle_grasps(handle_W, None, link_points_W=scattered) == []
    assert sample_handle_grasps(handle_W, None, link_points_W=np.zeros((0, 3))) == []
    with pytest.raises(ValueError, match="toward_W"):
        sample_handle_grasps(handle_W, None, link_points_W=scattered, toward_W=[np.nan, 0.0, 0.0])


def test_bad_input_names_the_problem():
    handle_W, *_ = scene("horizontal_bar")
    with pytest.raises(ValueError, match="front_normal_W or link_points_W"):
        sample_handle_grasps(handle_W)
    with pytest.raises(ValueError, match="NaN"):
        sample_handle_grasps(np.array([[np.nan, 0, 0], [0, 0, 0], [1, 1, 1]]), [-1, 0, 0])
    with pytest.raises(ValueError, match=r"shape \[N, 3\]"):
        sample_handle_grasps(np.zeros((5, 2)), [-1, 0, 0])
    with pytest.raises(ValueError, match="nearly vertical"):
        sample_handle_grasps(handle_W, [0, 0, 1])


def test_pregrasp_backs_off_along_the_approach():
    handle_W, link_W, _, _, normal_W, _ = scene("horizontal_bar", np.radians(20))
    X_WG = sample_handle_grasps(handle_W, normal_W, link_points_W=link_W)[0].X_WG
    X_WP = pregrasp_pose(X_WG, 0.1)
    assert np.allclose(X_WP[:3, :3], X_WG[:3, :3])
    assert np.allclose(X_WP[:3, 3], X_WG[:3, 3] + 0.1 * normal_W, atol=1e-9)  # back out of the front
    flipped = flipped_grasp_pose(X_WG)
    assert np.allclose(flipped[:3, 2], X_WG[:3, 2]) and np.allclose(flipped[:3, 1], -X_WG[:3, 1])
    assert np.allclose(flipped[:3, 3], X_WG[:3, 3])


def test_merged_sparse_frames_give_a_centred_grasp():
    """Ten-point frames merged by a HandleAccumulator (Let's Handle It (arXiv 2202.11792): until 50 points) centre the
    grasp."""
    from handleit.perception.handle_points import HandleAccumulator

    accumulator = HandleAccumulator()
    for seed in range(10):
        handle_W, link_W, centre_W, _, normal_W, _ = scene("horizontal_bar", np.radians(20), seed=seed, n_visible=10)
        accumulator.add(handle_W)
        if accumulator.ready:
            break
    assert accumulator.ready and accumulator.n_points >= 50 and accumulator.n_steps < 10  # some voxels repeat
    grasps = sample_handle_grasps(accumulator.points, normal_W, link_points_W=link_W)
    in_plane = grasps[0].X_WG[:3, 3] - centre_W
    in_plane -= (in_plane @ normal_W) * normal_W
    assert np.linalg.norm(in_plane) < 0.01
