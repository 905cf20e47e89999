"""How far the target drawer or door is open, from the motion of its segmented points.

Let's Handle It (arXiv 2202.11792) Sec. 2.3 takes the difference in x-position of the segmented region from its first
x-position. The points of a part come and go as the robot moves and occludes it, so a mean moves even when the part
does not; here both measurements use surfaces, not means:

- displacement: the position, along the first frame's outward normal, of the part's most forward dense
  layer of points, i.e. its front face (a 5 mm histogram bin holding at least a quarter of the fullest bin's
  points; a handle's few points and a drawer's walls behind the front never make such a layer). A partial
  view of the front still puts its layer at the same place.
- angle: the rotation about world z of the front's normal, from a RANSAC fit of a vertical plane to the
  part's points, searched near the previous normal so that a drawer's side walls (90 degrees away) never
  replace its front and a door's normal is tracked continuously.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from handleit.perception.point_cloud import Z_W, as_points, fit_vertical_plane, horizontal_direction

BIN_M = 0.005  # layer histogram bin: a few times the depth noise, well under any opening that matters
LAYER_FRACTION = 0.25  # of the fullest bin's points: a front face, not a handle or a wall's edge
MIN_POINTS = 30  # fewer points than this in a step: keep the previous estimate
MAX_TURN_RAD = 0.5  # largest change of the front's normal between two updates (a door at 100 Hz: ~0.02)
PLANE_DISTANCE_M = 0.006  # inlier distance of the plane fit: depth noise plus a door panel's warp
EXTENT_QUANTILES = (0.02, 0.98)  # the front's robust ends along its plane


@dataclass(frozen=True)
class OpenState:
    """The part's motion since the estimator's first frame."""

    displacement_m: float  # the front's move along the first outward normal (m); > 0 opens outward
    angle_rad: float  # rotation of the front's normal about world +z (rad), signed; ~0 for a drawer
    front_normal_W: np.ndarray  # [3] current outward normal of the front (world)
    n_points: int  # points used this step
    measured: bool  # False when this step had too few points and the previous estimate is repeated
    front_offset_m: float | None = None  # the current front plane: front_normal_W . p = front_offset_m (m)
    # The front's extent (m) along its horizontal tangent z x front_normal_W: the 2nd and 98th percentiles of
    # the plane's inliers; None where no plane was fitted this step.
    front_extent_m: tuple[float, float] | None = None

    @property
    def opening_angle_rad(self) -> float:
        """The door's opening angle (rad), whichever way it swings."""
        return abs(self.angle_rad)


def front_layer_offset_m(s_m: np.ndarray, bin_m: float = BIN_M, layer_fraction: float = LAYER_FRACTION) -> float:
    """Position (m) of the most forward dense layer among positions ``s_m`` along an outward normal.

    The most forward histogram bin holding at least ``layer_fraction`` of the fullest bin's count; refined
    to the median of the points within 1.5 bins of it.
    """
    s = np.asarray(s_m, dtype=np.float64).reshape(-1)
    if len(s) == 0:
        raise ValueError("front_layer_offset_m: no points")
    lo = float(s.min())
    counts = np.bincount(((s - lo) / bin_m).astype(np.int64))
    dense = np.flatnonzero(counts >= layer_fraction * counts.max())
    centre = lo + (dense[-1] + 0.5) * bin_m
    near = s[np.abs(s - centre) <= 1.5 * bin_m]
    return float(np.median(near))


def _signed_angle_about_z(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.arctan2(np.cross(a, b) @ Z_W, a @ b))


def _tangent(normal_W: np.ndarray) -> np.ndarray:
    t = np.cross(Z_W, normal_W)
    return t / np.linalg.norm(t)


