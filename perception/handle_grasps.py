"""Grasps on a drawer or door handle from one-sided, sparse handle points.

Let's Handle It (arXiv 2202.11792) Sec. 2.3 samples antipodal grasps, keeps the horizontal and vertical ones and sorts
them by their distance to the handle centroid; the handle's shape picks the orientation. A two-point antipodal test
needs both jaw contacts seen with opposing normals, but the cameras see a handle only from the front and
above, so a bar's underside (one jaw's contact) is never seen. This sampler therefore builds the antipodal
pair from the cross-section instead:

- the closing axis is fixed by the handle's shape: vertical for a horizontal bar or a drawer's lip,
  horizontal (in the front's plane) for a vertical bar or a door's lip, and either for a knob (preferring
  the closing axis across its smaller extent);
- candidate centres lie along the handle's axis near its middle, 1 cm apart, kept off the handle's ends
  (where bars have posts); the jaws' contacts are the extremes of the handle's cross-section across the
  closing axis. A bar's or lip's cross-section is the same along it, so it is measured on all its points
  off the ends (a pad-wide slab of a sparse view often holds a few points of one face only); a knob's in a
  pad-wide slab through the candidate, widened while it holds too few points. The grasp centres on the
  cross-section, so the pair of contacts is antipodal across the closing axis without seeing the far face;
- the approach is into the front (opposite its outward normal), and the tool centre sits beyond the
  visible front surface of the handle, by half the handle's width (its middle, for round and square
  sections) so the finger pads envelop it, but never so deep that the fingertips touch the front itself
  (when the front's points are given).

Gripper frame G (:class:`handleit.types.Grasp`): z approach, y closing, x = y cross z.
"""

from __future__ import annotations

import numpy as np

from handleit.perception.handle_points import estimate_handle_frame
from handleit.perception.point_cloud import (
    Z_W,
    as_points,
    as_pose,
    estimate_front_normal,
    fit_vertical_plane,
    horizontal_direction,
)
from handleit.types import Grasp

PANDA_MAX_OPENING_M = 0.08
PAD_WIDTH_M = 0.02  # Panda finger pad width, along G's x
# Opening beyond the handle's measured width on each side: one-sided views under-measure a cylinder's
# cross-section by ~15%, and the fingers must clear it while approaching.
CLEARANCE_M = 0.008
# The Panda's finger pads span the tool centre -9 to +9.5 mm along the approach (its URDF: tool centre
# 103.4 mm from the hand, pads 94.4-112.9 mm), so the tool centre goes to the handle's middle in depth.
MAX_DEPTH_M = 0.025  # deepest tool centre behind the handle's visible front (a 4.5 cm knob's middle: 2.25 cm)
FINGERTIP_CLEARANCE_M = 0.015  # tool centre to the front's plane: 9.5 mm of fingertip and 5.5 mm to spare
MIN_ENVELOP_M = 0.005  # a handle that lets the fingers in less than this cannot be held
PREFERENCE_BONUS = 1.0  # score added to the preferred orientation: it ranks above any distance (< 1 m)


def _grasp_pose(p_WG: np.ndarray, approach_W: np.ndarray, closing_W: np.ndarray) -> np.ndarray:
    X_WG = np.eye(4)
    X_WG[:3, 0] = np.cross(closing_W, approach_W)
    X_WG[:3, 1] = closing_W
    X_WG[:3, 2] = approach_W
    X_WG[:3, 3] = p_WG
    return X_WG


def _slab_indices(along: np.ndarray, s: float, half_width_m: float, min_points: int) -> np.ndarray:
    """Points within the finger-pad slab at ``s``; widened (a bar's cross-section is uniform) when sparse."""
    half = half_width_m
    span = float(np.abs(along - s).max()) if len(along) else 0.0
    while True:
        index = np.flatnonzero(np.abs(along - s) <= half)
        if len(index) >= min_points or half >= span:
            return index
        half *= 2.0


