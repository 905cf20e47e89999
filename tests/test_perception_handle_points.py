"""Handle points merged over steps (Let's Handle It (arXiv 2202.11792): 50 points or ten steps), the handle's frame and
its shape."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.perception.handle_points import (
    HandleAccumulator,
    classify_handle_shape,
    estimate_handle_frame,
)

FRONT_NORMAL_W = np.array([-1.0, 0.0, 0.0])


def bar_points(rng, n, axis=(0.0, 1.0, 0.0), length_m=0.2, centre=(-0.345, 0.1, 0.7), thick_m=0.02):
    """Points on the front and top of a bar (box) along ``axis`` in a front facing -x, 1 mm noise."""
    axis = np.asarray(axis, float)
    across = np.cross([1.0, 0.0, 0.0], axis)  # in the front's plane, across the bar
    s = rng.uniform(-length_m / 2, length_m / 2, n)
    t = rng.uniform(-thick_m / 2, thick_m / 2, n)
    front = np.asarray(centre) + s[:, None] * axis + t[:, None] * across - [thick_m / 2, 0, 0]
    return front + rng.normal(scale=0.001, size=front.shape)


def test_ready_after_50_points():
    rng = np.random.default_rng(0)
    acc = HandleAccumulator()
    acc.add(bar_points(rng, 30))
    assert not acc.ready and acc.n_steps == 1 and acc.n_points == 30
    acc.add(bar_points(rng, 30))
    assert acc.ready and acc.n_steps == 2 and 50 <= acc.n_points <= 60


def test_ready_after_ten_steps_with_few_points():
    rng = np.random.default_rng(1)
    acc = HandleAccumulator()
    for step in range(10):
        assert not acc.ready, step
        acc.add(bar_points(rng, 2))
    assert acc.ready and acc.n_steps == 10 and acc.n_points < 50


def test_no_points_is_never_ready_and_repeats_do_not_count():
    acc = HandleAccumulator()
    for _ in range(12):
        acc.add(np.zeros((0, 3)))
    assert acc.n_steps == 12 and not acc.ready
    # The same view ten times is the same 20 points once: deduplicated on the voxel grid.
    view = bar_points(np.random.default_rng(2), 20)
    acc.reset()
    for _ in range(5):
        acc.add(view)
    assert acc.n_points == 20 and not acc.ready
    with pytest.raises(ValueError, match="no handle points"):
        HandleAccumulator().handle_frame()


def test_frame_of_a_horizontal_bar():
    rng = np.random.default_rng(3)
    acc = HandleAccumulator()
    acc.add(bar_points(rng, 200))
    for normal in (None, FRONT_NORMAL_W):
        frame = acc.handle_frame(normal)
        assert abs(frame.principal_axis_W @ [0, 1, 0]) > 0.999
        assert np.allclose(frame.center_W[1:], [0.1, 0.7], atol=0.005)
        assert np.allclose(frame.centroid_W[1:], [0.1, 0.7], atol=0.01)
        assert frame.extents_m[0] == pytest.approx(0.2, abs=0.01)
        assert frame.extents_m[1] == pytest.approx(0.02, abs=0.006)
        assert frame.shape == "horizontal"
        R = frame.X_WH[:3, :3]
        assert np.allclose(R.T @ R, np.eye(3)) and np.isclose(np.linalg.det(R), 1.0)
    assert np.allclose(acc.handle_frame(FRONT_NORMAL_W).axes_W[:, 2], FRONT_NORMAL_W)


def test_shapes_vertical_and_compact():
    rng = np.random.default_rng(4)
    vertical = estimate_handle_frame(bar_points(rng, 100, axis=(0, 0, 1), length_m=0.3), FRONT_NORMAL_W)
    assert vertical.shape == "vertical" and abs(vertical.principal_axis_W[2]) > 0.999
    knob = estimate_handle_frame(bar_points(rng, 40, length_m=0.035, thick_m=0.035), FRONT_NORMAL_W)
    assert knob.shape == "compact"
    assert classify_handle_shape([0, 0, 1], 0.2, 0.02) == "vertical"
    assert classify_handle_shape([0, 1, 0], 0.2, 0.02) == "horizontal"
    assert classify_handle_shape([0, 1, 0], 0.05, 0.01) == "compact"  # too short for a bar
    assert classify_handle_shape([0, 1, 0], 0.08, 0.06) == "compact"  # not elongated
    assert estimate_handle_frame(np.array([[0.0, 0.0, 0.5]])).shape == "compact"


def test_points_in_a_moving_part_frame_follow_the_part():
    rng = np.random.default_rng(5)
    acc = HandleAccumulator()
    X_WP = np.eye(4)
    for step in range(4):
        X_WP = np.eye(4)
        X_WP[0, 3] = -0.05 * step  # the drawer moves out 5 cm per step
        acc.add(bar_points(rng, 30) + X_WP[:3, 3], X_WP=X_WP)
    # All the points gathered over a 15 cm motion sit on the bar at its latest place, not smeared.
    frame = acc.handle_frame(FRONT_NORMAL_W)
    assert frame.extents_m[2] < 0.01
    assert frame.center_W[0] == pytest.approx(-0.355 - 0.15, abs=0.003)
    with pytest.raises(ValueError, match="X_WP with every call"):
        acc.add(bar_points(rng, 5))


def test_max_steps_forgets_old_points():
    acc = HandleAccumulator(max_steps=2)
    for k in range(3):
        acc.add(np.array([[0.1 * k, 0.0, 0.5]]))
    assert np.allclose(np.sort(acc.points[:, 0]), [0.1, 0.2])


def test_bad_input_names_the_problem():
    acc = HandleAccumulator()
    with pytest.raises(ValueError, match=r"shape \[N, 3\]"):
        acc.add(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="NaN"):
        acc.add(np.array([[0.0, np.inf, 0.0]]))
    with pytest.raises(ValueError, match="4x4"):
        acc.add(np.zeros((1, 3)), X_WP=np.eye(3))
    with pytest.raises(ValueError, match="empty"):
        estimate_handle_frame(np.zeros((0, 3)))
