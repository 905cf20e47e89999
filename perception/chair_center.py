"""A swivel chair's centre, its upper body and its backrest, from its points seen from behind.

Let's Handle It (arXiv 2202.11792) Sec. 2.3, "Estimating the chair center" (and Fig. 10): the robot starts behind the
chair, so its cameras see mostly the back of the backrest, and the mean of the points lies well behind the chair's
centre.
The paper assumes instead that the chair's upper body ("including and above the cushion") is symmetric:
the backrest's main axis in the floor plane comes from PCA, the bounding box of the upper body along that
axis and the one across it is found, and the box's centre is the chair's centre. Fig. 10 reports it closer
to the truth than the mean of all points (MSE 0.038 against 0.11).

What success is measured on is the swivel axis (the seat's centre in xy). The box spans the backrest behind
the seat too, and from behind the seat's front is rarely seen, so the box's centre lies behind the axis
(by 5-30 cm in the tests). :class:`ChairCenter` therefore carries corrections next to the paper's centre,
each documented where it is computed: the centre of the box's seat part (the box less the backrest's
depth), and, when the cameras see them, the gas-lift column and the circle through the star base's casters
(:attr:`ChairCenter.swivel_center_W` picks the best one available).

Conventions (world W, z up, floor at z = 0): horizontal unit axes; ``forward_W`` (= the backrest's
``normal_W``) points from the backrest toward the seat, the way a sitter faces; ``width_axis_W`` is
``z x forward`` (the sitter's left). Centres lie on the floor: their z is the lowest chair point's.

Numpy in, numpy out; about 1-2 ms for 5,000 points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from handleit.perception.bucket_rim import fit_circle_xy
from handleit.perception.point_cloud import Z_W, as_points

MIN_POINTS = 30  # fewer chair points than this are not a chair to fit
# A slice narrower than this fraction of the widest slice is the gas-lift column (5-7 cm) or nothing seen;
# a star base is 0.56-0.7 m across, and even a seat seen only from behind (its back face) 0.35-0.55 m.
NARROW_FRACTION = 0.3
# The backrest is first found in the top part of the upper body: above the armrests, which sit 0.18-0.25 m
# over a seat and at least 0.12 m under the backrest's top on office chairs.
BACKREST_TOP_FRACTION = 0.2
_COLUMN_MAX_WIDTH_M = 0.08  # a slice of the gas-lift column: 4-7 cm across (the star base's hub is ~10)
_COLUMN_MIN_HEIGHT_M = 0.04  # ... seen over at least this height
_BASE_RADIUS_M = (0.2, 0.45)  # casters of office chairs' star bases: 0.25-0.38 m from the axis
_CASTER_BAND_M = 0.04  # the casters' lower part: up to this above the lowest point (casters are 5-7 cm tall)
_TOP_SLAB_M = 0.03  # the backrest's top edge: its top 3 cm

SwivelSource = Literal["base", "column", "seat"]


@dataclass(frozen=True)
class Backrest:
    """The backrest panel of a chair, in the world W (z up)."""

    top_height_m: float  # world z of the panel's top edge, m
    top_center_W: np.ndarray  # [3] middle of the top edge (xy of its top 3 cm's box, z = top_height_m), m
    center_W: np.ndarray  # [3] middle of the panel's box (along width, normal and z), m
    width_axis_W: np.ndarray  # [3] unit, horizontal, along the panel's width (PCA); z x normal_W
    normal_W: np.ndarray  # [3] unit, horizontal, from the backrest toward the seat (the chair's forward)
    width_m: float  # extent along width_axis_W, m
    thickness_m: float  # extent of the top edge (its top 3 cm) along normal_W: what a gripper closes across, m
    # world z of the lowest panel slice found, m (from behind, a seat's back face in line with the panel
    # can extend it down to the seat's underside)
    bottom_height_m: float
    points_W: np.ndarray  # [M, 3] the panel's points, m


@dataclass(frozen=True)
class ChairCenter:
    """A chair's centre (Let's Handle It Fig. 10: the upper body's box along the backrest's axes) and corrections.

    Centres are on the floor: z is the lowest chair point's.
    """

    center_W: np.ndarray  # [3] the paper's estimate: centre of the upper body's box, m
    width_axis_W: np.ndarray  # [3] unit, horizontal: the backrest's main axis (PCA)
    forward_W: np.ndarray  # [3] unit, horizontal: across it, from the backrest toward the seat
    extents_m: np.ndarray  # [2] the box's extent along width_axis_W and forward_W, m
    seat_center_W: np.ndarray  # [3] centre of the box's seat part: the box less the backrest's depth, m
    column_center_W: np.ndarray | None  # [3] the gas-lift column's position, when seen; else None
    base_center_W: np.ndarray | None  # [3] centre of the circle through the star base's casters, when seen
    seat_level_m: float  # world z where the upper body starts (the seat's underside), m
    backrest: Backrest
    n_upper_points: int  # points in the upper body

    @property
    def swivel_center_W(self) -> np.ndarray:
        """The best estimate of the swivel axis (what the task measures): the casters' circle when seen, else
        the column when seen, else the centre of the box's seat part."""
        for center in (self.base_center_W, self.column_center_W):
            if center is not None:
                return center
        return self.seat_center_W

    @property
    def swivel_source(self) -> SwivelSource:
        """Where :attr:`swivel_center_W` comes from: "base", "column" or "seat"."""
        if self.base_center_W is not None:
            return "base"
        return "column" if self.column_center_W is not None else "seat"

    @property
    def X_WC(self) -> np.ndarray:
        """4x4 pose of a chair frame C: origin ``center_W``, x forward, y along the width (left), z up."""
        X = np.eye(4)
        X[:3, :3] = np.stack([self.forward_W, self.width_axis_W, Z_W], axis=1)
        X[:3, 3] = self.center_W
        return X


