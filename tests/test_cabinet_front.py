"""The cabinet's front from its points (perception/cabinet_front.py): its floor rectangle from a partial view, the
side the target handle stands out of, the sides a viewpoint looks at squarely, and the look-out stand-offs. Plain
numpy, synthetic clouds: a box cabinet turned by 30 degrees, its front toward its -x with a drawer and handle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from handleit.perception.cabinet_front import (
    estimate_cabinet_rectangle,
    front_side,
    l_shape_axes,
    side_normals,
    side_standoff_xy_yaw,
    sides_seen_from,
)
from handleit.perception.place_targets import PlaceTargetError

YAW = math.radians(30.0)
R = np.array([[math.cos(YAW), -math.sin(YAW)], [math.sin(YAW), math.cos(YAW)]])
CENTRE = np.array([0.5, -0.2])
DEPTH, WIDTH, HEIGHT = 0.5, 0.9, 0.8  # along the cabinet's x (front at -x), y, z


def _to_W(local_xyz: np.ndarray) -> np.ndarray:
    out = local_xyz.copy()
    out[:, :2] = local_xyz[:, :2] @ R.T + CENTRE
    return out


def _face(x=None, y=None, n=400, seed=0):
    """Points on a vertical face of the body (x = const or y = const, cabinet frame)."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(0.05, HEIGHT, n)
    if x is not None:
        return np.stack([np.full(n, x), rng.uniform(-WIDTH / 2, WIDTH / 2, n), z], axis=1)
    return np.stack([rng.uniform(-DEPTH / 2, DEPTH / 2, n), np.full(n, y), z], axis=1)


def _front_panel_and_handle(handle_y=0.1):
    rng = np.random.default_rng(1)
    panel = np.stack([np.full(200, -DEPTH / 2 - 0.01), rng.uniform(-0.2, 0.4, 200), rng.uniform(0.5, 0.7, 200)], axis=1)
    handle = np.stack([np.full(30, -DEPTH / 2 - 0.04), rng.uniform(handle_y - 0.06, handle_y + 0.06, 30),
                       np.full(30, 0.6)], axis=1)
    return _to_W(panel), _to_W(handle)


def _front_normal_W():
    return R @ np.array([-1.0, 0.0])


def _side_index(rect, direction):
    normals, _ = side_normals(rect)
    return int(np.argmax(normals @ direction))


def test_the_rectangle_of_a_whole_cabinet_fits_its_body():
    points = _to_W(np.vstack([_face(x=-DEPTH / 2), _face(x=DEPTH / 2), _face(y=-WIDTH / 2), _face(y=WIDTH / 2)]))
    rect = estimate_cabinet_rectangle(points)
    assert np.allclose(rect.center_W, CENTRE, atol=0.02)
    assert np.allclose(sorted(2 * rect.half_extent_m), sorted([DEPTH, WIDTH]), atol=0.03)
    assert rect.half_extent_m[0] >= rect.half_extent_m[1]  # the first axis the longer side
    assert abs(abs(float(rect.axes_W[0] @ (R @ np.array([0.0, 1.0])))) - 1.0) < 1e-3  # along the cabinet's width


def test_a_cabinet_seen_from_a_corner_keeps_its_heading():
    """Two faces seen, an L: the smallest rectangle around a right triangle along its hypotenuse has the area of
    the one along its legs, so the heading comes from the sides the points hug (l_shape_axes)."""
    corner_view = _to_W(np.vstack([_face(x=-DEPTH / 2, seed=2), _face(y=-WIDTH / 2, seed=3)]))
    axes = l_shape_axes(corner_view[:, :2])
    width_axis = R @ np.array([0.0, 1.0])
    assert abs(abs(float(axes[0] @ width_axis)) - 1.0) < 1e-3 or abs(abs(float(axes[1] @ width_axis)) - 1.0) < 1e-3
    rect = estimate_cabinet_rectangle(corner_view, np.array([*CENTRE, 0.6]))
    assert abs(abs(float(rect.axes_W[0] @ width_axis)) - 1.0) < 1e-3  # the longer side along the width
    assert np.allclose(rect.center_W, CENTRE, atol=0.03)
    assert np.allclose(2 * rect.half_extent_m, [WIDTH, DEPTH], atol=0.03)


