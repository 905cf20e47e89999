"""The target cabinet part (drawer or door) and its handle from geometry, named by the operator's prompt.

A real robot has no simulator masks; the operator names the target once with a prompt (a world point or an
axis-aligned world box, a few cm off). :class:`CabinetPartTracker` turns that into the two masks the cabinet
trees read, ``target_handle`` and ``target_link``, every control step:

1. First step: the cabinet's front is the dominant vertical plane near the prompt (RANSAC,
   :func:`~handleit.perception.point_cloud.fit_vertical_plane`, normal turned toward the robot). The part's
   region on it is a rectangle in the front's plane: the prompt box's extent, or, for a point prompt, the
   Voronoi cell of the handle nearest the prompt among the handles on that plane (closed fronts are
   coplanar and their 2-4 mm gaps are below the cameras' point spacing, so the neighbours' handles are what
   separates parts).
2. Every step: the part is a rigid rectangle that either slides along the front's normal (a drawer: the
   offset of its densest layer of points) or swings about a vertical hinge line on one of its two side
   edges (a door: the peak of the points' angles about that edge). Each hypothesis is searched near the
   last step's pose and scored by the points on the posed face; a kind and a hinge side are kept once
   the motion is clear. Once the part has moved off the cabinet's plane, its face's own points replace the
   prompt's bounds (they are no longer coplanar with the neighbours). A marked handle names no extent: once its
   door has swung ~9 degrees, the line of the points that moved (seen from above) meets the cabinet's plane at
   the hinge, and replaces the guess wherever it was. A swung leaf's extent comes from its points off the
   cabinet's plane.
3. The part mask is what lies in the posed part's slab: the face, the handle in front of it, and for a
   drawer its sides and bottom between the cabinet's plane and the front (as the simulator's ``target_link``,
   it includes the handle). The handle is what stands proud of the posed face (6 mm to 8 cm), clustered
   with DBSCAN (open3d ``cluster_dbscan``); the clusters whose centre lies on the part are kept. With a box prompt
   and no handle on the closed part, the cluster just beside its bounds (within 5 cm) is taken, and the bounds grow
   to hold it.

Frames: W the world (z up). The front frame F has its origin on the cabinet's front plane, axes u
(horizontal, in the plane), v (world z) and s (the outward normal, toward the robot). Lengths in metres.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from handleit.perception.point_cloud import Z_W, as_pose, fit_vertical_plane, horizontal_direction
from handleit.perception.segmentation_errors import SegmentationError, check_mask, check_points, check_prompt

FLOOR_HEIGHT_M = 0.01  # points at most this high are floor (the cloud is mostly floor: skip it first)
PLANE_DISTANCE_M = 0.006  # inlier distance of the front's plane: depth noise plus a panel's warp
POINT_PROMPT_RADIUS_M = 0.3  # a point prompt must have candidate points within this
BOX_PROMPT_MARGIN_M = 0.1  # a box prompt must have candidate points inside the box grown by this
HANDLE_MIN_PROUD_M = 0.006  # handles stand 1-6 cm proud; the face's points scatter a few mm
HANDLE_MAX_PROUD_M = 0.08
# A handle along the face's top edge (a lip: a plate standing 3-4 cm proud) hides the face just below it from
# cameras that look down on it, so the face seen ends under the lip and the lip lies above the face's bounds
# (drawer-train-023: 0.3-1.9 cm above). Proud points up to this far above the face count as its handle; below
# the face is the next drawer's lip, which is not taken.
HANDLE_ABOVE_FACE_M = 0.03
# A box prompt's faces are a few cm off (2 cm std per face in the bundled envs), and a handle along the part's edge
# (a door's lip along its free edge, 0-1 cm from it) can lie outside the box: door-train-039's lip 3-4 cm beyond
# its u bound, and no handle was found in 150 steps. While the closed part shows no handle inside its bounds, the
# proud cluster nearest them within this margin is taken, and the bounds grow to hold it.
BOX_HANDLE_SEARCH_M = 0.05
BOX_HANDLE_MIN_POINTS = 10
FRONT_THICKNESS_M = 0.025  # a door leaf's thickness (1.5-2 cm) with margin: its edge shows when it swings
MAX_DRAWER_STEP_M = 0.05  # largest drawer motion between two updates (a pulled drawer moves ~1.5 cm/step)
MAX_DOOR_STEP_RAD = 0.2  # largest door swing between two updates
MIN_SUPPORT = 20  # fewer face points than this: the part is hidden; keep the last pose
MOVED_DRAWER_M = 0.02  # a drawer this far out is off the cabinet's plane: its kind and bounds are clear
MOVED_DOOR_RAD = 0.12  # a door leaf this far open: the same
# With a handle hint (a colour marker), the face this far beside (u) and above/below (v) the handle is taken as
# the part's own while its extent is unknown: fronts are at least ~10 cm tall and wider than their handles.
HANDLE_ANCHOR_U_M = 0.08
HANDLE_ANCHOR_V_M = 0.03
MARKER_CLUSTER_GAP_M = 0.02  # a proud cluster this near a marker point is the marked handle's own piece
# A marked handle names the handle, not its part: a door's hinge is found from the leaf's motion. Points this far
# out of the cabinet's plane (a few times the depth noise) have moved; they are searched this far beside and
# above or below the handle (the widest and tallest leaves; a free edge swings out by at most the leaf's width, so
# LEAF_SEARCH_U_M also bounds how far out), and their line, once it has turned LEAF_FIT_RAD, meets the cabinet's
# plane at the hinge.
LEAF_MOVED_M = 0.012
LEAF_SEARCH_U_M, LEAF_SEARCH_V_M = 1.2, 1.0
LEAF_FIT_RAD = 0.15
LEAF_RECHECK_DRAWER_M = 0.15  # a part taken for a drawer is checked for a leaf until it is this far out
LEAF_CELL_M = 0.02  # the closed view's depth is kept per cell of this size in the front's plane
LEAF_MIN_POINTS, LEAF_MIN_LENGTH_M = 60, 0.1  # a leaf's line holds this many points over at least this length
LEAF_ATTACHED_M = 0.025  # ... and leaves the cabinet's plane: its moved points begin this near it
LEAF_GAP_M = 0.03  # a gap this wide along the leaf's line, beyond the handle, is its free edge
MIN_HINGE_RADIUS_M, MAX_HINGE_RADIUS_M = 0.1, 1.2  # the handle's distance from a door's hinge


@dataclass
class _Front:
    """The cabinet's front plane near the part, and the part's rectangle on it (front frame F)."""

    normal_W: np.ndarray  # [3] outward unit normal, horizontal (s axis)
    u_W: np.ndarray  # [3] horizontal in-plane axis, cross(z, normal)
    offset_m: float  # plane: normal . p = offset
    bounds: np.ndarray  # [2, 2]: (u_min, u_max), (v_min, v_max) of the part's face when closed

    def coords(self, points_W: np.ndarray) -> np.ndarray:
        """``[N, 3]`` (u, v, s) of world points."""
        return np.stack([points_W @ self.u_W, points_W[:, 2], points_W @ self.normal_W - self.offset_m], axis=1)


def _dbscan_labels(points: np.ndarray, eps_m: float, min_points: int) -> np.ndarray:
    """open3d's DBSCAN labels ([N] int, -1 noise) of points (2D points get z = 0)."""
    import open3d as o3d  # lazy: a second to import

    if len(points) == 0:
        return np.zeros(0, dtype=int)
    p3 = points if points.shape[1] == 3 else np.column_stack([points, np.zeros(len(points))])
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(p3))
    return np.asarray(cloud.cluster_dbscan(eps=eps_m, min_points=min_points), dtype=int)