def sample_handle_grasps(
    handle_points_W,
    front_normal_W=None,
    *,
    link_points_W=None,
    toward_W=None,
    max_opening_m: float = PANDA_MAX_OPENING_M,
    clearance_m: float = CLEARANCE_M,
    depth_m: float | None = None,
    fingertip_clearance_m: float = FINGERTIP_CLEARANCE_M,
    pad_width_m: float = PAD_WIDTH_M,
    step_m: float = 0.01,
    max_offset_m: float = 0.05,
    end_margin_m: float = 0.015,
    min_points: int = 3,
    min_slab_points: int = 4,
) -> list[Grasp]:
    """Horizontal and vertical parallel-jaw grasps on a handle, best first.

    Args:
        handle_points_W: ``[N, 3]`` handle points in the world (z up), m; merged over steps preferably
            (:class:`~handleit.perception.handle_points.HandleAccumulator`). Fewer than ``min_points``
            points give ``[]``.
        front_normal_W: outward normal of the front the handle sits on (world; only its horizontal part is
            used). Without it, it is estimated from ``link_points_W``; one of the two is required.
        link_points_W: ``[M, 3]`` points of the drawer/door (the handle's may be included), world, m. They
            give the front normal when none is given, and the front's plane, which limits how deep the
            fingers go.
        toward_W: a point in front of the part (e.g. the robot base) to orient an estimated normal; default
            the handle centroid (handles protrude outward).
        max_opening_m: the gripper's largest opening (Panda: 0.08 m).
        clearance_m: opening added to the measured handle width on each side (m).
        depth_m: tool centre depth behind the handle's visible front surface (m). Default: half the
            measured width, i.e. the middle of a round or square bar, a lip's edge or a knob's head, where the
            pads' middle should be (at least 5 mm, at most 25 mm).
        fingertip_clearance_m: least distance kept between the tool centre and the front's plane (m).
        pad_width_m: finger pad width (m): keeps the pads off the ends; a knob's width is measured in a
            slab this wide.
        step_m: spacing of candidate centres along the handle (m).
        max_offset_m: candidates at most this far from the handle's middle along it (m).
        end_margin_m: keep the pads this far from the handle's ends, where bars have posts (m).
    Returns:
        ``Grasp(X_WG, width_m, score)`` sorted by score, best first: ``X_WG`` with z into the front and y
        vertical or horizontal-in-the-front; ``width_m`` the opening needed (measured width plus clearance);
        ``score`` = minus the distance (m) of the grasp centre from the handle's middle in the front's
        plane, plus 1 for the shape's preferred orientation. (The middle of the points' extent, rather than
        the paper's centroid: on sparse one-sided views the mean strays by ~1 cm along a bar.)
        ``[]`` when nothing fits (too few points, too wide, too shallow to envelop, no front: link points that
        fit no vertical plane).
    Raises:
        ValueError on invalid points or when neither ``front_normal_W`` nor ``link_points_W`` is given.
    """
    p = as_points(handle_points_W, "handle_points_W")
    if front_normal_W is None and link_points_W is None:
        raise ValueError("sample_handle_grasps: give front_normal_W or link_points_W (to estimate the front's normal)")
    if len(p) < max(min_points, 1):
        return []
    centroid = p.mean(axis=0)
    link = None if link_points_W is None else as_points(link_points_W, "link_points_W")
    if front_normal_W is not None:
        n = horizontal_direction(front_normal_W, "front_normal_W")
    else:
        toward = centroid if toward_W is None else as_points(toward_W, "toward_W", allow_empty=False)[0]
        try:
            n = estimate_front_normal(link, toward)
        except ValueError:
            # No link points, or a few scattered ones (the part at the view's edge) that fit no vertical plane:
            # no front to approach yet. Raised, it ended a TidyIntoDrawer episode (test seed 8: 14 link points).
            return []

    approach = -n
    e_h = np.cross(Z_W, n)  # horizontal, in the front's plane
    q = p - centroid
    depth = q @ approach  # grows into the cabinet
    depth_front_plane = None
    if link is not None and len(link) >= 10:
        # The front face is the largest plane parallel to the handle behind the handle's front surface
        # (link points include the handle's, whose front face must not pass for the cabinet's front).
        behind = (link - centroid) @ approach > float(depth.min()) + 0.01
        plane = fit_vertical_plane(link[behind], normal_hint_W=n, max_angle_rad=0.35)
        if plane is not None:  # oriented like n, so this is the centroid's height in front of it
            depth_front_plane = float(centroid @ plane.normal_W - plane.offset_m)

    frame = estimate_handle_frame(p, n)
    elongated = frame.shape != "compact"
    extent_h = float(np.ptp(q @ e_h))
    extent_v = float(np.ptp(q @ Z_W))
    if frame.shape == "horizontal":
        options = [(Z_W, e_h, True)]  # (closing, along, preferred)
    elif frame.shape == "vertical":
        options = [(e_h, Z_W, True)]
    else:  # knob: both, preferring to close across the smaller extent
        close_vertically = extent_v <= extent_h
        options = [(Z_W, e_h, close_vertically), (e_h, Z_W, not close_vertically)]

    grasps: list[Grasp] = []
    for closing, along_axis, preferred in options:
        along = q @ along_axis
        across = q @ closing
        # The handle's middle: the middle of its extent (see HandleFrame.center_W), not the noisier mean.
        mid_along = 0.5 * float(along.min() + along.max())
        mid_across = 0.5 * float(across.min() + across.max())
        lo = float(along.min()) + pad_width_m / 2 + end_margin_m
        hi = float(along.max()) - pad_width_m / 2 - end_margin_m
        k = int(round(max_offset_m / step_m))
        centres = [s for s in mid_along + step_m * np.arange(-k, k + 1) if lo <= s <= hi]
        if not centres:  # a short handle (a knob): its middle
            centres = [mid_along]
        if elongated:
            # A bar's or lip's cross-section is the same along it: measure it on all points off its ends
            # (posts), since a pad-wide slab of a sparse view often holds a few points of a single face.
            inner = np.flatnonzero((along >= along.min() + end_margin_m) & (along <= along.max() - end_margin_m))
            section = inner if len(inner) >= min_slab_points else np.arange(len(p))
        for s in centres:
            index = section if elongated else _slab_indices(along, s, pad_width_m / 2, min_slab_points)
            y_min, y_max = float(across[index].min()), float(across[index].max())
            width_m = y_max - y_min + 2 * clearance_m
            if width_m > max_opening_m:
                continue
            d_front = float(depth[index].min())
            if depth_m is None:  # bars and knobs are about as deep as they are wide
                d_tcp = d_front + float(np.clip(0.5 * (y_max - y_min), MIN_ENVELOP_M, MAX_DEPTH_M))
            else:
                d_tcp = d_front + depth_m
            if depth_front_plane is not None:
                d_tcp = min(d_tcp, depth_front_plane - fingertip_clearance_m)
                if d_tcp < d_front + MIN_ENVELOP_M:
                    continue
            y_mid = 0.5 * (y_min + y_max)
            p_WG = centroid + s * along_axis + y_mid * closing + d_tcp * approach
            score = -float(np.hypot(s - mid_along, y_mid - mid_across)) + (PREFERENCE_BONUS if preferred else 0.0)
            grasps.append(Grasp(_grasp_pose(p_WG, approach, closing), float(width_m), score))
    grasps.sort(key=lambda g: g.score, reverse=True)
    return grasps


def pregrasp_pose(X_WG, distance_m: float) -> np.ndarray:
    """The gripper pose ``distance_m`` (m) backed off from ``X_WG`` along its approach: -z of G. 4x4, world."""
    X_WG = as_pose(X_WG, "X_WG")
    X_GP = np.eye(4)
    X_GP[2, 3] = -float(distance_m)
    return X_WG @ X_GP


def flipped_grasp_pose(X_WG) -> np.ndarray:
    """The same grasp turned 180 degrees about its approach (z of G): equivalent for a symmetric gripper.

    Useful when the arm reaches one of the two more easily (wrist joint limits).
    """
    X_WG = as_pose(X_WG, "X_WG")
    return X_WG @ np.diag([-1.0, -1.0, 1.0, 1.0])
