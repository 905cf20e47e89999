"""The bucket's rim from its points: height, circle, thickness, axis; which points are inside; the ball.

Let's Handle It (arXiv 2202.11792) Sec. 2.3, "Estimating the bucket rim": the highest points are not the rim, because
the bail handle sometimes arches over it. Instead the cloud is cut into z-slices, only slices holding at least a
threshold of points count, and the highest such slice is the rim. Here the slices slide (a window of ``slice_m`` moved
in quarter steps, so the answer does not hinge on where slice boundaries fall), and a rim slice must also go
around the bucket: the nearly level top of an arched handle can hold as many points as a rim slice, but in
one short piece. Then:

- height: the rim's top surface, from the density of heights just below the top slice's upper edge;
- circle: a robust fit in the horizontal plane to the rim points (two concentric circles a rim's thickness
  apart, see :func:`_fit_concentric_xy`; on arcs shorter than 270 degrees, the outer edge alone);
- thickness: the radial spread of the rim points (5th to 95th percentile), which also carries a few mm of
  the points' noise;
- axis: the normal of the plane through the rim's top edge all around (the rim is level on an upright
  bucket); a tilted bucket is sliced again along that axis. A rim seen less than half-way around is taken
  as level (upright).

Numpy in, numpy out: world points ``[N, 3]`` (z up, m). About 3-6 ms for 5,000 points on one core (one pass
for an upright bucket; a tilted one takes one or two more).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from handleit.perception.color_markers import channel_max_min, rgb_to_hsv
from handleit.perception.point_cloud import Z_W, as_direction, as_points, voxel_keys

RimThickness = Literal["thin", "thick"]

PANDA_MAX_OPENING_M = 0.08  # Franka Panda hand: 80 mm between the fingers when fully open
# The fingers need room around the rim: ~1 cm of position error per side plus the finger pads' rounding.
PINCH_MARGIN_M = 0.025
# Rims the grippers can pinch are at most this thick: 0.08 - 0.025 m. Thin bucket walls are 0.006-0.03 m and
# thick ones 0.075-0.11 m, so 0.055 m splits them with ~2.5 cm to spare on either side (the measured thickness
# also carries the points' noise, a few mm).
RIM_THICKNESS_THRESHOLD_M = PANDA_MAX_OPENING_M - PINCH_MARGIN_M

MIN_POINTS = 30  # fewer bucket points than this are not a bucket to fit
_WALL_SLICES = 6  # circles fitted along the walls for their taper
# On a shorter arc the rim's centre comes from its outer edge alone (see _outer_edge_center).
_SHORT_ARC_RAD = np.deg2rad(270.0)
# The rim's plane (the axis) needs rim tops this far around; over a shorter arc the bucket is taken as upright.
_MIN_TILT_ARC_RAD = np.deg2rad(180.0)
# Rim tops further than this from their median height are not the rim (hidden behind something, or a handle
# standing over it): a rim of 0.2 m radius tilted by 0.35 rad spreads only +-7 cm.
_MAX_TOP_OFFSET_M = 0.08
_MAX_PASSES = 3  # slicing along world z, then along the estimated axis until it moves less than a degree


@dataclass(frozen=True)
class BucketRim:
    """The rim of a bucket, in the world W (z up).

    ``center_W`` lies on the rim's top surface, at the centre of the rim circle; ``axis_W`` points up, out of
    the bucket's opening. Radii are measured perpendicular to the axis.
    """

    height_m: float  # world z of the rim's top surface at its centre (= center_W[2]), m
    center_W: np.ndarray  # [3] centre of the rim circle, on the rim's top surface, m
    outer_radius_m: float  # outer edge of the rim (robust high percentile of the rim points' radii), m
    inner_radius_m: float  # inner edge (robust low percentile), m
    thickness_m: float  # outer minus inner radius: the rim's width across, as seen, m
    axis_W: np.ndarray  # [3] unit axis of the bucket, pointing up (about +z for an upright bucket)
    points_W: np.ndarray  # [M, 3] the rim points (the top slice), m
    depth_m: float  # from the rim's top surface down to the bucket's lowest point, along the axis, m
    # d(radius)/d(height) of the walls: the radius shrinks by this per metre below the rim (0: a cylinder).
    taper_m_per_m: float
    arc_rad: float  # angle around the centre covered by rim points (2 pi: seen all around), rad

    @property
    def radius_m(self) -> float:
        """The rim's middle radius, between the inner and the outer edge (m)."""
        return 0.5 * (self.outer_radius_m + self.inner_radius_m)

    @property
    def tilt_rad(self) -> float:
        """Angle between the bucket's axis and world z (rad): 0 for an upright bucket."""
        return float(np.arccos(np.clip(self.axis_W @ Z_W, -1.0, 1.0)))

    @property
    def X_WR(self) -> np.ndarray:
        """4x4 pose of a rim frame R in the world: origin ``center_W``, z along ``axis_W`` (the smallest
        rotation from the world's axes: x and y are the world's for an upright bucket)."""
        X = np.eye(4)
        X[:3, :3] = _frame_with_z(self.axis_W)
        X[:3, 3] = self.center_W
        return X


