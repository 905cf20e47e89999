"""Nodes of the MoveBucket tree: bucket perception, the rim-thickness test, the two holds (pinching the rim
with both grippers, or hugging the walls between both arms), lift, carry, set down, and the checks.

Blackboard keys (besides the common ones):
    target_xy_W       [2] the platform's centre (the ManiSkill1 protocol puts it at the world origin)
    rim               latest rim estimate (handleit.perception.bucket_rim.BucketRim), or None
    bucket_points_W   latest bucket points (world frame)
    bucket_height_m   the bucket's height below its rim: the median extent seen so far (the arms of a hold
                      hide its lower part later)
    ball_points_W     latest points of the ball (its colour), possibly empty
    platform_top_z_m  height of the platform's top face, from the points around the target
    hold              "rim" or "hug": the branch taken
    rim_z_at_grasp_m, torso_at_grasp_m, rim_radius_at_grasp_m: references of the "bucket follows?" check
    platform_points_W latest points of the platform's top face
    carry_offset_W / lower_offset_W: base moves of the carry (dx, dy, dz torso): lift and carry in one move,
                      then the set-down (what is left of it: the carry lowers the bucket once it is over the
                      platform, and then writes (0, 0, 0) here)
    lower_in_carry    (travel m, dz m): the carry lowers the bucket by dz once the base has travelled this far
                      (the bucket's axis over the platform) and the lift is over; None: set down after the carry
    carry_delay_s     how long the base waits at the start of the carry while the torso lifts
"""

from __future__ import annotations

import math

import numpy as np
from py_trees.common import Status
from scipy.stats import theilslopes

from handleit.perception.bucket_rim import ball_points_mask, estimate_bucket_rim, rim_is_pinchable
from handleit.perception.place_targets import box_top_height_m
from handleit.types import Observation

from .background import BackgroundPlanning
from .bimanual_nodes import (
    HELD_RAMP_S,
    HoldPlanStages,
    body_travel_m,
    flipped_about_approach,
    quickest_hold_for_move,
    shifted_goals,
)
from .common import Skill, trapezoid_time_s

