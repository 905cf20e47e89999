"""6-DoF parallel-jaw grasps on an object's observed, partial point cloud (GPD / Dex-Net style sampling).

Candidates come from two samplers:

- **antipodal pairs**: two observed points whose connecting line lies inside both friction cones
  (Coulomb friction ``mu``, 0.4-0.5 in GPD and Dex-Net); the closing axis is the line, the tool centre its
  middle, and the approach is turned about the closing axis in ``n_rotations`` steps (the first one as
  close to ``approach_prior_W`` as the closing axis allows);
- **single contacts**, for partial views where the opposite face is not seen (a box seen from one camera
  shows no opposite faces at all): the approach is into the surface (along its inward normal; straight
  along the prior when within 30 degrees of it), the tool centre 1-3 cm below the contact (halfway down to
  the table for a small object), and the closing axis is turned in the tangent plane, in uniform steps and
  along the object's own axes (the eigenvectors of its normals' scatter and of its points, and the sides
  of the smallest rectangle around it seen from above: a box's face normals). Per contact, only the
  closing directions within 3 mm of the narrowest width are kept (a box is taken across its faces, not
  across its diagonal). Their antipodal quality is what the normals at the jaws show, halved.

Every candidate is then checked against the points, vectorised over candidates
(:func:`evaluate_grasp_poses`): the object points the fingers sweep through on the way in must all fit
between them (this measures the opening and re-centres the gripper between them), enough object points
lie between the fingers, no point (object or scene) is inside a simple model of the Panda hand (palm box
and two finger boxes, swept back along the approach by ``approach_distance_m``), no part of the hand is
below the table, the normals seen at a jaw do not slope against it (it would slip), and a jaw's contacts
are not only the silhouette (the object goes on, unseen, behind it). Survivors are scored, deduplicated and
returned best first.

Known limit: what no camera saw is not there. From one camera, a sphere's far side below the silhouette,
or a box's far faces, are assumed to lie within what was seen (a box's unseen faces are vertical below
its top's edges: true for boxes and upright cylinders, not for a sphere's lower half).

Gripper frame G (:class:`handleit.types.Grasp`): z approach (out of the palm, between the fingers), y
closing, x = y cross z; origin at the tool centre (the middle of the finger pads).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from handleit.perception.point_cloud import as_direction, as_points, estimate_normals, voxel_downsample
from handleit.types import Grasp

PANDA_MAX_OPENING_M = 0.08
# Coulomb friction coefficient of the antipodal test; GPD and Dex-Net use 0.4-0.5.
FRICTION_COEF = 0.4
# A contact normal within ~78 degrees of a jaw's closing direction (cos 78 degrees) but more than 10 degrees
# outside its friction cone (curvature and normal noise tilt a few) is a surface sloped against the jaw:
# the object would slip out. Normals closer to perpendicular (a top face at its rim) say nothing.
OBLIQUE_COS = 0.2
SLIP_MARGIN_RAD = np.deg2rad(10.0)
JAW_BAND_M = 0.002  # points this close to a jaw's extreme along the closing axis are its contacts
# A point whose normal is within ~17 degrees of perpendicular to the camera's ray is on the silhouette:
# the surface goes on, unseen, behind it (cos 73 degrees).
SILHOUETTE_COS = 0.3


@dataclass(frozen=True)
class HandGeometry:
    """A parallel-jaw hand as three boxes in the gripper frame G (m).

    Defaults: the Panda hand of mani_skill's ``panda_v2.urdf``: the tool centre is 103.4 mm from the hand
    link; the hand's collision mesh spans x +-31.6 mm, y -104..+100 mm, z -26..+66 mm in the hand link
    (G z -129.4..-37.4 mm); each finger's collision boxes are 17.5-22 mm wide (x), its rubber pad 15.2 mm
    thick (y) and 18.5 mm long (z 94.4..112.9 mm in the hand link: G z -9..+9.5 mm); the fingers start at
    the finger joint, 58.4 mm in the hand link (G z -45 mm).
    """

    palm_half_x_m: float = 0.0316
    palm_half_y_m: float = 0.102
    palm_z_m: tuple[float, float] = (-0.1294, -0.0374)
    finger_half_x_m: float = 0.011
    finger_thickness_m: float = 0.0152
    finger_z_m: tuple[float, float] = (-0.045, 0.0095)
    pad_half_x_m: float = 0.00875
    pad_z_m: tuple[float, float] = (-0.009, 0.0095)
    max_opening_m: float = PANDA_MAX_OPENING_M

    def boxes_G(self, opening_m: float, sweep_m: float = 0.0) -> np.ndarray:
        """``[3, 2, 3]`` boxes (palm, +y finger, -y finger) as (lower, upper) corners in G, for fingers
        ``opening_m`` apart, each swept back along -z by ``sweep_m`` (the approach path)."""
        w = 0.5 * float(opening_m)
        t = self.finger_thickness_m
        return np.array([
            [[-self.palm_half_x_m, -self.palm_half_y_m, self.palm_z_m[0] - sweep_m],
             [self.palm_half_x_m, self.palm_half_y_m, self.palm_z_m[1]]],
            [[-self.finger_half_x_m, w, self.finger_z_m[0] - sweep_m],
             [self.finger_half_x_m, w + t, self.finger_z_m[1]]],
            [[-self.finger_half_x_m, -w - t, self.finger_z_m[0] - sweep_m],
             [self.finger_half_x_m, -w, self.finger_z_m[1]]],
        ])


PANDA_HAND = HandGeometry()


def hand_lowest_z_W(X_WG, opening_m, hand: HandGeometry = PANDA_HAND, sweep_m: float = 0.0) -> np.ndarray:
    """World height (m) of the lowest corner of the hand's boxes, per pose.

    Args:
        X_WG: ``[4, 4]`` or ``[M, 4, 4]`` gripper poses in the world (z up).
        opening_m: scalar or ``[M]`` finger opening (m).
        sweep_m: boxes swept back along the approach by this much (m).
    Returns:
        ``[M]`` (or a float for one pose) heights, m.
    """
    X = np.asarray(X_WG, dtype=np.float64)
    single = X.ndim == 2
    X = X.reshape(-1, 4, 4)
    half_w = 0.5 * np.broadcast_to(np.asarray(opening_m, dtype=np.float64), (len(X),))
    r = X[:, 2, :3]  # world z of G's axes
    t = hand.finger_thickness_m
    finger_z = (hand.finger_z_m[0] - sweep_m, hand.finger_z_m[1])
    palm_z = (hand.palm_z_m[0] - sweep_m, hand.palm_z_m[1])
    boxes = [  # (centre [M, 3], half extents [M, 3]) in G
        (np.array([0.0, 0.0, np.mean(palm_z)]), np.array([hand.palm_half_x_m, hand.palm_half_y_m, np.ptp(palm_z) / 2])),
    ]
    for side in (1.0, -1.0):
        centre = np.zeros((len(X), 3))
        centre[:, 1] = side * (half_w + t / 2)
        centre[:, 2] = np.mean(finger_z)
        boxes.append((centre, np.array([hand.finger_half_x_m, t / 2, np.ptp(finger_z) / 2])))
    # The lowest corner of a box: its centre's height minus the half extents along |world z| of each axis.
    lowest = np.min([X[:, 2, 3] + np.einsum("mk,mk->m", r, np.broadcast_to(c, (len(X), 3))) - np.abs(r) @ h
                     for c, h in boxes], axis=0)
    return float(lowest[0]) if single else lowest


@dataclass(frozen=True)
class GraspEvaluation:
    """Checks and measures of M candidate poses (see :func:`evaluate_grasp_poses`); arrays of length M."""

    X_WG: np.ndarray  # [M, 4, 4] re-centred between the measured jaw contacts
    width_m: np.ndarray  # [M] opening needed: object width across the closing axis plus 2 x clearance
    n_between: np.ndarray  # [M] object points between the fingers (in the fingers' sweep)
    collides: np.ndarray  # [M] bool: a point is inside the hand model (with the approach sweep)
    below_table: np.ndarray  # [M] bool: part of the hand is below table_z + clearance
    jaw_quality: np.ndarray  # [M] in [0, 1]: how well the observed normals at the jaws face them
    slips: np.ndarray  # [M] bool: at a jaw, more seen contact normals are oblique (outside the cone) than facing it
    hidden: np.ndarray  # [M] bool: a jaw's extreme is the silhouette: the object goes on unseen past it
    valid: np.ndarray  # [M] bool: fits, enough points, no collision, above the table, does not slip


def _frames(X_WG: np.ndarray):
    return X_WG[:, :3, :3], X_WG[:, :3, 3]


def _inside_hand(L_G, shift, half_w, hand: HandGeometry, sweep_m: float, margin_m: float) -> np.ndarray:
    """``[m]`` bool: any of the points ``L_G`` ([m, N, 3], each pose's G) inside the hand's boxes (grown by
    ``margin_m``, swept back by ``sweep_m``), the fingers ``half_w`` ([m, 1]) from the middle, moved by
    ``shift`` ([m]) along y."""
    e = margin_m
    x, y, z = np.abs(L_G[..., 0]), np.abs(L_G[..., 1] - shift[:, None]), L_G[..., 2]
    palm = ((x <= hand.palm_half_x_m + e) & (y <= hand.palm_half_y_m + e)
            & (z >= hand.palm_z_m[0] - sweep_m - e) & (z <= hand.palm_z_m[1] + e))
    finger = ((x <= hand.finger_half_x_m + e) & (y >= half_w - e) & (y <= half_w + hand.finger_thickness_m + e)
              & (z >= hand.finger_z_m[0] - sweep_m - e) & (z <= hand.finger_z_m[1] + e))
    return (palm | finger).any(axis=1)


def evaluate_grasp_poses(
    X_WG,
    object_points_W,
    *,
    object_normals_W=None,
    obstacle_points_W=None,
    viewpoint_W=None,
    table_z: float | None = None,
    hand: HandGeometry = PANDA_HAND,
    clearance_m: float = 0.005,
    min_points_between: int = 5,
    approach_distance_m: float = 0.05,
    table_clearance_m: float = 0.003,
    collision_margin_m: float = 0.003,
    friction_coef: float = FRICTION_COEF,
    chunk: int = 256,
) -> GraspEvaluation:
    """Measure and check gripper poses against the observed points (vectorised over poses).

    The object points in the fingers' sweep (``|x| <= finger half width``, z from the palm to the
    fingertips, within reach of the open fingers along y) must fit between the fingers: their extent along
    y plus ``clearance_m`` on each side is the opening, and the pose is moved along y to their middle.

    Args:
        X_WG: ``[M, 4, 4]`` candidate gripper poses in the world (G: z approach, y closing).
        object_points_W: ``[N, 3]`` observed points of the object to grasp, world, m.
        object_normals_W: ``[N, 3]`` their outward unit normals; gives ``jaw_quality`` (zeros without).
        obstacle_points_W: ``[K, 3]`` other points the hand must not touch (table, other objects), world, m.
        viewpoint_W: ``[3]`` the camera that saw the object (world, m), with normals: a jaw whose contacts
            are all on the silhouette (the object goes on, unseen, behind it: a sphere's far side) is invalid.
        table_z: world height of the table's top (m): the hand must stay above it (analytic check).
        hand: the hand's boxes (default: the Panda's).
        clearance_m: opening added on each side of the measured width (m).
        min_points_between: fewer object points between the fingers than this: invalid.
        approach_distance_m: the hand's boxes are swept back along -z by this much (the straight approach
            from the pregrasp pose) for the collision and table checks (m).
        table_clearance_m: least height of the hand above ``table_z`` (m).
        collision_margin_m: the hand's boxes are grown by this much for the collision check (m): covers
            the shift of voxel-downsampled points and depth noise.
        friction_coef: Coulomb friction for ``jaw_quality`` (normals within the cone score 1 at its axis).
    Returns:
        A :class:`GraspEvaluation`.
    """
    X = np.asarray(X_WG, dtype=np.float64)
    if X.ndim != 3 or X.shape[1:] != (4, 4):
        raise ValueError(f"X_WG: expected shape [M, 4, 4], got {list(X.shape)}")
    obj = as_points(object_points_W, "object_points_W")
    obs = np.zeros((0, 3)) if obstacle_points_W is None else as_points(obstacle_points_W, "obstacle_points_W")
    normals = None if object_normals_W is None else as_points(object_normals_W, "object_normals_W")
    if normals is not None and len(normals) != len(obj):
        raise ValueError(f"object_normals_W: expected {len(obj)} normals, got {len(normals)}")
    M = len(X)
    out_X = X.copy()
    width = np.full(M, np.inf)
    n_between = np.zeros(M, dtype=np.int64)
    collides = np.ones(M, dtype=bool)
    jaw_quality = np.zeros(M)
    slips = np.zeros(M, dtype=bool)
    hidden = np.zeros(M, dtype=bool)
    silhouette = None
    if normals is not None and viewpoint_W is not None:
        ray = as_points(viewpoint_W, "viewpoint_W")[0] - obj
        ray /= np.maximum(np.linalg.norm(ray, axis=1, keepdims=True), 1e-9)
        silhouette = np.abs(np.einsum("ij,ij->i", normals, ray)) < SILHOUETTE_COS
    cos_cone = np.cos(np.arctan(friction_coef))
    cos_slip = np.cos(np.arctan(friction_coef) + SLIP_MARGIN_RAD)
    search_half = 0.5 * hand.max_opening_m + hand.finger_thickness_m
    tip_z = hand.finger_z_m[1]
    palm_bottom_z = hand.palm_z_m[1]
    obj32 = obj.astype(np.float32)
    obs32 = obs.astype(np.float32)
    for start in range(0, M, chunk):
        sl = slice(start, min(M, start + chunk))
        R, t = _frames(X[sl])
        R32, t32 = R.astype(np.float32), t.astype(np.float32)
        L = np.matmul(obj32[None] - t32[:, None], R32)  # [m, N, 3] object points in G
        x, y, z = L[..., 0], L[..., 1], L[..., 2]
        region = (np.abs(x) <= hand.finger_half_x_m) & (z >= palm_bottom_z) & (z <= tip_z) & (np.abs(y) <= search_half)
        n_region = region.sum(axis=1)
        y_min = np.where(region, y, np.inf).min(axis=1)
        y_max = np.where(region, y, -np.inf).max(axis=1)
        # The object continues beyond what the open fingers can span: no opening fits.
        truncated = (region & (np.abs(y) >= search_half - JAW_BAND_M)).any(axis=1)
        has = (n_region > 0) & ~truncated
        w = np.where(has, y_max - y_min + 2 * clearance_m, np.inf)
        shift = np.where(has, 0.5 * (y_min + y_max), 0.0)
        width[sl] = w
        n_between[sl] = n_region
        out_X[sl, :3, 3] = t + shift[:, None] * R[:, :, 1]
        # Collision: any point inside the palm or a finger (swept back along the approach), re-centred.
        half_w = np.where(np.isfinite(w), 0.5 * w, 0.5 * hand.max_opening_m)[:, None]

        hand_args = (shift, half_w, hand, approach_distance_m, collision_margin_m)
        hit = _inside_hand(L, *hand_args)
        if len(obs32):
            hit |= _inside_hand(np.matmul(obs32[None] - t32[:, None], R32), *hand_args)
        collides[sl] = hit
        if normals is not None:
            # The jaws press on the extreme points along y; their normals should face the jaws (within the
            # friction cone). A face the camera did not see scores 0: partial views rank lower.
            ny = np.matmul(normals.astype(np.float32), R32[:, :, 1].T).T  # [m, N] normal . y
            near_max = region & (y >= (y_max - JAW_BAND_M)[:, None])
            near_min = region & (y <= (y_min + JAW_BAND_M)[:, None])
            q_max = np.clip((ny - cos_cone) / (1 - cos_cone), 0, 1)
            q_min = np.clip((-ny - cos_cone) / (1 - cos_cone), 0, 1)
            mean_max = (q_max * near_max).sum(axis=1) / np.maximum(near_max.sum(axis=1), 1)
            mean_min = (q_min * near_min).sum(axis=1) / np.maximum(near_min.sum(axis=1), 1)
            jaw_quality[sl] = 0.5 * (mean_max + mean_min)
            # Slip: a jaw whose contacts, where seen, are more often on a surface sloped against it than
            # facing it (the corner of a box too big to hold, a sphere above its equator). Normals nearly
            # perpendicular to the closing axis (the top face at its rim) say nothing about an unseen side.
            for near, n_jaw in ((near_max, ny), (near_min, -ny)):
                oblique = (near & (n_jaw > OBLIQUE_COS) & (n_jaw < cos_slip)).sum(axis=1)
                facing = (near & (n_jaw >= cos_slip)).sum(axis=1)
                slips[sl] |= oblique > facing
                if silhouette is not None:
                    on_silhouette = (near & silhouette[None, :]).sum(axis=1)
                    hidden[sl] |= (facing == 0) & (2 * on_silhouette > near.sum(axis=1))
    fits = np.isfinite(width) & (width <= hand.max_opening_m + 1e-9)
    opening = np.where(fits, width, hand.max_opening_m)
    if table_z is None:
        below = np.zeros(M, dtype=bool)
    else:
        below = hand_lowest_z_W(out_X, opening, hand, approach_distance_m) < float(table_z) + table_clearance_m
    valid = fits & (n_between >= min_points_between) & ~collides & ~below & ~slips & ~hidden
    return GraspEvaluation(out_X, width, n_between, collides, below, jaw_quality, slips, hidden, valid)


# ---------------------------------------------------------------------------------------------- sampling


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def _poses(p_W: np.ndarray, closing_W: np.ndarray, approach_W: np.ndarray) -> np.ndarray:
    """``[M, 4, 4]`` poses with y = closing, z = approach (made orthogonal to y), x = y cross z."""
    y = _unit(closing_W)
    z = _unit(approach_W - np.einsum("mk,mk->m", approach_W, y)[:, None] * y)
    X = np.zeros((len(p_W), 4, 4))
    X[:, :3, 0] = np.cross(y, z)
    X[:, :3, 1] = y
    X[:, :3, 2] = z
    X[:, :3, 3] = p_W
    X[:, 3, 3] = 1.0
    return X


def _perpendicular(v: np.ndarray, preferred: np.ndarray) -> np.ndarray:
    """Unit vectors perpendicular to each row of ``v``: ``preferred`` made perpendicular, else any."""
    u = preferred[None, :] - (v @ preferred)[:, None] * v
    weak = np.linalg.norm(u, axis=1) < 0.1
    if weak.any():
        helper = np.where(np.abs(v[weak, 2:3]) < 0.9, [[0.0, 0.0, 1.0]], [[1.0, 0.0, 0.0]])
        u[weak] = np.cross(v[weak], helper)
    return _unit(u)


def _min_area_rectangle_axes(xy: np.ndarray) -> np.ndarray | None:
    """``[2, 2]`` axes of the smallest rectangle around 2D points (one side lies along a convex hull edge):
    a box's face normals seen from above, even from a few dozen points. None when degenerate."""
    try:
        hull = xy[ConvexHull(xy).vertices]
    except (QhullError, ValueError):
        return None
    edges = np.roll(hull, -1, axis=0) - hull
    length = np.linalg.norm(edges, axis=1)
    u = edges[length > 1e-6] / length[length > 1e-6, None]
    if len(u) == 0:
        return None
    v = np.stack([-u[:, 1], u[:, 0]], axis=1)
    area = np.ptp(hull @ u.T, axis=0) * np.ptp(hull @ v.T, axis=0)
    k = int(np.argmin(area))
    return np.stack([u[k], v[k]])


