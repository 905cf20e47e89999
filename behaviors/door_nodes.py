"""Nodes of the door tree: estimating the hinge, and swinging the door open along the hinge arc.

Blackboard keys (besides those of cabinet_nodes):
    hinge      (p_W [3], axis_W [3], radius_m): a point on the hinge axis, its unit direction (a positive turn
               about it opens the door) and the handle's distance from it; or None
    door_push  (X_WG_contact [4x4], door_rad, edge_m, depth_m): the hand's pose against the leaf's inner side,
               the door's angle when it was planned, the free edge's distance from the hinge and the tool's
               depth behind the leaf's front face at the push; or None
"""

from __future__ import annotations

import math

import numpy as np
from py_trees.common import Status

from handleit.perception.open_state import free_edge_distance_m
from handleit.planning.trajectories import door_push_poses, hinge_arc, swept_angle_rad
from handleit.types import Observation

from .cabinet_nodes import MIN_LINK_POINTS
from .common import JointReference, Skill, wrist_roll_starts

# Kept between the base's origin and the handle's circle: the door's edge beyond the handle (3-7 cm) and
# the base's footprint (torso box 0.3 x 0.2 m, body ~0.11 m from its axis).
BASE_CLEARANCE_M = 0.3
# How far the goal's position leads the door's measured angle along the arc. 0.25 rad to 0.4 with the swing's
# speed fraction 0.9 to 1.0 and the torso held: 12-18% shorter swings on 4 test doors, none lost.
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
SWING_WEIGHTS = {"base_translation": 40.0, "base_rotation": 40.0, "base_height": 2000.0}
STALL_STEPS = 12  # control steps over which the door and the hand are checked for motion
STALL_RAD = math.radians(1.5)  # turning less than this in STALL_STEPS is standing still
MIN_OPEN_RAD = math.radians(45)  # a door standing still beyond this is taken to be at its stop
DECOUPLED_RAD = math.radians(12)  # a still door this far behind the hand is no longer held
MAX_OPENING_RAD = math.radians(130)  # beyond the largest door range: the door's stop ends the swing