MIN_BUCKET_POINTS = 150
PERCEIVE_EVERY_STEPS = 2
FLOOR_CLEARANCE_M = 0.02
PLATFORM_SEARCH_RADIUS_M = 0.45  # points this close to the target (not robot, not bucket) are the platform
RIM_PAD_DEPTH_M = 0.015  # finger pads centred this far below the rim's top (pads span +-9 mm)
# Each gripper may turn about its closing axis (radial, across the wall) this far from pointing straight down:
# the pads still straddle the wall (their upper corners stay ~3 mm under the rim), and the wrists turn less.
RIM_TILT_RAD = math.radians(25.0)
RIM_PREGRASP_HEIGHT_M = 0.06  # fingers pre-shaped wider than the rim: a short straight descent is enough
PRESHAPE_MARGIN_M = 0.035  # fingers this much wider than the rim on the way down
# Hug the walls at this fraction of the rim height: just above the loaded bucket's centre of mass (0.47-0.49 of its
# height on seven train buckets, the ball at the bottom), where the carry's acceleration has the least lever to turn
# it about the line between the hands. Measured alone (0.55 before) it moved failures around and gained nothing;
# what stopped the bucket turning in the hands was the fingers along the wall (hug_hold_poses), measured with
# 0.50 (docs/benchmarks.md, "The hug's fingers along a tapered wall").
HUG_HEIGHT_FRACTION = 0.50
WALL_BAND_M = 0.03  # half height of the band of wall points the radius at the hold is read from
HUG_SQUEEZE_M = 0.07  # hug goals this far inside the wall surface: the arms press on it
WALL_SLOPE_SPAN_M = 0.05  # the wall's slope read from its radius this far above and below the hold
WALL_SLOPE_BAND_M = 0.01
MAX_WALL_SLOPE = 0.35  # about 19 degrees: the generator's steepest taper is about 15 (a slope of 0.28)
HUG_PREGRASP_OUT_M = 0.08
# The hug's hands press with their fingers open, one above the other (8 cm apart): the bucket pitches less about
# the line between the hands as the base speeds up and stops than between closed fingers (measured on 8 thick
# train buckets: all carried, tilt <= 0.23 rad; spread level instead, one finger of each hand touched the
# curved wall and the carries failed on tilt).
HUG_GRIPPER = "open"
# The squeeze ends when the hands have stopped at the walls for this many steps after their reference arrived
# inside them (the default patience of 10 steps waits longer than the contact needs to build up); the hands
# move in at 0.8 of full speed (HUG_SQUEEZE_SPEED). On 23 thick-bucket episodes: 20 within 200 steps, none
# lost, against 4 of 8 with 4 steps at 0.6.
HUG_PATIENCE_STEPS = 2
HUG_SQUEEZE_SPEED = 0.8
LIFT_CLEARANCE_M = 0.04  # bucket bottom this far above the platform top while carrying
# The carry ends with the bucket's axis this far short of the platform's centre (~14 steps sooner at the base's
# 1 m/s): 16 cm inside the 0.3 m success radius, room for the rim estimate's centimetres of error; the bottom
# (radius <= 0.22 m) may overhang the platform's edge by a few cm, its centre of mass stays well inside.
CARRY_STOP_SHORT_M = 0.14
LIFT_MARGIN_S = 0.05  # the torso lags its reference: the base reaches the platform's edge this much after the lift
# A hugged bucket hangs a few cm lower than the hands' lift and swings as the base speeds up: more clearance. Once
# the set-down began during the carry (lower_in_carry), 2 cm and no extra time before the edge did better than 4 cm
# and 0.1 s: on the 64 hugged episodes of docs/benchmarks.md (issue 14, eighth session), 54 against 47 succeeded
# in 200 steps, none failing at the platform's edge (every centimetre lifted is also one to lower).
HUG_EXTRA_LIFT_M = 0.02
HUG_EXTRA_MARGIN_S = 0.0
PLATFORM_TOP_BAND_M = 0.03  # points this close below the platform's top height are its top face
EDGE_MARGIN_M = 0.05  # the lift ends with the bucket's wall at least this far from the platform's edge
PLATFORM_LINE_BAND_M = 0.05  # platform-top points this close to the carry line mark where it crosses the edge
SET_DOWN_HEIGHT_M = 0.01  # released this far above the platform top
MAX_TILT_RAD = 0.25  # the bucket tilting more than this (from its rim) fails the carry
MAX_FOLLOW_ERROR_M = 0.05  # the rim must rise with the torso within this
# A bucket tipping in a hug rotates about the line between the hands: its high side rises above them. Seen from
# the side, its rim then reads as the top of the wall, 12-21 cm above the hands, with a circle of another radius
# (0.08-0.26 m, or a 864 m arc, for a 0.20 m rim: MoveBucket test seed 5, geometric), and as upright where less
# than half of it is in view (estimate_bucket_rim). Upright carries read within 1.2 cm and 0.01 m.
MAX_RIM_RISE_M = 0.08  # the rim this far above where the hands hold it: the bucket turned in the hands
MAX_RIM_RADIUS_CHANGE = 0.25  # the rim's radius this far (a fraction) from the grasp's: not the rim held upright
BALL_MARGIN_M = 0.03
CONFIRM_VIEWS = 6  # "bucket follows?" fails when this many views in a row show the problem (0.12 s): an arm
# across the rim has made the rim estimate tilt by 50 degrees for 5 views in a row (train seed 33)
HOLD_IK_WEIGHTS = ({"base_height": 20.0}, {"base_height": 400.0})  # tried in turn, the quickest wins
# The robot's torso column reaches the floor (0.3 x 0.2 m around the base origin) and cannot pass over the
# platform, so the bucket must be held far enough ahead of the base to reach the platform's middle: with the
# base origin at least this far from the bucket's axis, the axis gets within CARRY_STOP_SHORT_M of the centre
# from most directions, and within the 0.3 m success radius from all (a hug otherwise holds it ~0.35 m ahead).
MIN_HOLD_DISTANCE_M = 0.5
BODY_CLEARANCE_M = 0.03  # the carry stops with the column this far from the seen platform top


