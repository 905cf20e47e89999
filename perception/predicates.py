"""Logical predicates (``handleit.predicates``) evaluated from perception: point clouds and the robot's own
state, never simulator state.

Each function takes numpy arrays (world frame, z up, metres) and returns a :class:`PredicateEvidence`: whether
the predicate holds and, in words, why (what a behavior tree's condition node shows in its feedback).

- ``Open(part)`` / ``Closed(part)``: from the part's opening, the position of its front face along its
  outward normal relative to the cabinet body's front face around it (:func:`estimate_opening_m`): a drawer's
  front is flush with the body when closed (the bundled cabinets' convention, and PartNet-Mobility's
  cabinets'). Closed: within ``CLOSED_MAX_OPENING_M``. Open: pulled to at least ``OPEN_FRACTION_OF_TRAVEL``
  of its travel, once the travel is known (the opening at which a pull stalled, its end stop); a drawer whose
  travel is unknown is not Open (no range can be read off a closed drawer's points).
- ``Grasped(object)``: the fingers stopped apart (not closed on each other, not wide open) with the
  object's points between them.
- ``HandEmpty()``: the fingers closed on each other, or nothing but the robot between them.
- ``InsideOf(object, part)``: the object's points inside the drawer's box, an oriented box fitted to the
  drawer's points (front normal, horizontal lateral axis, z); not observed when the box is not seen (a closed
  drawer shows its front only).
- ``OnTopOf(object, surface)``: the object's lowest points on a plane fitted to the surface's uppermost points
  (open3d RANSAC), above the surface's extent.

Where perception cannot see what decides a predicate, the evidence says so (``observed=False``); a tree keeps
the last value it saw (behaviors/predicate_nodes.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import Delaunay, QhullError

from handleit.perception.open_state import front_layer_offset_m
from handleit.perception.point_cloud import Z_W, as_points, fit_plane, horizontal_direction

# Open / Closed ---------------------------------------------------------------------------------------------
# A front within 5 mm of the body's is closed. A push that this condition stops ends about there (at 8 mm,
# the drawers ended 7-8 mm out): half the long-horizon envs' ground truth (within 1 cm of the closed limit).
CLOSED_MAX_OPENING_M = 0.005
# Open: at least 95% of the travel a pull reached. Stricter than OpenCabinetDrawer's success (90% of the range,
# ManiSkill1): a pull that this condition stops ends about there, and at 90% of a travel measured a few mm
# short of the true range it could end short of the env's 90%.
OPEN_FRACTION_OF_TRAVEL = 0.95
BODY_BAND_M = 0.10  # body points within this of the part's extent (lateral, vertical) give the closed front
MIN_BODY_POINTS = 20  # fewer body points near the part: no closed reference, the opening is unknown
MIN_PART_POINTS = 30  # as open_state.MIN_POINTS: fewer part points give no front face
# A drawer's front never stands behind the body's: an opening read more than this below zero means the front's
# layer was not seen (from an angle, 1.3 m away, an open drawer read -5.9 cm for 20+ ticks; TidyIntoDrawer test
# seed 1): not measured.
MAX_BEHIND_BODY_M = 0.02
# An opening read from beside the cabinet is not a measurement either: the body's front plane and the drawer's
# front layer are both seen edge-on. From a base 0.8 m away, 100-110 degrees off the front's normal, an open
# drawer (35.9 cm) read 28 cm for 20 ticks, then 40.8 cm; within 85 degrees it read 35.5-35.9 cm
# (TidyIntoDrawer test seed 19, driving to the object on the table beside the cabinet).
MAX_VIEW_ANGLE_RAD = np.radians(75.0)
# Grasped / HandEmpty ---------------------------------------------------------------------------------------
FINGER_GAP_EMPTY_M = 0.004  # fingers closed tighter than this hold nothing (behaviors.common's value)
FINGER_GAP_OPEN_MARGIN_M = 0.003  # fingers within this of fully open have not closed on anything
PAD_HALF_WIDTH_M = 0.02  # half the finger-pad box across the closing direction (pads are 2 cm wide, + margin)
PAD_HALF_DEPTH_M = 0.025  # half the box along the approach (pads span -9 to +9.5 mm around the tool centre)
GAP_MARGIN_M = 0.005  # points this far outside the fingers' inner faces still count as between them
MIN_POINTS_BETWEEN = 3  # the fingers and the hand occlude most of what they hold: a few points suffice
# A gripper commanded closed whose fingers stand still apart holds something. The hand can hide all of it from the
# base cameras: a held object tucked for a drive showed no point at all for 100+ ticks, the fingers 37 mm apart,
# and the pick that had succeeded was taken for failed and begun again, dropping it (TidyIntoDrawer test seed 17).
# What it holds may be a drawer's handle, the object out of view on the table: only an object last seen at the hand
# is taken for held when out of view (test seed 6 took the handle for the object and began to place it).
NEAR_HAND_M = 0.1  # object points this close to the tool centre are at the hand
# InsideOf --------------------------------------------------------------------------------------------------
INSIDE_MARGIN_M = 0.01  # the box grows by this (walls' thickness, depth noise)
INSIDE_ABOVE_WALLS_M = 0.10  # an object may stand this far above the box's walls and still be inside
INSIDE_MIN_FRACTION = 0.9  # of the object's points within the box
MIN_BOX_DEPTH_M = 0.05  # a drawer's box seen shallower than this is its front only (closed): what it holds is unseen
MIN_OBJECT_POINTS = 5
# OnTopOf ---------------------------------------------------------------------------------------------------
# The object's lowest visible points within 3 cm above the surface's plane: seen from above, its bottom edge
# is hidden by its own sides (an object resting on a table read 2.3 cm, benchmarks/predicates_at_reset.py).
ON_TOP_MAX_GAP_M = 0.03
ON_TOP_MIN_GAP_M = -0.01  # ... and at most 1 cm below it (depth noise; not sunk through)
PLANE_DISTANCE_M = 0.005  # RANSAC inlier distance of the surface's plane
# The plane is fitted to the surface's uppermost points only: a table's sides and legs, below its top, are no
# support (seen from the side, a table's front panel can hold more points than its top).
SURFACE_TOP_BAND_M = 0.03
MAX_SURFACE_TILT_RAD = 0.35  # a support surface is roughly horizontal (20 degrees)
LOWEST_PERCENTILE = 5.0  # the object's lowest points: this percentile of heights, robust to stray points


@dataclass(frozen=True)
class PredicateEvidence:
    """A predicate's value from perception and the evidence for it (units in the text)."""

    holds: bool
    evidence: str
    observed: bool = True  # False: perception could not see what decides it (a tree may keep the last value)


