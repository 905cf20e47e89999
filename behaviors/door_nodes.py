"""Nodes of the door tree: estimating the hinge, and swinging the door open along the hinge arc.

Blackboard keys (besides those of cabinet_nodes):
    hinge   (p_W [3], axis_W [3], radius_m): a point on the hinge axis, its unit direction (a positive turn
            about it opens the door) and the handle's distance from it; or None
"""

from __future__ import annotations

import math

import numpy as np
from py_trees.common import Status

from handleit.perception.cabinet_segmentation import MAX_HINGE_RADIUS_M, MIN_HINGE_RADIUS_M
from handleit.planning.trajectories import hinge_arc, swept_angle_rad
from handleit.types import Observation

from .cabinet_nodes import MIN_LINK_POINTS
from .common import RAMP_S, JointReference, Skill

# Kept between the base's origin and the handle's circle: the door's edge beyond the handle (3-7 cm) and
# the base's footprint (torso box 0.3 x 0.2 m, body ~0.11 m from its axis).
BASE_CLEARANCE_M = 0.3
# How far the goal's position leads the door's measured angle along the arc. 0.25 rad to 0.4 with the swing's
# speed fraction 0.9 to 1.0 and the torso held: 12-18% shorter swings on 4 test doors, none lost. 0.5 with the
# diagonal heading and the lighter base weights below took 4 steps off the median swing of 10 test doors, but over
# 50 + 50 doors twice as many handles slipped out mid-swing as before (20 against 10): train seed 49's door, pulled
# at 3.3 rad/s, stopped at 0.82 of its range and the hand ran on; with 0.4 it opened at step 147 instead of 217.
ARC_LEAD_RAD = 0.4
# The lead until the door has turned START_SWING_RAD: the gentler 0.25 rad. With 0.4 from the start, 18 of 100
# doors slipped out of the gripper at 10-30% of their range in 200-step episodes; with this, 12 (50 + 50 doors,
# docs/benchmarks.md "Doors within 200 steps").
START_LEAD_RAD, START_SWING_RAD = 0.25, math.radians(30)
REPLAN_STEPS = 4  # control steps between arc goals
SWING_SPEED_FRACTION = 1.0  # of the joints' velocity limits (0.9 before issue 17: 12-18% longer swings)
# IK weights (1/m^2, 1/rad^2) during the swing: the heavy base lags the arm, and a base that moves for every
# arc goal drags the hand off the arc; the arm turns the hand, the base moves where the keep-out forces it.
# The handle stays at one height: the torso (0.5 m/s, the slowest joint) is held, or it paces the whole move.
# With the diagonal heading (below) the base's weights 20 (were 40): the median swing of 10 test doors 93 steps
# instead of 99 (10: 95).
SWING_WEIGHTS = {"base_translation": 20.0, "base_rotation": 20.0, "base_height": 2000.0}
# The base's x/y limits hold per axis of its own frame (1 m/s each): late in the swing the base circles the hinge
# along one of its axes at 1 m/s, and paces the door. Its heading is pulled toward 45 degrees off its way round the
# hinge (the tangent of its circle), where both axes share the motion (up to sqrt(2) m/s), by at most
# SWING_YAW_STEP_RAD per arc goal; the reference budgets the base in its own frame. On 10 test doors: the median
# swing 99 steps instead of 104, the base at 1.1-1.3 m/s where it ran at 1.0; a step of 0.2 rad: 101.
SWING_DIAGONAL_BASE = True
SWING_YAW_STEP_RAD = 0.1
STALL_STEPS = 12  # control steps over which the door and the hand are checked for motion
STALL_RAD = math.radians(1.5)  # turning less than this in STALL_STEPS is standing still
MIN_OPEN_RAD = math.radians(45)  # a door standing still beyond this is taken to be at its stop
DECOUPLED_RAD = math.radians(12)  # a still door this far behind the hand is no longer held
MAX_OPENING_RAD = math.radians(130)  # beyond the largest door range: the door's stop ends the swing
# Once the door has turned HINGE_REFIT_RAD, the hinge where its closed and swung faces meet replaces the estimate
# from the closed door when the two are more than HINGE_REFIT_M apart: a closed door's extent (and so its hinge)
# is only as good as its mask, which a marked handle's segmenter guesses (hinge 6 cm off, docs/benchmarks.md).
# The faces' hinge is taken only where it lies within HINGE_EDGE_M of the swung leaf's hinge-side end as seen
# in the same cloud, and that end is itself more than HINGE_REFIT_M from the estimate: the two faces are seen
# seconds apart, and an odometry drift of 2 cm between them put the hinge 13-15 cm off at 15 degrees (1 / sin of
# the angle), where the leaf's end was within 1 cm (docs/benchmarks.md "The door's hinge refit checked against
# the leaf's end").
HINGE_REFIT_RAD = math.radians(15)
HINGE_REFIT_M = 0.03
HINGE_EDGE_M = 0.03


