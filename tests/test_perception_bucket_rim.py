"""The bucket's rim (Let's Handle It (arXiv 2202.11792) Sec. 2.3) on synthetic, z-buffer rendered buckets: height,
circle, thickness, axis, with a handle over the rim or beside the wall, a ball inside, partial views and tilts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from handleit.perception.bucket_rim import (
    PANDA_MAX_OPENING_M,
    PINCH_MARGIN_M,
    RIM_THICKNESS_THRESHOLD_M,
    BucketRim,
    ball_points_mask,
    classify_rim_thickness,
    estimate_bucket_rim,
    fit_circle_xy,
    points_inside_bucket,
    rim_is_pinchable,
)
from tests.synthetic_objects import make_bucket

THIN_M = (0.006, 0.03)  # wall thicknesses of pinchable buckets
THICK_M = (0.075, 0.11)


def random_bucket(rng, thin: bool, **kwargs):
    kwargs.setdefault("noise_m", rng.uniform(0.002, 0.005))
    kwargs.setdefault("distance_m", rng.uniform(0.6, 1.2))
    return make_bucket(
        rng,
        thickness_m=rng.uniform(*(THIN_M if thin else THICK_M)),
        outer_radius_m=rng.uniform(0.13, 0.2) if thin else rng.uniform(0.17, 0.22),
        height_m=rng.uniform(0.25, 0.4),
        **kwargs,
    )


def angle_deg(a, b) -> float:
    return float(np.degrees(np.arccos(np.clip(np.dot(a, b), -1.0, 1.0))))


def assert_rim_close(rim: BucketRim, bucket, *, center_m=0.015, radius_m=0.01, axis_deg=3.0):
    assert abs(rim.height_m - bucket.rim_height_m) < 0.01
    assert np.isclose(rim.height_m, rim.center_W[2])
    assert np.linalg.norm(rim.center_W[:2] - bucket.rim_center_W[:2]) < center_m
    assert abs(rim.outer_radius_m - bucket.outer_radius_m) < radius_m
    assert abs(rim.inner_radius_m - bucket.inner_radius_m) < 1.5 * radius_m
    assert angle_deg(rim.axis_W, bucket.axis_W) < axis_deg
    assert classify_rim_thickness(rim.thickness_m) == ("thin" if bucket.thickness_m < 0.05 else "thick")


@pytest.mark.parametrize("thin", [True, False])
def test_upright_bucket_rim(thin):
    rng = np.random.default_rng(1 if thin else 2)
    for _ in range(6):
        bucket = random_bucket(rng, thin)
        rim = estimate_bucket_rim(bucket.points_W)
        assert_rim_close(rim, bucket, axis_deg=1.5)
        assert angle_deg(rim.axis_W, [0, 0, 1]) < 1.5  # upright: the axis is +z
        assert rim.arc_rad > np.deg2rad(270)  # seen all around from one side (the rim's top faces up)
        assert rim.points_W.shape[1] == 3 and np.all(np.abs(rim.points_W[:, 2] - rim.height_m) < 0.02)
        assert 0.0 <= rim.taper_m_per_m < 0.3 and rim.depth_m > 0.2


def test_handle_over_the_rim_is_skipped():
    rng = np.random.default_rng(3)
    for thin in (True, False, True, False):
        bucket = random_bucket(rng, thin, handle="up")
        rim = estimate_bucket_rim(bucket.points_W)
        assert_rim_close(rim, bucket)
        # The naive rim, the highest points, is the handle's top: Let's Handle It's reason for the slices.
        naive_m = np.percentile(bucket.points_W[:, 2], 99.5)
        assert naive_m - bucket.rim_height_m > 0.08
        assert naive_m - rim.height_m > 0.08
        assert not np.any(rim.points_W[:, 2] > bucket.rim_height_m + 0.03)


def test_handle_down_beside_the_wall_and_a_ball_inside():
    rng = np.random.default_rng(4)
    for thin in (True, False, True):
        bucket = random_bucket(rng, thin, handle="down", ball=True, distance_m=0.6)
        rim = estimate_bucket_rim(bucket.points_W)
        assert_rim_close(rim, bucket)
        ball = bucket.labels == "ball"
        if ball.any():
            assert points_inside_bucket(bucket.points_W[ball], rim).all()
        handle = bucket.labels == "handle"
        assert not points_inside_bucket(bucket.points_W[handle], rim, margin_m=0.0).any()


def test_partial_arc_of_the_rim():
    rng = np.random.default_rng(5)
    for k in range(8):
        bucket = random_bucket(rng, k % 2 == 0, arc_deg=rng.uniform(120, 200))
        rim = estimate_bucket_rim(bucket.points_W)
        assert rim.arc_rad < np.deg2rad(230)
        assert_rim_close(rim, bucket, center_m=0.02, axis_deg=3.0)  # typically 0.5 cm and 0.5 degrees


def test_rim_hidden_by_the_arms_does_not_tilt_the_axis():
    """A simulator view of a pinched, lifted bucket (MoveBucket train seed 33, bucket-train-004, step 108; its
    true axis saved beside it): the arms hide the rim over ~60 degrees, where only the wall 10-25 cm below
    shows. The axis stays within a few degrees of the truth (it was fitted 50 degrees over, failing the
    carry's tilt check on an upright bucket)."""
    view = np.load(Path(__file__).parent / "data" / "pinched_bucket_view.npz")
    rim = estimate_bucket_rim(view["points_W"].astype(float))
    assert angle_deg(rim.axis_W, view["axis_W"]) < 3.0
    assert abs(rim.height_m - float(view["rim_height_m"])) < 0.01


def test_tilted_bucket_axis_and_rim():
    rng = np.random.default_rng(6)
    for thin in (True, False, True, False):
        tilt_rad = np.deg2rad(rng.uniform(4.0, 10.0))
        bucket = random_bucket(rng, thin, tilt_rad=tilt_rad, handle="up")
        rim = estimate_bucket_rim(bucket.points_W)
        assert_rim_close(rim, bucket, radius_m=0.012, axis_deg=2.0)
        assert abs(rim.tilt_rad - tilt_rad) < np.deg2rad(2.0)
        X_WR = rim.X_WR
        assert np.allclose(X_WR[:3, 2], rim.axis_W) and np.allclose(X_WR[:3, :3].T @ X_WR[:3, :3], np.eye(3))


def test_thickness_classification_and_pinching():
    assert np.isclose(RIM_THICKNESS_THRESHOLD_M, PANDA_MAX_OPENING_M - PINCH_MARGIN_M)
    assert THIN_M[1] < RIM_THICKNESS_THRESHOLD_M < THICK_M[0]
    assert classify_rim_thickness(0.02) == "thin" and classify_rim_thickness(0.09) == "thick"
    assert classify_rim_thickness(0.06, threshold_m=0.07) == "thin"
    with pytest.raises(ValueError, match="non-negative"):
        classify_rim_thickness(float("nan"))
    rng = np.random.default_rng(7)
    for thin in (True, False):
        rim = estimate_bucket_rim(random_bucket(rng, thin, noise_m=0.005).points_W)
        assert rim_is_pinchable(rim) == thin
        assert rim_is_pinchable(rim, max_opening_m=0.2) is True


def test_ball_points_by_colour():
    cyan = np.array([[0, 255, 255], [0, 150, 150], [20, 200, 210]], dtype=np.uint8)  # lit, shaded, off-white
    other = np.array([[200, 80, 40], [90, 90, 90], [255, 255, 255], [0, 0, 255], [0, 255, 0], [5, 10, 10]],
                     dtype=np.uint8)
    mask = ball_points_mask(np.concatenate([cyan, other]))
    assert mask.tolist() == [True] * 3 + [False] * 6
    assert ball_points_mask(np.concatenate([cyan, other]) / 255.0).tolist() == mask.tolist()  # floats in [0, 1]
    assert ball_points_mask(np.array([[255, 0, 0]]), rgb=(255, 0, 0)).tolist() == [True]
    assert ball_points_mask(np.zeros((0, 3))).shape == (0,)
    with pytest.raises(ValueError, match="saturated"):
        ball_points_mask(cyan, rgb=(128, 128, 128))
    with pytest.raises(ValueError, match=r"shape \[N, 3\]"):
        ball_points_mask(np.zeros((4, 4)))
    # On a rendered bucket: the ball's points and no others.
    bucket = random_bucket(np.random.default_rng(8), True, ball=True, distance_m=0.6)
    assert np.array_equal(ball_points_mask(bucket.colors), bucket.labels == "ball")


def test_points_inside_an_ideal_bucket():
    rim = BucketRim(height_m=0.3, center_W=np.array([1.0, 2.0, 0.3]), outer_radius_m=0.16, inner_radius_m=0.15,
                    thickness_m=0.01, axis_W=np.array([0.0, 0.0, 1.0]), points_W=np.zeros((0, 3)), depth_m=0.3,
                    taper_m_per_m=0.1, arc_rad=2 * np.pi)
    points = np.array([
        [1.0, 2.0, 0.05],  # on the bottom, in the middle
        [1.13, 2.0, 0.25],  # near the wall, high up (radius there: 0.145)
        [1.13, 2.0, 0.05],  # as far out, low down: outside the tapered wall (radius there: 0.125)
        [1.0, 2.0, 0.35],  # above the rim
        [1.3, 2.0, 0.2],  # beside the bucket
    ])
    assert points_inside_bucket(points, rim, margin_m=0.0).tolist() == [True, True, False, False, False]
    assert points_inside_bucket(points, rim, margin_m=0.06).tolist() == [True, True, True, True, False]


def test_fit_circle_on_an_arc_with_outliers():
    rng = np.random.default_rng(9)
    theta = rng.uniform(0, np.deg2rad(120), 200)
    xy = np.column_stack([0.5 + 0.2 * np.cos(theta), -0.3 + 0.2 * np.sin(theta)]) + rng.normal(0, 0.002, (200, 2))
    xy = np.concatenate([xy, rng.uniform(-0.1, 0.1, (30, 2)) + [0.5, -0.3]])  # a ball's points inside
    center, radius, inliers = fit_circle_xy(xy)
    assert np.linalg.norm(center - [0.5, -0.3]) < 0.01 and abs(radius - 0.2) < 0.01
    assert inliers[:200].mean() > 0.95 and inliers[200:].mean() < 0.2


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="empty"):
        estimate_bucket_rim(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="NaN"):
        estimate_bucket_rim(np.full((100, 3), np.nan))
    with pytest.raises(ValueError, match=r"shape \[N, 3\]"):
        estimate_bucket_rim(np.zeros((100, 2)))
    with pytest.raises(ValueError, match="at least 30"):
        estimate_bucket_rim(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="slice_m"):
        estimate_bucket_rim(np.random.default_rng(0).uniform(size=(100, 3)), slice_m=0.0)
    # A straight line of points goes around nothing: no rim slice.
    line = np.column_stack([np.linspace(0, 1, 200), np.zeros(200), np.linspace(0, 0.3, 200)])
    with pytest.raises(ValueError, match="no 0.01 m slice"):
        estimate_bucket_rim(line)
    with pytest.raises(ValueError, match="NaN"):
        points_inside_bucket(np.array([[np.nan, 0, 0]]), estimate_bucket_rim(
            random_bucket(np.random.default_rng(0), True).points_W))


def test_ball_mask_matches_the_hue_test_of_every_point():
    """The mask computes the hue only of the saturated, bright points: the result is the plain test's, hue,
    saturation and value of every point, on camera (uint8) and float colours alike."""
    from handleit.perception.bucket_rim import ball_points_mask
    from handleit.perception.color_markers import rgb_to_hsv

    rng = np.random.default_rng(0)
    target = rgb_to_hsv(np.array([[0.0, 1.0, 1.0]]))[0]
    for colors in (rng.integers(0, 256, (20000, 3)).astype(np.uint8), rng.uniform(0.0, 1.0, (5000, 3)),
                   np.array([[51, 25, 0], [0, 51, 51], [0, 0, 0], [255, 255, 255], [0, 255, 255], [0, 26, 51]], np.uint8)):
        c = colors / 255.0 if colors.dtype == np.uint8 else colors
        hsv = rgb_to_hsv(c)
        hue_diff = np.abs((hsv[:, 0] - target[0] + 180.0) % 360.0 - 180.0)
        expected = (hue_diff <= 20.0) & (hsv[:, 1] >= 0.5) & (hsv[:, 2] >= 0.2)
        np.testing.assert_array_equal(ball_points_mask(colors), expected)