def _peak(values: np.ndarray, lo: float, hi: float, bin_width: float) -> tuple[float, int]:
    """The densest ``bin_width`` window of ``values`` within [lo, hi] (3-bin smoothed histogram), refined to
    the median of the values within 1.5 bins of it; ``(position, count within 1.5 bins)``; (nan, 0) if none."""
    v = values[(values >= lo) & (values <= hi)]
    if len(v) == 0:
        return float("nan"), 0
    n_bins = max(1, int(np.ceil((hi - lo) / bin_width)))
    counts = np.bincount(np.minimum(((v - lo) / bin_width).astype(np.int64), n_bins - 1), minlength=n_bins)
    smooth = np.convolve(counts, np.ones(3), mode="same")
    centre = lo + (int(np.argmax(smooth)) + 0.5) * bin_width
    near = v[np.abs(v - centre) <= 1.5 * bin_width]
    return float(np.median(near)), int(len(near))


class CabinetPartTracker:
    """Segments the prompted drawer or door and its handle, every control step, from the point cloud alone.

    Example::

        tracker = CabinetPartTracker()
        handle_mask, part_mask = tracker.update(obs.points, ~robot_mask, obs.target_prompt_W, obs.X_WB)

    The prompt is read on the first update after :meth:`reset` (a new episode); later prompts are only
    checked, so a prompt that follows a moving marker does not restart the tracking. Cost: a few ms per
    update on a 192,000-point cloud (the floor is dropped first).

    State after an update: ``kind`` ("drawer", "door" or None while the part has not moved clearly),
    ``displacement_m`` (a drawer's travel along the front's normal), ``angle_rad`` (a door's swing),
    ``hinge_side`` (-1 or +1: the leaf's edge at u_min or u_max), ``front_normal_W``, ``bounds``.
    """

    def __init__(self, *, kind: str | None = None, floor_height_m: float = FLOOR_HEIGHT_M,
                 plane_distance_m: float = PLANE_DISTANCE_M, handle_min_proud_m: float = HANDLE_MIN_PROUD_M,
                 handle_max_proud_m: float = HANDLE_MAX_PROUD_M, front_thickness_m: float = FRONT_THICKNESS_M,
                 point_prompt_radius_m: float = POINT_PROMPT_RADIUS_M,
                 box_prompt_margin_m: float = BOX_PROMPT_MARGIN_M, min_support: int = MIN_SUPPORT):
        """
        Args:
            kind: "drawer" or "door" when the caller knows it (the task does); None: decided from the motion.
            floor_height_m: points at most this high (world z, m) are floor and never part of the target.
            plane_distance_m: points within this of the part's face are on it (m).
            handle_min_proud_m, handle_max_proud_m: the handle is what stands this far in front of the face (m).
            front_thickness_m: how far behind its face a door leaf's points may lie (its edge, m).
            point_prompt_radius_m, box_prompt_margin_m: how near the prompt candidate points must be (m).
            min_support: face points below which a step is too occluded to move the pose.
        """
        if kind not in (None, "drawer", "door"):
            raise ValueError(f"kind must be 'drawer', 'door' or None, got {kind!r}")
        self.fixed_kind = kind
        self.floor_height_m = float(floor_height_m)
        self.plane_distance_m = float(plane_distance_m)
        self.handle_min_proud_m = float(handle_min_proud_m)
        self.handle_max_proud_m = float(handle_max_proud_m)
        self.front_thickness_m = float(front_thickness_m)
        self.point_prompt_radius_m = float(point_prompt_radius_m)
        self.box_prompt_margin_m = float(box_prompt_margin_m)
        self.min_support = int(min_support)
        self.drawer_depth_m = 0.6
        self.reset()

    def reset(self) -> None:
        """Forget the part (a new episode, or a new prompt)."""
        self.front: _Front | None = None
        self.kind: str | None = self.fixed_kind
        self.displacement_m = 0.0
        self.angle_rad = 0.0
        self.hinge_side = 0  # -1: hinge on the u_min edge, +1: on u_max, 0: not known
        self._refined = False  # the bounds come from the moved part's own face
        self._door_width_m = 0.0
        self._side_guess = -1  # the best hinge side while the kind is not decided yet
        self._handle_box: np.ndarray | None = None  # [2, 2] the handle's (u, v) extent on the closed part
        self._handle_anchored = False  # the first update had a handle hint: the part's pose follows its handle
        self._leaf_from_motion = False  # a marked door's hinge and extent came from its leaf's motion
        self._closed_depth: tuple[np.ndarray, np.ndarray] | None = None  # (cell keys, most forward s) when first seen
        self._box_prompt = False  # the prompt was a box (its faces a few cm off), not a point

    # ------------------------------------------------------------------------------------------- public

    @property
    def front_normal_W(self) -> np.ndarray | None:
        """The cabinet front's outward normal ([3], world), or None before the first update."""
        return None if self.front is None else self.front.normal_W.copy()

    @property
    def bounds(self) -> np.ndarray | None:
        """The part's face when closed, ``[[u_min, u_max], [v_min, v_max]]`` in the front frame (m)."""
        return None if self.front is None else self.front.bounds.copy()

    def update(self, points_W, candidate_mask, prompt_W, X_WB, handle_hint_mask=None) -> tuple[np.ndarray, np.ndarray]:
        """The target's handle and part in this step's cloud.

        Args:
            points_W: ``[N, 3]`` the fused point cloud in the world (m).
            candidate_mask: ``[N]`` bool, the points that may be the target (not the robot).
            prompt_W: ``[3]`` a world point on the target, or ``[2, 3]`` a world box around it (min, max
                corners), a few cm off; read on the first update after :meth:`reset`.
            X_WB: 4x4 pose of the robot's base in the world (the front faces the robot).
            handle_hint_mask: ``[N]`` bool, the handle's points when something else found them (a colour
                marker): the handle is those points and the part is the planar region behind them.
        Returns:
            ``(handle_mask, part_mask)``, ``[N]`` bool each; the part mask includes the handle. The handle
            mask is empty when the handle is hidden (e.g. in the closed gripper).
        Raises:
            SegmentationError naming the problem: an empty cloud or no candidate points, NaN/inf points,
            points not [N, 3], a prompt not [3] or [2, 3] or not finite, a prompt away from the cloud, no
            vertical front plane at the prompt.
        """
        p = check_points(points_W)
        n = len(p)
        candidates = check_mask(candidate_mask, n, "candidate_mask")
        prompt = check_prompt(prompt_W)
        try:
            X_WB = as_pose(X_WB, "X_WB")
        except ValueError as error:
            raise SegmentationError(str(error)) from error
        hint = None if handle_hint_mask is None else check_mask(handle_hint_mask, n, "handle_hint_mask")
        usable = candidates & (p[:, 2] > self.floor_height_m)
        if not usable.any():
            raise SegmentationError(f"no candidate points: of {n} points, {int(candidates.sum())} are candidates "
                                    f"and none is above the floor ({self.floor_height_m} m)")
        index = np.flatnonzero(usable)
        q = p[index]
        if self.front is None:
            self._initialise(q, prompt, X_WB, None if hint is None else hint[index])
            self._handle_anchored = hint is not None and bool(hint[index].any())
            if self._handle_anchored:
                self._closed_depth = self._depth_cells(self.front.coords(q))
        uvs = self.front.coords(q)
        self._track(uvs)
        part_local, handle_local = self._masks(uvs, None if hint is None else hint[index])
        handle_mask = np.zeros(n, dtype=bool)
        part_mask = np.zeros(n, dtype=bool)
        handle_mask[index[handle_local]] = True
        part_mask[index[part_local | handle_local]] = True
        return handle_mask, part_mask

    # ------------------------------------------------------------------------------------------- first step

    def _initialise(self, q: np.ndarray, prompt: np.ndarray, X_WB: np.ndarray, hint: np.ndarray | None) -> None:
        if prompt.ndim == 1:
            near = np.linalg.norm(q - prompt, axis=1) <= self.point_prompt_radius_m
            if not near.any():
                raise SegmentationError(f"prompt_W: the point {np.round(prompt, 3).tolist()} is away from the cloud "
                                        f"(no candidate point within {self.point_prompt_radius_m} m)")
            centre = prompt
        else:
            lo, hi = prompt[0] - self.box_prompt_margin_m, prompt[1] + self.box_prompt_margin_m
            near = np.all((q >= lo) & (q <= hi), axis=1)
            if not near.any():
                raise SegmentationError(f"prompt_W: the box {np.round(prompt, 3).tolist()} is away from the cloud "
                                        f"(no candidate point inside it grown by {self.box_prompt_margin_m} m)")
            centre = prompt.mean(axis=0)
        if hint is not None and hint.any():
            centre = q[hint].mean(axis=0)
        toward = X_WB[:3, 3] - centre
        try:
            hint_W = horizontal_direction(toward if np.linalg.norm(toward[:2]) > 1e-6 else X_WB[:3, 0], "toward")
        except ValueError:
            hint_W = np.array([1.0, 0.0, 0.0])
        # The front faces the robot; 60 degrees keeps the cabinet's sides (90 degrees off) out.
        plane = fit_vertical_plane(q[near], self.plane_distance_m, normal_hint_W=hint_W, max_angle_rad=np.pi / 3,
                                   min_inliers=min(10, int(near.sum())))
        if plane is None:
            raise SegmentationError(f"no vertical front plane facing the robot among the {int(near.sum())} "
                                    "candidate points at the prompt")
        normal = plane.normal_W
        u_W = np.cross(Z_W, normal)
        front = _Front(normal, u_W, plane.offset_m, np.zeros((2, 2)))
        self._box_prompt = prompt.ndim == 2
        if prompt.ndim == 2:
            corners = np.array([[x, y, z] for x in prompt[:, 0] for y in prompt[:, 1] for z in prompt[:, 2]])
            uv = front.coords(corners)[:, :2]
            front.bounds = np.stack([uv.min(axis=0), uv.max(axis=0)], axis=1)
        else:
            front.bounds = self._point_prompt_bounds(front, q, prompt if hint is None or not hint.any() else centre,
                                                     hint)
        self.front = front

    def _point_prompt_bounds(self, front: _Front, q: np.ndarray, prompt: np.ndarray,
                             hint: np.ndarray | None) -> np.ndarray:
        """The part's rectangle for a point prompt: the Voronoi cell (on the front's plane) of the handle
        nearest the prompt among the handles standing proud of that plane within 1 m, cut to the connected
        region of plane points holding the handle; without a handle, the plane's region within the prompt
        radius."""
        uvs = front.coords(q)
        p_uv = front.coords(prompt[None])[0, :2]
        local = np.linalg.norm(uvs[:, :2] - p_uv, axis=1) <= 1.0
        on_plane = local & (np.abs(uvs[:, 2]) <= self.plane_distance_m)
        proud = local & (uvs[:, 2] > self.handle_min_proud_m) & (uvs[:, 2] < self.handle_max_proud_m)
        labels = _dbscan_labels(q[proud], 0.02, 3) if proud.any() else np.zeros(0, int)
        centres = [uvs[proud][labels == k, :2].mean(axis=0) for k in range(labels.max(initial=-1) + 1)]
        if hint is not None and hint.any():
            # The marked handle's own clusters are not its neighbours: a long bar seen in pieces (a gap between
            # its posts) gave clusters beyond 3 cm of the marker's centre, whose cells cut the part down to 6 x 7 cm
            # (door-test-009). A cluster with a point within MARKER_CLUSTER_GAP_M of the marker's is the handle.
            target = uvs[hint, :2].mean(axis=0)
            marked = cKDTree(uvs[hint, :2])
            proud_uv = uvs[proud, :2]
            centres = [c for k, c in enumerate(centres)
                       if marked.query(proud_uv[labels == k], distance_upper_bound=MARKER_CLUSTER_GAP_M)[0].min()
                       == np.inf]
        elif centres:
            gaps = [np.min(np.linalg.norm(uvs[proud][labels == k, :2] - p_uv, axis=1)) for k in range(len(centres))]
            target = centres.pop(int(np.argmin(gaps)))
        else:
            target = None
        if target is None:
            cell = on_plane & (np.linalg.norm(uvs[:, :2] - p_uv, axis=1) <= self.point_prompt_radius_m)
            seed_uv = p_uv
        else:
            cell = on_plane.copy()
            d_target = np.linalg.norm(uvs[:, :2] - target, axis=1)
            for c in centres:
                cell &= d_target <= np.linalg.norm(uvs[:, :2] - c, axis=1)
            seed_uv = target
        if cell.sum() < 3:
            raise SegmentationError("no front plane around the point prompt to bound the part")
        # The connected piece of the cell (DBSCAN in the plane) nearest the handle or prompt.
        cell_uv = uvs[cell, :2]
        labels = _dbscan_labels(cell_uv, 0.03, 3)
        nearest = int(np.argmin(np.linalg.norm(cell_uv - seed_uv, axis=1)))
        piece = cell_uv[labels == labels[nearest]] if labels[nearest] >= 0 else cell_uv
        return np.stack([np.percentile(piece, 0.5, axis=0), np.percentile(piece, 99.5, axis=0)], axis=1)

    # ------------------------------------------------------------------------------------------- tracking

    def _anchored_guess(self) -> bool:
        """The part's extent is a guess around a marked handle, and the part has not shown its kind yet."""
        return self._handle_anchored and self._handle_box is not None and self.kind is None

    def _around_handle(self, uvs: np.ndarray) -> np.ndarray:
        """The points of the face around the handle (its closed (u, v) box, grown by the anchor margins)."""
        (hu0, hu1), (hv0, hv1) = self._handle_box
        return ((uvs[:, 0] >= hu0 - HANDLE_ANCHOR_U_M) & (uvs[:, 0] <= hu1 + HANDLE_ANCHOR_U_M)
                & (uvs[:, 1] >= hv0 - HANDLE_ANCHOR_V_M) & (uvs[:, 1] <= hv1 + HANDLE_ANCHOR_V_M))

    def _door_frame(self, uvs: np.ndarray, side: int, angle_rad: float) -> tuple[np.ndarray, np.ndarray]:
        """(t, depth) of points in a leaf hinged on edge ``side`` and swung by ``angle_rad``: t along the leaf
        from its hinge edge, depth along its outward normal."""
        (u0, u1), _ = self.front.bounds
        u_h, a = (u1, -1.0) if side > 0 else (u0, 1.0)  # the hinge's u and the leaf's direction from it
        du, s = uvs[:, 0] - u_h, uvs[:, 2]
        c, sn = np.cos(angle_rad), np.sin(angle_rad)
        return a * c * du + sn * s, -a * sn * du + c * s

    def _in_v(self, uvs: np.ndarray, margin_m: float = 0.0) -> np.ndarray:
        v0, v1 = self.front.bounds[1]
        return (uvs[:, 1] >= v0 - margin_m) & (uvs[:, 1] <= v1 + margin_m)

    def _drawer_pose(self, uvs: np.ndarray, in_v: np.ndarray) -> tuple[float, int]:
        (u0, u1), _ = self.front.bounds
        inside = in_v & (uvs[:, 0] >= u0) & (uvs[:, 0] <= u1)
        if self._anchored_guess():
            # The part's extent is a guess (a marker names the handle, not the part): until the part has moved,
            # its pose comes from the face around its handle, which is surely the part's, so that the static
            # neighbours a too-wide guess holds do not pin the estimate to the cabinet's plane.
            inside = self._around_handle(uvs)
        d = self.displacement_m
        return _peak(uvs[inside, 2], d - MAX_DRAWER_STEP_M, d + MAX_DRAWER_STEP_M, 0.004)

    def _door_pose(self, uvs: np.ndarray, in_v: np.ndarray, side: int) -> tuple[float, int]:
        (u0, u1), _ = self.front.bounds
        width = u1 - u0
        u_h, a = (u1, -1.0) if side > 0 else (u0, 1.0)
        du, s = a * (uvs[in_v, 0] - u_h), uvs[in_v, 2]
        r = np.hypot(du, s)
        # Away from the hinge (angles are sharp there) and within the leaf's reach.
        far = (r >= 0.3 * width) & (r <= width)
        phi = np.arctan2(s[far], du[far])
        angle, _ = _peak(phi, max(-0.05, self.angle_rad - MAX_DOOR_STEP_RAD), self.angle_rad + MAX_DOOR_STEP_RAD,
                         0.01)
        if not np.isfinite(angle):
            return angle, 0
        t, depth = self._door_frame(uvs[in_v], side, angle)
        support = int(np.count_nonzero((np.abs(depth) <= self.plane_distance_m) & (t >= 0) & (t <= width)))
        return angle, support

    @staticmethod
    def _cell_keys(uvs: np.ndarray) -> np.ndarray:
        cells = np.floor(uvs[:, :2] / LEAF_CELL_M).astype(np.int64)
        return cells[:, 0] * 1_000_003 + cells[:, 1]

    def _depth_cells(self, uvs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The most forward s per (u, v) cell of a view: (sorted cell keys, their s)."""
        keys = self._cell_keys(uvs)
        order = np.lexsort((-uvs[:, 2], keys))
        keys, depth = keys[order], uvs[order, 2]
        first = np.r_[True, keys[1:] != keys[:-1]]
        return keys[first], depth[first]

    def _moved_since_closed(self, uvs: np.ndarray) -> np.ndarray:
        """[N] bool: points LEAF_MOVED_M in front of what the first view saw in their cell (the handles, the
        cabinet's edges and anything else that stood there already have not moved; cells it did not see, not
        known to have moved)."""
        keys, depth = self._closed_depth
        mine = self._cell_keys(uvs)
        at = np.clip(np.searchsorted(keys, mine), 0, len(keys) - 1)
        seen = keys[at] == mine
        return seen & (uvs[:, 2] > depth[at] + LEAF_MOVED_M)

    def _fit_moved_leaf(self, uvs: np.ndarray) -> None:
        """With a marked handle, the part's extent is a guess from the neighbouring handles (a door's width off by
        up to 30 cm on the bundled cabinets, and so its hinge): once a leaf has swung LEAF_FIT_RAD out of the
        cabinet's plane, the points that moved lie on a line (seen from above) that meets the plane at the hinge.
        That line (RANSAC, :func:`~handleit.perception.point_cloud.fit_vertical_plane` on (u, s)) replaces the
        guess: the hinge's side and place, the angle, and the leaf's width and height from its points."""
        (hu0, hu1), (hv0, hv1) = self._handle_box
        hu = 0.5 * (hu0 + hu1)
        moved = ((np.abs(uvs[:, 0] - hu) <= LEAF_SEARCH_U_M) & (uvs[:, 1] >= hv0 - LEAF_SEARCH_V_M)
                 & (uvs[:, 1] <= hv1 + LEAF_SEARCH_V_M) & (uvs[:, 2] > LEAF_MOVED_M)
                 & (uvs[:, 2] < LEAF_SEARCH_U_M))
        if moved.sum() < LEAF_MIN_POINTS:
            return
        moved[moved] = self._moved_since_closed(uvs[moved])
        if moved.sum() < LEAF_MIN_POINTS:
            return
        usv = uvs[moved][:, [0, 2, 1]]  # (u, s) as a horizontal plane's (x, y): a vertical plane is a line in it
        line = fit_vertical_plane(usv, self.plane_distance_m, min_inliers=self.min_support)
        if line is None or line.inliers.sum() < max(LEAF_MIN_POINTS, 0.5 * len(usv)):
            return  # no line holds most of what moved: not one leaf
        nu, ns = line.normal_W[:2]
        angle = float(np.arctan2(abs(nu), abs(ns)))  # the line's turn from the cabinet's plane (s = 0)
        if angle < LEAF_FIT_RAD:
            return  # a drawer's face (parallel to the plane), or a leaf not yet turned enough to place its hinge
        u_hinge = line.offset_m / nu
        side = -1 if hu > u_hinge else 1  # the leaf runs from its hinge to the handle
        if not MIN_HINGE_RADIUS_M <= abs(hu - u_hinge) <= MAX_HINGE_RADIUS_M or side * nu * ns < 0:
            return  # the handle not on the leaf, or a line rising toward the hinge: not a leaf swung about it
        leaf = usv[line.inliers]
        t = np.hypot(leaf[:, 0] - u_hinge, leaf[:, 1])
        if np.ptp(t) < LEAF_MIN_LENGTH_M or leaf[:, 1].min() > LEAF_ATTACHED_M:
            return  # a blob, or a line floating in front of the face (a hand's stray points), not a swung leaf
        # The leaf runs from its hinge out to the first gap in its points beyond the handle (gaps before it are the
        # arm's shadow); beyond such a gap lies what is not the leaf (door-train-038: 2% of the line's points 5 cm
        # past its free edge made it 9 cm too wide, and the static face there then outvoted the leaf).
        handle_t = max(abs(hu0 - u_hinge), abs(hu1 - u_hinge))
        ts = np.sort(t)
        gaps = np.flatnonzero((np.diff(ts) > LEAF_GAP_M) & (ts[:-1] >= handle_t))
        width = max(float(ts[gaps[0]] if len(gaps) else ts[-1]), handle_t + 0.02)
        v_lo = min(float(np.percentile(leaf[:, 2], 0.5)), hv0)
        v_hi = max(float(np.percentile(leaf[:, 2], 99.5)), hv1)
        u_lo, u_hi = (u_hinge, u_hinge + width) if side < 0 else (u_hinge - width, u_hinge)
        self.front.bounds = np.array([[u_lo, u_hi], [v_lo, v_hi]])
        self.kind, self.hinge_side, self._side_guess = "door", side, side
        self.angle_rad, self.displacement_m = angle, 0.0
        self._door_width_m = width
        self._refined = True
        self._leaf_from_motion = True

    def _track(self, uvs: np.ndarray) -> None:
        # A marked door's face around the handle moves out as a drawer's would: a kind taken from a short pull is
        # checked against the leaf's line until it is one a drawer's face cannot make (turned LEAF_FIT_RAD).
        if self._handle_anchored and not self._leaf_from_motion and self._handle_box is not None \
                and (self.kind != "drawer" or self.displacement_m < LEAF_RECHECK_DRAWER_M):
            self._fit_moved_leaf(uvs)
        in_v = self._in_v(uvs)
        hypotheses = []  # (support, kind, pose, side)
        if self.kind in (None, "drawer"):
            d, support = self._drawer_pose(uvs, in_v)
            if np.isfinite(d):
                hypotheses.append((support, "drawer", max(d, 0.0), 0))
        # While the kind is open and the part's extent a guess around a marked handle, the door hypotheses are
        # weighed on the same face around the handle as the drawer's (_drawer_pose): over the whole guess, the
        # static neighbours it holds outnumbered the moving drawer's points, a door at 0 degrees won, and a
        # drawer pulled 12 cm was tracked as closed.
        door_region = in_v & self._around_handle(uvs) if self._anchored_guess() else in_v
        if self.kind in (None, "door"):
            for side in ((-1, 1) if self.hinge_side == 0 else (self.hinge_side,)):
                angle, support = self._door_pose(uvs, door_region, side)
                if np.isfinite(angle):
                    hypotheses.append((support, "door", max(angle, 0.0), side))
        if not hypotheses:
            return
        support, kind, pose, side = max(hypotheses, key=lambda h: h[0])
        if support < self.min_support:
            return  # hidden: keep the last pose
        if kind == "drawer":
            self.displacement_m, self.angle_rad = pose, 0.0
            if self.kind is None and pose >= MOVED_DRAWER_M:
                self.kind = "drawer"
        else:
            self.angle_rad, self.displacement_m = pose, 0.0
            self._side_guess = side
            if pose >= MOVED_DOOR_RAD:
                self.kind, self.hinge_side = "door", side
        self._refine_bounds(uvs)

    def _refine_bounds(self, uvs: np.ndarray) -> None:
        """Once the part is off the cabinet's plane its face's points are its own: their extent replaces the
        prompt's bounds (merged over steps, so an occluded edge does not shrink them back)."""
        front = self.front
        (u0, u1), (v0, v1) = front.bounds
        grow = 0.04  # the prompt is a few cm off
        in_v = self._in_v(uvs, grow)
        if self.kind == "drawer" and self.displacement_m >= MOVED_DRAWER_M:
            face = in_v & (np.abs(uvs[:, 2] - self.displacement_m) <= self.plane_distance_m)
            face &= (uvs[:, 0] >= u0 - grow) & (uvs[:, 0] <= u1 + grow)
            if face.sum() < self.min_support:
                return
            lo, hi = np.percentile(uvs[face, :2], 0.5, axis=0), np.percentile(uvs[face, :2], 99.5, axis=0)
            new = np.stack([lo, hi], axis=1)
        elif self.kind == "door" and self.angle_rad >= MOVED_DOOR_RAD:
            self._refine_door(uvs, in_v)
            return
        else:
            return
        if self._refined:  # merged over steps: an edge hidden in this step keeps its earlier place
            old = front.bounds
            new = np.stack([np.minimum(old[:, 0], new[:, 0]), np.maximum(old[:, 1], new[:, 1])], axis=1)
        front.bounds = new
        self._refined = True

    def _refine_door(self, uvs: np.ndarray, in_v: np.ndarray) -> None:
        """A swung leaf's face is a line seen from above: its least-squares line gives the angle, and where
        it meets the cabinet's plane, the hinge (the prompt's edge is a few cm off, which tilts the near-hinge
        points by several mm); its points' reach from the hinge gives the free edge, and their heights the
        leaf's top and bottom (merged over steps)."""
        front = self.front
        (u0, u1), (v0, v1) = front.bounds
        side = self.hinge_side
        width = u1 - u0
        t, depth = self._door_frame(uvs, side, self.angle_rad)
        face = in_v & (np.abs(depth) <= 2 * self.plane_distance_m) & (t >= 0.1 * width) & (t <= width + 0.04)
        if face.sum() < self.min_support:
            return
        us = uvs[face][:, [0, 2]]
        centre = us.mean(axis=0)
        _, vectors = np.linalg.eigh(np.cov((us - centre).T))
        direction = vectors[:, 1]  # along the leaf, in (u, s)
        if abs(direction[1]) > 0.25:  # steep enough to meet the cabinet's plane at a well-defined hinge
            u_hinge = centre[0] - centre[1] * direction[0] / direction[1]
            if abs(u_hinge - (u1 if side > 0 else u0)) <= 0.05:  # the prompt is a few cm off, not more
                if side > 0:
                    u1 = u_hinge
                else:
                    u0 = u_hinge
                a = -1.0 if side > 0 else 1.0
                self.angle_rad = float(np.arctan2(abs(direction[1]), a * direction[0] * np.sign(direction[1])))
        front.bounds = np.array([[u0, u1], [v0, v1]])
        t, depth = self._door_frame(uvs, side, self.angle_rad)
        # Near the hinge the leaf's plane runs into the cabinet's: the cabinet's own face beside the leaf (above or
        # below it, where in_v grows by 4 cm) lies on both. Taken for the leaf's, it raised the leaf's top 4 cm
        # an update, merged over steps (door-train-000, geometric: 0.88 m to 1.18 m in 15 steps), until the
        # part's points held a dense static layer and the opening read 0 ("making progress?" failed mid-swing).
        # So the extent comes from the leaf's points off the cabinet's plane.
        off_plane = uvs[:, 2] >= 2 * self.plane_distance_m
        face = in_v & off_plane & (np.abs(depth) <= self.plane_distance_m) & (t >= 0.0) & (t <= width + 0.04)
        if face.sum() < self.min_support:
            return
        t_max = float(np.percentile(t[face], 99.5))
        v_lo, v_hi = np.percentile(uvs[face, 1], 0.5), np.percentile(uvs[face, 1], 99.5)
        if self._refined:
            t_max, v_lo, v_hi = max(t_max, self._door_width_m), min(v_lo, v0), max(v_hi, v1)
        self._door_width_m = t_max
        if side > 0:
            u0 = u1 - t_max
        else:
            u1 = u0 + t_max
        front.bounds = np.array([[u0, u1], [v_lo, v_hi]])
        self._refined = True

    # ------------------------------------------------------------------------------------------- masks

    def _door_posed(self) -> bool:
        """The pose is a door's swing (a known door, or an unknown part swung a few degrees)."""
        return self.kind == "door" or (self.kind is None and self.angle_rad >= 0.03)

    def _masks(self, uvs: np.ndarray, hint: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(part, handle) masks over the usable points, from the current pose."""
        (u0, u1), (v0, v1) = self.front.bounds
        in_v = self._in_v(uvs)
        if self._door_posed():
            side = self.hinge_side if self.hinge_side else self._side_guess
            t, depth = self._door_frame(uvs, side, self.angle_rad)
            across = (t >= 0.0) & (t <= u1 - u0)
            part = in_v & across & (depth >= -self.front_thickness_m) & (depth <= self.plane_distance_m)
            if self.angle_rad < MOVED_DOOR_RAD:  # still (nearly) in the cabinet's plane: only the face
                part &= depth >= -self.plane_distance_m
            lateral = in_v & across
        else:
            depth = uvs[:, 2] - self.displacement_m
            lateral = in_v & (uvs[:, 0] >= u0) & (uvs[:, 0] <= u1)
            # The face, and once the drawer is out its sides and bottom between the cabinet's plane and the face.
            back = -self.plane_distance_m if self.displacement_m < MOVED_DRAWER_M else -self.drawer_depth_m
            part = lateral & (depth >= back) & (depth <= self.plane_distance_m)
        handle_zone = lateral
        if not self._door_posed():  # a drawer's lip along its top edge (HANDLE_ABOVE_FACE_M)
            above = (uvs[:, 1] > v1) & (uvs[:, 1] <= v1 + HANDLE_ABOVE_FACE_M)
            handle_zone = lateral | above & (uvs[:, 0] >= u0) & (uvs[:, 0] <= u1)
        proud = handle_zone & (depth > self.handle_min_proud_m) & (depth <= self.handle_max_proud_m)
        if hint is not None:
            handle = hint.copy()
            moved = self.displacement_m >= MOVED_DRAWER_M or self.angle_rad >= MOVED_DOOR_RAD
            if handle.any() and not moved:
                self._remember_handle(uvs[handle])
        else:
            handle = self._handle_clusters(uvs, proud)
            if not handle.any() and self._box_prompt and self._handle_box is None and not self._door_posed() \
                    and self.displacement_m < MOVED_DRAWER_M and self._grow_to_handle_beside(uvs):
                return self._masks(uvs, hint)  # the bounds grew to hold a handle: the masks with them
        return part | proud & handle, handle

    def _grow_to_handle_beside(self, uvs: np.ndarray) -> bool:
        """With a box prompt and no handle inside the closed part's bounds: the proud cluster (DBSCAN, at least
        ``BOX_HANDLE_MIN_POINTS``) nearest the bounds, outside them by at most ``BOX_HANDLE_SEARCH_M``, is the
        handle the box cut off; the bounds grow to hold it (and 1 cm beyond: a lip lies up to 1 cm inside the
        part's edge). True when they grew. Only where nothing inside is a handle: a neighbour's handle may lie as
        near (the next drawer's lip under this one's face), and one inside the bounds is kept as before."""
        (u0, u1), (v0, v1) = self.front.bounds
        m = BOX_HANDLE_SEARCH_M
        near = (uvs[:, 0] >= u0 - m) & (uvs[:, 0] <= u1 + m) & (uvs[:, 1] >= v0 - m) & (uvs[:, 1] <= v1 + m)
        proud = near & (uvs[:, 2] > self.handle_min_proud_m) & (uvs[:, 2] <= self.handle_max_proud_m)
        index = np.flatnonzero(proud)
        if len(index) < BOX_HANDLE_MIN_POINTS:
            return False
        labels = _dbscan_labels(uvs[index], 0.02, 3)
        best, best_gap = None, np.inf
        for k in range(labels.max(initial=-1) + 1):
            uv = uvs[index[labels == k], :2]
            if len(uv) < BOX_HANDLE_MIN_POINTS:
                continue
            # How far the cluster's nearest point lies outside the bounds.
            du = np.maximum(np.maximum(u0 - uv[:, 0], uv[:, 0] - u1), 0.0)
            dv = np.maximum(np.maximum(v0 - uv[:, 1], uv[:, 1] - v1), 0.0)
            gap = float(np.min(np.hypot(du, dv)))
            if gap < best_gap:
                best, best_gap = uv, gap
        if best is None:
            return False
        lo, hi = best.min(axis=0) - 0.01, best.max(axis=0) + 0.01
        grown = np.stack([np.minimum(self.front.bounds[:, 0], lo), np.maximum(self.front.bounds[:, 1], hi)], axis=1)
        if np.array_equal(grown, self.front.bounds):
            return False
        self.front.bounds = grown
        return True

    def _closed_uv(self, uvs: np.ndarray) -> np.ndarray:
        """(u, v) where points of the part were before it moved (the part's own frame, in closed coordinates)."""
        if not self._door_posed():
            return uvs[:, :2]
        side = self.hinge_side if self.hinge_side else self._side_guess
        (u0, u1), _ = self.front.bounds
        u_h, a = (u1, -1.0) if side > 0 else (u0, 1.0)
        t, _ = self._door_frame(uvs, side, self.angle_rad)
        return np.column_stack([u_h + a * t, uvs[:, 1]])

    def _handle_clusters(self, uvs: np.ndarray, proud: np.ndarray) -> np.ndarray:
        """The proud clusters (DBSCAN) that are the part's handle. While the part is closed: those whose
        centre lies on the part's face, and their extent (in the part's closed frame) is remembered; once it
        moves: those whose centre lies in that remembered extent (grown by 3 cm), so that what comes to stand
        in front of a swung leaf (the cabinet's edge, a neighbour) is not taken for its handle."""
        handle = np.zeros(len(uvs), dtype=bool)
        index = np.flatnonzero(proud)
        if len(index) < 3:
            return handle
        labels = _dbscan_labels(uvs[index], 0.02, 3)
        closed_uv = self._closed_uv(uvs[index])
        moved = self.displacement_m >= MOVED_DRAWER_M or self.angle_rad >= MOVED_DOOR_RAD
        if moved and self._handle_box is not None:
            box = self._handle_box + np.array([[-0.03, 0.03], [-0.03, 0.03]])
        else:
            box = self.front.bounds + (0.0 if self._door_posed() else np.array([[0.0, 0.0], [0.0, HANDLE_ABOVE_FACE_M]]))
        for k in range(labels.max(initial=-1) + 1):
            members = labels == k
            cu, cv = closed_uv[members].mean(axis=0)
            if box[0, 0] <= cu <= box[0, 1] and box[1, 0] <= cv <= box[1, 1]:
                handle[index[members]] = True
        if handle.any() and not moved:
            self._remember_handle(uvs[handle])
        return handle

    def _remember_handle(self, handle_uvs: np.ndarray) -> None:
        """Grow the handle's remembered extent (in the part's closed frame) by this step's handle points."""
        seen = self._closed_uv(handle_uvs)
        new = np.stack([seen.min(axis=0), seen.max(axis=0)], axis=1)
        if self._handle_box is not None:
            new = np.stack([np.minimum(new[:, 0], self._handle_box[:, 0]),
                            np.maximum(new[:, 1], self._handle_box[:, 1])], axis=1)
        self._handle_box = new