# ---------------------------------------------------------------------------------------------- circles


def _refine_circle(q, center, radius: float, gap_m: float, iterations: int, min_scale_m: float):
    """Gauss-Newton on the distances of ``[N, 2]`` points to a circle, or to two concentric circles
    ``gap_m`` apart (each point to the nearer), trimming points further than 3 robust standard deviations
    (at least ``3 * min_scale_m``). Returns ``(center [2], radius (the middle one), inliers [N] bool)``.
    """
    center = np.array(center, dtype=np.float64)
    inliers = np.ones(len(q), dtype=bool)
    for _ in range(iterations):
        d = q - center
        dist = np.hypot(d[:, 0], d[:, 1])
        residual = dist - radius
        if gap_m > 0:
            residual -= np.where(residual >= 0.0, 0.5, -0.5) * gap_m
        scale = max(1.4826 * float(np.median(np.abs(residual[inliers]))), min_scale_m)
        inliers = np.abs(residual) <= 3.0 * scale
        if inliers.sum() < 3:
            break
        # Linearised: residual - u . d_center - d_radius, u the unit vector from the centre to the point.
        A = np.ones((int(inliers.sum()), 3))
        A[:, :2] = d[inliers] / np.maximum(dist[inliers, None], 1e-12)
        step = np.linalg.solve(A.T @ A + 1e-12 * np.eye(3), A.T @ residual[inliers])
        center += step[:2]
        radius += float(step[2])
        if np.abs(step).max() < 1e-5:
            break
    return center, float(radius), inliers


def fit_circle_xy(xy, *, iterations: int = 10, min_scale_m: float = 0.003):
    """Robust circle fit in a plane: an algebraic (Kasa) fit, then a geometric fit with outliers trimmed.

    Works on arcs down to about 90 degrees. Points further than 3 robust standard deviations (at least
    ``3 * min_scale_m``) from the circle are left out of each refinement step, so a handle or a ball next to a
    wall does not pull it.

    Args:
        xy: ``[N, 2]`` points (m), N >= 3.
    Returns:
        ``(center [2], radius_m, inliers [N] bool)``.
    """
    xy = np.asarray(xy, dtype=np.float64)
    if xy.ndim != 2 or xy.shape[1] != 2 or len(xy) < 3:
        raise ValueError(f"fit_circle_xy: expected [N, 2] points with N >= 3, got shape {list(xy.shape)}")
    if not np.isfinite(xy).all():
        raise ValueError("fit_circle_xy: the points contain NaN or inf")
    origin = xy.mean(axis=0)
    q = xy - origin
    # Kasa: x^2 + y^2 = 2 a x + 2 b y + c is linear in (a, b, c).
    A = np.ones((len(q), 3))
    A[:, :2] = 2.0 * q
    (a, b, c), *_ = np.linalg.lstsq(A, (q**2).sum(axis=1), rcond=None)
    radius = float(np.sqrt(max(c + a * a + b * b, 1e-12)))
    center, radius, inliers = _refine_circle(q, (a, b), radius, 0.0, iterations, min_scale_m)
    return center + origin, radius, inliers