# The handover from the held swing to a push on the leaf's inner side (issue 17; papers/002 Sec. 2.5). A door
# let go stands still (its joint damping, 5-20 N m s/rad, leaves no momentum to coast), so the hand is moved
# round the free edge against a door that waits for it.
HANDOVER_RAD = math.radians(45)  # the swing hands over once the door has turned this far
RELEASE_BACKOFF_M = 0.05  # the open hand backs off the handle this far along the leaf's normal
DOOR_THICKNESS_M = 0.02  # assumed: the inner face is never seen from the front (bundled leaves: 15-20 mm)
HAND_HALF_EXTENTS_M = (0.035, 0.1)  # the Panda hand's half extents along the tool's x and y (m)
# The hand's approach at the push, from the leaf's inward normal toward the hinge: pi/2 along the leaf (its
# side against the inner face); less turns the wrist less and hooks the free edge (PUSH_INSET_M then smaller).
PUSH_YAW_RAD = math.pi / 2
PUSH_CLOSING_VERTICAL = True  # the hand's thin side against the leaf (a roll and a yaw), or the least turn (a yaw)
PUSH_CLEARANCE_M = 0.10  # the hand passes round the free edge this far beyond it
PUSH_INSET_M = 0.06  # the tool centre this far inside the free edge at the push: the hand's length lies beyond it
PUSH_LEAD_RAD = 0.4  # how far the push's goal leads the door's measured angle about the hinge
PUSH_TURNS_WITH_DOOR = False  # the hand keeps its orientation (no wrist turning), or turns with the leaf
ARRIVED_M = 0.02  # the hand this close to a move's last pose has arrived
BLEND_S = 0.0  # a waypoint this close (s at full speed) hands over to the next without a stop (0: stop at each)
MOVE_TIME_WEIGHT = 20.0  # IK cost per second of the move round the edge (0: the nearest posture, not the quickest)
CONTACT_GAP_M = 0.04  # a hand farther than this behind its push depth, the door still: not against the leaf


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
    r = handle_W - p_W
    r[2] = 0.0
    axis = np.array([0.0, 0.0, 1.0])
    if np.cross(axis, r) @ n < 0:  # a positive turn must move the free edge outward
        axis = -axis
    return p_W, axis, float(np.linalg.norm(r))


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
        if not 0.1 < r < 1.2:
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
        self.reference = JointReference(tools, SWING_SPEED_FRACTION if speed_fraction is None else speed_fraction)

    def initialise(self):
        self.started = False
        self.q_target = None
        self.ticks = 0
        self.path_W: list[np.ndarray] = []
        self.angles: list[tuple[float, float]] = []  # (door, hand) angles (rad) per step
        self.ik_failures = 0

    def _door_angle_rad(self, p_W, axis, X_WT) -> float:
        """The door's opening: from its points (the front plane's turn) when they were seen this step, else
        from the hand's position about the hinge."""
        state = self.bb.open_state.state if self.bb.open_state is not None else None
        if state is not None and state.measured:
            return state.opening_angle_rad
        return max(0.0, swept_angle_rad(np.array([self.path_W[0], X_WT[:3, 3]]), p_W, axis))

    def update(self):
        obs: Observation = self.bb.observation
        tools, side = self.tools, self.tools.side
        X_WT = obs.X_WT[side]
        if not self.started:
            self.reference.start(obs, self.bb.reference, self.bb.tick)
            self.started = True
            self.q_target = obs.qpos.copy()
            self.X_WG0 = X_WT.copy()  # the grasp, as it was on the closed door
        self.ticks += 1
        self.path_W.append(X_WT[:3, 3].copy())
        p_W, axis, r = self.bb.hinge
        door = self._door_angle_rad(p_W, axis, X_WT)
        hand = max(0.0, swept_angle_rad(np.array([self.path_W[0], X_WT[:3, 3]]), p_W, axis))
        self.angles.append((door, hand))
        self.feedback_message = f"door at {math.degrees(door):.0f} deg, hand at {math.degrees(hand):.0f} deg"
        if len(self.angles) > STALL_STEPS:
            door_then, hand_then = self.angles[-1 - STALL_STEPS]
            door_still = door - door_then < STALL_RAD
            if door_still and hand - hand_then < STALL_RAD and door > MIN_OPEN_RAD:
                return Status.SUCCESS  # door and hand stopped together: the door is at its stop
            if door_still and hand - door > DECOUPLED_RAD:
                return self.fail(f"door not following the hand ({self.feedback_message})")
        if self.ticks % REPLAN_STEPS == 1:
            # Closed on the door's measured angle: the goal's position leads the door along the arc (pulling
            # it), its orientation is the door's own (a hand turned ahead of the door would twist a thin
            # handle between the pads until it springs out).
            goal = hinge_arc(self.X_WG0, p_W, axis, door, 1)[-1]
            lead = START_LEAD_RAD if door < START_SWING_RAD else ARC_LEAD_RAD
            goal[:3, 3] = hinge_arc(self.X_WG0, p_W, axis, door + lead, 1)[-1][:3, 3]
            result = tools.ik.solve(obs.qpos, {side: goal}, base_keep_out=(p_W, r + BASE_CLEARANCE_M),
                                    position_tolerance_m=0.01, angle_tolerance_rad=0.05, weights=SWING_WEIGHTS)
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


