"""Colour markers: points whose colour is a marker's (coloured tape on a handle, a backrest, a rim, an object).

"Let's Handle It" (arXiv 2202.11792) marked a real drawer's handle with red tape so that colour alone found it. A
marker is found by an HSV threshold: shading under white light scales a colour's brightness (its value) but
keeps its hue, and a white highlight lowers its saturation, so a point is marker-coloured when its hue is
within ``hue_tolerance_deg`` of the marker's, and it is saturated and bright enough for its hue to mean
something. Greys (the robot, the floor, metal) have no hue and never match.

Colours are as the cameras display them (sRGB, what ``Observation.colors`` holds). A render material's base
colour is linear: :func:`srgb_of_linear` converts it (the bundled envs' markers, ``envs/markers.py``).

Numpy in, numpy out; :func:`marker_points` clusters the matching points in the world (open3d's DBSCAN) and
raises :class:`~handleit.perception.segmentation_errors.SegmentationError` when the marker is not seen or is
seen in two places.
"""

from __future__ import annotations

import numpy as np

from handleit.perception.segmentation_errors import SegmentationError, check_mask, check_points

HUE_TOLERANCE_DEG = 15.0  # displayed hue within this of the marker's
MIN_SATURATION = 0.5  # ... at least this saturated (highlights and greys are less)
MIN_VALUE = 0.12  # ... and this bright (in deep shadow the hue is noise)
DISPLAY_GAMMA = 2.2  # the cameras' sRGB encoding, approximated by a power law (as envs/markers.py)


def srgb_of_linear(rgb_linear) -> tuple[int, int, int]:
    """The displayed colour (0-255 sRGB) of a linear base colour in [0, 1] (a render material's)."""
    c = np.asarray(rgb_linear, dtype=np.float64).reshape(-1)
    if c.shape != (3,) or not np.isfinite(c).all() or c.min() < 0.0 or c.max() > 1.0:
        raise SegmentationError(f"rgb_linear: expected three numbers in [0, 1], got {np.asarray(rgb_linear).tolist()}")
    return tuple(int(v) for v in np.round(255.0 * c ** (1.0 / DISPLAY_GAMMA)))


def rgb_to_hsv(rgb01: np.ndarray) -> np.ndarray:
    """``[N, 3]`` rgb in [0, 1] to hsv: hue in degrees [0, 360), saturation and value in [0, 1]."""
    mx = rgb01.max(axis=1)
    delta = mx - rgb01.min(axis=1)
    safe = np.where(delta > 0, delta, 1.0)
    r, g, b = rgb01.T
    hue = np.where(mx == r, (g - b) / safe % 6, np.where(mx == g, (b - r) / safe + 2, (r - g) / safe + 4)) * 60.0
    hue = np.where(delta > 0, hue, 0.0)
    saturation = np.where(mx > 0, delta / np.where(mx > 0, mx, 1.0), 0.0)
    return np.column_stack([hue % 360.0, saturation, mx])


