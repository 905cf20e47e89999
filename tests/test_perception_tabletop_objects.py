"""Objects on a table from partial point clouds: the table's height, the object's centre, footprint and top."""

from __future__ import annotations

import math

import numpy as np
import pytest

from handleit.perception.tabletop_objects import (
    estimate_support_height,
    estimate_tabletop_object,
    min_area_rectangle,
    top_down_grasps,
)


def _partial_cube(centre_xy, yaw, half=0.02, spacing=0.004):
    """What a camera on the -x side above sees of a cube resting on z = 0: its top and its -x face."""
    u = np.arange(-half, half + 1e-9, spacing)
    a, b = np.meshgrid(u, u)
    top = np.stack([a.ravel(), b.ravel(), np.full(a.size, 2 * half)], axis=1)
    side = np.stack([np.full(a.size, -half), a.ravel(), b.ravel() + half], axis=1)
    c, s = math.cos(yaw), math.sin(yaw)
    R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    return np.concatenate([top, side]) @ R.T + [centre_xy[0], centre_xy[1], 0.0]


def test_centre_of_a_partially_seen_cube_is_its_true_centre():
    points = _partial_cube((0.05, -0.03), yaw=0.5)
    assert abs(points.mean(axis=0)[2] - 0.02) > 0.005  # the plain mean lies high
    obj = estimate_tabletop_object(points, support_z=0.0)
    np.testing.assert_allclose(obj.center_W, [0.05, -0.03, 0.02], atol=0.002)
    assert obj.top_z == pytest.approx(0.04) and obj.height_m == pytest.approx(0.04)
    np.testing.assert_allclose(np.sort(obj.footprint_extent_m), [0.04, 0.04], atol=0.002)
    # The footprint's axes are the cube's faces (yaw 0.5 rad, up to quarter turns).
    angle = math.atan2(obj.footprint_axes_W[0, 1], obj.footprint_axes_W[0, 0]) % (math.pi / 2)
    assert angle == pytest.approx(0.5, abs=0.02)


def test_support_height_is_the_table_not_the_floor():
    rng = np.random.default_rng(0)
    cube = _partial_cube((0.0, 0.0), yaw=0.2)
    table = np.column_stack([rng.uniform(-0.3, 0.3, (2000, 2)), np.zeros(2000)])
    floor = np.column_stack([rng.uniform(-0.3, 0.3, (500, 2)), np.full(500, -0.92)])
    assert estimate_support_height(np.concatenate([table, floor]), cube) == pytest.approx(0.0, abs=1e-6)
    assert estimate_support_height(floor[:5], cube) is None  # too few points near it


def test_min_area_rectangle_and_bad_input():
    xy = np.array([[0, 0], [2, 0], [2, 1], [0, 1], [1, 0.5]], dtype=float)
    centre, axes, extent = min_area_rectangle(xy)
    np.testing.assert_allclose(centre, [1.0, 0.5], atol=1e-9)
    np.testing.assert_allclose(np.sort(extent), [1.0, 2.0], atol=1e-9)
    assert np.allclose(np.abs(axes @ axes.T), np.eye(2))
    with pytest.raises(ValueError):
        estimate_tabletop_object(np.zeros((0, 3)))
    with pytest.raises(ValueError):
        estimate_tabletop_object(np.full((3, 3), np.nan))


def test_min_area_rectangle_of_a_turned_line_lies_along_it():
    """Collinear points (a closed drawer's front seen from above) have no hull: the rectangle lies along their line,
    not the frame's axes (which gave a front turned by 0.4 rad a 20 x 48 cm box, read as an open drawer)."""
    t = np.linspace(-0.25, 0.25, 40)
    direction = np.array([math.cos(1.17), math.sin(1.17)])
    centre, axes, extent = min_area_rectangle(np.array([0.6, 0.9]) + t[:, None] * direction)
    np.testing.assert_allclose(centre, [0.6, 0.9], atol=1e-9)
    assert abs(abs(axes[0] @ direction) - 1.0) < 1e-9 and abs(axes[1] @ direction) < 1e-9
    np.testing.assert_allclose(extent, [0.5, 0.0], atol=1e-9)
    _, axes, extent = min_area_rectangle(np.array([[0.3, 0.2]] * 3))  # one place: the frame's axes, no size
    np.testing.assert_allclose(axes, np.eye(2))
    np.testing.assert_allclose(extent, [0.0, 0.0])


def test_top_down_grasps_close_across_the_footprint():
    obj = estimate_tabletop_object(_partial_cube((0.05, -0.03), yaw=0.5), support_z=0.0)
    grasps = top_down_grasps(obj)
    assert len(grasps) == 2  # across either pair of faces
    for g in grasps:
        np.testing.assert_allclose(g.X_WG[:3, 3], [0.05, -0.03, 0.02], atol=0.002)
        np.testing.assert_allclose(g.X_WG[:3, 2], [0.0, 0.0, -1.0])  # straight down
        closing_angle = math.atan2(g.X_WG[1, 1], g.X_WG[0, 1]) % (math.pi / 2)
        assert closing_angle == pytest.approx(0.5, abs=0.02)  # across the faces, not the diagonal
        assert g.width_m == pytest.approx(0.05, abs=0.003)  # 4 cm plus 5 mm each side
        np.testing.assert_allclose(g.X_WG[:3, :3].T @ g.X_WG[:3, :3], np.eye(3), atol=1e-9)
    wide = estimate_tabletop_object(_partial_cube((0.0, 0.0), yaw=0.0, half=0.05), support_z=0.0)
    assert top_down_grasps(wide) == []  # 10 cm across: wider than the open hand