def _fit_concentric_xy(xy, center, r_mid: float, gap_m: float, iterations: int = 10, min_scale_m: float = 0.003):
    """Two concentric circles ``gap_m`` apart (a wall's inner and outer face) through ``[N, 2]`` points.

    From one side a camera sees the outer face of the near wall and the inner face of the far wall: a single
    circle through both sits half a wall thickness toward the camera, two concentric ones do not. But two
    circles can fit the same points as well as one shifted circle, unless the gap between them is known: it
    is held at ``gap_m`` (the rim's thickness). Each point belongs to the nearer circle; outliers are trimmed.

    Returns:
        ``(center [2], r_mid, inliers [N] bool)``.
    """
    origin = np.asarray(center, dtype=np.float64)
    c, r, inliers = _refine_circle(np.asarray(xy) - origin, (0.0, 0.0), r_mid, gap_m, iterations, min_scale_m)
    return c + origin, r, inliers


def _angular_coverage_rad(xy, center, bins: int = 72) -> float:
    """Angle around ``center`` covered by the points: occupied 5-degree sectors times 5 degrees (rad)."""
    d = xy - center
    sector = np.floor((np.arctan2(d[:, 1], d[:, 0]) + np.pi) / (2 * np.pi) * bins).astype(int) % bins
    return float(len(np.unique(sector)) * 2 * np.pi / bins)


def _frame_with_z(axis) -> np.ndarray:
    """The smallest rotation (3x3, columns x y z) that turns world z into ``axis``."""
    z = as_direction(axis, "axis")
    k = np.cross(Z_W, z)
    s, c = float(np.linalg.norm(k)), float(z[2])
    if s < 1e-12:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]]) / s
    return np.eye(3) + s * K + (1.0 - c) * K @ K


# ---------------------------------------------------------------------------------------------- rim


@dataclass(frozen=True)
class _RimInFrame:
    """The rim found in a frame F whose z is (about) the bucket's axis; everything in F."""

    height: float
    center_xy: np.ndarray
    outer: float
    inner: float
    mask: np.ndarray  # [N] rim points
    axis_F: np.ndarray
    bottom: float
    taper: float
    arc: float


def _top_surface_height(z: np.ndarray, top_edge: float, slice_m: float) -> float:
    """Height of the top surface of the points just below ``top_edge`` (the highest dense window's top).

    The density of z near a rim is a wall (flat, ending at the rim) plus, for a wide rim, a peak (the top
    annulus), both blurred by noise. A clear peak gives its position; a plain wall gives where the density
    falls to half of the wall's level.
    """
    lo, hi = top_edge - 4 * slice_m, top_edge + slice_m
    zz = z[(z >= lo) & (z <= hi)]
    bin_m = slice_m / 10
    edges = np.arange(lo, hi + bin_m, bin_m)
    counts, _ = np.histogram(zz, edges)
    kernel = np.exp(-0.5 * (np.arange(-6, 7) / 2.5) ** 2)  # ~2.5 mm Gaussian smoothing at 1 cm slices
    density = np.convolve(counts, kernel / kernel.sum(), mode="same")
    centers = 0.5 * (edges[:-1] + edges[1:])
    peak = int(np.argmax(density))
    plateau = float(np.median(density[centers < top_edge - 2 * slice_m])) if np.any(
        centers < top_edge - 2 * slice_m) else 0.0
    if density[peak] >= 2.0 * max(plateau, 1e-9):
        return float(centers[peak])
    above = np.flatnonzero(density >= 0.5 * max(plateau, 0.5 * density[peak]))
    return float(centers[above.max()])


