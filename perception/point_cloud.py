"""Point-cloud utilities: checks, frames, crops, ground removal, voxel downsampling, normals, plane fits.

Numpy in, numpy out. Points are ``[N, 3]`` arrays in metres, named by their frame (``p_W`` in the world W);
poses are 4x4 homogeneous matrices (``X_AB`` is the pose of frame B in frame A). The world is z up.

Per-call costs matter: most of these run inside a 100 Hz control loop. Everything here is plain numpy
except :func:`fit_plane` and :func:`estimate_normals`, which call open3d (imported lazily: it takes a second
to import and most callers never need it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Z_W = np.array([0.0, 0.0, 1.0])


# ---------------------------------------------------------------------------------------------- checks


def as_points(points, name: str = "points", *, allow_empty: bool = True) -> np.ndarray:
    """Check and convert a point array: ``[N, 3]`` (or one point ``[3]``), finite; returns float64 ``[N, 3]``.

    Raises ValueError naming ``name`` and the problem: wrong shape, NaN/inf, or (``allow_empty=False``) no
    points at all.
    """
    try:
        array = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: expected an [N, 3] array of numbers, got {type(points).__name__}") from error
    if array.ndim == 1 and array.shape[0] == 3:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != 3:
        raise ValueError(f"{name}: expected shape [N, 3], got {list(np.shape(points))}")
    if not allow_empty and len(array) == 0:
        raise ValueError(f"{name}: the point cloud is empty (0 points); at least one point is needed")
    if not np.isfinite(array).all():
        bad = int((~np.isfinite(array)).any(axis=1).sum())
        raise ValueError(f"{name}: {bad} of {len(array)} points contain NaN or inf")
    return array


def as_pose(X, name: str = "X") -> np.ndarray:
    """Check a homogeneous transform: 4x4, finite, last row [0, 0, 0, 1]; returns it as float64."""
    array = np.asarray(X, dtype=np.float64)
    if array.shape != (4, 4):
        raise ValueError(f"{name}: expected a 4x4 homogeneous transform, got shape {list(array.shape)}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: the transform contains NaN or inf")
    if not np.allclose(array[3], [0.0, 0.0, 0.0, 1.0], atol=1e-9):
        raise ValueError(f"{name}: the last row of a homogeneous transform must be [0, 0, 0, 1], got {array[3]}")
    return array


def as_direction(v, name: str = "direction") -> np.ndarray:
    """Check a 3-vector that is not (close to) zero; returns it normalized, float64."""
    array = np.asarray(v, dtype=np.float64).reshape(-1)
    if array.shape != (3,):
        raise ValueError(f"{name}: expected a 3-vector, got shape {list(np.shape(v))}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: contains NaN or inf")
    norm = float(np.linalg.norm(array))
    if norm < 1e-9:
        raise ValueError(f"{name}: must not be the zero vector")
    return array / norm


def horizontal_direction(v, name: str = "direction") -> np.ndarray:
    """The unit vector of ``v`` projected onto the horizontal (xy) plane of the world.

    Cabinet fronts are vertical, so their normals are horizontal: dropping the z part removes fit noise.
    Raises ValueError when ``v`` is (nearly) vertical, because then it has no horizontal direction.
    """
    n = as_direction(v, name)
    h = np.array([n[0], n[1], 0.0])
    norm = float(np.linalg.norm(h))
    if norm < 0.2:  # steeper than ~78 degrees: not the normal of a vertical face
        raise ValueError(f"{name}: {np.round(n, 3).tolist()} is nearly vertical; expected a horizontal direction")
    return h / norm


# ---------------------------------------------------------------------------------------------- frames, masks


def transform_points(X_AB, p_B) -> np.ndarray:
    """Express points given in frame B in frame A: ``p_A = X_AB @ p_B``.

    Args:
        X_AB: 4x4 pose of frame B in frame A.
        p_B: ``[N, 3]`` points in B (m); a single ``[3]`` point gives a single ``[3]`` point back.
    Returns:
        ``[N, 3]`` (or ``[3]``) float64 points in A (m).
    """
    X_AB = as_pose(X_AB, "X_AB")
    single = np.ndim(p_B) == 1
    p = as_points(p_B, "p_B")
    p_A = p @ X_AB[:3, :3].T + X_AB[:3, 3]
    return p_A[0] if single else p_A


def invert_pose(X_AB) -> np.ndarray:
    """``X_BA``, the inverse of a rigid transform ``X_AB`` (cheaper and exacter than a general inverse)."""
    X_AB = as_pose(X_AB, "X_AB")
    X_BA = np.eye(4)
    X_BA[:3, :3] = X_AB[:3, :3].T
    X_BA[:3, 3] = -X_AB[:3, :3].T @ X_AB[:3, 3]
    return X_BA


def select(points, mask) -> np.ndarray:
    """The points where the boolean ``mask`` ([N]) is true, ``[M, 3]``; raises ValueError on a mask mismatch."""
    p = as_points(points)
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ValueError(f"mask: expected a boolean array, got dtype {m.dtype}")
    if m.shape != (len(p),):
        raise ValueError(f"mask: expected shape [{len(p)}] to match the points, got {list(m.shape)}")
    return p[m]


def crop_box(points, lower, upper) -> np.ndarray:
    """Mask ([N] bool) of the points inside the axis-aligned box ``lower <= p <= upper`` (m, same frame)."""
    p = as_points(points)
    lo = np.asarray(lower, dtype=np.float64).reshape(-1)
    hi = np.asarray(upper, dtype=np.float64).reshape(-1)
    if lo.shape != (3,) or hi.shape != (3,):
        raise ValueError(f"crop_box: lower and upper must be 3-vectors, got {list(lo.shape)} and {list(hi.shape)}")
    if np.any(lo > hi):
        raise ValueError(f"crop_box: lower {lo.tolist()} exceeds upper {hi.tolist()}")
    return np.all((p >= lo) & (p <= hi), axis=1)


# ---------------------------------------------------------------------------------------------- ground


def remove_ground(points_W, height_m: float = 0.01, plane=None) -> np.ndarray:
    """Mask ([N] bool) of the points that are NOT ground: more than ``height_m`` above the floor.

    Args:
        points_W: ``[N, 3]`` points in the world (z up), m.
        height_m: points at most this high above the floor are ground (m). 1 cm clears depth noise on
            the floor while keeping the lowest drawers.
        plane: the floor as ``(a, b, c, d)`` with ``a x + b y + c z + d = 0`` and (a, b, c) the upward unit
            normal, e.g. from :func:`fit_ground_plane` (fit it once: it is the expensive call). Default:
            the plane z = 0.
    """
    p = as_points(points_W, "points_W")
    if plane is None:
        return p[:, 2] > height_m
    a, b, c, d = np.asarray(plane, dtype=np.float64).reshape(4)
    return p @ np.array([a, b, c]) + d > height_m


def fit_plane(points, distance_m: float = 0.01, iterations: int = 200, seed: int = 0):
    """RANSAC plane fit (open3d ``segment_plane``).

    Args:
        points: ``[N, 3]`` points (m), N >= 3.
        distance_m: largest point-to-plane distance of an inlier (m).
        iterations: RANSAC hypotheses.
        seed: seeds open3d's random generator so that fits repeat.
    Returns:
        ``(plane, inliers)``: ``plane = (a, b, c, d)`` with unit normal (a, b, c), ``a x + b y + c z + d = 0``;
        ``inliers`` an [N] bool mask.
    """
    import open3d as o3d  # lazy: a second to import, and only this and estimate_normals use it

    p = as_points(points, allow_empty=False)
    if len(p) < 3:
        raise ValueError(f"fit_plane: needs at least 3 points, got {len(p)}")
    o3d.utility.random.seed(seed)
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(p))
    plane, index = cloud.segment_plane(distance_threshold=distance_m, ransac_n=3, num_iterations=iterations)
    inliers = np.zeros(len(p), dtype=bool)
    inliers[np.asarray(index, dtype=int)] = True
    return np.asarray(plane, dtype=np.float64), inliers


def fit_ground_plane(points_W, distance_m: float = 0.01, max_tilt_rad: float = 0.2, max_points: int = 20000,
                     seed: int = 0) -> np.ndarray:
    """The floor as ``(a, b, c, d)`` (upward unit normal), for a floor that is not exactly z = 0.

    Fits the dominant plane of the lowest points (a floor under a cabinet is the largest low surface);
    an expensive call (tens of ms on a full cloud): fit once, then use :func:`remove_ground` with ``plane=``.

    Args:
        points_W: ``[N, 3]`` world points (z up), m.
        distance_m: inlier distance (m).
        max_tilt_rad: the fitted normal must be within this of world z, or ValueError.
        max_points: a random subset of this size is fitted (keeps the cost bounded).
    """
    p = as_points(points_W, "points_W", allow_empty=False)
    rng = np.random.default_rng(seed)
    if len(p) > max_points:
        p = p[rng.choice(len(p), max_points, replace=False)]
    # Only the lower part of the cloud can be floor; this keeps big cabinet tops from winning.
    low = p[p[:, 2] <= np.percentile(p[:, 2], 60)]
    plane, _ = fit_plane(low if len(low) >= 3 else p, distance_m=distance_m, seed=seed)
    if plane[2] < 0:
        plane = -plane
    if np.arccos(np.clip(plane[2], -1.0, 1.0)) > max_tilt_rad:
        raise ValueError(f"fit_ground_plane: the dominant low plane {np.round(plane, 3).tolist()} is not horizontal")
    return plane


# ---------------------------------------------------------------------------------------------- downsampling


def voxel_keys(points, voxel_m: float) -> np.ndarray:
    """One int64 key per point naming its voxel (cubes of ``voxel_m`` m, aligned with the frame's origin)."""
    if not voxel_m > 0:
        raise ValueError(f"voxel_m must be positive, got {voxel_m}")
    cell = np.floor(as_points(points) / voxel_m).astype(np.int64)
    # 21 bits per axis: +-1e6 voxels, +-1 km at 1 mm, so keys stay unique for any real scene.
    cell += 1 << 20
    return (cell[:, 0] << 42) | (cell[:, 1] << 21) | cell[:, 2]


def voxel_downsample(points, voxel_m: float) -> np.ndarray:
    """One point per occupied voxel: the mean of the points in it. ``[N, 3]`` in, ``[M, 3]`` out (same frame).

    Plain numpy (a sort): about 0.2 ms for 3,000 points and 17 ms for 192,000 on one core, several times
    faster than open3d's ``voxel_down_sample`` once the copy into open3d is counted. Output order: by voxel.
    """
    p = as_points(points)
    if len(p) == 0:
        return p
    _, inverse, counts = np.unique(voxel_keys(p, voxel_m), return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)  # numpy 2 keeps the input's shape here; 1.26 returns it flat
    sums = np.stack([np.bincount(inverse, weights=p[:, i], minlength=len(counts)) for i in range(3)], axis=1)
    return sums / counts[:, None]


# ---------------------------------------------------------------------------------------------- normals, planes


def estimate_normals(points, radius_m: float = 0.02, max_nn: int = 30, toward=None) -> np.ndarray:
    """Unit surface normals ([N, 3], same frame as ``points``) from local PCA (open3d).

    Args:
        points: ``[N, 3]`` points (m).
        radius_m: neighbourhood radius (m); at most ``max_nn`` neighbours are used.
        toward: a point (e.g. the camera or robot position, same frame) the normals are turned to face;
            without it their signs are arbitrary.
    """
    import open3d as o3d  # lazy: open3d, see fit_plane

    p = as_points(points)
    if len(p) == 0:
        return np.zeros((0, 3))
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(p))
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=radius_m, max_nn=max_nn))
    normals = np.asarray(cloud.normals).copy()
    if toward is not None:
        viewpoint = as_points(toward, "toward")[0]
        flip = np.einsum("ij,ij->i", normals, viewpoint - p) < 0
        normals[flip] *= -1.0
    return normals