def _object_axes(points: np.ndarray, normals: np.ndarray, up_W: np.ndarray) -> np.ndarray:
    """``[K, 3]`` candidate closing directions: the eigenvectors of the normals' scatter (a box's face
    normals, a cylinder's axis), the principal axes of the points, and the axes of the smallest rectangle
    around the points seen along ``up_W`` (for grasps from above)."""
    _, normal_axes = np.linalg.eigh(normals.T @ normals)
    centred = points - points.mean(axis=0)
    _, point_axes = np.linalg.eigh(centred.T @ centred)
    axes = [normal_axes.T, point_axes.T]
    e1 = _perpendicular(up_W[None], np.array([1.0, 0.0, 0.0]))[0]
    e2 = np.cross(up_W, e1)
    rectangle = _min_area_rectangle_axes(np.stack([centred @ e1, centred @ e2], axis=1))
    if rectangle is not None:
        axes.append(rectangle @ np.stack([e1, e2]))
    return np.concatenate(axes)


def _object_centre(p: np.ndarray, table_z: float | None) -> np.ndarray:
    """The object's centre (world, m). A camera sees the top and near side, so the points' mean lies high
    and near; on a table, the middle of the points' extent from above (smallest rectangle, xy) and halfway
    from the table to the top (z) is closer to the truth."""
    if table_z is None:
        return p.mean(axis=0)
    centre = np.empty(3)
    axes = _min_area_rectangle_axes(p[:, :2])
    if axes is None:
        centre[:2] = 0.5 * (p[:, :2].min(axis=0) + p[:, :2].max(axis=0))
    else:
        along = p[:, :2] @ axes.T
        centre[:2] = (0.5 * (along.min(axis=0) + along.max(axis=0))) @ axes
    centre[2] = 0.5 * (float(table_z) + p[:, 2].max())
    return centre