def _voxel_representatives(points, voxel_m: float) -> np.ndarray:
    """Indices of one point per occupied voxel (the first in input order): an evenly dense subset."""
    _, first = np.unique(voxel_keys(points, voxel_m), return_index=True)
    return np.sort(first)


def _outer_edge_center(xy, center, percentile: float, sectors: int = 72):
    """Centre of the circle through the rim's outer edge: per sector around ``center``, the point at the
    ``percentile`` of the radii. The outer edge is sharp (the wall's outer face meets the top), where the
    rim's points across its width depend on how the camera sees them; on a short arc this matters.
    """
    d = xy - center
    r = np.linalg.norm(d, axis=1)
    sector = (np.floor((np.arctan2(d[:, 1], d[:, 0]) + np.pi) / (2 * np.pi) * sectors).astype(int)) % sectors
    order = np.lexsort((r, sector))
    r_sorted, sector_sorted = r[order], sector[order]
    starts = np.searchsorted(sector_sorted, np.arange(sectors), side="left")
    counts = np.bincount(sector, minlength=sectors)
    full = np.flatnonzero(counts >= 3)
    if len(full) < 5:
        return center
    # Per sector: the radius at the percentile (interpolated, as np.percentile), along the sector's mean direction.
    rank = percentile / 100.0 * (counts[full] - 1)
    below = np.floor(rank).astype(int)
    above = np.minimum(below + 1, counts[full] - 1)
    edge_r = r_sorted[starts[full] + below] + (rank - below) * (
        r_sorted[starts[full] + above] - r_sorted[starts[full] + below])
    u = np.stack([np.bincount(sector, d[:, i] / np.maximum(r, 1e-12), sectors)[full] for i in range(2)], axis=1)
    u /= np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)
    c, _, _ = fit_circle_xy(center + edge_r[:, None] * u)
    return c


def _rim_plane_normal(p: np.ndarray, center, min_radius_m: float, sectors: int = 36, top_k: int = 3,
                      max_offset_m: float = 0.015, min_arc_rad: float = np.pi) -> np.ndarray:
    """Unit normal (up) of the plane through the rim: the top edge of the walls, all around.

    The points at least ``min_radius_m`` from the rim's ``center`` (xy) are cut into ``sectors`` around it;
    the mean of each sector's ``top_k`` highest points is one point of the rim's top edge. A handle standing
    over the rim makes a few sectors far too high: the sector furthest from the plane is dropped, and the fit
    repeated, while any is more than ``max_offset_m`` off; sectors more than ``_MAX_TOP_OFFSET_M`` from the
    median top (the rim hidden there) are left out first. Noise lifts every sector's top alike, so it does not
    tilt the plane.
    Fewer than 6 sectors, or sectors less than ``min_arc_rad`` around (a plane through a short arc is
    poorly known across it): +z.
    """
    d = p[:, :2] - center
    far = np.linalg.norm(d, axis=1) >= min_radius_m
    sector = (np.floor((np.arctan2(d[far, 1], d[far, 0]) + np.pi) / (2 * np.pi) * sectors).astype(int)) % sectors
    q = p[far]
    order = np.lexsort((q[:, 2], sector))
    q, sector = q[order], sector[order]
    ends = np.searchsorted(sector, np.arange(sectors), side="right")
    counts = ends - np.searchsorted(sector, np.arange(sectors), side="left")
    ends = ends[counts >= top_k]
    tops = q[ends[:, None] - np.arange(1, top_k + 1)].mean(axis=1)  # [S, 3] mean of the top_k highest
    up = np.array([0.0, 0.0, 1.0])
    if len(tops) < 6:
        return up
    # A sector whose rim is hidden (a gripper or an arm in front of it) shows only the wall below: its top is
    # far lower than the rim's, by more than any tilt worth measuring moves it. Left in, a run of such sectors
    # pulls the plane over (50 degrees on an upright, pinched bucket) faster than one-by-one rejection undoes.
    use = np.abs(tops[:, 2] - np.median(tops[:, 2])) <= _MAX_TOP_OFFSET_M
    if use.sum() < 6:
        return up
    while True:
        centre = tops[use].mean(axis=0)
        A = np.column_stack([tops[:, :2] - centre[:2], np.ones(len(tops))])
        coef, *_ = np.linalg.lstsq(A[use], tops[use, 2], rcond=None)
        off = np.where(use, np.abs(A @ coef - tops[:, 2]), 0.0)
        if use.sum() <= 6 or off.max() <= max_offset_m:
            break
        use[int(np.argmax(off))] = False
    if _angular_coverage_rad(tops[use, :2], center, bins=sectors) < min_arc_rad:
        return up
    normal = np.array([-coef[0], -coef[1], 1.0])
    return normal / np.linalg.norm(normal)