def _unit_xy(v) -> np.ndarray:
    v = np.array([v[0], v[1], 0.0], dtype=float)
    return v / max(np.linalg.norm(v), 1e-9)


class PerceiveBucket(Skill):
    """Every other tick: bucket points -> rim estimate (Let's Handle It (arXiv 2202.11792) Sec. 2.3), the ball's points
    (by its colour), and the platform's top height. Always SUCCESS."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "tick", "target_xy_W"),
                         writes=("rim", "bucket_points_W", "ball_points_W", "platform_top_z_m", "platform_points_W",
                                 "bucket_height_m"))
        self.heights_m: list[float] = []  # the bucket's extent below the rim, per view (a tree lives one episode)

    def update(self):
        obs: Observation = self.bb.observation
        if self.bb.tick % PERCEIVE_EVERY_STEPS:
            return Status.SUCCESS
        robot, bucket = obs.masks["robot"], obs.masks["target_link"]
        # The ball by its colour, wherever a segmenter put it: a segmenter that finds the bucket as the cluster at
        # the prompt (geometric, color_marker) takes in the ball lying in it, 70-95 points 8-14 cm up on
        # bucket-test-005, and the hug's walls fitted to them squeezed the wrong radius ("hug walls: no progress").
        ball = ball_points_mask(obs.colors)
        points = obs.points[bucket & ~robot & ~ball]
        self.bb.ball_points_W = obs.points[ball & ~robot]
        other = obs.points[~robot & ~bucket & (obs.points[:, 2] > FLOOR_CLEARANCE_M)]
        near = np.linalg.norm(other[:, :2] - np.asarray(self.bb.target_xy_W), axis=1) < PLATFORM_SEARCH_RADIUS_M
        if near.sum() >= 20:
            top = box_top_height_m(other[near, 2])
            self.bb.platform_top_z_m = top
            self.bb.platform_points_W = other[near & (other[:, 2] > top - PLATFORM_TOP_BAND_M)]
        if len(points) < MIN_BUCKET_POINTS:
            self.feedback_message = f"only {len(points)} bucket points"
            return Status.SUCCESS
        self.bb.bucket_points_W = points
        try:
            self.bb.rim = estimate_bucket_rim(points)
        except ValueError as e:
            self.feedback_message = f"no rim estimate: {e}"
            return Status.SUCCESS
        rim = self.bb.rim
        # The median over the views so far: one bad rim estimate must not set it, and the views before the
        # arms reach the bucket (most of them, by the time the carry is planned) see its foot.
        self.heights_m.append(float(rim.height_m - np.percentile(points[:, 2], 1)))
        self.bb.bucket_height_m = float(np.median(self.heights_m))
        self.feedback_message = f"rim at {rim.height_m:.2f} m, {1000 * rim.thickness_m:.0f} mm thick"
        return Status.SUCCESS


class RimIsThin(Skill):
    """Condition: the rim is thin enough to pinch (SUCCESS) or not (FAILURE: the hugging branch)."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("rim",), writes=("hold",))

    def update(self):
        rim = self.bb.rim
        if rim is None:
            return self.fail("no rim estimate")
        thin = rim_is_pinchable(rim, max_opening_m=self.tools.model.gripper_max_opening_m)
        self.bb.hold = "rim" if thin else "hug"
        self.feedback_message = f"rim {1000 * rim.thickness_m:.0f} mm: {'pinch it' if thin else 'too thick, hug'}"
        # A thick rim is a branch decision, not a failure: it is not recorded as one.
        return Status.SUCCESS if thin else Status.FAILURE