def _pair_candidates(p, n, rng, n_samples, max_width_m, min_width_m, cos_cone, prior, n_rotations):
    """Poses from antipodal pairs: (X_WG [M, 4, 4], pair quality [M])."""
    i = np.sort(rng.choice(len(p), min(n_samples, len(p)), replace=False))
    v = p[None, :, :] - p[i, None, :]  # [S, N, 3] from contact i to every point j
    dist = np.linalg.norm(v, axis=2)
    d = v / np.maximum(dist, 1e-12)[..., None]
    cos_i = -np.einsum("snk,sk->sn", d, n[i])  # the line enters the object at i (against its outward normal)
    cos_j = np.einsum("snk,nk->sn", d, n)  # and leaves it at j (along j's outward normal)
    quality = (np.minimum(cos_i, cos_j) - cos_cone) / (1 - cos_cone)
    ok = (dist >= min_width_m) & (dist <= max_width_m) & (quality >= 0)
    quality = np.where(ok, quality, -1.0)
    j = np.argmax(quality, axis=1)  # each sample's most antipodal partner
    keep = quality[np.arange(len(i)), j] >= 0
    i, j = i[keep], j[keep]
    if len(i) == 0:
        return np.zeros((0, 4, 4)), np.zeros(0)
    q = quality[np.flatnonzero(keep), j]
    closing = _unit(p[j] - p[i])
    centre = 0.5 * (p[i] + p[j])
    z0 = _perpendicular(closing, prior)
    x0 = np.cross(closing, z0)
    theta = 2 * np.pi * np.arange(n_rotations) / n_rotations
    approach = np.cos(theta)[None, :, None] * z0[:, None] + np.sin(theta)[None, :, None] * x0[:, None]
    K = len(theta)
    X = _poses(np.repeat(centre, K, axis=0), np.repeat(closing, K, axis=0), approach.reshape(-1, 3))
    return X, np.repeat(q, K)