def _rim_in_frame(p: np.ndarray, slice_m: float, min_slice_points: int, min_slice_fraction: float,
                  min_arc_rad: float, band_m: float, percentiles: tuple[float, float],
                  voxel_m: float) -> _RimInFrame:
    """The rim of points ``p`` ([N, 3]) in a frame F whose z is about the bucket's axis."""
    z = p[:, 2]
    order = np.sort(z)
    step = slice_m / 4
    starts = np.arange(order[0] - slice_m + step, order[-1] + step, step)  # windows [start, start + slice_m)
    counts = np.searchsorted(order, starts + slice_m) - np.searchsorted(order, starts)
    # The threshold follows the cloud's density: a fraction of a typical dense slice.
    threshold = max(min_slice_points, min_slice_fraction * float(np.percentile(counts[counts > 0], 75)))
    # A rim slice also goes around the bucket: its points away from the middle cover at least min_arc_rad of
    # a turn. A handle's slices hold two short pieces of the bail, on opposite sides: a few sectors only, however
    # many points (the top of an arched handle is nearly level and can hold as many as a rim slice).
    lo, hi = np.percentile(p[:, :2], [2.0, 98.0], axis=0)
    middle, body_radius = 0.5 * (lo + hi), 0.25 * float((hi - lo).sum())
    far = np.linalg.norm(p[:, :2] - middle, axis=1) >= 0.5 * body_radius
    far_xy = p[far, :2][np.argsort(z[far])]
    far_z = np.sort(z[far])
    top_edge = None
    for k in np.flatnonzero(counts >= threshold)[::-1]:
        window = far_xy[np.searchsorted(far_z, starts[k]):np.searchsorted(far_z, starts[k] + slice_m)]
        if _angular_coverage_rad(window, middle, bins=36) >= min_arc_rad:
            top_edge = float(starts[k] + slice_m)
            break
    if top_edge is None:
        raise ValueError(f"estimate_bucket_rim: no {slice_m} m slice holds {threshold:.0f} points around "
                         f"{np.degrees(min_arc_rad):.0f} degrees of the bucket ({len(p)} points)")
    height = _top_surface_height(z, top_edge, slice_m)
    band = np.flatnonzero((z >= height - band_m) & (z <= height + 0.5 * band_m))
    if len(band) < 3:
        raise ValueError(f"estimate_bucket_rim: only {len(band)} points in the rim band at {height:.3f} m")

    # The rim's circle. A voxel grid evens out the density first: the perspective samples the nearer edge of a
    # wide rim more densely, on the near and on the far side, which pulls a circle toward the camera.
    xy = p[band, :2]
    even = xy[_voxel_representatives(p[band], voxel_m)]
    if len(even) < 3:
        even = xy
    center, _, inliers = fit_circle_xy(even)
    inner, outer = np.percentile(np.linalg.norm(even[inliers] - center, axis=1), percentiles)
    center, _, _ = _fit_concentric_xy(even[inliers], center, 0.5 * (inner + outer), float(outer - inner))
    r = np.linalg.norm(xy - center, axis=1)
    near = np.abs(r - 0.5 * (inner + outer)) <= 0.5 * (outer - inner) + 3.0 * band_m  # not the handle's points
    if near.sum() < 3:
        near = np.ones(len(xy), dtype=bool)
    if _angular_coverage_rad(xy[near], center) < _SHORT_ARC_RAD:
        center = _outer_edge_center(xy[near], center, percentiles[1])
        r = np.linalg.norm(xy - center, axis=1)
    inner, outer = (float(v) for v in np.percentile(r[near], percentiles))
    arc = _angular_coverage_rad(xy[near], center)
    mask = np.zeros(len(p), dtype=bool)
    mask[band[near]] = True

    # The axis: the rim's plane tilts with it (the rim is level on an upright bucket). The taper: circles
    # through slices of the walls, from 15% to 85% of the depth below the rim.
    axis = _rim_plane_normal(p, center, 0.5 * inner, min_arc_rad=_MIN_TILT_ARC_RAD)
    bottom = float(np.percentile(z, 1.0))
    depth = height - bottom
    heights, radii = [], []
    half = max(slice_m, 0.05 * depth)
    c_k, r_k = center, 0.5 * (inner + outer)
    for h in np.linspace(height - 0.15 * depth, height - 0.85 * depth, _WALL_SLICES):
        xy_k = p[np.abs(z - h) <= half, :2]
        if len(xy_k) < 15:
            continue
        # Both faces a rim's thickness apart, from the slice above: one circle's radius would change with
        # which face the cameras see at that depth.
        c_new, r_new, _ = _fit_concentric_xy(xy_k, c_k, r_k, outer - inner, iterations=6)
        if 0.5 * inner < r_new < 1.5 * outer and np.linalg.norm(c_new - c_k) < 0.25 * outer:
            c_k, r_k = c_new, r_new
            heights.append(h)
            radii.append(r_k)
    taper = float(np.polyfit(heights, radii, 1)[0]) if len(heights) >= 3 else 0.0
    return _RimInFrame(height, center, outer, inner, mask, axis, bottom, taper, arc)