def _side_directions(rim, X_WB: np.ndarray, heading_rad: float | None = None) -> dict[str, np.ndarray]:
    """Unit xy vectors from the bucket's axis toward the robot's left and right: perpendicular to the line
    from the base to the bucket, or to ``heading_rad`` (the robot facing the bucket along that heading)."""
    if heading_rad is None:
        toward = _unit_xy(np.asarray(rim.center_W) - X_WB[:3, 3])
    else:
        toward = np.array([math.cos(heading_rad), math.sin(heading_rad), 0.0])
    left = np.array([-toward[1], toward[0], 0.0])
    return {"left": left, "right": -left}


def rim_hold_poses(rim, X_WB: np.ndarray, heading_rad: float | None = None) -> dict[str, np.ndarray]:
    """Tool-centre goals that pinch the rim on the bucket's left and right (of the robot, facing the bucket
    from where it stands or along ``heading_rad``): pointing down, closing radially."""
    radius = 0.5 * (rim.outer_radius_m + rim.inner_radius_m)
    goals = {}
    for side, d in _side_directions(rim, X_WB, heading_rad).items():
        z = np.array([0.0, 0.0, -1.0])
        X = np.eye(4)
        X[:3, :3] = np.stack([np.cross(d, z), d, z], axis=1)
        X[:3, 3] = [rim.center_W[0] + radius * d[0], rim.center_W[1] + radius * d[1], rim.height_m - RIM_PAD_DEPTH_M]
        goals[side] = X
    return goals


def _wall_radius_m(points_W: np.ndarray, center_xy, z_m: float, toward_xy,
                   band_m: float = WALL_BAND_M) -> float | None:
    """The bucket wall's outer radius (m) at height ``z_m``: the median distance from the axis of the seen
    points of a thin band there, on the side facing ``toward_xy`` (the cameras': from there the inside of the
    far wall shows too), the median because the bail handle, lying against the wall, stands out; None when
    too few are seen."""
    rel = points_W[:, :2] - center_xy
    near = (np.abs(points_W[:, 2] - z_m) < band_m) & (rel @ (np.asarray(toward_xy) - center_xy) > 0)
    if near.sum() < 10:
        return None
    return float(np.median(np.linalg.norm(rel[near], axis=1)))


def wall_slope(points_W: np.ndarray, center_xy, z_m: float, toward_xy) -> float:
    """How much the wall's outer radius grows per metre of height at ``z_m`` (a bucket wider at the top: > 0):
    the Theil-Sen slope of its radius (:func:`_wall_radius_m`, 1 cm bands) at 11 heights within
    ``WALL_SLOPE_SPAN_M`` of ``z_m`` (robust to the bail handle lying against the wall at some of them), within
    [0, MAX_WALL_SLOPE]; 0 where fewer than 4 are seen. On the ten test buckets' first views (simulator masks) it is
    within 0.005 of the true slope on nine and 0.05 low on one, half of whose wall there is hidden."""
    heights = z_m + np.linspace(-WALL_SLOPE_SPAN_M, WALL_SLOPE_SPAN_M, 11)
    radii = [_wall_radius_m(points_W, center_xy, z, toward_xy, band_m=WALL_SLOPE_BAND_M) for z in heights]
    seen = np.array([r is not None for r in radii])
    if seen.sum() < 4:
        return 0.0
    slope = theilslopes(np.array([r for r in radii if r is not None]), heights[seen])[0]
    return float(np.clip(slope, 0.0, MAX_WALL_SLOPE))


