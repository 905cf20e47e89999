"""A swivel chair's centre (Let's Handle It (arXiv 2202.11792) Fig. 10), upper body and backrest, on synthetic chairs
seen from behind (rendered with a z-buffer, so the backrest really hides most of the seat)."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.perception.chair_center import (
    ChairCenter,
    estimate_backrest,
    estimate_chair_center,
    mean_center,
    upper_body_mask,
)
from tests.synthetic_objects import make_chair


def angle_deg(a, b) -> float:
    return float(np.degrees(np.arccos(np.clip(np.dot(a, b), -1.0, 1.0))))


@pytest.fixture(scope="module")
def chairs():
    rng = np.random.default_rng(0)
    return [make_chair(rng) for _ in range(20)]


def xy_error_m(estimate_W, chair) -> float:
    return float(np.linalg.norm(np.asarray(estimate_W)[:2] - chair.center_W[:2]))


def test_box_centre_beats_the_mean_over_random_chairs(chairs):
    """Let's Handle It Fig. 10: the box's centre (MSE 0.038) is closer than the mean of all points (MSE 0.11)."""
    estimates = [estimate_chair_center(c.points_W) for c in chairs]
    mse = {
        "box": np.mean([xy_error_m(e.center_W, c) ** 2 for e, c in zip(estimates, chairs)]),
        "mean": np.mean([xy_error_m(mean_center(c.points_W), c) ** 2 for c in chairs]),
        "seat": np.mean([xy_error_m(e.seat_center_W, c) ** 2 for e, c in zip(estimates, chairs)]),
        "swivel": np.mean([xy_error_m(e.swivel_center_W, c) ** 2 for e, c in zip(estimates, chairs)]),
    }
    assert mse["box"] < 0.6 * mse["mean"]
    # The corrections come closer still: the seat part of the box, and the casters' circle or the column.
    assert mse["seat"] < mse["box"]
    assert mse["swivel"] < 0.25 * mse["box"]
    for e, c in zip(estimates, chairs):
        assert np.isclose(e.center_W[2], c.points_W[:, 2].min())  # centres lie on the floor
        if e.base_center_W is not None:
            assert xy_error_m(e.base_center_W, c) < 0.05
        if e.column_center_W is not None:
            assert xy_error_m(e.column_center_W, c) < 0.06


def test_axes_and_box(chairs):
    for c in chairs[:8]:
        e = estimate_chair_center(c.points_W)
        assert angle_deg(e.forward_W, c.forward_W) < 10.0
        assert np.isclose(np.linalg.norm(e.forward_W), 1.0) and e.forward_W[2] == 0.0
        assert np.allclose(e.width_axis_W, np.cross([0.0, 0.0, 1.0], e.forward_W))
        X_WC = e.X_WC
        assert np.allclose(X_WC[:3, :3].T @ X_WC[:3, :3], np.eye(3)) and np.isclose(np.linalg.det(X_WC[:3, :3]), 1.0)
        assert 0.3 < e.extents_m[0] < 0.8 and 0.0 < e.extents_m[1] < 0.8
        assert isinstance(e, ChairCenter) and e.swivel_source in ("base", "column", "seat")
        assert 0.25 < e.seat_level_m < c.seat_top_m + 0.02


def test_backrest_top_edge_and_normal(chairs):
    for c in chairs:
        b = estimate_backrest(c.points_W)
        assert abs(b.top_height_m - c.backrest_top_m) < 0.015
        assert np.linalg.norm(b.top_center_W[:2] - c.backrest_top_center_W[:2]) < 0.02
        assert angle_deg(b.normal_W, c.forward_W) < 10.0
        assert angle_deg(b.width_axis_W, c.width_axis_W) < 10.0  # both z x forward: the sitter's left
        assert np.allclose(b.width_axis_W, np.cross([0.0, 0.0, 1.0], b.normal_W))
        assert abs(b.width_m - c.backrest_width_m) < 0.03
        assert abs(b.thickness_m - c.backrest_thickness_m) < 0.02
        assert b.bottom_height_m < b.center_W[2] < b.top_height_m
        # From behind, a seat's back face in line with the panel may extend it down to the seat's underside.
        assert len(b.points_W) > 100 and np.all(b.points_W[:, 2] >= c.seat_top_m - 0.12)


def test_upper_body_is_the_seat_and_above(chairs):
    for c in chairs[:10]:
        upper = upper_body_mask(c.points_W)
        assert upper.dtype == bool and upper.shape == (len(c.points_W),)
        for part in ("backrest", "seat", "armrest"):
            if (c.labels == part).any():
                assert upper[c.labels == part].mean() > 0.9, part
        for part in ("base", "column"):
            assert not upper[c.labels == part].any(), part


def test_chair_without_armrests_from_straight_behind():
    rng = np.random.default_rng(1)
    for _ in range(5):
        c = make_chair(rng, armrests=False, view_offset_rad=0.0, noise_m=0.005)
        b = estimate_backrest(c.points_W)
        assert abs(b.top_height_m - c.backrest_top_m) < 0.015
        assert angle_deg(b.normal_W, c.forward_W) < 10.0
        assert xy_error_m(estimate_chair_center(c.points_W).swivel_center_W, c) < 0.3


def test_mean_center_is_the_plain_mean():
    points = np.array([[0.0, 0.0, 0.1], [1.0, 2.0, 0.5]] * 20)
    assert np.allclose(mean_center(points), [0.5, 1.0, 0.1])


def test_bad_input_is_named():
    for f in (estimate_chair_center, estimate_backrest, upper_body_mask, mean_center):
        with pytest.raises(ValueError, match="empty"):
            f(np.zeros((0, 3)))
        with pytest.raises(ValueError, match="NaN"):
            f(np.full((100, 3), np.nan))
        with pytest.raises(ValueError, match=r"shape \[N, 3\]"):
            f(np.zeros((100, 4)))
        with pytest.raises(ValueError, match="at least 30"):
            f(np.zeros((5, 3)))