def estimate_bucket_rim(points_W, slice_m: float = 0.01, *, min_slice_points: int = 10,
                        min_slice_fraction: float = 0.3, min_arc_deg: float = 90.0, band_m: float | None = None,
                        percentiles: tuple[float, float] = (5.0, 95.0), voxel_m: float = 0.01,
                        max_tilt_rad: float = 0.5) -> BucketRim:
    """The bucket's rim from its points (Let's Handle It Sec. 2.3: the highest z-slice holding enough points).

    Args:
        points_W: ``[N, 3]`` bucket points in the world (z up), m, as segmented from the fused cloud; a
            one-sided view is fine, and so are handle points (over the rim or lying beside the wall) and a
            ball inside.
        slice_m: height of a z-slice (m). 1 cm holds a rim's top surface with 2-5 mm of noise. Slices slide
            in quarter steps.
        min_slice_points: a rim slice holds at least this many points ...
        min_slice_fraction: ... and at least this fraction of a typical dense slice (the 75th percentile of
            the slices' counts), so the threshold follows the cloud's density ...
        min_arc_deg: ... and its points away from the bucket's middle go at least this far around (deg); a
            handle's slices do not.
        band_m: rim points lie from ``band_m`` below the rim's top surface to half of it above (m);
            default ``slice_m``.
        percentiles: radial percentiles of the rim points taken as its inner and outer edge; trims noise.
        voxel_m: the rim's circle is fitted to one point per voxel of this size (m), evening out the density.
        max_tilt_rad: an axis tilted more than this is reported but not sliced along (a bucket on its side
            has no rim to find this way).
    Returns:
        A :class:`BucketRim`. A rim seen less than half-way around gives no tilt (a plane through a short arc
        is poorly known across it): the bucket is then taken as upright.
    Raises:
        ValueError: invalid input (wrong shape, NaN), fewer than 30 points, or no slice dense enough.
    """
    p_W = as_points(points_W, "points_W", allow_empty=False)
    if len(p_W) < MIN_POINTS:
        raise ValueError(f"estimate_bucket_rim: needs at least {MIN_POINTS} bucket points, got {len(p_W)}")
    if not slice_m > 0:
        raise ValueError(f"estimate_bucket_rim: slice_m must be positive, got {slice_m}")
    band = slice_m if band_m is None else float(band_m)
    # A first guess of the axis from the top edge all around the bucket's middle, so that slicing along it
    # (frame F) finds a tilted bucket's rim at the first go; only a view nearly all around is trusted this
    # early. When the rim's plane still says the bucket is tilted in F, slice again along it.
    lo, hi = np.percentile(p_W[:, :2], [2.0, 98.0], axis=0)
    axis_W = _rim_plane_normal(p_W, 0.5 * (lo + hi), 0.125 * float((hi - lo).sum()), min_arc_rad=1.5 * np.pi)
    tilted = np.deg2rad(1.0) < np.arccos(np.clip(axis_W[2], -1.0, 1.0)) <= max_tilt_rad
    R_WF = _frame_with_z(axis_W) if tilted else np.eye(3)
    for attempt in range(_MAX_PASSES):
        p_F = p_W @ R_WF
        rim = _rim_in_frame(p_F, slice_m, min_slice_points, min_slice_fraction, np.deg2rad(min_arc_deg), band,
                            percentiles, voxel_m)
        axis_W = R_WF @ rim.axis_F
        converged = rim.axis_F[2] >= np.cos(np.deg2rad(1.0))
        if converged or attempt == _MAX_PASSES - 1 or axis_W[2] < np.cos(max_tilt_rad):
            break
        R_WF = _frame_with_z(axis_W)
    center_W = R_WF @ np.array([rim.center_xy[0], rim.center_xy[1], rim.height])
    return BucketRim(
        height_m=float(center_W[2]),
        center_W=center_W,
        outer_radius_m=rim.outer,
        inner_radius_m=rim.inner,
        thickness_m=rim.outer - rim.inner,
        axis_W=axis_W,
        points_W=p_W[rim.mask],
        depth_m=float(rim.height - rim.bottom),
        taper_m_per_m=rim.taper,
        arc_rad=rim.arc,
    )