@dataclass(frozen=True)
class VerticalPlane:
    """A vertical plane in the world: points p with ``normal_W . p = offset_m``."""

    normal_W: np.ndarray  # [3] horizontal unit normal
    offset_m: float
    inliers: np.ndarray  # [N] bool over the points it was fitted to

    def signed_distance_m(self, points_W) -> np.ndarray:
        """Signed distance (m) of world points from the plane, positive on the normal's side."""
        return as_points(points_W, "points_W") @ self.normal_W - self.offset_m


def fit_vertical_plane(points_W, distance_m: float = 0.005, *, normal_hint_W=None, max_angle_rad: float | None = None,
                       hypotheses: int = 96, max_points: int = 2000, min_inliers: int = 10,
                       seed: int = 0) -> VerticalPlane | None:
    """RANSAC fit of a vertical plane (a cabinet front, a door leaf) to world points (z up).

    A vertical plane is a line in the xy-plane, so two points make a hypothesis and a drawer's bottom or
    a cabinet's top can never win. Cost: under a millisecond for 2,000 points; larger clouds are
    subsampled to ``max_points`` (seeded, so fits repeat).

    Args:
        points_W: ``[N, 3]`` world points (m).
        distance_m: inlier distance (m).
        normal_hint_W: an approximate normal; the result's sign follows it. With ``max_angle_rad``, only
            planes whose normal is within that angle of the hint (either sign) are considered, which keeps
            a drawer's side walls from replacing its front.
        min_inliers: fewer inliers than this gives None.
    Returns:
        The plane, inliers over all the given points; None when no plane has ``min_inliers`` inliers.
    """
    p = as_points(points_W, "points_W")
    hint = None if normal_hint_W is None else horizontal_direction(normal_hint_W, "normal_hint_W")
    if len(p) < max(2, min_inliers):
        return None
    rng = np.random.default_rng(seed)
    sample = p if len(p) <= max_points else p[rng.choice(len(p), max_points, replace=False)]
    xy = sample[:, :2]
    i, j = rng.integers(0, len(xy), size=(2, hypotheses))
    d = xy[j] - xy[i]
    length = np.linalg.norm(d, axis=1)
    keep = length > 1e-3  # coincident pairs define no line
    normals = np.stack([-d[:, 1], d[:, 0]], axis=1)[keep] / length[keep, None]
    anchors = xy[i[keep]]
    if hint is not None and max_angle_rad is not None:
        close = np.abs(normals @ hint[:2]) >= np.cos(max_angle_rad)
        normals, anchors = normals[close], anchors[close]
    if len(normals) == 0:
        return None
    offsets = np.einsum("ij,ij->i", normals, anchors)
    # Scoring all hypotheses is the cost: float32 on centred points (exact enough) and in-place operations
    # (no fresh [N, H] temporaries to page in) make it several times faster.
    origin = xy.mean(axis=0)
    residuals = (xy - origin).astype(np.float32) @ normals.T.astype(np.float32)
    residuals -= (offsets - normals @ origin).astype(np.float32)
    np.abs(residuals, out=residuals)
    counts = np.count_nonzero(residuals <= distance_m, axis=0)
    best = int(np.argmax(counts))
    n2 = normals[best]
    inl = np.abs(xy @ n2 - offsets[best]) <= distance_m
    if inl.sum() < min_inliers:
        return None
    # Least squares on the inliers: the sampled pair only seeds the direction.
    for _ in range(2):
        centre = xy[inl].mean(axis=0)
        _, vectors = np.linalg.eigh(np.cov((xy[inl] - centre).T))
        n2 = vectors[:, 0]
        inl = np.abs((xy - centre) @ n2) <= distance_m
        if inl.sum() < min_inliers:
            return None
    normal = np.array([n2[0], n2[1], 0.0])
    if hint is not None and normal @ hint < 0:
        normal = -normal
    offset = float(np.median(sample[inl] @ normal))
    inliers_all = np.abs(p @ normal - offset) <= distance_m
    return VerticalPlane(normal, offset, inliers_all)


def estimate_front_normal(link_points_W, toward_W, distance_m: float = 0.005) -> np.ndarray:
    """The outward unit normal ([3], world, horizontal) of a part's front face, from its points.

    Fits the dominant vertical plane of the part's points (its front face, seen head-on by the cameras) and
    turns the normal toward ``toward_W``: any point on the outside, e.g. the robot base position, a camera,
    or the handle centroid (handles protrude outward). Cheap enough per step, but the normal of a
    cabinet's front only needs estimating once.

    Args:
        link_points_W: ``[N, 3]`` points of the drawer/door (handle points may be included), world, m.
        toward_W: ``[3]`` a point in front of the part, world, m.
    Raises:
        ValueError on empty/invalid input or when no vertical plane fits.
    """
    p = as_points(link_points_W, "link_points_W", allow_empty=False)
    viewpoint = as_points(toward_W, "toward_W", allow_empty=False)[0]
    plane = fit_vertical_plane(p, distance_m, min_inliers=min(10, len(p)))
    if plane is None:
        raise ValueError(f"estimate_front_normal: no vertical plane fits the {len(p)} link points")
    n = plane.normal_W
    centre = p[plane.inliers].mean(axis=0)
    return n if (viewpoint - centre) @ n >= 0 else -n