def hug_hold_poses(rim, points_W: np.ndarray, X_WB: np.ndarray, squeeze_m: float,
                   heading_rad: float | None = None) -> dict[str, np.ndarray]:
    """Tool-centre goals of the hug: each open hand points at the bucket's axis from its side (as
    :func:`rim_hold_poses`), its fingertips one above the other along the wall's slope (:func:`wall_slope`: on a
    tapered bucket both fingers then press on the wall; vertical fingers touch it with the upper one alone, two point
    contacts that make an axle about which the bucket turns freely in the carry), at ``HUG_HEIGHT_FRACTION`` of the
    rim height, ``squeeze_m`` inside the wall (negative: outside)."""
    height = HUG_HEIGHT_FRACTION * rim.height_m
    c = np.asarray(rim.center_W)[:2]
    radius = _wall_radius_m(points_W, c, height, X_WB[:2, 3])
    radius = rim.outer_radius_m if radius is None else radius
    slope = wall_slope(points_W, c, height, X_WB[:2, 3])
    up = np.array([0.0, 0.0, 1.0])
    goals = {}
    for side, d in _side_directions(rim, X_WB, heading_rad).items():
        y = slope * d + up  # fingers one above the other, along the wall
        y /= np.linalg.norm(y)
        z = -(d - slope * up)  # approach: toward the axis, normal to the wall
        z /= np.linalg.norm(z)
        X = np.eye(4)
        X[:3, :3] = np.stack([np.cross(y, z), y, z], axis=1)
        X[:3, 3] = [c[0] + (radius - squeeze_m) * d[0], c[1] + (radius - squeeze_m) * d[1], height]
        goals[side] = X
    return goals


class PlanBucketHold(HoldPlanStages, BackgroundPlanning, Skill):
    """Plan the hold chosen by the rim test: goals for both tool centres and one whole-body IK solve each for
    the hold and its pregrasp (two goals at once, Let's Handle It Sec. 2.4). The robot may face the bucket from
    where it stands or turned 45 degrees to the carry (the base then carries sqrt(2) times faster): the hold
    with the least time to reach plus time to carry wins (:func:`quickest_hold_for_move`). In real time
    (``tools.realtime``) off the tick thread, the robot held still meanwhile (behaviors/background.py), or, with
    ``stage`` "provisional" and "search", on a quick plan while the full search runs (:class:`HoldPlanStages`)."""

    def __init__(self, name, tools, kind: str, stage: str = "full", provisional_search: str = "nearest flip"):
        super().__init__(name, tools, reads=("observation", "rim", "bucket_points_W", "target_xy_W"),
                         writes=("q_pregrasp", "X_WG_pregrasp", "q_grasp", "X_WG_grasp", "preshape_opening_m"))
        self.kind = kind
        self.set_stage(stage, provisional_search)

    def snapshot(self) -> dict:
        points = self.bb.bucket_points_W
        return {"observation": self.bb.observation, "rim": self.bb.rim,
                "bucket_points_W": None if points is None else np.array(points),
                "target_xy_W": np.array(self.bb.target_xy_W, dtype=float), "provisional": self.provisional_argument()}

    def plan(self, snap: dict) -> tuple[str, object]:
        """("fail", why) or ("hold", (rim, q_grasp, goals, q_pregrasp, pregrasp goals, summary, carry)); no
        blackboard."""
        obs: Observation = snap["observation"]
        rim = snap["rim"]
        if rim is None:
            return "fail", "no rim estimate"
        points = snap["bucket_points_W"]
        if self.kind == "rim":
            def goals_facing(heading):
                return flipped_about_approach(rim_hold_poses(rim, obs.X_WB, heading))

            def pregrasp_of(g):
                return shifted_goals(g, [0.0, 0.0, RIM_PREGRASP_HEIGHT_M])
        else:
            def goals_facing(heading):
                return flipped_about_approach(hug_hold_poses(rim, points, obs.X_WB, HUG_SQUEEZE_M, heading))

            def pregrasp_of(g):  # the same orientation, back along the approach to outside the wall
                return {s: shifted_goals({s: X}, -(HUG_PREGRASP_OUT_M + HUG_SQUEEZE_M) * X[:3, 2])[s]
                        for s, X in g.items()}
        carry = carry_offset_xy(rim, snap["target_xy_W"])
        try:
            (grasp, pre, goals, pre_goals), summary = quickest_hold_for_move(
                self.tools, obs, goals_facing, pregrasp_of, HOLD_IK_WEIGHTS, carry,
                base_keep_out=(np.asarray(rim.center_W)[:2], MIN_HOLD_DISTANCE_M),
                tilt_rad=RIM_TILT_RAD if self.kind == "rim" else 0.0, provisional=snap.get("provisional"))
        except RuntimeError as e:
            return "fail", f"IK failed for the {self.kind} hold: {e}"
        return "hold", (rim, grasp.q, goals, pre.q, pre_goals, summary, carry)

    def apply_plan(self, kind: str, value) -> Status:
        rim, q_grasp, goals, q_pregrasp, pre_goals, summary, _ = value
        self.write_hold(q_grasp, goals, q_pregrasp, pre_goals)
        # Fingers pre-shaped around the rim on the way (closing then takes a few steps); closed for a hug.
        self.bb.preshape_opening_m = (min(rim.thickness_m + PRESHAPE_MARGIN_M, self.tools.model.gripper_max_opening_m)
                                      if self.kind == "rim" else None)
        self.feedback_message = (f"{'provisional ' if self.provisional_plan else ''}{self.kind} hold planned, rim at "
                                 f"{rim.height_m:.2f} m; heading to the carry and time to reach and carry: {summary}")
        return Status.SUCCESS