# ---------------------------------------------------------------------------------------------- pinching


def classify_rim_thickness(thickness_m: float, threshold_m: float = RIM_THICKNESS_THRESHOLD_M) -> RimThickness:
    """The rim's class from its thickness (m): "thin" (a gripper can pinch it) up to ``threshold_m``, else
    "thick" (the robot hugs the bucket instead)."""
    if not np.isfinite(thickness_m) or thickness_m < 0:
        raise ValueError(f"classify_rim_thickness: thickness_m must be a finite, non-negative length, got {thickness_m}")
    return "thin" if thickness_m <= threshold_m else "thick"


def rim_is_pinchable(rim: BucketRim, max_opening_m: float = PANDA_MAX_OPENING_M,
                     margin_m: float = PINCH_MARGIN_M) -> bool:
    """Whether a parallel gripper opening to ``max_opening_m`` can pinch the rim with ``margin_m`` to spare.

    Let's Handle It Sec. 2.5, Move Bucket: a thin rim takes the prehensile branch, a thick one the hugging
    branch. With the defaults (a Panda, 2.5 cm margin) the limit is :data:`RIM_THICKNESS_THRESHOLD_M` (0.055 m).
    """
    return classify_rim_thickness(rim.thickness_m, max_opening_m - margin_m) == "thin"