def _single_contact_candidates(p, n, rng, n_samples, n_angles, axes, depth_range_m, prior, snap_cos, table_z):
    """Poses approaching single contacts along their inward normal: (X_WG [S*K, 4, 4], contact id [S*K]).

    A contact whose inward normal is within the snap angle of ``prior`` is approached along ``prior``
    itself (normals of sparse clouds are noisy; a table-top object's top is grasped straight down).
    """
    i = np.sort(rng.choice(len(p), min(n_samples, len(p)), replace=False))
    approach = -n[i]
    if prior is not None:
        approach[approach @ prior >= snap_cos] = prior
    # Depth of the tool centre below the contact: half the object's extent along the approach (its
    # middle, for a small object), within depth_range_m. A downward approach reaches the table under it.
    extent = (p @ approach.T).max(axis=0) - np.einsum("sk,sk->s", p[i], approach)
    if table_z is not None:
        down = approach[:, 2] < -0.5
        extent[down] = np.maximum(extent[down], (p[i][down, 2] - table_z) / -approach[down, 2])
    depth = np.clip(0.5 * extent, *depth_range_m)
    tcp = p[i] + depth[:, None] * approach
    e1 = _perpendicular(approach, np.array([1.0, 0.0, 0.0]))
    e2 = np.cross(approach, e1)
    phi = np.pi * np.arange(n_angles) / n_angles
    uniform = np.cos(phi)[None, :, None] * e1[:, None] + np.sin(phi)[None, :, None] * e2[:, None]  # [S, K, 3]
    along = axes[None, :, :] - np.einsum("sk,ak->sa", approach, axes)[..., None] * approach[:, None, :]
    closing = np.concatenate([uniform, _unit(along)], axis=1)  # [S, K, 3]
    # An object axis nearly along the approach has no direction in the tangent plane: dropped.
    use = np.concatenate([np.ones(uniform.shape[:2], bool), np.linalg.norm(along, axis=2) >= 0.3], axis=1)
    S, K = use.shape
    rows = np.repeat(np.arange(S), K).reshape(S, K)[use]
    X = _poses(tcp[rows], closing[use], approach[rows])
    return X, rows


