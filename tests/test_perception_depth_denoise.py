"""Depth noise along the cameras' rays: measured, and removed by the median range on each ray."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.perception.depth_denoise import denoise_along_rays, range_noise_m
from handleit.perception.handle_grasps import sample_handle_grasps
from handleit.perception.handle_points import HandleAccumulator

CAMERA_W = np.array([0.9, 0.0, 1.5])  # a camera 1.5 m up, about 1.3 m from a bar on a front facing +x
FRONT_NORMAL_W = np.array([1.0, 0.0, 0.0])
BAR_CENTRE_W = np.array([0.0, 0.0, 0.8])
BAR_RADIUS_M = 0.01


def visible_bar_points(rng, n: int) -> np.ndarray:
    """Points on the half of a round horizontal bar (along y, 20 cm long) that faces the camera, clean."""
    y = rng.uniform(-0.1, 0.1, n)
    to_camera = (CAMERA_W - BAR_CENTRE_W)[[0, 2]]
    facing = np.arctan2(to_camera[1], to_camera[0])  # angle of the camera in the bar's x-z section
    theta = facing + rng.uniform(-np.pi / 2, np.pi / 2, n)
    x = BAR_CENTRE_W[0] + BAR_RADIUS_M * np.cos(theta)
    z = BAR_CENTRE_W[2] + BAR_RADIUS_M * np.sin(theta)
    return np.stack([x, y, z], axis=1)


def with_range_noise(rng, points: np.ndarray, sigma_at_1m: float) -> np.ndarray:
    v = points - CAMERA_W
    r = np.linalg.norm(v, axis=1)
    return CAMERA_W + v / r[:, None] * (r + rng.normal(scale=sigma_at_1m * r**2))[:, None]


def views(rng, steps: int, sigma_at_1m: float, per_step: int = 150) -> np.ndarray:
    """A static bar seen ``steps`` times (each view its own pixels' noise)."""
    return np.concatenate([with_range_noise(rng, visible_bar_points(rng, per_step), sigma_at_1m)
                           for _ in range(steps)])


def test_noise_is_measured_and_clean_points_read_near_zero():
    rng = np.random.default_rng(0)
    clean = views(rng, 20, 0.0)
    noisy = views(rng, 20, 0.005)
    expected = 0.005 * float(np.linalg.norm(CAMERA_W - BAR_CENTRE_W)) ** 2  # sigma at the bar's range
    assert range_noise_m(clean, CAMERA_W) < 0.001
    assert range_noise_m(noisy, CAMERA_W) == pytest.approx(expected, rel=0.35)


def test_denoising_brings_the_front_back_and_the_width_down():
    rng = np.random.default_rng(1)
    noisy = views(rng, 20, 0.005)
    denoised = denoise_along_rays(noisy, CAMERA_W)
    assert denoised.shape == noisy.shape
    # Distance of each point from the bar's axis: the surface is at the radius.
    def off_surface(p):
        return np.abs(np.linalg.norm((p - BAR_CENTRE_W)[:, [0, 2]], axis=1) - BAR_RADIUS_M)
    assert np.median(off_surface(denoised)) < 0.6 * np.median(off_surface(noisy))
    # Every point only moved along its own ray.
    before, after = noisy - CAMERA_W, denoised - CAMERA_W
    cos = np.sum(before * after, axis=1) / np.linalg.norm(before, axis=1) / np.linalg.norm(after, axis=1)
    assert np.all(cos > 1 - 1e-9)


def test_a_grasp_on_denoised_views_closes_on_the_bar():
    rng = np.random.default_rng(2)
    noisy = views(rng, 20, 0.005)
    clean = views(rng, 20, 0.0)
    g_clean = sample_handle_grasps(clean, FRONT_NORMAL_W)[0]
    g_noisy = sample_handle_grasps(noisy, FRONT_NORMAL_W)
    g_denoised = sample_handle_grasps(denoise_along_rays(noisy, CAMERA_W), FRONT_NORMAL_W)[0]
    depth_error = abs((g_denoised.X_WG[:3, 3] - g_clean.X_WG[:3, 3]) @ g_clean.X_WG[:3, 2])
    assert depth_error < 0.006  # the pads span -9 to +9.5 mm in depth around the tool centre
    assert g_denoised.width_m < g_clean.width_m + 0.015
    # The merged noisy points alone: no grasp fits, or one planned well in front of the bar or far wider.
    if g_noisy:
        g = g_noisy[0]
        assert abs((g.X_WG[:3, 3] - g_clean.X_WG[:3, 3]) @ g_clean.X_WG[:3, 2]) > depth_error or \
            g.width_m > g_denoised.width_m + 0.01


def test_per_point_origins_and_bad_input():
    rng = np.random.default_rng(3)
    noisy = views(rng, 5, 0.005)
    origins = np.broadcast_to(CAMERA_W, noisy.shape)
    np.testing.assert_allclose(denoise_along_rays(noisy, origins), denoise_along_rays(noisy, CAMERA_W))
    with pytest.raises(ValueError, match="empty"):
        denoise_along_rays(np.zeros((0, 3)), CAMERA_W)
    with pytest.raises(ValueError, match="NaN"):
        denoise_along_rays(np.full((4, 3), np.nan), CAMERA_W)
    with pytest.raises(ValueError, match="origins_W must be"):
        denoise_along_rays(noisy, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="camera's centre"):
        range_noise_m(noisy, noisy)
    with pytest.raises(ValueError, match="radius_m"):
        denoise_along_rays(noisy, CAMERA_W, radius_m=0.0)


def test_accumulator_keeps_recent_views_with_their_cameras():
    rng = np.random.default_rng(4)
    acc = HandleAccumulator(recent_steps=3)
    assert acc.recent_views()[0].shape == (0, 3)
    acc.add(visible_bar_points(rng, 10))  # no origins: merged only
    for step in range(5):
        origin = CAMERA_W + [0.01 * step, 0.0, 0.0]
        acc.add(visible_bar_points(rng, 10 + step), origins_W=origin)
    points, origins = acc.recent_views()
    assert len(points) == 12 + 13 + 14 and origins.shape == points.shape  # the last three steps
    np.testing.assert_allclose(origins[-1], CAMERA_W + [0.04, 0.0, 0.0])
    assert acc.n_steps == 6
    acc.reset()
    assert acc.recent_views()[0].shape == (0, 3)