# ---------------------------------------------------------------------------------------------- heights


def _slice_widths(p: np.ndarray, z0: float, slice_m: float, min_points: int):
    """Per horizontal slice of ``slice_m`` from ``z0`` up: point count and width (m).

    The width is that of a uniform spread with the slice's largest xy standard deviation (sqrt(12) sigma),
    from per-slice sums (one pass, no loop); a slice with fewer than ``min_points`` points is 0 wide.
    """
    index = np.floor((p[:, 2] - z0) / slice_m).astype(int)
    n = int(index.max()) + 1
    count = np.bincount(index, minlength=n).astype(np.float64)
    safe = np.maximum(count, 1.0)
    x, y = p[:, 0] - p[:, 0].mean(), p[:, 1] - p[:, 1].mean()
    mx, my = np.bincount(index, x, n) / safe, np.bincount(index, y, n) / safe
    cxx = np.bincount(index, x * x, n) / safe - mx**2
    cyy = np.bincount(index, y * y, n) / safe - my**2
    cxy = np.bincount(index, x * y, n) / safe - mx * my
    lam = 0.5 * (cxx + cyy) + np.sqrt(np.maximum(0.25 * (cxx - cyy) ** 2 + cxy**2, 0.0))
    width = np.sqrt(12.0 * np.maximum(lam, 0.0))
    width[count < min_points] = 0.0
    return count, width


def _seat_level(p: np.ndarray, slice_m: float, min_points: int):
    """The seat's underside (world z, m) and the indices of the gas-lift column's points (or None).

    From the floor up a swivel chair is wide (the star base), narrow (the column, or nothing the cameras see:
    narrower than a third of the widest slice), then wide again (the seat, however little of it is seen):
    the seat level is the bottom of the first wide slice above the first narrow run. Without a narrow run
    above a wide one, all of the chair counts as upper body (the lowest point's height is returned).
    """
    z = p[:, 2]
    z0 = float(z.min())
    _, width = _slice_widths(p, z0, slice_m, min_points)
    narrow = width < NARROW_FRACTION * width.max()
    first_wide = int(np.argmax(~narrow))
    narrow_after = np.flatnonzero(narrow[first_wide:]) + first_wide
    if len(narrow_after) == 0:
        return z0, None
    i_col = int(narrow_after[0])
    wide_after = np.flatnonzero(~narrow[i_col:]) + i_col
    if len(wide_after) == 0:
        return z0, None
    i_seat = int(wide_after[0])
    # The column: the narrow run's thin slices, away from the seat's underside (where a backrest's support
    # bar may hang down), seen over at least _COLUMN_MIN_HEIGHT_M.
    k = np.arange(len(width))
    thin = (k >= i_col) & (k < i_seat - 1) & (_slice_widths(p, z0, slice_m, 2)[1] <= _COLUMN_MAX_WIDTH_M)
    column = np.flatnonzero(thin[np.minimum(np.floor((z - z0) / slice_m).astype(int), len(thin) - 1)])
    if len(column) < min_points or np.ptp(z[column]) < _COLUMN_MIN_HEIGHT_M:
        column = None
    return z0 + i_seat * slice_m, column