def _lateral_axes(normal_W: np.ndarray) -> np.ndarray:
    """[3, 3] rows: the horizontal outward normal, the horizontal lateral axis, world z (a right-handed frame)."""
    n = horizontal_direction(normal_W, "front_normal_W")
    lateral = np.cross(Z_W, n)
    return np.stack([n, lateral, Z_W])


def estimate_opening_m(part_points_W, body_points_W, front_normal_W, band_m: float = BODY_BAND_M) -> float | None:
    """How far (m) a drawer's front stands out of the cabinet body's front face, along the outward normal.

    Args:
        part_points_W: ``[N, 3]`` the part's points (its handle's best left out), world, m.
        body_points_W: ``[M, 3]`` points of everything around that is not the part, the robot or the floor
            (the cabinet body and its other parts), world, m. Only those within ``band_m`` of the part's
            lateral and vertical extent are used: the frame and neighbouring fronts around the part.
        front_normal_W: ``[3]`` the part's outward front normal (horizontal; world).
    Returns:
        The front's position minus the body's front, both the most forward dense layer of points
        (:func:`~handleit.perception.open_state.front_layer_offset_m`); ~0 when closed. None when fewer
        than ``MIN_PART_POINTS`` part points or ``MIN_BODY_POINTS`` body points are seen.
    """
    part = as_points(part_points_W, "part_points_W")
    body = as_points(body_points_W, "body_points_W")
    if len(part) < MIN_PART_POINTS:
        return None
    R = _lateral_axes(front_normal_W)
    part_F, body_F = part @ R.T, body @ R.T
    lo, hi = part_F[:, 1:].min(axis=0) - band_m, part_F[:, 1:].max(axis=0) + band_m
    near = np.all((body_F[:, 1:] >= lo) & (body_F[:, 1:] <= hi), axis=1)
    if near.sum() < MIN_BODY_POINTS:
        return None
    return front_layer_offset_m(part_F[:, 0]) - front_layer_offset_m(body_F[near, 0])