def _deduplicate(X: np.ndarray, order: np.ndarray, distance_m: float, angle_rad: float, limit: int) -> list[int]:
    """Greedy non-maximum suppression: drop a pose near a better one (position, approach, closing up to
    the 180 degree turn about the approach that a symmetric hand does not notice)."""
    kept: list[int] = []
    cos_angle = np.cos(angle_rad)
    for k in order:
        if kept:
            K = X[kept]
            near = np.linalg.norm(K[:, :3, 3] - X[k, :3, 3], axis=1) < distance_m
            same_approach = K[:, :3, 2] @ X[k, :3, 2] > cos_angle
            same_closing = np.abs(K[:, :3, 1] @ X[k, :3, 1]) > cos_angle
            if np.any(near & same_approach & same_closing):
                continue
        kept.append(int(k))
        if len(kept) >= limit:
            break
    return kept


def sample_antipodal_grasps(
    points_W,
    *,
    obstacle_points_W=None,
    viewpoint_W=None,
    table_z: float | None = None,
    seed: int = 0,
    max_grasps: int = 50,
    friction_coef: float = FRICTION_COEF,
    n_pair_samples: int = 160,
    n_rotations: int = 8,
    n_single_samples: int = 64,
    n_closing_angles: int = 8,
    single_contact_factor: float = 0.5,
    snap_angle_rad: float = np.deg2rad(30.0),
    hand: HandGeometry = PANDA_HAND,
    clearance_m: float = 0.005,
    min_points_between: int = 5,
    approach_distance_m: float = 0.05,
    table_clearance_m: float = 0.003,
    approach_prior_W=(0.0, 0.0, -1.0),
    weight_antipodal: float = 1.0,
    weight_points: float = 0.25,
    weight_center: float = 0.5,
    weight_approach: float = 0.5,
    voxel_m: float = 0.003,
    max_points: int = 1500,
    obstacle_voxel_m: float = 0.005,
    max_obstacle_points: int = 4000,
    normal_radius_m: float = 0.012,
    dedup_distance_m: float = 0.01,
    dedup_angle_rad: float = 0.35,
) -> list[Grasp]:
    """Ranked 6-DoF parallel-jaw grasps on an object's observed (partial) point cloud.

    Args:
        points_W: ``[N, 3]`` observed points of the object, world (z up), m. Downsampled to ``voxel_m``
            and at most ``max_points`` (seeded).
        obstacle_points_W: ``[K, 3]`` other observed points the hand must not touch (table, other objects;
            not the robot), world, m. Points beyond the hand's reach from the object are ignored; with
            ``table_z``, so are the table's own points (the table is checked as a plane).
        viewpoint_W: ``[3]`` a camera position (world): normals are turned toward it. Without it they point
            away from the object's centroid.
        table_z: world height of the supporting table's top (m): no part of the hand may go below it.
        seed: seeds the sampling; the same input and seed give the same grasps.
        max_grasps: at most this many grasps are returned.
        friction_coef: Coulomb friction coefficient of the antipodal test (GPD, Dex-Net: 0.4-0.5).
        n_pair_samples, n_rotations: contacts sampled for antipodal pairs, approaches per pair (about the
            closing axis).
        n_single_samples, n_closing_angles: contacts sampled for single-contact grasps, uniform closing
            directions per contact (plus the object's own axes, see above).
        single_contact_factor: a single-contact grasp's antipodal quality is its observed jaw quality
            times this (< 1: an unseen opposite face ranks below a seen one).
        snap_angle_rad: a single contact whose inward normal is this close to ``approach_prior_W`` is
            approached along the prior exactly.
        hand: the hand's geometry (default: the Panda's); ``hand.max_opening_m`` is the widest opening.
        clearance_m: opening beyond the measured width on each side (m); the widest graspable object is
            ``hand.max_opening_m - 2 * clearance_m``.
        min_points_between: fewer object points between the fingers: rejected.
        approach_distance_m: the hand must also be free along this much of its straight approach (m).
        table_clearance_m: least height of the hand above the table (m).
        approach_prior_W: preferred approach direction (world; default straight down, for table-top
            picking), or None for no preference.
        weight_antipodal, weight_points, weight_center, weight_approach: weights of the score's terms, each
            in [0, 1]: antipodal quality (friction-cone margin of seen contacts), points between the fingers
            (relative to the best candidate), closeness of the closing line to the object's centre
            (Gaussian, sigma half the object's radius), alignment of the approach with the prior.
        voxel_m, max_points: the object's points are voxel-downsampled to ``voxel_m`` (m), coarser (x1.5
            steps) while more than ``max_points`` remain.
        obstacle_voxel_m, max_obstacle_points: the obstacles' downsampling (m, count).
        normal_radius_m: neighbourhood radius of the normal estimate (m).
        dedup_distance_m, dedup_angle_rad: a grasp this close in position and orientation to a better one
            is dropped.
    Returns:
        ``Grasp(X_WG, width_m, score)`` best first: ``width_m`` the opening needed (m, at most
        ``hand.max_opening_m``), ``score`` the weighted mean of the terms, in [0, 1]. ``[]`` when nothing
        fits (too wide, too few points, blocked).
    Raises:
        ValueError on an empty or invalid cloud or invalid options.
    """
    p = as_points(points_W, "points_W", allow_empty=False)
    if not 0 <= clearance_m < hand.max_opening_m / 2:
        raise ValueError(f"clearance_m must be in (0, {hand.max_opening_m / 2}) m, got {clearance_m}")
    if friction_coef <= 0:
        raise ValueError(f"friction_coef must be positive, got {friction_coef}")
    if max_grasps < 1 or n_rotations < 1 or n_closing_angles < 1:
        raise ValueError("max_grasps, n_rotations and n_closing_angles must be at least 1")
    rng = np.random.default_rng(seed)
    voxel = float(voxel_m)
    if voxel > 0:
        # Coarser voxels until at most max_points remain: thinned evenly, the collision check sees no holes.
        downsampled = voxel_downsample(p, voxel)
        while len(downsampled) > max_points:
            voxel *= 1.5
            downsampled = voxel_downsample(p, voxel)
        p = downsampled
    elif len(p) > max_points:
        p = p[np.sort(rng.choice(len(p), max_points, replace=False))]
    if len(p) < max(min_points_between, 3):
        return []
    centroid = p.mean(axis=0)
    prior = None if approach_prior_W is None else as_direction(approach_prior_W, "approach_prior_W")

    # Normals, outward: toward the camera when known, else away from the centroid.
    normals = estimate_normals(p, radius_m=normal_radius_m, max_nn=30)
    outward = p - centroid
    if viewpoint_W is not None:
        outward = as_points(viewpoint_W, "viewpoint_W")[0] - p
    bad = np.linalg.norm(normals, axis=1) < 0.5  # open3d leaves isolated points without a normal
    normals[bad] = _unit(p[bad] - centroid + 1e-9)
    normals = _unit(normals)
    normals[np.einsum("ij,ij->i", normals, outward) < 0] *= -1.0

    # Obstacles within the hand's reach of the object only; the table itself is a plane when known.
    obstacles = None
    if obstacle_points_W is not None:
        obs = as_points(obstacle_points_W, "obstacle_points_W")
        reach = float(np.linalg.norm([hand.palm_half_x_m, hand.palm_half_y_m, hand.palm_z_m[0]]))
        reach += approach_distance_m + 0.5 * hand.max_opening_m
        lo, hi = p.min(axis=0) - reach, p.max(axis=0) + reach
        keep = np.all((obs >= lo) & (obs <= hi), axis=1)
        if table_z is not None:
            keep &= obs[:, 2] > float(table_z) + table_clearance_m
        obs = obs[keep]
        if obstacle_voxel_m and len(obs):
            obs = voxel_downsample(obs, obstacle_voxel_m)
        if len(obs) > max_obstacle_points:
            obs = obs[np.sort(rng.choice(len(obs), max_obstacle_points, replace=False))]
        obstacles = obs

    cos_cone = np.cos(np.arctan(friction_coef))
    max_width = hand.max_opening_m - 2 * clearance_m
    prior_for_pairs = prior if prior is not None else np.array([0.0, 0.0, -1.0])
    X_pair, q_pair = _pair_candidates(p, normals, rng, n_pair_samples, max_width, 0.002, cos_cone,
                                      prior_for_pairs, n_rotations)
    up = -prior if prior is not None else np.array([0.0, 0.0, 1.0])
    X_single, contact = _single_contact_candidates(p, normals, rng, n_single_samples, n_closing_angles,
                                                   _object_axes(p, normals, up), (0.01, 0.03), prior,
                                                   np.cos(snap_angle_rad), table_z)
    X = np.concatenate([X_pair, X_single])
    is_pair = np.arange(len(X)) < len(X_pair)
    contact = np.concatenate([np.full(len(X_pair), -1), contact])
    q_pair = np.concatenate([q_pair, np.zeros(len(X_single))])
    if table_z is not None:
        # Cheap first cut: a pair's turn that puts the hand under the table even closed and backed off by
        # the most allowed below (an approach from underneath: about half of them) is not worth measuring.
        # (Single contacts are all measured: their narrowest closing direction is needed below.)
        highest_possible = hand_lowest_z_W(X, 0.0, hand, approach_distance_m) + 0.008 * np.maximum(-X[:, 2, 2], 0.0)
        keep = ~is_pair | (highest_possible >= float(table_z) + table_clearance_m)
        X, is_pair, contact, q_pair = X[keep], is_pair[keep], contact[keep], q_pair[keep]

    kwargs = {"object_normals_W": normals, "obstacle_points_W": obstacles, "viewpoint_W": viewpoint_W,
              "table_z": table_z, "hand": hand, "clearance_m": clearance_m, "min_points_between": min_points_between,
              "approach_distance_m": approach_distance_m, "table_clearance_m": table_clearance_m,
              "collision_margin_m": max(0.003, 0.9 * voxel), "friction_coef": friction_coef}
    ev = evaluate_grasp_poses(X, p, **kwargs)
    X_out, width, n_between, valid, jaw = ev.X_WG, ev.width_m, ev.n_between, ev.valid.copy(), ev.jaw_quality
    if table_z is not None:
        # A downward grasp whose fingertips would touch the table: back off along the approach, by up to
        # 8 mm for a pair (its contacts stay on the 18.5 mm pads) or 15 mm for a single contact.
        retry = ev.below_table & ~ev.collides & np.isfinite(width) & (width <= hand.max_opening_m)
        lowest = hand_lowest_z_W(X_out[retry], width[retry], hand, approach_distance_m)
        approach_z = X_out[retry, 2, 2]
        need = (float(table_z) + table_clearance_m + 1e-4 - lowest) / np.maximum(-approach_z, 1e-6)
        limit = np.where(is_pair[retry], 0.008, 0.015)
        ok = (approach_z < -0.2) & (need <= limit)
        index = np.flatnonzero(retry)[ok]
        if len(index):
            X_back = X[index].copy()
            X_back[:, :3, 3] -= need[ok][:, None] * X_back[:, :3, 2]
            ev2 = evaluate_grasp_poses(X_back, p, **kwargs)
            X_out[index], width[index], n_between[index] = ev2.X_WG, ev2.width_m, ev2.n_between
            valid[index], jaw[index] = ev2.valid, ev2.jaw_quality

    # Per single contact, keep only the closing directions within 3 mm of its narrowest width (valid or
    # not, so that a blocked grasp across two faces does not promote the diagonal beside it).
    single_index = np.flatnonzero(~is_pair)
    if len(single_index):
        c = contact[single_index]
        w_single = np.where(np.isfinite(width[single_index]), width[single_index], np.inf)
        narrowest = np.full(c.max() + 1, np.inf)
        np.minimum.at(narrowest, c, w_single)
        valid[single_index] &= w_single <= narrowest[c] + 0.003

    index = np.flatnonzero(valid)
    if len(index) == 0:
        return []
    X_v = X_out[index]
    q_antipodal = np.where(is_pair[index], q_pair[index], single_contact_factor * jaw[index])
    q_points = n_between[index] / max(1, n_between[index].max())
    centre = _object_centre(p, table_z)
    radius = float(np.linalg.norm(p - centre, axis=1).max())
    sigma = max(0.01, 0.5 * radius)
    offset = centre - X_v[:, :3, 3]
    off_line = offset - np.einsum("mk,mk->m", offset, X_v[:, :3, 1])[:, None] * X_v[:, :3, 1]
    q_center = np.exp(-(np.linalg.norm(off_line, axis=1) / sigma) ** 2)
    q_approach = np.zeros(len(index)) if prior is None else 0.5 * (1.0 + X_v[:, :3, 2] @ prior)
    weights = np.array([weight_antipodal, weight_points, weight_center, weight_approach if prior is not None else 0.0])
    if np.any(weights < 0) or weights.sum() <= 0:
        raise ValueError(f"score weights must be non-negative and not all zero, got {weights.tolist()}")
    score = (weights @ np.stack([q_antipodal, q_points, q_center, q_approach])) / weights.sum()
    order = np.argsort(-score, kind="stable")
    kept = _deduplicate(X_v, order, dedup_distance_m, dedup_angle_rad, max_grasps)
    return [Grasp(X_v[k], float(width[index[k]]), float(score[k])) for k in kept]