def _top_height(z: np.ndarray, slice_m: float, min_points: int) -> float:
    """Height (m) of the top surface of points whose top is a level edge (a backrest's top).

    The highest ``slice_m`` window (sliding in quarter steps) holding ``min_points`` and a fifth of a typical
    dense window is the top; the median of the points from its bottom up 1.5 windows is the surface (stray
    points above are too few to make a window).
    """
    zs = np.sort(z)
    step = slice_m / 4
    starts = np.arange(zs[0], zs[-1] + step, step)
    counts = np.searchsorted(zs, starts + slice_m) - np.searchsorted(zs, starts)
    threshold = max(min_points, 0.2 * float(np.percentile(counts[counts > 0], 75)))
    dense = np.flatnonzero(counts >= threshold)
    top = float(starts[dense[-1]]) if len(dense) else float(zs[0])
    near = zs[(zs >= top) & (zs < top + 1.5 * slice_m)]
    return float(np.median(near)) if len(near) else float(zs[-1])


def _base_center(p: np.ndarray, z0: float, band_m: float):
    """Centre (xy) of the circle through the star base's casters, or None when they do not make one.

    The casters stand on the floor at the ends of the base's legs, all at one radius from the swivel axis:
    a circle through the lowest points (``band_m`` above the lowest) has the axis as its centre. It counts
    only when at least 3 separate casters are seen, not all on one side (no gap over 250 degrees), and its
    radius is a star base's (_BASE_RADIUS_M).
    """
    low = p[p[:, 2] < z0 + band_m, :2]
    if len(low) < 10:
        return None
    center, radius, inliers = fit_circle_xy(low)
    if not (_BASE_RADIUS_M[0] <= radius <= _BASE_RADIUS_M[1]):
        return None
    d = low[inliers] - center
    angles = np.sort(np.arctan2(d[:, 1], d[:, 0]))
    gaps = np.diff(np.concatenate([angles, angles[:1] + 2 * np.pi]))
    clusters = int((gaps > np.deg2rad(20.0)).sum())
    if clusters < 3 or gaps.max() > np.deg2rad(250.0):
        return None
    return center


# ---------------------------------------------------------------------------------------------- masks


def upper_body_mask(points_W, slice_m: float = 0.02, *, min_slice_points: int = 5) -> np.ndarray:
    """Mask ([N] bool) of a swivel chair's upper body: the seat and everything above it (Let's Handle It).

    The seat level comes from the points' widths by height: below the seat only the thin gas-lift column
    rises between the star base and the seat (see :func:`_seat_level`); no chair size is assumed.

    Args:
        points_W: ``[N, 3]`` chair points in the world (z up), m.
        slice_m: height of the slices whose widths are compared (m).
        min_slice_points: a slice with fewer points counts as empty (narrow).
    Raises:
        ValueError on invalid input or fewer than 30 points.
    """
    p = _chair_points(points_W)
    level, _ = _seat_level(p, slice_m, min_slice_points)
    return p[:, 2] >= level


def _chair_points(points_W) -> np.ndarray:
    p = as_points(points_W, "points_W", allow_empty=False)
    if len(p) < MIN_POINTS:
        raise ValueError(f"chair: needs at least {MIN_POINTS} chair points, got {len(p)}")
    return p


# ---------------------------------------------------------------------------------------------- backrest


def _horizontal_axes(xy: np.ndarray):
    """PCA in the floor plane: (major, minor) unit 2-vectors of ``[N, 2]`` points."""
    _, vectors = np.linalg.eigh(np.cov((xy - xy.mean(axis=0)).T))
    return vectors[:, 1], vectors[:, 0]