def view_angle_rad(part_points_W, front_normal_W, viewpoint_W) -> float:
    """The horizontal angle (rad, 0 to pi) between a part's front normal and the direction from the part's
    centre (``part_points_W`` [N, 3]) to ``viewpoint_W`` ([3]); pi/2 and more: seen from beside or behind."""
    part = as_points(part_points_W, "part_points_W")
    if not len(part):
        raise ValueError("view_angle_rad: no part points")
    n = horizontal_direction(front_normal_W)
    d = np.asarray(viewpoint_W, dtype=np.float64).reshape(-1)[:3] - part.mean(axis=0)
    d[2] = 0.0
    length = float(np.linalg.norm(d))
    if length < 1e-9:
        return 0.0
    return float(np.arccos(np.clip(float(d @ n) / length, -1.0, 1.0)))


class OpeningTracker:
    """A part's opening (m) every step: :func:`estimate_opening_m` where the body around the part is seen, else
    the part's displacement since some earlier step (an
    :class:`~handleit.perception.open_state.OpenStateEstimator`'s) plus the offset between the two measured
    when both last were (the robot's arm hides the body's front near the handle while it pulls)."""

    def __init__(self) -> None:
        self.offset_m: float | None = None  # opening minus displacement, when last both were measured

    def update(self, part_points_W, body_points_W, front_normal_W, displacement_m: float | None = None,
               viewpoint_W=None, max_view_angle_rad: float = MAX_VIEW_ANGLE_RAD) -> tuple[float | None, str]:
        """(opening in m or None, how it was measured: "body front", "displacement", "not seen" or "seen from
        beside"). An opening read more than :data:`MAX_BEHIND_BODY_M` behind the body's front is not a
        measurement; nor one read from ``viewpoint_W`` ([3], the cameras' base, W) more than
        ``max_view_angle_rad`` off the front's normal, seen from the part's centre (horizontally), and then the
        displacement does not bridge it either."""
        opening = estimate_opening_m(part_points_W, body_points_W, front_normal_W)
        if opening is not None and opening < -MAX_BEHIND_BODY_M:
            opening = None  # the front's layer not seen (implausible: behind the body's front)
        if opening is not None and viewpoint_W is not None:
            if view_angle_rad(part_points_W, front_normal_W, viewpoint_W) > max_view_angle_rad:
                # Seen from beside the cabinet, edge-on: nothing measured, not even through the displacement
                # (a handle track of another skill's: bridged, a drawer open 30 cm read closed after a place
                # from beside it, and the tree held still with its goal believed; test seed 1).
                return None, "seen from beside"
        if opening is not None:
            if displacement_m is not None:
                self.offset_m = opening - displacement_m
            return opening, "body front"
        if displacement_m is not None and self.offset_m is not None:
            bridged = displacement_m + self.offset_m
            if bridged >= -MAX_BEHIND_BODY_M:
                return bridged, "displacement"
        return None, "not seen"