# ---------------------------------------------------------------------------------------------- inside, ball


def points_inside_bucket(points_W, rim: BucketRim, margin_m: float = 0.01) -> np.ndarray:
    """Mask ([N] bool) of the points inside the bucket: below the rim, within the (tapered) inner wall.

    The inside is the cone frustum under the rim, along ``rim.axis_W``: from the rim's top surface down to
    ``rim.depth_m`` below it, of radius ``rim.inner_radius_m`` at the rim, shrinking by
    ``rim.taper_m_per_m`` per metre down.

    Args:
        points_W: ``[N, 3]`` world points, m (e.g. the ball's points).
        margin_m: the region grows by this (m) sideways, downward and above the rim; negative shrinks it
            (to count only points well inside).
    """
    p = as_points(points_W, "points_W")
    q = p - rim.center_W
    s = q @ rim.axis_W  # height relative to the rim, negative inside
    radial = np.linalg.norm(q - s[:, None] * rim.axis_W, axis=1)
    limit = rim.inner_radius_m + rim.taper_m_per_m * np.minimum(s, 0.0) + margin_m
    return (s <= margin_m) & (s >= -rim.depth_m - margin_m) & (radial <= limit)


def ball_points_mask(colors, rgb=(0, 255, 255), *, hue_tolerance_deg: float = 20.0, min_saturation: float = 0.5,
                     min_value: float = 0.2) -> np.ndarray:
    """Mask ([N] bool) of the points whose colour is the ball's (default cyan), by hue under any shading.

    Shading scales a colour's brightness but keeps its hue, so a point matches when its hue is within
    ``hue_tolerance_deg`` of ``rgb``'s and it is saturated (``min_saturation``) and bright enough
    (``min_value``) for its hue to mean something.

    Args:
        colors: ``[N, 3]`` point colours: integers in 0-255, or floats in [0, 1] (floats above 1 are read
            as 0-255).
        rgb: the ball's colour, 0-255; it must be saturated (a grey or white ball has no hue to match).
    """
    c = np.asarray(colors)
    if c.ndim != 2 or c.shape[1] != 3:
        raise ValueError(f"colors: expected shape [N, 3], got {list(c.shape)}")
    if not np.issubdtype(c.dtype, np.number) or (np.issubdtype(c.dtype, np.floating) and not np.isfinite(c).all()):
        raise ValueError("colors: expected finite numbers")
    target = np.asarray(rgb, dtype=np.float64).reshape(-1)
    if target.shape != (3,):
        raise ValueError(f"rgb: expected 3 values in 0-255, got {list(target.shape)}")
    hsv_target = rgb_to_hsv(target[None] / 255.0)[0]
    if hsv_target[1] < min_saturation:
        raise ValueError(f"rgb: {tuple(target.astype(int))} is not a saturated colour; its hue cannot be matched")
    if len(c) == 0:
        return np.zeros(0, dtype=bool)
    # Saturation and value first, on the colours as they come (uint8 from a camera: no float copy of the whole
    # cloud), the hue only of the points they leave: the tree runs this on the whole cloud (tens of thousands of
    # points) every other tick, and few points are saturated and bright.
    scale = 255.0 if np.issubdtype(c.dtype, np.integer) or c.max() > 1.0 else 1.0
    brightest, darkest = channel_max_min(c)
    value = brightest.astype(np.float32)
    spread = value - darkest.astype(np.float32)
    mask = (spread >= min_saturation * value) & (value > 0) & (value >= min_value * scale)
    candidates = np.flatnonzero(mask)
    hue = rgb_to_hsv(c[candidates].astype(np.float64) / scale)[:, 0]
    hue_diff = np.abs((hue - hsv_target[0] + 180.0) % 360.0 - 180.0)
    mask[candidates] = hue_diff <= hue_tolerance_deg
    return mask