def hinge_from_geometry(link_points_W: np.ndarray, handle_W: np.ndarray, front_normal_W: np.ndarray):
    """The hinge of a closed door from its points: the vertical edge of the panel farthest from the handle.

    Returns ``(p_W, axis_W, radius_m)``: a point on the hinge line (on the front face), the unit axis about
    which a positive turn swings the free edge outward (along ``front_normal_W``), and the handle's distance
    from the axis."""
    n = np.array([front_normal_W[0], front_normal_W[1], 0.0])
    n /= np.linalg.norm(n)
    t = np.cross([0.0, 0.0, 1.0], n)  # horizontal, in the front plane
    s = (link_points_W - handle_W) @ t
    lo, hi = np.quantile(s, [0.01, 0.99])  # robust extremes of the panel along t
    edge = lo if abs(lo) > abs(hi) else hi
    front = np.quantile((link_points_W - handle_W) @ n, 0.5)  # the front face, behind the protruding handle
    p_W = handle_W + edge * t + front * n
    p_W[2] = handle_W[2]
    return hinge_through(p_W, handle_W, n)


def hinge_through(p_W: np.ndarray, handle_W: np.ndarray, front_normal_W: np.ndarray):
    """The vertical hinge through ``p_W`` of a door whose handle is at ``handle_W``: ``(p_W, axis_W, radius_m)``,
    the axis signed so that a positive turn swings the handle outward (along ``front_normal_W``), and the handle's
    horizontal distance from it."""
    r = handle_W - p_W
    r[2] = 0.0
    axis = np.array([0.0, 0.0, 1.0])
    if np.cross(axis, r) @ front_normal_W < 0:  # a positive turn must move the free edge outward
        axis = -axis
    return p_W, axis, float(np.linalg.norm(r))


def diagonal_heading_nominal(q: np.ndarray, base_index: np.ndarray, p_W: np.ndarray, axis_W: np.ndarray,
                             step_rad: float | None = None) -> np.ndarray:
    """``q`` with the base's yaw turned (by at most ``step_rad``, default SWING_YAW_STEP_RAD) toward the nearer of the
    two headings 45 degrees off the base's way round the hinge: the tangent at the base of its circle about the hinge
    line (``p_W``, ``axis_W``), in the sense a positive (opening) turn moves it. An IK nominal: moving along that
    tangent, the base's two axes share the motion."""
    step_rad = SWING_YAW_STEP_RAD if step_rad is None else step_rad
    x, y, yaw = (float(q[i]) for i in base_index[:3])
    radial = np.array([x - p_W[0], y - p_W[1], 0.0])
    tangent = np.cross(axis_W, radial)
    heading = math.atan2(tangent[1], tangent[0])
    turns = [math.remainder(heading + sign * math.pi / 4 - yaw, 2 * math.pi) for sign in (1.0, -1.0)]
    turn = min(turns, key=abs)
    q_nominal = q.copy()
    q_nominal[base_index[2]] = yaw + float(np.clip(turn, -step_rad, step_rad))
    return q_nominal