def evaluate_closed(opening_m: float | None, max_opening_m: float = CLOSED_MAX_OPENING_M) -> PredicateEvidence:
    """``Closed(part)`` from its opening (m, :func:`estimate_opening_m`; None: not measured)."""
    if opening_m is None:
        return PredicateEvidence(False, "opening not measured (part or body not seen)", observed=False)
    holds = opening_m <= max_opening_m
    return PredicateEvidence(holds, f"opening {opening_m * 100:.1f} cm {'<=' if holds else '>'} "
                                    f"{max_opening_m * 100:.1f} cm")


def evaluate_open(opening_m: float | None, travel_m: float | None,
                  fraction: float = OPEN_FRACTION_OF_TRAVEL) -> PredicateEvidence:
    """``Open(part)`` from its opening (m) and its travel (m; the end stop a pull reached, None: not known yet)."""
    if opening_m is None:
        return PredicateEvidence(False, "opening not measured (part or body not seen)", observed=False)
    if travel_m is None or travel_m <= 0.0:
        return PredicateEvidence(False, f"opening {opening_m * 100:.1f} cm, travel unknown (not pulled to its stop)")
    holds = opening_m >= fraction * travel_m
    return PredicateEvidence(holds, f"opening {opening_m * 100:.1f} cm of {travel_m * 100:.1f} cm travel "
                                    f"({'>=' if holds else '<'} {fraction:.0%})")


def points_between_fingers(points_W, X_WT, finger_gap_m: float) -> np.ndarray:
    """[N] bool: the points inside the box between a parallel gripper's fingers.

    Args:
        points_W: ``[N, 3]`` world points, m.
        X_WT: 4x4 tool-centre pose (z: approach, y: the fingers' closing direction), world.
        finger_gap_m: distance between the fingers' inner faces (m).
    """
    p = as_points(points_W, "points_W")
    X = np.asarray(X_WT, dtype=np.float64)
    p_T = (p - X[:3, 3]) @ X[:3, :3]
    return ((np.abs(p_T[:, 0]) <= PAD_HALF_WIDTH_M) & (np.abs(p_T[:, 1]) <= finger_gap_m / 2 + GAP_MARGIN_M)
            & (np.abs(p_T[:, 2]) <= PAD_HALF_DEPTH_M))


def evaluate_grasped(finger_gap_m: float, max_opening_m: float, object_points_W, X_WT,
                     held_apart: bool = False, last_seen_at_hand: bool = False) -> PredicateEvidence:
    """``Grasped(object)``: the fingers stopped apart on something, with the object's points between them; or,
    ``held_apart`` (the gripper commanded closed, its fingers standing still apart), with the object's points at
    the hand (within :data:`NEAR_HAND_M`), or nowhere in view when it was last seen at the hand
    (``last_seen_at_hand``: the hand hides what it holds). Object points seen only away from the hand, or the
    object unseen since it was last seen elsewhere (the fingers on a drawer's handle, the object on the table
    behind the robot): not grasped.

    Args:
        finger_gap_m: current finger gap (m); max_opening_m: the gripper's full opening (m).
        object_points_W: ``[N, 3]`` the object's points (its mask), world, m.
        X_WT: 4x4 tool-centre pose, world.
        held_apart: the fingers closed on something (commanded closed, still, apart).
        last_seen_at_hand: the object's points, when last in view, were at the hand.
    """
    if finger_gap_m < FINGER_GAP_EMPTY_M:
        return PredicateEvidence(False, f"fingers closed on nothing (gap {finger_gap_m * 1000:.1f} mm)")
    if finger_gap_m > max_opening_m - FINGER_GAP_OPEN_MARGIN_M:
        return PredicateEvidence(False, f"gripper open (gap {finger_gap_m * 1000:.0f} mm)")
    points = as_points(object_points_W, "object_points_W")
    n = int(points_between_fingers(points, X_WT, finger_gap_m).sum())
    if n < MIN_POINTS_BETWEEN and held_apart:
        if not len(points) and last_seen_at_hand:
            return PredicateEvidence(True, f"fingers held {finger_gap_m * 1000:.0f} mm apart on something; the object "
                                           "not in view since it was last seen at the hand (the hand hides it)")
        near = _count_near_hand(points, X_WT, NEAR_HAND_M)
        if near >= MIN_POINTS_BETWEEN:
            return PredicateEvidence(True, f"fingers held {finger_gap_m * 1000:.0f} mm apart on something; {near} "
                                           f"object points at the hand, {n} between the fingers")
    holds = n >= MIN_POINTS_BETWEEN
    return PredicateEvidence(holds, f"gap {finger_gap_m * 1000:.0f} mm, {n} object points between the fingers")