def channel_max_min(colors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per point, the largest and the smallest of its three channels (``[N, 3]`` in, two ``[N]`` arrays of the same
    dtype out): an hsv value and, less the smallest, its spread, for the whole-cloud prefilters. Column by column:
    numpy's max and min along a 3-long axis take ~6.6 ms on a 192,000-point cloud, this ~0.3 ms (as
    handleit.clouds.finite_rows)."""
    r, g, b = colors[:, 0], colors[:, 1], colors[:, 2]
    return np.maximum(np.maximum(r, g), b), np.minimum(np.minimum(r, g), b)


def check_colors(colors, n: int | None = None) -> np.ndarray:
    """``colors`` as uint8 ``[N, 3]`` (N = ``n`` when given), or SegmentationError naming the problem."""
    c = np.asarray(colors)
    if c.dtype != np.uint8:
        raise SegmentationError(f"colors: expected uint8 values 0-255, got dtype {c.dtype}")
    if c.ndim != 2 or c.shape[1] != 3:
        raise SegmentationError(f"colors: expected shape [N, 3], got {list(c.shape)}")
    if n is not None and len(c) != n:
        raise SegmentationError(f"colors: {len(c)} colours for {n} points")
    return c


def _marker_hsv(marker_rgb, min_saturation: float, min_value: float) -> np.ndarray:
    try:
        m = np.asarray(marker_rgb, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as error:
        raise SegmentationError(f"marker_rgb: expected three values 0-255, got {marker_rgb!r}") from error
    if m.shape != (3,) or not np.isfinite(m).all() or m.min() < 0 or m.max() > 255:
        raise SegmentationError(f"marker_rgb: expected three values 0-255, got {np.asarray(marker_rgb).tolist()}")
    hsv = rgb_to_hsv(m[None] / 255.0)[0]
    if hsv[1] < min_saturation or hsv[2] < min_value:
        raise SegmentationError(f"marker_rgb: {m.tolist()} is too grey or dark to find by its hue (saturation "
                                f"{hsv[1]:.2f}, value {hsv[2]:.2f}; at least {min_saturation}, {min_value})")
    return hsv


def find_marker(colors, marker_rgb, *, hue_tolerance_deg: float = HUE_TOLERANCE_DEG,
                min_saturation: float = MIN_SATURATION, min_value: float = MIN_VALUE) -> np.ndarray:
    """Mask ([N] bool) of the points whose displayed colour is the marker's, under any shading.

    Args:
        colors: ``[N, 3]`` uint8 point colours (sRGB, as the cameras display them).
        marker_rgb: the marker's displayed colour, three values 0-255; it must be saturated (a grey or white
            marker has no hue to match). For a linear render colour, pass ``srgb_of_linear(rgb)``.
        hue_tolerance_deg: largest hue difference (degrees, around the colour wheel).
        min_saturation, min_value: the least saturation and value (0-1) of a matching point.
    """
    c = check_colors(colors)
    target = _marker_hsv(marker_rgb, min_saturation, min_value)
    # Saturation and value in integers first (a whole cloud is ~192,000 points; few are saturated and bright),
    # then the hue of those alone.
    brightest, darkest = channel_max_min(c)
    mx = brightest.astype(np.int16)
    delta = mx - darkest
    maybe = np.flatnonzero((mx >= min_value * 255.0) & (delta >= min_saturation * mx) & (delta > 0))
    hsv = rgb_to_hsv(c[maybe].astype(np.float64) / 255.0)
    hue_gap = np.abs((hsv[:, 0] - target[0] + 180.0) % 360.0 - 180.0)
    found = np.zeros(len(c), dtype=bool)
    found[maybe] = (hue_gap <= hue_tolerance_deg) & (hsv[:, 1] >= min_saturation) & (hsv[:, 2] >= min_value)
    return found


def marker_points(points_W, colors, marker_rgb, candidate_mask, min_points: int = 10, cluster_eps_m: float = 0.03,
                  max_marker_size_m: float = 0.6, **threshold) -> np.ndarray:
    """The marker's points ([N] bool): the marker-coloured candidate points, as one cluster in the world.

    Clusters (open3d DBSCAN, ``cluster_eps_m``) with fewer than ``min_points`` points are stray pixels and
    ignored. Clusters whose centres lie within ``max_marker_size_m`` of the largest one's are the same marker
    split by something in front of it (a gripper across the tape) and are kept with it.

    Args:
        points_W: ``[N, 3]`` world points (m).
        colors: ``[N, 3]`` uint8 displayed colours of the points.
        marker_rgb: the marker's displayed colour, 0-255 (see :func:`find_marker`).
        candidate_mask: ``[N]`` bool, the points that may be the marker (not the robot).
        min_points: the least points of a marker (and of a cluster that counts).
        cluster_eps_m: DBSCAN neighbourhood (m): gaps wider than this split clusters.
        max_marker_size_m: the largest extent of one marker (m); clusters farther apart are two places.
        threshold: ``hue_tolerance_deg``, ``min_saturation``, ``min_value`` of :func:`find_marker`.
    Raises:
        SegmentationError: bad input; "no marker colour found" (fewer than ``min_points`` matching points, or
            no cluster of that many); "marker found in two places" (two clusters farther apart than
            ``max_marker_size_m``, with their centres).
    """
    p = check_points(points_W)
    c = check_colors(colors, len(p))
    candidate = check_mask(candidate_mask, len(p), "candidate_mask")
    if min_points < 1:
        raise SegmentationError(f"min_points must be at least 1, got {min_points}")
    rgb = np.asarray(marker_rgb).tolist()
    matches = find_marker(c, marker_rgb, **threshold) & candidate
    index = np.flatnonzero(matches)
    if len(index) < min_points:
        raise SegmentationError(f"no marker colour found: {len(index)} candidate points match the marker colour "
                                f"{rgb} (at least {min_points} needed)")
    import open3d as o3d  # lazy: a second to import

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(p[index]))
    labels = np.asarray(cloud.cluster_dbscan(eps=cluster_eps_m, min_points=1, print_progress=False))
    sizes = np.bincount(labels[labels >= 0])
    big = np.flatnonzero(sizes >= min_points)
    if len(big) == 0:
        raise SegmentationError(f"no marker colour found: {len(index)} points match the marker colour {rgb} but "
                                f"they are scattered (no {min_points} within {cluster_eps_m} m of each other)")
    big = big[np.argsort(-sizes[big])]
    centres = np.array([p[index[labels == k]].mean(axis=0) for k in big])
    distance = np.linalg.norm(centres - centres[0], axis=1)
    if distance.max() > max_marker_size_m:
        far = int(np.argmax(distance))
        raise SegmentationError(f"marker found in two places: {sizes[big[0]]} points around "
                                f"{np.round(centres[0], 3).tolist()} and {sizes[big[far]]} around "
                                f"{np.round(centres[far], 3).tolist()}, {distance[far]:.2f} m apart "
                                f"(one marker spans at most {max_marker_size_m} m)")
    result = np.zeros(len(p), dtype=bool)
    result[index[np.isin(labels, big)]] = True
    return result