def _leaf_frame(open_state, axis_W: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The leaf's outward normal and its direction from the hinge toward the free edge, as measured now
    (horizontal, world), and the door's measured opening angle (rad)."""
    state = open_state.state
    n = np.array([state.front_normal_W[0], state.front_normal_W[1], 0.0])
    n /= np.linalg.norm(n)
    return n, np.cross(n, axis_W), state.opening_angle_rad


class DoorPastAngle(Skill):
    """Check, every tick of the swing: RUNNING until the door's measured angle (from its points) reaches
    ``HANDOVER_RAD``, then SUCCESS (the swing hands over to the push)."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("open_state",))

    def update(self):
        if self.bb.open_state is None:
            return Status.RUNNING
        angle = self.bb.open_state.state.opening_angle_rad
        self.feedback_message = f"door at {math.degrees(angle):.0f} deg (handover at {math.degrees(HANDOVER_RAD):.0f})"
        return Status.SUCCESS if angle >= HANDOVER_RAD else Status.RUNNING


class _ToolMoves(Skill):
    """Move the tool through poses (whole-body IK for each, solved on the first tick; a joint reference
    follows them one after the other); SUCCESS at the last, FAILURE when one has no IK solution."""

    gripper = "open"
    min_ticks = 1

    def __init__(self, name, tools, reads=(), writes=()):
        super().__init__(name, tools, reads=("observation", "tick", "hinge", "open_state", "reference", *reads),
                         writes=("command", "reference", *writes))
        self.reference = JointReference(tools, SWING_SPEED_FRACTION)

    def poses(self, obs: Observation) -> list[np.ndarray] | str:
        """The tool's poses, or why there are none."""
        raise NotImplementedError

    def initialise(self):
        self.targets: list[np.ndarray] | None = None
        self.ticks = 0

    def update(self):
        obs: Observation = self.bb.observation
        if self.targets is None:
            poses = self.poses(obs)
            if isinstance(poses, str):
                return self.fail(poses)
            p_W, _, r = self.bb.hinge
            q, self.targets = obs.qpos, []
            for k, X_WG in enumerate(poses):
                # The time to reach counted: a turn of the hand is shared between the joints (the wrist alone
                # turns 1.6 rad in 0.5 s).
                limits = self.tools.model.velocity_limits if MOVE_TIME_WEIGHT else None
                result = self.tools.ik.solve(q, {self.tools.side: X_WG}, base_keep_out=(p_W, r + BASE_CLEARANCE_M),
                                             position_tolerance_m=0.01, angle_tolerance_rad=0.05, weights=SWING_WEIGHTS,
                                             initial_guesses=wrist_roll_starts(self.tools, q),
                                             velocity_limits=limits, time_weight=MOVE_TIME_WEIGHT)
                if not result.success:
                    return self.fail(f"pose {k + 1} of {len(poses)} unreachable: {result.message}")
                q = result.q
                self.targets.append(q)
            self.p_WG_last = poses[-1][:3, 3].copy()
            self.reference.start(obs, self.bb.reference, self.bb.tick)
        self.ticks += 1
        if len(self.targets) > 1 and self._time_left_s(self.targets[0]) < BLEND_S:
            self.targets.pop(0)  # on to the next pose without stopping at this one
        qvel, arrived = self.reference.advance(self.targets[0], obs)
        self.bb.reference = self.reference.handover(self.bb.tick)
        self.send(qvel, self.gripper)
        self.feedback_message = f"{len(self.targets)} poses to go"
        if arrived and len(self.targets) > 1:
            self.targets.pop(0)
        elif arrived and self.ticks >= self.min_ticks:  # the last pose held until the gripper had its ticks
            # The hand itself there, not only its reference: it lags while moving.
            off_m = float(np.linalg.norm(obs.X_WT[self.tools.side][:3, 3] - self.p_WG_last))
            if off_m <= ARRIVED_M:
                return Status.SUCCESS
            self.feedback_message = f"{off_m * 100:.1f} cm from the last pose"
        return Status.RUNNING


    def _time_left_s(self, q_target: np.ndarray) -> float:
        """The reference's time (s) to a waypoint at full speed, its slowest joint."""
        i = self.tools.controlled
        limits = self.reference.speed_fraction * self.tools.model.velocity_limits[i]
        return float(np.max(np.abs(q_target[i] - self.reference.q[i]) / np.maximum(limits, 1e-9)))


class ReleaseHandle(_ToolMoves):
    """Open the gripper and back the hand off the handle along the leaf's normal; the door stays where it is."""

    min_ticks = 6  # the fingers clear a handle bar

    def poses(self, obs):
        if self.bb.open_state is None:
            return "door's open state unknown"
        n, _, _ = _leaf_frame(self.bb.open_state, self.bb.hinge[1])
        X_WG = obs.X_WT[self.tools.side].copy()
        X_WG[:3, 3] += RELEASE_BACKOFF_M * n
        return [X_WG]


class MoveBehindDoor(_ToolMoves):
    """Take the open hand round the leaf's free edge (found in this step's leaf points) to its inner side,
    pointing along the leaf toward the hinge; writes the push's start (``door_push``)."""

    def __init__(self, name, tools):
        super().__init__(name, tools, writes=("door_push",))

    def poses(self, obs):
        p_W, axis, _ = self.bb.hinge
        n, u, door = _leaf_frame(self.bb.open_state, axis)
        link = obs.points[obs.masks["target_link"]]
        if len(link) < MIN_LINK_POINTS:
            return f"door leaf not seen ({len(link)} points)"
        # Points near the leaf's plane only: not the cabinet's other parts seen through a noisy mask.
        link = link[np.abs((link - p_W) @ n) < 0.1]
        if len(link) < MIN_LINK_POINTS:
            return f"door leaf not seen near its plane ({len(link)} points)"
        edge = free_edge_distance_m(link, p_W, u)
        X_WT = obs.X_WT[self.tools.side]
        beside, behind, contact = door_push_poses(
            p_W, axis, n, edge, X_WT[2, 3], edge - PUSH_INSET_M, DOOR_THICKNESS_M, PUSH_CLEARANCE_M, X_WT[:3, :3],
            HAND_HALF_EXTENTS_M, PUSH_CLOSING_VERTICAL, PUSH_YAW_RAD)
        depth = -float((contact[:3, 3] - p_W) @ n)
        self.bb.door_push = (contact, door, edge, depth)
        return [beside, behind, contact]


class PushDoorOpen(Skill):
    """Push the leaf open from its inner side: every few steps the push's start turned about the hinge to the
    door's measured angle plus a lead gives a goal (the hand's orientation kept, unless PUSH_TURNS_WITH_DOOR),
    whole-body IK a joint target. SUCCESS when door and hand stop together beyond 45 degrees (the door's stop);
    FAILURE when no goal is reachable."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "tick", "hinge", "open_state", "reference", "door_push"),
                         writes=("command", "reference"))
        self.reference = JointReference(tools, SWING_SPEED_FRACTION)

    def initialise(self):
        self.started = False
        self.ticks = 0
        self.angles: list[tuple[float, float]] = []
        self.ik_failures = 0

    def update(self):
        obs: Observation = self.bb.observation
        side = self.tools.side
        X_WT = obs.X_WT[side]
        p_W, axis, r = self.bb.hinge
        X_WC, door0, _, _ = self.bb.door_push
        if not self.started:
            self.reference.start(obs, self.bb.reference, self.bb.tick)
            self.started, self.q_target = True, obs.qpos.copy()
            self.p0 = X_WT[:3, 3].copy()
        self.ticks += 1
        _, _, door = _leaf_frame(self.bb.open_state, axis)
        hand = door0 + swept_angle_rad(np.array([self.p0, X_WT[:3, 3]]), p_W, axis)
        self.angles.append((door, hand))
        self.feedback_message = f"door at {math.degrees(door):.0f} deg, hand at {math.degrees(hand):.0f} deg"
        if len(self.angles) > STALL_STEPS:
            door_then, hand_then = self.angles[-1 - STALL_STEPS]
            if door - door_then < STALL_RAD and hand - hand_then < STALL_RAD and door > MIN_OPEN_RAD:
                return Status.SUCCESS  # door and hand stopped together: the door is at its stop
        if self.ticks % REPLAN_STEPS == 1:
            goal = hinge_arc(X_WC, p_W, axis, door - door0 + PUSH_LEAD_RAD, 1)[-1]
            if not PUSH_TURNS_WITH_DOOR:
                goal[:3, :3] = X_WC[:3, :3]
            result = self.tools.ik.solve(obs.qpos, {side: goal}, base_keep_out=(p_W, r + BASE_CLEARANCE_M),
                                         position_tolerance_m=0.01, angle_tolerance_rad=0.05, weights=SWING_WEIGHTS)
            if result.success:
                self.q_target, self.ik_failures = result.q, 0
            else:
                self.ik_failures += 1
                if self.ik_failures >= 3:
                    return self.fail(f"push unreachable at {math.degrees(door):.0f} deg: {result.message}")
        qvel, _ = self.reference.advance(self.q_target, obs)
        self.bb.reference = self.reference.handover(self.bb.tick)
        self.send(qvel, "open")
        return Status.RUNNING


class PushContact(Skill):
    """Check, every tick of the push: the hand stays on the leaf's inner side and against it. FAILURE when the
    tool centre is in front of the leaf's front face (it would push the door shut), or when the door has stood
    still for STALL_STEPS with the hand more than CONTACT_GAP_M behind the depth it pushes at (it missed the
    leaf). RUNNING otherwise."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "hinge", "open_state", "door_push"))

    def initialise(self):
        self.angles: list[float] = []

    def update(self):
        p_W, axis, _ = self.bb.hinge
        n, _, door = _leaf_frame(self.bb.open_state, axis)
        depth = -float((self.bb.observation.X_WT[self.tools.side][:3, 3] - p_W) @ n)
        self.angles.append(door)
        self.feedback_message = f"hand {depth * 100:.1f} cm behind the leaf's front"
        if depth < 0.0:
            return self.fail(f"hand in front of the leaf ({self.feedback_message})")
        push_depth = self.bb.door_push[3]
        still = len(self.angles) > STALL_STEPS and door - self.angles[-1 - STALL_STEPS] < STALL_RAD
        if still and depth > push_depth + CONTACT_GAP_M:
            return self.fail(f"hand not against the leaf ({self.feedback_message}, door still)")
        return Status.RUNNING