class AntipodalGraspPredictor6DoF:
    """Grasp predictor (registered as ``"antipodal_6dof"``) around :func:`sample_antipodal_grasps`.

    ``predict(points_W, masks, **context)`` grasps the points under ``masks["target"]`` (else
    ``masks["target_link"]``); every other point except ``masks["robot"]`` is an obstacle. Context hints:
    ``table_z`` (m), ``viewpoint_W`` ([3], a camera position), ``seed``. Constructor keyword arguments are
    passed to the sampler (e.g. ``max_grasps``, ``friction_coef``, ``approach_prior_W``).
    """

    def __init__(self, **sampler_kwargs):
        self.sampler_kwargs = sampler_kwargs

    def split(self, points_W, masks) -> tuple[np.ndarray, np.ndarray]:
        """(target points, obstacle points) of a fused cloud and its masks; ValueError on a bad mask."""
        p = np.asarray(points_W)
        if p.ndim != 2 or p.shape[1] != 3:
            raise ValueError(f"points_W: expected shape [N, 3], got {list(p.shape)}")
        key = "target" if "target" in masks else "target_link" if "target_link" in masks else None
        if key is None:
            raise ValueError(f"antipodal_6dof grasp predictor: masks need 'target' or 'target_link', got {sorted(masks)}")

        def mask(name):
            m = np.asarray(masks[name])
            if m.dtype != bool or m.shape != (len(p),):
                raise ValueError(f"masks[{name!r}]: expected a bool array of shape [{len(p)}], got {m.dtype} {list(m.shape)}")
            return m

        target = mask(key)
        others = ~target
        if "robot" in masks:
            others &= ~mask("robot")
        return as_points(p[target], f"points_W[{key}]"), as_points(p[others], "points_W[obstacles]")

    def predict(self, points_W, masks, **context) -> list[Grasp]:
        target, obstacles = self.split(points_W, masks)
        if len(target) == 0:
            return []  # the object is not in view this step
        kwargs = dict(self.sampler_kwargs)
        for name in ("table_z", "viewpoint_W", "seed"):
            if context.get(name) is not None:
                kwargs[name] = context[name]
        return sample_antipodal_grasps(target, obstacle_points_W=obstacles, **kwargs)