def _count_near_hand(points: np.ndarray, X_WT, near_m: float) -> int:
    """How many of ``points`` ([N, 3], W) lie within ``near_m`` of the tool centre (``X_WT``)."""
    return int((np.linalg.norm(points - np.asarray(X_WT, dtype=np.float64)[:3, 3], axis=1) <= near_m).sum())


def object_at_hand(object_points_W, X_WT, near_m: float = NEAR_HAND_M) -> bool | None:
    """Whether at least :data:`MIN_POINTS_BETWEEN` of the object's points (``[N, 3]``, W) lie within ``near_m``
    of the tool centre (``X_WT``); None when none is in view."""
    points = as_points(object_points_W, "object_points_W")
    if not len(points):
        return None
    return _count_near_hand(points, X_WT, near_m) >= MIN_POINTS_BETWEEN


def evaluate_hand_empty(finger_gap_m: float, other_points_W, X_WT, held_apart: bool = False) -> PredicateEvidence:
    """``HandEmpty()``: the fingers closed on each other, or no point but the robot's between them; never while
    ``held_apart`` (commanded closed, the fingers stand still apart: on something, seen or not).

    ``other_points_W``: ``[N, 3]`` every point that is not the robot's (world, m)."""
    if finger_gap_m < FINGER_GAP_EMPTY_M:
        return PredicateEvidence(True, f"fingers closed on nothing (gap {finger_gap_m * 1000:.1f} mm)")
    n = int(points_between_fingers(other_points_W, X_WT, finger_gap_m).sum())
    if held_apart:
        return PredicateEvidence(False, f"fingers held {finger_gap_m * 1000:.0f} mm apart on something; {n} points "
                                        "between them")
    holds = n < MIN_POINTS_BETWEEN
    return PredicateEvidence(holds, f"gap {finger_gap_m * 1000:.0f} mm, {n} points between the fingers")


@dataclass(frozen=True)
class PartBox:
    """An oriented box fitted to a drawer's points: ``R_WF`` rows are its axes (outward normal, lateral, z)."""

    R_WF: np.ndarray  # [3, 3]
    lower_F: np.ndarray  # [3] m, in the box's axes
    upper_F: np.ndarray  # [3]

    def contains(self, points_W, margin_m: float = 0.0, above_m: float = 0.0) -> np.ndarray:
        """[N] bool: points inside the box grown by ``margin_m``, its top raised by ``above_m`` more."""
        p_F = as_points(points_W, "points_W") @ self.R_WF.T
        upper = self.upper_F + margin_m + np.array([0.0, 0.0, above_m])
        return np.all((p_F >= self.lower_F - margin_m) & (p_F <= upper), axis=1)


def estimate_part_box(part_points_W, front_normal_W) -> PartBox | None:
    """A drawer's box from its points: the 2nd-98th percentile extent along its front normal, the horizontal
    lateral axis and z (percentiles: a few stray points do not stretch it). None with fewer than
    ``MIN_PART_POINTS`` points."""
    p = as_points(part_points_W, "part_points_W")
    if len(p) < MIN_PART_POINTS:
        return None
    R = _lateral_axes(front_normal_W)
    p_F = p @ R.T
    return PartBox(R, np.percentile(p_F, 2, axis=0), np.percentile(p_F, 98, axis=0))