class EstimateHinge(Skill):
    """Estimate the hinge of the (closed) target door from its points and the handle's; one tick."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "handle", "front_normal_W", "hinge"), writes=("hinge",))

    def update(self):
        if self.bb.hinge is not None:  # from an earlier attempt, fitted to the door's motion: keep it
            self.feedback_message = "hinge known"
            return Status.SUCCESS
        obs: Observation = self.bb.observation
        link = obs.points[obs.masks["target_link"]]
        if len(link) < MIN_LINK_POINTS or self.bb.front_normal_W is None or not self.bb.handle.n_points:
            return self.fail(f"door not seen well enough ({len(link)} points)")
        handle = self.bb.handle.points.mean(axis=0)
        p_W, axis, r = hinge_from_geometry(link, handle, self.bb.front_normal_W)
        if not MIN_HINGE_RADIUS_M < r < MAX_HINGE_RADIUS_M:
            return self.fail(f"implausible door width {r:.2f} m")
        self.bb.hinge = (p_W, axis, r)
        self.feedback_message = f"hinge at {np.round(p_W[:2], 2)}, handle {r:.2f} m from it"
        return Status.SUCCESS


class SwingDoorOpen(Skill):
    """Follow the hinge arc with the grasped handle, closed on the door's measured angle: every few steps the
    grasp pose turned about the hinge (position ahead of the door by a lead angle, orientation the door's)
    gives a goal, whole-body IK (base kept out of the door's sweep) a joint target, and a joint reference
    tracks it. SUCCESS when door and hand stop together beyond 45 degrees (the door's stop); FAILURE when the
    door stands still while the hand runs ahead (lost hold), or when no arc goal is reachable.

    (Refitting the hinge to the hand's path as the door turns was tried and dropped: the hand also turns and
    slides on the handle, and a refit from a short path was worse than the geometric estimate, which is
    within ~5 mm on the bundled cabinets.)"""

    def __init__(self, name, tools, speed_fraction=None):
        super().__init__(name, tools, reads=("observation", "tick", "hinge", "open_state", "reference"),
                         writes=("command", "hinge", "reference"))
        self.reference = JointReference(tools, SWING_SPEED_FRACTION if speed_fraction is None else speed_fraction,
                                        base_frame_budget=SWING_DIAGONAL_BASE)
        self.diagonal_base = SWING_DIAGONAL_BASE

    def initialise(self):
        self.started = False
        self.q_target = None
        self.ticks = 0
        self.path_W: list[np.ndarray] = []
        self.angles: list[tuple[float, float, float]] = []  # (cloud stamp s, door rad, hand rad) per new cloud
        self.ik_failures = 0
        self.hinge_refits = 0
        self.refits_refused = 0  # faces' hinges off the leaf's end
        # The door's opening at the grasp: the arc turns the grasp by the door's turn since, not by its opening (a
        # door re-grasped at 60 degrees had its goals turned 60 degrees past the hand, and its swing ended at once).
        self.door0 = None

    def _door_angle_rad(self, p_W, axis, X_WT) -> float:
        """The door's opening: from its points (the front plane's turn) when they were seen this step, else
        from the hand's position about the hinge, turned on from the door's opening at the grasp."""
        state = self.bb.open_state.state if self.bb.open_state is not None else None
        if state is not None and (state.measured or self.door0 is None):
            return state.opening_angle_rad
        return (self.door0 or 0.0) + max(0.0, swept_angle_rad(np.array([self.path_W[0], X_WT[:3, 3]]), p_W, axis))

    def _refit_hinge(self, hand_W: np.ndarray) -> None:
        """Move the hinge to where the door's closed and swung faces meet, when that is within HINGE_EDGE_M of the
        leaf's hinge-side end and both are more than HINGE_REFIT_M from the estimate (see HINGE_REFIT_RAD); the angles
        judged so far were about the old hinge and are dropped."""
        estimator = self.bb.open_state
        p_W = self.bb.hinge[0]
        found = None if estimator is None else estimator.hinge_point_W(p_W[2], HINGE_REFIT_RAD)
        if found is None or np.linalg.norm(found[:2] - p_W[:2]) <= HINGE_REFIT_M:
            return
        edge = estimator.front_edge_W(p_W[2], hand_W)  # the hand holds the free edge
        if edge is None or np.linalg.norm(found[:2] - edge[:2]) > HINGE_EDGE_M:
            self.refits_refused += 1
            return
        if np.linalg.norm(p_W[:2] - edge[:2]) <= HINGE_REFIT_M:  # the leaf's end agrees with the estimate
            return
        hinge = hinge_through(found, self.X_WG0[:3, 3], estimator.initial_normal_W)
        if not MIN_HINGE_RADIUS_M < hinge[2] < MAX_HINGE_RADIUS_M:
            return
        self.bb.hinge = hinge
        self.angles.clear()
        self.hinge_refits += 1

    def update(self):
        obs: Observation = self.bb.observation
        tools, side = self.tools, self.tools.side
        # The hand where it was when the door's cloud was taken: the door's angle and the hand's are compared at
        # one moment (in real time the state handed on is predicted to now, the cloud older: at 100 ms the hand
        # ran "ahead" of a door that was following it).
        X_WT = (self.observation_at_cloud() or obs).X_WT[side]
        X_WT_now = obs.X_WT[side]
        if not self.started:
            self.reference.start(obs, self.bb.reference, self.bb.tick)
            self.started = True
            self.q_target = obs.qpos.copy()
            self.X_WG0 = X_WT.copy()  # the grasp, as it was on the closed door
            self.start_time_s = obs.time_s
        self.ticks += 1
        self.path_W.append(X_WT[:3, 3].copy())
        self._refit_hinge(X_WT[:3, 3])
        p_W, axis, r = self.bb.hinge
        door = self._door_angle_rad(p_W, axis, X_WT)
        if self.door0 is None:
            self.door0 = door
        turned = max(0.0, door - self.door0)  # since the grasp, as the hand's angle is
        hand = max(0.0, swept_angle_rad(np.array([self.path_W[0], X_WT[:3, 3]]), p_W, axis))
        # Door and hand are judged on new clouds, by their stamps, over STALL_STEPS control periods (in lockstep
        # a cloud a tick: the last STALL_STEPS ticks): a 15 Hz camera repeats a cloud over ~7 ticks. And only on
        # clouds taken once the hand has had its ramp to speed since the swing began: with 100 ms of latency the
        # first ten ticks' clouds show a hand not yet moving, and a door re-grasped past 45 degrees read as one
        # at its stop (the swing ended after 12-17 ticks, the door at 0.6-0.8 of its range, the tree holding
        # still: 3 of 18 episodes at 0-100 ms, docs/benchmarks.md).
        cloud_time_s = obs.cloud_time_s
        if cloud_time_s >= self.start_time_s + RAMP_S and (not self.angles or cloud_time_s > self.angles[-1][0]):
            self.angles.append((cloud_time_s, door, hand))
        self.feedback_message = (f"door at {math.degrees(door):.0f} deg, turned {math.degrees(turned):.0f} since the "
                                 f"grasp, hand at {math.degrees(hand):.0f} deg") + (
            f", hinge refitted {self.hinge_refits}x" if self.hinge_refits else "") + (
            f", {self.refits_refused} faces' hinges off the leaf's end" if self.refits_refused else "")
        window_s = STALL_STEPS * tools.model.control_dt_s
        then = [a for a in self.angles if a[0] <= cloud_time_s - window_s + 1e-6]
        if then and self.angles[-1][0] == cloud_time_s:
            _, door_then, hand_then = then[-1]
            door_still = door - door_then < STALL_RAD
            if door_still and hand - hand_then < STALL_RAD and door > MIN_OPEN_RAD:
                return Status.SUCCESS  # door and hand stopped together: the door is at its stop
            if door_still and hand - turned > DECOUPLED_RAD:
                return self.fail(f"door not following the hand ({self.feedback_message})")
        if self.ticks % REPLAN_STEPS == 1:
            # Closed on the door's measured angle: the goal's position leads the door along the arc (pulling
            # it), its orientation is the door's own (a hand turned ahead of the door would twist a thin
            # handle between the pads until it springs out).
            # The door as it is now: at the cloud's angle, turned on by as much as the hand, which holds it, has
            # turned since (in lockstep the two moments are one). Goals from a door 100 ms old lag the door:
            # a shorter lead, and a hand turned behind the door it holds.
            hand_now = max(0.0, swept_angle_rad(np.array([self.path_W[0], X_WT_now[:3, 3]]), p_W, axis))
            door_now = turned + max(0.0, hand_now - hand)  # since the grasp
            goal = hinge_arc(self.X_WG0, p_W, axis, door_now, 1)[-1]
            lead = START_LEAD_RAD if self.door0 + door_now < START_SWING_RAD else ARC_LEAD_RAD
            goal[:3, 3] = hinge_arc(self.X_WG0, p_W, axis, door_now + lead, 1)[-1][:3, 3]
            q_nominal = diagonal_heading_nominal(obs.qpos, tools.base_index, p_W, axis) if self.diagonal_base else None
            result = tools.ik.solve(obs.qpos, {side: goal}, base_keep_out=(p_W, r + BASE_CLEARANCE_M),
                                    position_tolerance_m=0.01, angle_tolerance_rad=0.05, weights=SWING_WEIGHTS,
                                    q_nominal=q_nominal)
            if result.success:
                self.q_target = result.q
                self.ik_failures = 0
            else:
                self.ik_failures += 1
                if self.ik_failures >= 3:
                    return self.fail(f"arc unreachable at {math.degrees(door):.0f} deg: {result.message}")
        qvel, _ = self.reference.advance(self.q_target, obs)
        self.bb.reference = self.reference.handover(self.bb.tick)
        self.send(qvel, "close")
        return Status.RUNNING