def _backrest(p: np.ndarray, upper: np.ndarray, seat_level: float, slice_m: float, min_points: int) -> Backrest:
    """The backrest from all chair points ``p`` and the upper body's mask."""
    u_pts = p[upper]
    z = u_pts[:, 2]
    top = _top_height(z, 0.5 * slice_m, min_points)
    # The top strip: above the armrests. Its PCA gives the panel's width axis.
    band = max(BACKREST_TOP_FRACTION * (top - seat_level), 2 * slice_m)
    strip = u_pts[z >= top - band]
    if len(strip) < 3:
        raise ValueError(f"estimate_backrest: only {len(strip)} points near the top at {top:.3f} m")
    origin = strip[:, :2].mean(axis=0)
    major, minor = _horizontal_axes(strip[:, :2])
    s_u = (strip[:, :2] - origin) @ major
    u_lo, u_hi = np.percentile(s_u, [1.0, 99.0])
    # The top edge itself (a slab of _TOP_SLAB_M, where the top face is seen from above): its depth is what
    # a gripper closes across, and its middle is where it closes (a reclined panel's top lies behind its middle).
    slab = u_pts[z >= top - max(_TOP_SLAB_M, slice_m)]
    s_n = (slab[:, :2] - origin) @ minor
    n_lo, n_hi = np.percentile(s_n, [5.0, 95.0])
    thickness = float(n_hi - n_lo)
    # Down from the strip, slice by slice, while a slice holds a panel about as wide as the strip inside its
    # depth corridor; the corridor follows the slice above (a reclined panel leans back). The seat and the
    # armrests lie in front of the corridor.
    keep = z >= top - band
    uv = (u_pts[:, :2] - origin) @ np.stack([major, minor], axis=1)
    depth = 0.5 * (n_lo + n_hi)
    h = bottom = top - band
    while h - slice_m >= seat_level:
        in_slice = (z >= h - slice_m) & (z < h)
        corridor = in_slice & (np.abs(uv[:, 1] - depth) <= 0.5 * thickness + 0.02)
        corridor &= (uv[:, 0] >= u_lo - 0.02) & (uv[:, 0] <= u_hi + 0.02)
        if corridor.sum() < min_points or np.ptp(uv[corridor, 0]) < 0.5 * (u_hi - u_lo):
            break
        depth = float(np.median(uv[corridor, 1]))
        keep |= corridor
        h = bottom = h - slice_m
    panel = u_pts[keep]
    pu = (panel[:, :2] - origin) @ major
    pn = (panel[:, :2] - origin) @ minor
    pu_lo, pu_hi = np.percentile(pu, [1.0, 99.0])
    pn_lo, pn_hi = np.percentile(pn, [1.0, 99.0])
    # Forward: the star base and the column stand under the seat, in front of the backrest (its points are
    # most of a view from behind, so the mean of all points would not do); without them, the seat and armrests.
    centre_xy = origin + major * 0.5 * (pu_lo + pu_hi) + minor * 0.5 * (pn_lo + pn_hi)
    lower = p[p[:, 2] < seat_level, :2]
    if len(lower) < min_points:
        lower = u_pts[~keep, :2] if (~keep).sum() >= min_points else p[:, :2]
    if (lower.mean(axis=0) - panel[:, :2].mean(axis=0)) @ minor < 0:
        minor = -minor
        n_lo, n_hi = -n_hi, -n_lo
    normal = np.array([minor[0], minor[1], 0.0])
    width_axis = np.cross(Z_W, normal)
    top_xy = origin + major * 0.5 * (u_lo + u_hi) + minor * 0.5 * (n_lo + n_hi)
    return Backrest(
        top_height_m=top,
        top_center_W=np.array([top_xy[0], top_xy[1], top]),
        center_W=np.array([centre_xy[0], centre_xy[1], 0.5 * (top + bottom)]),
        width_axis_W=width_axis,
        normal_W=normal,
        width_m=float(pu_hi - pu_lo),
        thickness_m=thickness,
        bottom_height_m=float(bottom),
        points_W=panel,
    )