def test_a_cabinet_seen_from_behind_only_is_grown_away_from_the_viewer_to_hold_the_prompt():
    back = _to_W(_face(x=DEPTH / 2))  # one flat face: the min-area rectangle is a line
    viewer = CENTRE + 2.0 * (R @ np.array([1.0, 0.0]))
    prompt = np.array([*CENTRE, 0.6])  # the drawer's centre, mid-depth
    rect = estimate_cabinet_rectangle(back, prompt, viewpoint_xy=viewer)
    normals, dist = side_normals(rect)
    back_side = _side_index(rect, R @ np.array([1.0, 0.0]))
    local_prompt = (prompt[:2] - rect.center_W) @ normals.T - dist
    assert np.all(local_prompt <= -0.1 + 1e-9)  # the prompt inside, 10 cm to spare
    # The back face is where it was seen; the rectangle reaches from it toward the hidden front.
    face = rect.center_W + dist[back_side] * normals[back_side]
    assert abs(float((face - CENTRE) @ normals[back_side]) - DEPTH / 2) < 0.02
    with pytest.raises(PlaceTargetError, match="points"):
        estimate_cabinet_rectangle(back[:10])


def test_the_front_is_the_side_the_handle_stands_out_of():
    body = _to_W(np.vstack([_face(x=DEPTH / 2), _face(y=-WIDTH / 2)]))
    panel, handle = _front_panel_and_handle()
    rect = estimate_cabinet_rectangle(np.vstack([body, panel, handle]), np.array([*CENTRE, 0.6]))
    k = front_side(rect, handle, panel)
    assert k == _side_index(rect, _front_normal_W())
    # An occluded panel (its centroid far aside from the handle) does not change the side.
    assert front_side(rect, handle, panel[panel[:, 1] > np.median(panel[:, 1])]) == k
    # A handle behind its panel along that side is no front (a mis-segmented view): unsure.
    assert front_side(rect, handle, panel + np.array([*(0.1 * _front_normal_W()), 0.0])) is None
    # At a corner of the rectangle: unsure.
    corner = rect.center_W + rect.half_extent_m[0] * rect.axes_W[0] + rect.half_extent_m[1] * rect.axes_W[1]
    assert front_side(rect, np.array([[*corner, 0.6]])) is None
    with pytest.raises(PlaceTargetError, match="no handle points"):
        front_side(rect, np.zeros((0, 3)))


def test_sides_seen_squarely_and_the_look_out_stand_offs():
    points = _to_W(np.vstack([_face(x=-DEPTH / 2), _face(x=DEPTH / 2), _face(y=-WIDTH / 2), _face(y=WIDTH / 2)]))
    rect = estimate_cabinet_rectangle(points)
    front = _side_index(rect, _front_normal_W())
    xy, yaw = side_standoff_xy_yaw(rect, front, 1.3)
    assert np.allclose(xy, CENTRE + (DEPTH / 2 + 1.3) * _front_normal_W(), atol=0.03)
    assert abs(math.remainder(yaw - math.atan2(-_front_normal_W()[1], -_front_normal_W()[0]), 2 * math.pi)) < 1e-6
    seen = sides_seen_from(rect, xy)
    assert seen[front] and seen.sum() == 1  # straight in front: that side only
    diagonal = CENTRE + 8.0 * (R @ np.array([-1.0, -1.0])) / math.sqrt(2)
    assert sides_seen_from(rect, diagonal).sum() == 2  # from a corner's diagonal: both sides at 45 degrees
    assert sides_seen_from(rect, CENTRE).sum() == 0  # from inside: none
    # In line with a target on the side (the handle), not the side's centre.
    handle_W = CENTRE + R @ np.array([-DEPTH / 2, 0.3])
    xy, _ = side_standoff_xy_yaw(rect, front, 1.0, target_W=handle_W)
    assert np.allclose(xy, handle_W + 1.0 * _front_normal_W(), atol=0.03)
    with pytest.raises(ValueError, match="side"):
        side_standoff_xy_yaw(rect, 4, 1.0)
    with pytest.raises(ValueError, match="distance_m"):
        side_standoff_xy_yaw(rect, 0, 0.0)