def evaluate_inside_of(object_points_W, part_points_W, front_normal_W) -> PredicateEvidence:
    """``InsideOf(object, part)``: at least ``INSIDE_MIN_FRACTION`` of the object's points in the drawer's box
    (grown by ``INSIDE_MARGIN_M``, up to ``INSIDE_ABOVE_WALLS_M`` above its walls). A closed drawer shows
    only its front: its box, and what it holds, cannot be seen, and the predicate does not hold."""
    obj = as_points(object_points_W, "object_points_W")
    if len(obj) < MIN_OBJECT_POINTS:
        return PredicateEvidence(False, f"object not seen ({len(obj)} points)", observed=False)
    box = estimate_part_box(part_points_W, front_normal_W)
    if box is None:
        return PredicateEvidence(False, "part not seen", observed=False)
    depth = float(box.upper_F[0] - box.lower_F[0])
    if depth < MIN_BOX_DEPTH_M:
        return PredicateEvidence(False, f"the part's box is not seen ({depth * 100:.0f} cm deep: its front only)",
                                 observed=False)
    inside = box.contains(obj, INSIDE_MARGIN_M, INSIDE_ABOVE_WALLS_M)
    fraction = float(inside.mean())
    holds = fraction >= INSIDE_MIN_FRACTION
    return PredicateEvidence(holds, f"{fraction:.0%} of {len(obj)} object points in the part's box "
                                    f"({depth * 100:.0f} cm deep)")


def evaluate_on_top_of(object_points_W, surface_points_W, seed: int = 0) -> PredicateEvidence:
    """``OnTopOf(object, surface)``: the object's lowest points (the ``LOWEST_PERCENTILE`` of their heights
    above the surface's plane) between ``ON_TOP_MIN_GAP_M`` and ``ON_TOP_MAX_GAP_M`` of a plane fitted to the
    surface's points (open3d RANSAC, roughly horizontal), and the object's centre above the surface's
    inliers (inside their convex hull seen from above)."""
    obj = as_points(object_points_W, "object_points_W")
    surface = as_points(surface_points_W, "surface_points_W")
    if len(obj) < MIN_OBJECT_POINTS:
        return PredicateEvidence(False, f"object not seen ({len(obj)} points)", observed=False)
    if len(surface) < 3:
        return PredicateEvidence(False, f"surface not seen ({len(surface)} points)", observed=False)
    surface = surface[surface[:, 2] >= surface[:, 2].max() - SURFACE_TOP_BAND_M]
    if len(surface) < 3:
        return PredicateEvidence(False, f"surface's top not seen ({len(surface)} points)", observed=False)
    plane, inliers = fit_plane(surface, PLANE_DISTANCE_M, seed=seed)
    normal, d = plane[:3], plane[3]
    if normal[2] < 0:
        normal, d = -normal, -d
    tilt = float(np.arccos(np.clip(normal[2], -1.0, 1.0)))
    if tilt > MAX_SURFACE_TILT_RAD:
        return PredicateEvidence(False, f"the surface's plane is tilted {np.degrees(tilt):.0f} deg: not a support")
    gap = float(np.percentile(obj @ normal + d, LOWEST_PERCENTILE))
    centre_xy = obj[:, :2].mean(axis=0)
    try:
        over = bool(Delaunay(surface[inliers][:, :2]).find_simplex(centre_xy) >= 0)
    except QhullError:  # too few or collinear inliers: no extent
        over = False
    holds = over and ON_TOP_MIN_GAP_M <= gap <= ON_TOP_MAX_GAP_M
    return PredicateEvidence(holds, f"lowest points {gap * 100:.1f} cm above the plane, centre "
                                    f"{'over' if over else 'off'} the surface")