def carry_offset_xy(rim, target_xy_W) -> np.ndarray:
    """The base move (m, world x/y) that carries the bucket's axis to ``CARRY_STOP_SHORT_M`` before the
    target."""
    to_target = np.asarray(target_xy_W, dtype=float) - np.asarray(rim.center_W)[:2]
    distance = float(np.linalg.norm(to_target))
    return to_target * (max(distance - CARRY_STOP_SHORT_M, 0.0) / max(distance, 1e-9))


def _carry_line_coordinates(center_xy, carry_xy, points_W):
    """(carry length m, each point's distance along the carry line from ``center_xy``, and across it) of the
    points' xy, or None without points or without a carry."""
    distance = float(np.linalg.norm(carry_xy))
    if points_W is None or len(points_W) == 0 or distance < 1e-6:
        return None
    u = np.asarray(carry_xy, dtype=float) / distance
    rel = np.asarray(points_W)[:, :2] - np.asarray(center_xy)[:2]
    return distance, rel @ u, np.abs(rel @ np.array([-u[1], u[0]]))


def over_platform_travel_m(center_xy, carry_xy, platform_points_W, margin_m: float = EDGE_MARGIN_M) -> float | None:
    """How far (m) the bucket travels along the carry line ``carry_xy`` before its axis is ``margin_m`` past the
    platform's near edge (the nearest seen platform-top point within ``PLATFORM_LINE_BAND_M`` of the line):
    from there its bottom may go down to just above the top while the base still moves. None when no platform
    point lies on the line or the carry ends before."""
    line = _carry_line_coordinates(center_xy, carry_xy, platform_points_W)
    if line is None:
        return None
    distance, along, across = line
    on_line = across < PLATFORM_LINE_BAND_M
    if not on_line.any():
        return None
    travel = float(np.min(along[on_line])) + margin_m
    return max(travel, 0.0) if travel <= distance else None


def lift_travel_m(center_xy, carry_xy, radius_m: float, platform_points_W) -> float:
    """How far (m) the bucket may travel toward the platform while it is still being lifted: until its wall
    (``radius_m`` around ``center_xy``) comes within ``EDGE_MARGIN_M`` of a seen platform-top point along the
    carry line ``carry_xy``; 0 without platform points, never more than the carry itself."""
    line = _carry_line_coordinates(center_xy, carry_xy, platform_points_W)
    if line is None:
        return 0.0
    distance, along, across = line
    reach = radius_m + EDGE_MARGIN_M
    hit = across < reach
    if not hit.any():
        return 0.0
    # The wall's circle touches a point at ``across`` when the centre is this far behind it along the line.
    first_contact = float(np.min(along[hit] - np.sqrt(reach ** 2 - across[hit] ** 2)))
    return float(np.clip(first_contact, 0.0, distance))