class OpenStateEstimator:
    """Tracks a drawer's opening distance and a door's opening angle from the part's points.

    Give it the target link's points (ideally without the handle's: ``target_link & ~target_handle``)
    once at the start, while the part is closed, then every step. Cost per update: about a millisecond for a
    few thousand points (plane fits subsample to 2,000).

    Example::

        estimator = OpenStateEstimator(link_points_W, front_normal_W)
        state = estimator.update(next_link_points_W)
        state.displacement_m, state.opening_angle_rad
    """

    def __init__(self, link_points_W, front_normal_W, *, bin_m: float = BIN_M, layer_fraction: float = LAYER_FRACTION,
                 min_points: int = MIN_POINTS, max_turn_rad: float = MAX_TURN_RAD,
                 plane_distance_m: float = PLANE_DISTANCE_M):
        """
        Args:
            link_points_W: ``[N, 3]`` points of the drawer/door in the first frame (world, z up), m.
            front_normal_W: its front's outward normal (world), e.g. from
                :func:`~handleit.perception.point_cloud.estimate_front_normal`; refined by a plane fit of
                these points (it only needs to be within ``max_turn_rad`` of the truth).
        Raises:
            ValueError on invalid input or fewer than ``min_points`` points.
        """
        p = as_points(link_points_W, "link_points_W", allow_empty=False)
        if len(p) < min_points:
            raise ValueError(
                f"OpenStateEstimator: the first frame has {len(p)} link points; at least {min_points} needed"
            )
        self.bin_m = float(bin_m)
        self.layer_fraction = float(layer_fraction)
        self.min_points = int(min_points)
        self.max_turn_rad = float(max_turn_rad)
        self.plane_distance_m = float(plane_distance_m)
        hint = horizontal_direction(front_normal_W, "front_normal_W")
        plane = fit_vertical_plane(p, plane_distance_m, normal_hint_W=hint, max_angle_rad=max_turn_rad)
        self.initial_normal_W = hint if plane is None else plane.normal_W
        self.initial_offset_m = front_layer_offset_m(p @ self.initial_normal_W, bin_m, layer_fraction)
        self._state = OpenState(0.0, 0.0, self.initial_normal_W.copy(), len(p), True, self.initial_offset_m)

    @property
    def state(self) -> OpenState:
        """The latest estimate."""
        return self._state

    def update(self, link_points_W) -> OpenState:
        """The part's open state from this step's points ``[N, 3]`` (world, m); N may be small or 0.

        With fewer than ``min_points`` points, returns the previous estimate with ``measured=False``.
        """
        p = as_points(link_points_W, "link_points_W")
        previous = self._state
        if len(p) < self.min_points:
            self._state = OpenState(previous.displacement_m, previous.angle_rad, previous.front_normal_W, len(p), False,
                                    previous.front_offset_m)
            return self._state
        front_m = front_layer_offset_m(p @ self.initial_normal_W, self.bin_m, self.layer_fraction)
        displacement = front_m - self.initial_offset_m
        plane = fit_vertical_plane(p, self.plane_distance_m, normal_hint_W=previous.front_normal_W,
                                   max_angle_rad=self.max_turn_rad)
        normal = previous.front_normal_W if plane is None else plane.normal_W
        offset = previous.front_offset_m if plane is None else plane.offset_m
        extent = None
        if plane is not None:
            lo, hi = np.quantile(p[plane.inliers] @ _tangent(normal), EXTENT_QUANTILES)
            extent = (float(lo), float(hi))
        angle = _signed_angle_about_z(self.initial_normal_W, normal)
        self._state = OpenState(float(displacement), angle, normal, len(p), True, offset, extent)
        return self._state

    def hinge_point_W(self, height_m: float, min_angle_rad: float = 0.2) -> np.ndarray | None:
        """Where a swung door's hinge line is: the line where the front's plane in the first frame (closed) meets
        its plane now, as a point ``[3]`` at ``height_m`` (world z). None while the door has turned less than
        ``min_angle_rad`` (two nearly parallel planes meet far from where they are measured) or this step's plane
        was not measured.

        Fitted to the leaf's own points, it does not depend on the part's extent as first seen (a marked
        handle's part is a guess), only on the two faces."""
        state = self._state
        if not state.measured or state.front_offset_m is None or abs(state.angle_rad) < min_angle_rad:
            return None
        a = np.array([self.initial_normal_W[:2], state.front_normal_W[:2]])
        b = np.array([self.initial_offset_m, state.front_offset_m])
        xy = np.linalg.solve(a, b)
        return np.array([xy[0], xy[1], float(height_m)])

    def front_edge_W(self, height_m: float, away_from_W) -> np.ndarray | None:
        """The end of the front as seen this step that is farther from ``away_from_W`` (a door's handle: the end
        is then its hinge side), as a point ``[3]`` on the front's plane at ``height_m``; None where this step's
        plane was not measured.

        It needs only this step's points, so it is a check on :meth:`hinge_point_W` that does not share its
        weakness: two planes measured seconds apart, whose relative offset an odometry drift of a centimetre
        moves the hinge by several at small angles (1 / sin of the angle)."""
        state = self._state
        if not state.measured or state.front_extent_m is None:
            return None
        t = _tangent(state.front_normal_W)
        s_away = float(np.asarray(away_from_W, dtype=np.float64)[:3] @ t)
        lo, hi = state.front_extent_m
        edge = lo if abs(lo - s_away) > abs(hi - s_away) else hi
        p = edge * t + state.front_offset_m * state.front_normal_W
        return np.array([p[0], p[1], float(height_m)])