def estimate_backrest(points_W, slice_m: float = 0.02, *, min_slice_points: int = 5) -> Backrest:
    """The backrest panel of a swivel chair, from the chair's points (world, z up, m).

    The top strip of the upper body (its top fifth, above the armrests) gives, by PCA in the floor plane, the
    width axis; its top 3 cm give the top edge's middle and thickness; the panel then grows down slice by slice while a slice holds a
    panel as wide inside the strip's depth corridor. The normal is horizontal, across the width axis, turned
    toward the star base and column (under the seat, in front of the backrest), or without them toward the
    rest of the upper body.

    Args:
        points_W: ``[N, 3]`` chair points in the world (all of the chair: the base and seat tell which side is
            the front), m.
        slice_m: slice height (m) for the seat level and the panel's growth.
        min_slice_points: fewer points make a slice empty.
    Raises:
        ValueError on invalid input, fewer than 30 points, or no backrest top found.
    """
    p = _chair_points(points_W)
    level, _ = _seat_level(p, slice_m, min_slice_points)
    return _backrest(p, p[:, 2] >= level, level, slice_m, min_slice_points)


# ---------------------------------------------------------------------------------------------- centre


def mean_center(points_W) -> np.ndarray:
    """The baseline Let's Handle It compares with: the mean of all chair points in xy; z is the lowest point's."""
    p = _chair_points(points_W)
    return np.array([p[:, 0].mean(), p[:, 1].mean(), p[:, 2].min()])


def estimate_chair_center(points_W, slice_m: float = 0.02, *, min_slice_points: int = 5,
                          trim_percent: float = 0.5) -> ChairCenter:
    """A swivel chair's centre by Let's Handle It Fig. 10, and corrections toward its swivel axis.

    1. Upper body: the seat and above (:func:`upper_body_mask`).
    2. Axes: the backrest's main axis in the floor plane (PCA of its top strip) and the horizontal axis
       across it, turned forward (:func:`estimate_backrest`).
    3. Box: the upper body's extent along both axes (``trim_percent`` of the points trimmed at each end
       against stray points); ``center_W`` is its centre, on the floor.

    Corrections (the box spans the backrest behind the seat, so its centre lies behind the swivel axis):
    ``seat_center_W`` is the centre of the box's part in front of the backrest (still short of the axis when
    the seat's front is not seen); ``column_center_W`` is the median of the gas-lift column's points when at
    least ``min_slice_points`` are seen over 4 cm between the base and the seat (its seen, back half puts it
    2-3 cm toward the cameras); ``base_center_W`` is the centre of the circle through the casters, when at
    least 3 are seen (see :func:`_base_center`). :attr:`ChairCenter.swivel_center_W` picks among them.

    Args:
        points_W: ``[N, 3]`` chair points in the world (z up, floor at 0), m.
    Raises:
        ValueError on invalid input or fewer than 30 points.
    """
    p = _chair_points(points_W)
    floor = float(p[:, 2].min())
    level, column = _seat_level(p, slice_m, min_slice_points)
    upper = p[:, 2] >= level
    backrest = _backrest(p, upper, level, slice_m, min_slice_points)
    u, f = backrest.width_axis_W[:2], backrest.normal_W[:2]
    xy = p[upper, :2]
    su, sf = xy @ u, xy @ f
    u_lo, u_hi = np.percentile(su, [trim_percent, 100.0 - trim_percent])
    f_lo, f_hi = np.percentile(sf, [trim_percent, 100.0 - trim_percent])

    def on_floor(a: float, b: float) -> np.ndarray:
        point = a * u + b * f
        return np.array([point[0], point[1], floor])

    # The backrest's front face, from its points' depth (they lie at the back of the box).
    back_f = backrest.points_W[:, :2] @ f
    seat_back = min(float(np.percentile(back_f, 99.0)), f_hi)
    column_center = base_center = None
    if column is not None:
        c = np.median(p[column, :2], axis=0)
        column_center = np.array([c[0], c[1], floor])
    c = _base_center(p, floor, _CASTER_BAND_M)
    if c is not None:
        base_center = np.array([c[0], c[1], floor])
    return ChairCenter(
        center_W=on_floor(0.5 * (u_lo + u_hi), 0.5 * (f_lo + f_hi)),
        width_axis_W=backrest.width_axis_W,
        forward_W=backrest.normal_W,
        extents_m=np.array([u_hi - u_lo, f_hi - f_lo]),
        seat_center_W=on_floor(0.5 * (u_lo + u_hi), 0.5 * (seat_back + f_hi)),
        column_center_W=column_center,
        base_center_W=base_center,
        seat_level_m=float(level),
        backrest=backrest,
        n_upper_points=int(upper.sum()),
    )