class PlanCarry(Skill):
    """Plan the carry: one move that lifts (torso up until the bottom clears the platform) and carries (the
    bucket's axis to ``CARRY_STOP_SHORT_M`` before the platform's centre) at once, the torso and the base each
    at full speed, then the set-down (the bottom just above the platform). The base waits at the start for as
    long as the lift would otherwise not be over when the bucket's wall reaches the platform's edge
    (:func:`lift_travel_m`). Remembers the rim's height and radius and the torso height for the "bucket
    follows?" check."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "rim", "bucket_height_m", "platform_top_z_m",
                                             "platform_points_W", "target_xy_W", "hold"),
                         writes=("carry_offset_W", "carry_delay_s", "lower_offset_W", "lower_in_carry",
                                 "rim_z_at_grasp_m", "torso_at_grasp_m", "rim_radius_at_grasp_m",
                                 "carry_gripper"))

    def update(self):
        obs: Observation = self.bb.observation
        rim = self.bb.rim
        if rim is None or self.bb.bucket_height_m is None:
            return self.fail("no bucket estimate")
        platform_z = self.bb.platform_top_z_m
        if platform_z is None:
            return self.fail("platform not seen")
        tools = self.tools
        bottom_z = float(rim.height_m - self.bb.bucket_height_m)
        hug = self.bb.hold == "hug"
        lift = max(platform_z + LIFT_CLEARANCE_M + (HUG_EXTRA_LIFT_M if hug else 0.0) - bottom_z, 0.0)
        carry = carry_offset_xy(rim, self.bb.target_xy_W)
        # The base's column, which reaches the floor, must stop short of the platform.
        clear = body_travel_m(obs.X_WB, tools.model.body_half_extents_m, carry, self.bb.platform_points_W,
                              BODY_CLEARANCE_M)
        carry = carry * (clear / max(float(np.linalg.norm(carry)), 1e-9))
        # How far the bucket may travel before it must be high enough, and when the base may start for the lift
        # to be over by then: the torso (0.5 m/s) and the base (1 m/s) work together, not one after the other.
        ahead = lift_travel_m(np.asarray(rim.center_W)[:2], carry, rim.outer_radius_m, self.bb.platform_points_W)
        x, y, _, height = tools.base_index
        limits = tools.model.velocity_limits
        margin_s = LIFT_MARGIN_S + (HUG_EXTRA_MARGIN_S if hug else 0.0)
        t_lift = trapezoid_time_s(lift, limits[height], HELD_RAMP_S) + margin_s if lift > 0 else 0.0
        t_ahead = trapezoid_time_s(ahead, min(limits[x], limits[y]), HELD_RAMP_S, stop=False) if ahead > 0 else 0.0
        lower = (platform_z + SET_DOWN_HEIGHT_M) - (bottom_z + lift)
        self.bb.carry_offset_W = np.array([carry[0], carry[1], lift])
        self.bb.carry_delay_s = max(t_lift - t_ahead, 0.0)
        self.bb.lower_offset_W = np.array([0.0, 0.0, lower])
        # Set down while the base still moves: from where the axis is over the platform, the bottom may go down
        # to just above its top (the edge is behind it), so that the lowering ends about when the base stops
        # instead of after it (~0.3-0.4 s of a 2 s episode).
        over = over_platform_travel_m(np.asarray(rim.center_W)[:2], carry, self.bb.platform_points_W)
        self.bb.lower_in_carry = None if over is None else (over, lower)
        self.bb.rim_z_at_grasp_m, self.bb.torso_at_grasp_m = float(rim.height_m), float(obs.qpos[height])
        self.bb.rim_radius_at_grasp_m = float(rim.outer_radius_m)
        self.bb.carry_gripper = HUG_GRIPPER if hug else "close"
        self.feedback_message = (f"lift {100 * lift:.0f} cm, carry {100 * np.linalg.norm(carry):.0f} cm "
                                 f"({100 * ahead:.0f} cm before the edge, base waits "
                                 f"{self.bb.carry_delay_s:.2f} s), platform top {platform_z:.2f} m, "
                                 + ("set down after the carry" if over is None else
                                    f"set down from {100 * over:.0f} cm on"))
        return Status.SUCCESS


class BucketFollows(Skill):
    """Check while carrying: the rim rises with the torso, neither sinking (the hold slipped) nor rising above
    the hands (the bucket turned in them), keeps the radius it had at the grasp (else what is seen is not the
    rim of an upright bucket), the bucket stays upright (its rim's axis), and no ball points are seen outside
    the bucket. RUNNING while all hold."""

    def __init__(self, name, tools, confirm_views: int = CONFIRM_VIEWS):
        super().__init__(name, tools, reads=("observation", "rim", "rim_z_at_grasp_m", "torso_at_grasp_m",
                                             "rim_radius_at_grasp_m", "ball_points_W"))
        self.confirm_views = confirm_views

    def initialise(self):
        self.seen = []  # (rim estimate, problem or None) per view, the latest last

    def update(self):
        obs: Observation = self.bb.observation
        rim = self.bb.rim
        if rim is None or self.bb.rim_z_at_grasp_m is None:
            return Status.RUNNING
        if self.seen and self.seen[-1][0] is rim:  # no new view since the last tick
            return Status.RUNNING
        problem = self._problem(self.observation_at_cloud() or obs, rim)  # the torso of the cloud's moment
        self.seen = (self.seen + [(rim, problem)])[-self.confirm_views:]
        # A failure is one that the last views all show: a single bad rim estimate (an arm across the rim) is not.
        if len(self.seen) == self.confirm_views and all(p is not None for _, p in self.seen):
            return self.fail(problem)
        return Status.RUNNING

    def _problem(self, obs: Observation, rim) -> str | None:
        """What this view shows wrong with the carried bucket, or None."""
        risen = obs.qpos[self.tools.base_index[3]] - self.bb.torso_at_grasp_m
        error = float(rim.height_m - self.bb.rim_z_at_grasp_m - risen)
        tilt = math.acos(min(1.0, abs(float(np.asarray(rim.axis_W)[2]))))
        self.feedback_message = f"rim {100 * error:+.1f} cm off the hands, tilt {math.degrees(tilt):.0f} deg"
        if error < -MAX_FOLLOW_ERROR_M:
            return f"bucket slipped: {self.feedback_message}"
        if error > MAX_RIM_RISE_M:
            return f"bucket turned in the hands (its rim above them): {self.feedback_message}"
        if tilt > MAX_TILT_RAD:
            return f"bucket tilted: {self.feedback_message}"
        radius_at_grasp = self.bb.rim_radius_at_grasp_m
        if radius_at_grasp is not None and radius_at_grasp > 0.0:
            radius = float(rim.outer_radius_m)
            if not abs(radius / radius_at_grasp - 1.0) <= MAX_RIM_RADIUS_CHANGE:  # a NaN radius fails too
                return (f"bucket tipped: the rim seen has a radius of {100 * radius:.1f} cm, "
                        f"{100 * radius_at_grasp:.1f} cm at the grasp ({self.feedback_message})")
        ball = self.bb.ball_points_W
        if ball is not None and len(ball) >= 5:
            center = np.median(ball, axis=0)
            off_axis = float(np.linalg.norm(center[:2] - np.asarray(rim.center_W)[:2]))
            if off_axis > rim.outer_radius_m + BALL_MARGIN_M or center[2] > rim.height_m + BALL_MARGIN_M:
                return f"ball lost: seen {100 * off_axis:.0f} cm from the bucket's axis"
        return None
