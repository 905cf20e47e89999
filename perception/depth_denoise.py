"""Depth noise removed along the cameras' rays, from points seen over several frames.

A depth camera's error lies along each pixel's ray and grows with the distance (a stereo camera's roughly with
its square; Kinect and RealSense figures of a few millimetres at 1 m). Merged over frames, a small part such
as a handle then becomes a cloud stretched along the rays: its front surface looks 1-2 cm nearer than it is
and its cross-section centimetres wider, so a grasp planned on it closes in front of the handle or does not
fit the gripper at all. Averaging neighbours in 3D does not undo that (the spread is along the rays, not
across them); the median range among the points that lie on the same ray does, since the repeated views of
one surface point scatter symmetrically along its ray.

:func:`denoise_along_rays` does that for points that know where their camera was (PCL keeps the same in
``sensor_origin_``; a ROS cloud's frame gives it through TF), and reports the noise it removed, so a caller
can tell a clean cloud (the simulator's: nothing to do) from a noisy one.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from handleit.perception.point_cloud import as_points

# Points whose rays pass within this distance of each other are taken as views of one surface point (m).
# Larger averages more samples and blurs edges more; 8 mm kept the grasp on the bundled handles within 7 mm
# in depth at 5 mm noise at 1 m (docs/benchmarks.md, "Robustness").
RAY_RADIUS_M = 0.008
# The noise is measured on narrower rays, where a surface seen at a slant still varies little in range: the
# simulator's clean depth then reads 0-1.2 mm on the bundled handles (over 20 steps of a moving camera), 5 mm
# noise at 1 m reads 4-12 mm.
NOISE_RADIUS_M = 0.003
MIN_RAY_SAMPLES = 3  # fewer points on a ray leave the point where it is


def _checked(points_W, origins_W, radius_m: float) -> tuple[np.ndarray, np.ndarray]:
    p = as_points(points_W, "points_W", allow_empty=False)
    o = np.asarray(origins_W, dtype=np.float64)
    if o.shape == (3,):
        o = np.broadcast_to(o, p.shape)
    if o.shape != p.shape:
        raise ValueError(f"origins_W must be [3] or [N, 3] like points_W {p.shape}, got {o.shape}")
    if not np.all(np.isfinite(o)):
        raise ValueError("origins_W contains NaN or inf")
    if not radius_m > 0:
        raise ValueError(f"radius_m must be positive, got {radius_m}")
    if np.any(np.linalg.norm(p - o, axis=1) < 1e-6):
        raise ValueError("a point lies at its camera's centre (origins_W in another frame than points_W?)")
    return p, o


def _ray_medians(p: np.ndarray, o: np.ndarray, radius_m: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per point: its range, its unit ray, and the median range of the points on its ray (NaN: too few)."""
    v = p - o
    ranges = np.linalg.norm(v, axis=1)
    directions = v / ranges[:, None]
    # Neighbours on a ray: directions closer than radius / range, seen from one common centre. The cameras move
    # a few centimetres between the frames merged here, which shifts a ray far less than the radius.
    d_common = p - o.mean(axis=0)
    d_common /= np.linalg.norm(d_common, axis=1, keepdims=True)
    angle = radius_m / float(np.median(ranges))
    medians = np.full(len(p), np.nan)
    for i, neighbours in enumerate(cKDTree(d_common).query_ball_point(d_common, angle)):
        if len(neighbours) >= MIN_RAY_SAMPLES:
            # Ranges of the neighbours along this point's own ray, from its own camera.
            medians[i] = np.median((p[neighbours] - o[i]) @ directions[i])
    return ranges, directions, medians


def range_noise_m(points_W, origins_W, radius_m: float = NOISE_RADIUS_M) -> float:
    """The range noise of points seen over several frames (m): the robust standard deviation (1.4826 x the
    median absolute deviation) of each point's range about the median range on its ray.

    Args as :func:`denoise_along_rays`. Returns 0 when no ray holds ``MIN_RAY_SAMPLES`` points.
    """
    p, o = _checked(points_W, origins_W, radius_m)
    ranges, _, medians = _ray_medians(p, o, radius_m)
    r = (ranges - medians)[np.isfinite(medians)]
    if not len(r):
        return 0.0
    return float(1.4826 * np.median(np.abs(r - np.median(r))))


def denoise_along_rays(points_W, origins_W, radius_m: float = RAY_RADIUS_M) -> np.ndarray:
    """Each point moved along its ray to the median range of the points on (about) the same ray.

    Args:
        points_W: ``[N, 3]`` points (any one frame W, m), typically one small part seen over several frames.
        origins_W: ``[N, 3]`` the camera centre each point was seen from, or ``[3]`` one for all (same frame).
        radius_m: points whose rays pass within this distance (at the points' median range) share a ray.
    Returns:
        ``[N, 3]`` the denoised points (float64); a point with fewer than ``MIN_RAY_SAMPLES`` points on its ray
        stays where it was.
    Raises:
        ValueError on an empty point set, NaN, mismatched shapes or a point at its camera's centre.
    """
    p, o = _checked(points_W, origins_W, radius_m)
    _, directions, medians = _ray_medians(p, o, radius_m)
    ok = np.isfinite(medians)
    out = p.copy()
    out[ok] = o[ok] + medians[ok, None] * directions[ok]
    return out
