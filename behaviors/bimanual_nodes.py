"""Skills of the dual-arm trees (PushChair, MoveBucket): both arms and the base moved together to a whole-body
configuration, both grippers checked, the base moved with the arms held (carrying or pushing a held object),
and the recovery between attempts.

Goals for both arms come from one whole-body IK solve with two tool-centre goals (Let's Handle It (arXiv 2202.11792)
Sec. 2.4: the reason Drake was chosen), so the base, the torso and both arms arrive together.
"""

from __future__ import annotations

import math

import numpy as np
import py_trees
from py_trees.common import ParallelPolicy, Status

from handleit.control.actions import world_to_base_velocity
from handleit.perception.handle_grasps import flipped_grasp_pose
from handleit.planning.whole_body_ik import rotation_angle_rad
from handleit.poses import rotation_of_yaw
from handleit.types import Observation

from .common import BASE_VELOCITY_LAG_S, FINGER_GAP_EMPTY_M, JointReference, ProgressWatch, Skill, Tools, finger_gap_m

# Speeding up and slowing down with a held object takes this long (s): a held chair or bucket is pulled by
# the hands high up, and a hard stop sets it swinging (seconds before it is static again).
HELD_RAMP_S = 0.3
# Weight (per second) of the time to reach a hold in its IK cost, beside the posture cost: among the many whole-body
# solutions, the quickest to reach (the slowest joint's travel over its speed) rather than only the nearest.
HOLD_TIME_WEIGHT = 20.0
# The base's x/y speed limits hold per axis of its own frame, so a push or a carry at 45 degrees to its heading
# goes up to sqrt(2) times faster. Holds are also planned with the base turned that way (a cost pulling the
# heading there, not a constraint), and the plan with the least time to reach plus time to move wins.
DIAGONAL_HEADING_OFFSETS_RAD = (math.pi / 4, -math.pi / 4)
HEADING_WEIGHT = 200.0  # 1/rad^2, on the base's heading toward the offset one
PROVISIONAL_PLANS = ("all flips", "nearest flip", "nearest heading")  # quickest_hold_for_move's provisional searches


def shifted_goals(goals: dict[str, np.ndarray], d_W) -> dict[str, np.ndarray]:
    """Tool-centre goals (side -> X_WG) translated by ``d_W`` (m, world frame), orientations kept."""
    out = {}
    for side, X in goals.items():
        X = X.copy()
        X[:3, 3] += d_W
        out[side] = X
    return out


def time_to_go_s(tools: Tools, q_from: np.ndarray, q_to: np.ndarray) -> float:
    """Seconds a synchronized move from ``q_from`` to ``q_to`` needs at the velocity limits (the slowest joint,
    the base's planar distance counted as one vector), ramps left out: what to minimise among IK solutions."""
    dq = np.abs(np.asarray(q_to, dtype=float) - np.asarray(q_from, dtype=float))[tools.controlled]
    v = tools.model.velocity_limits[tools.controlled]
    xy = tools.base_index[:2]
    planar = float(np.linalg.norm(np.asarray(q_to)[xy] - np.asarray(q_from)[xy])) / float(np.min(tools.model.velocity_limits[xy]))
    return max(float(np.max(dq / np.maximum(v, 1e-9))), planar)


def flipped_about_approach(goals: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Every combination of each gripper goal and the same goal turned half a turn about its approach axis (z).

    A parallel-jaw gripper's two fingers are alike, so both poses grasp the same; the one nearer the arm's
    current wrist roll saves up to half a turn of the slowest wrist joint."""
    sides = sorted(goals)
    return [{s: (flipped_grasp_pose(goals[s]) if mask >> i & 1 else goals[s].copy()) for i, s in enumerate(sides)}
            for mask in range(2 ** len(sides))]


def fastest_hold(tools: Tools, obs: Observation, goal_options, pregrasp_of, weight_options, tilt_rad: float = 0.0,
                 **solve_kwargs):
    """The quickest hold to reach among IK solutions for several goal variants and cost weights.

    ``goal_options``: candidate grasp goals (side -> X_WG); ``pregrasp_of(goals)``: the pregrasp goals above
    them; ``weight_options``: IK cost weights to try (e.g. a heavy torso weight keeps the slow torso still);
    ``tilt_rad``: how far each gripper may turn about its closing axis from its goal (a pinch grips the same;
    ``WholeBodyIK.solve``'s ``closing_axis_tilt_rad``): the goals returned are then the poses reached.
    Each grasp is solved from the current configuration and its pregrasp from the grasp (base fixed, else
    free); the pair with the least time to go (now -> pregrasp -> grasp, :func:`time_to_go_s`) wins.
    Returns ``(grasp, pregrasp, goals, pregrasp_goals)`` or raises ``RuntimeError`` with the last IK message.

    Branch and bound over the pregrasp solves: every grasp is solved first, and pregrasps only in the order of
    a lower bound on their time, ``time_to_go_s(now, grasp)`` (a norm: going by the pregrasp takes no less),
    until the best time found is no more than the next candidate's bound. The choice is the one that solving
    every pregrasp would make (ties aside), with fewer solves (37-53 a chair plan instead of 60-63): it is what
    the robot waits for in real time."""
    last = "no candidate"
    candidates = []  # (lower bound on the time to go, order, grasp, goals, weights)
    for option in goal_options:
        for weights in weight_options:
            grasp = tools.ik.solve(obs.qpos, option, weights=weights, closing_axis_tilt_rad=tilt_rad,
                                   velocity_limits=controlled_speeds(tools), time_weight=HOLD_TIME_WEIGHT,
                                   quick=True, **solve_kwargs)
            if not grasp.success:
                last = grasp.message
                continue
            goals = option if tilt_rad == 0.0 else reached_goals(tools, grasp.q, option)
            candidates.append((time_to_go_s(tools, obs.qpos, grasp.q), len(candidates), grasp, goals, weights))
    best = None
    for bound, _, grasp, goals, weights in sorted(candidates, key=lambda c: (c[0], c[1])):
        if best is not None and best[0] <= bound:
            break
        pre_goals = pregrasp_of(goals)
        pre = tools.ik.solve(grasp.q, pre_goals, weights=weights, fixed_joints=tools.model.base_joint_names, quick=True)
        if not pre.success:  # the torso may rise too
            pre = tools.ik.solve(grasp.q, pre_goals, weights=weights, quick=True, **solve_kwargs)
        if not pre.success:
            last = f"pregrasp: {pre.message}"
            continue
        t = time_to_go_s(tools, obs.qpos, pre.q) + time_to_go_s(tools, pre.q, grasp.q)
        if best is None or t < best[0]:
            best = (t, grasp, pre, goals, pre_goals)
    if best is None:
        raise RuntimeError(last)
    return best[1:]


def wrap_angle_rad(angle: float) -> float:
    """The same angle in [-pi, pi)."""
    return (angle + math.pi) % (2 * math.pi) - math.pi


def move_time_s(tools: Tools, move_W, heading_rad: float) -> float:
    """Seconds the base needs (ramps left out) to move by ``move_W`` (m, world x/y) with its heading held at
    ``heading_rad``: its x/y limits hold per axis of its own frame, so a move at 45 degrees to the heading runs
    up to sqrt(2) times faster than one along it."""
    x, y = tools.base_index[:2]
    move_B = world_to_base_velocity(np.asarray(move_W, dtype=float)[:2], heading_rad)  # a displacement, rotated alike
    return float(np.max(np.abs(move_B) / tools.model.velocity_limits[[x, y]]))


def body_travel_m(X_WB: np.ndarray, half_extents_m, move_xy, points_W, margin_m: float) -> float:
    """How far (m) the base may move along ``move_xy`` (world x/y, heading fixed) before the footprint of its
    body (``half_extents_m``: x, y in the base frame), widened by ``margin_m``, reaches one of ``points_W``
    (e.g. the seen top of a platform, which the body, reaching the floor, cannot pass over). The whole move
    when nothing is in the way or the footprint is unknown."""
    distance = float(np.linalg.norm(np.asarray(move_xy, dtype=float)[:2]))
    if half_extents_m is None or points_W is None or len(points_W) == 0 or distance < 1e-9:
        return distance
    R = X_WB[:2, :2]
    u_B = R.T @ (np.asarray(move_xy, dtype=float)[:2] / distance)
    p_B = (np.asarray(points_W)[:, :2] - X_WB[:2, 3]) @ R  # the points in the base frame (rows: R^T p)
    half = np.asarray(half_extents_m, dtype=float) + margin_m
    # A point is inside the moved footprint while |p - s u| <= half on both axes: an interval of s per axis.
    lo, hi = np.full(len(p_B), -np.inf), np.full(len(p_B), np.inf)
    for axis in range(2):
        if abs(u_B[axis]) < 1e-9:
            outside = np.abs(p_B[:, axis]) > half[axis]
            lo[outside], hi[outside] = np.inf, -np.inf
            continue
        a = (p_B[:, axis] - half[axis]) / u_B[axis]
        b = (p_B[:, axis] + half[axis]) / u_B[axis]
        lo, hi = np.maximum(lo, np.minimum(a, b)), np.minimum(hi, np.maximum(a, b))
    hit = (lo <= hi) & (hi >= 0.0)
    if not hit.any():
        return distance
    return float(np.clip(np.min(lo[hit]), 0.0, distance))


def controlled_speeds(tools: Tools) -> np.ndarray:
    """The velocity limits of the joints a move drives (base and arms), zero for the rest (the fingers)."""
    v = np.zeros(len(tools.model.velocity_limits))
    v[tools.controlled] = tools.model.velocity_limits[tools.controlled]
    return v


def reached_goals(tools: Tools, q: np.ndarray, goals: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The tool-centre poses (side -> X_WG) that ``q`` reaches, with the positions of ``goals``: what an IK
    solve that was free to turn the grippers (about their closing axes) arrived at."""
    out = {}
    for side, X in goals.items():
        out[side] = tools.ik.tcp_pose(q, side)
        out[side][:3, 3] = X[:3, 3]
    return out


def nearest_flip(obs: Observation, options: list[dict[str, np.ndarray]], heading_rad: float | None):
    """Of ``options`` (the same grasp with the fingers flipped, :func:`flipped_about_approach`), the one whose
    grippers, seen from the base turned to ``heading_rad`` (None: as it stands), are turned least from where the
    hands are turned now in the base's frame: the flip an IK search would most likely choose, found without one."""
    yaw_now = math.atan2(obs.X_WB[1, 0], obs.X_WB[0, 0])
    yaw = yaw_now if heading_rad is None else heading_rad

    def turn_rad(option) -> float:
        total = 0.0
        for side, X in option.items():
            R_now = rotation_of_yaw(yaw_now).T @ obs.X_WT[side][:3, :3]
            R_goal = rotation_of_yaw(yaw).T @ X[:3, :3]
            z = R_goal[:, 2]  # the turn about the approach: the hand's x axis and the goal's, across it
            x_now = R_now[:, 0] - (R_now[:, 0] @ z) * z
            total += abs(math.atan2(float(np.cross(x_now, R_goal[:, 0]) @ z), float(x_now @ R_goal[:, 0])))
        return total

    return min(options, key=turn_rad)


def hold_time_s(tools: Tools, q_now: np.ndarray, q_pregrasp: np.ndarray, q_grasp: np.ndarray, move_W=None) -> float:
    """Seconds (ramps left out) to go from ``q_now`` by the pregrasp to the grasp, then to move the base by
    ``move_W`` (m, world x/y; None: no move) with its heading held at the grasp's: what the hold plans minimise."""
    t = time_to_go_s(tools, q_now, q_pregrasp) + time_to_go_s(tools, q_pregrasp, q_grasp)
    if move_W is None:
        return t
    return t + move_time_s(tools, np.asarray(move_W, dtype=float)[:2], float(np.asarray(q_grasp)[tools.base_index[2]]))


def quickest_hold_for_move(tools: Tools, obs: Observation, goals_facing, pregrasp_of, weight_options, move_W,
                           heading_offsets_rad=DIAGONAL_HEADING_OFFSETS_RAD, heading_weight: float = HEADING_WEIGHT,
                           provisional: str | None = None, **solve_kwargs):
    """The hold (as :func:`fastest_hold`) from which reaching it and then moving the base by ``move_W`` (m, world
    x/y, heading fixed: a push or a carry) takes the least time.

    Planned with the base's heading free, and with the heading pulled (a cost, not a constraint) toward each of
    ``heading_offsets_rad`` off the move's direction: at 45 degrees to its heading the base moves sqrt(2) times
    faster. ``goals_facing(heading_rad | None)``: the candidate grasp goals (side -> X_WG) for the robot facing
    the object along that heading (None: as it stands now). Returns ``(plan, summary)``: the plan as
    :func:`fastest_hold` returns it, and a line of feedback (each heading tried and its time). Raises
    ``RuntimeError`` when no hold is found for any heading.

    ``provisional``: a quick first plan for the robot to start on while the full search runs (real time,
    :class:`HoldPlanStages`), with the first cost weighting only, and per heading either every finger flip
    ("all flips") or only the flip nearest the hands' turn (:func:`nearest_flip`, "nearest flip": 6-7 IK solves
    instead of 29-41 for the bucket, the same hold on test seeds 0-9; it misses the chair's best hold by 0.19 s;
    benchmarks/hold_plan_cost.py), or every flip for one heading: the diagonal offset the base turns least to
    ("nearest heading": 8 solves instead of 24 for the chair; the heading the base stands at now is left out too:
    in a lockstep run of 40 chair seeds a diagonal heading was as quick or quicker on all 40, the nearer one on 35,
    docs/benchmarks.md)."""
    if provisional is not None and provisional not in PROVISIONAL_PLANS:
        raise ValueError(f"provisional plan {provisional!r} is none of {PROVISIONAL_PLANS}")
    yaw = tools.base_index[2]
    move = None if move_W is None else np.asarray(move_W, dtype=float)[:2]
    direction = math.atan2(move[1], move[0]) if move is not None and np.linalg.norm(move) > 1e-3 else None
    headings = [None] + ([] if direction is None else [direction + offset for offset in heading_offsets_rad])
    if provisional == "nearest heading" and direction is not None:
        headings = [min(headings[1:], key=lambda h: abs(wrap_angle_rad(h - float(obs.qpos[yaw]))))]
    plans, last = [], None
    for heading in headings:
        kwargs = dict(solve_kwargs)
        weights = weight_options
        if heading is not None:
            q_nominal = obs.qpos.copy()
            q_nominal[yaw] = obs.qpos[yaw] + wrap_angle_rad(heading - obs.qpos[yaw])
            kwargs["q_nominal"] = q_nominal
            weights = [{**w, "base_rotation": heading_weight} for w in weight_options]
        options = goals_facing(heading)
        if provisional is not None:
            options = [nearest_flip(obs, options, heading)] if provisional == "nearest flip" else options
            weights = weights[:1]
        try:
            plans.append(fastest_hold(tools, obs, options, pregrasp_of, weights, **kwargs))
        except RuntimeError as e:
            last = e
    if not plans:
        raise RuntimeError(str(last))

    times = [hold_time_s(tools, obs.qpos, p[1].q, p[0].q, move) for p in plans]
    best = int(np.argmin(times))
    summary = "no move direction yet"
    if direction is not None:
        summary = ", ".join(f"{math.degrees(wrap_angle_rad(float(p[0].q[yaw]) - direction)):+.0f} deg {t:.2f} s"
                            for p, t in zip(plans, times))
    return plans[best], summary


# A hold found by the full search replaces the provisional one the robot follows only when it is quicker from
# where the robot is by at least this much (s): switching costs the turn of a move already under way.
HOLD_SWITCH_MARGIN_S = 0.05
HOLD_STAGES = ("full", "provisional", "search")


class HoldPlanStages:
    """Mixin for the dual-arm hold plans (before :class:`~behaviors.background.BackgroundPlanning`): in real time
    the robot need not stand still for the whole hold search (0.3-0.4 s of IK on this CPU: 12 control periods at
    a quarter of real time, 35 at real time).

    ``stage``:
    - "full": the whole search (:func:`quickest_hold_for_move`), in lockstep and in real time;
    - "provisional": in real time a quick first plan (:func:`quickest_hold_for_move`'s ``provisional``, which
      candidates per ``provisional_search``: 8 grasp solves for the chair's "nearest heading" (17-24 with "all
      flips"), 6-7 for the bucket's "nearest flip") that the robot starts on; in lockstep the full search, so that
      lockstep episodes are what they were;
    - "search": in real time the full search in the background, beside the move toward the provisional hold (a
      Parallel), commanding nothing (``holds_still`` False); its hold replaces the provisional one on the
      blackboard when it is quicker from where the robot is then (:data:`HOLD_SWITCH_MARGIN_S`). A search that
      finds nothing keeps the provisional hold (SUCCESS, said in the feedback). In lockstep: SUCCESS at once.

    The node's snapshot holds ``"provisional"`` (:meth:`provisional_argument`: in the snapshot, not read from the
    node in ``plan``, since the planning worker keeps the copy of the node it was sent at warm-up); its ``plan``
    passes it on and returns ``("hold", (percept, q_grasp, goals, q_pregrasp, pregrasp goals, summary, move_W))``
    or ``("fail", why)``. :meth:`apply` hands a "search" result to :meth:`apply_search`, fails on "fail", and
    passes any other result to the node's own ``apply_plan(kind, value)``, which writes it (with
    :meth:`write_hold`)."""

    stage: str = "full"
    provisional_search: str = "all flips"  # quickest_hold_for_move's ``provisional``: which candidates a first plan tries
    provisional_plan: bool = False  # this plan is the provisional one (set in update, on the tick side)

    def set_stage(self, stage: str, provisional_search: str = "all flips") -> None:
        if stage not in HOLD_STAGES:
            raise ValueError(f"{self.name}: hold plan stage {stage!r} is none of {HOLD_STAGES}")
        if provisional_search not in PROVISIONAL_PLANS:
            raise ValueError(f"{self.name}: provisional search {provisional_search!r} is none of {PROVISIONAL_PLANS}")
        self.stage, self.provisional_search = stage, provisional_search
        self.holds_still = stage != "search"

    def provisional_argument(self) -> str | None:
        """What ``plan`` passes to :func:`quickest_hold_for_move` as ``provisional``."""
        return self.provisional_search if self.provisional_plan else None

    def update(self):
        realtime = bool(getattr(self.tools, "realtime", False))
        if self.stage == "search" and not realtime:
            self.feedback_message = "lockstep: the hold was planned by the full search"
            return Status.SUCCESS
        self.provisional_plan = self.stage == "provisional" and realtime
        return super().update()

    def apply(self, result: tuple[str, object]) -> Status:
        if self.stage == "search":
            return self.apply_search(result)
        kind, value = result
        if kind == "fail":
            return self.fail(value)
        return self.apply_plan(kind, value)

    def write_hold(self, q_grasp, goals, q_pregrasp, pre_goals) -> None:
        """The hold the moves go to: the grasp and pregrasp configurations and their tool goals (side -> X_WG)."""
        self.bb.q_grasp, self.bb.X_WG_grasp = q_grasp, goals
        self.bb.q_pregrasp, self.bb.X_WG_pregrasp = q_pregrasp, pre_goals

    def apply_search(self, result: tuple[str, object]) -> Status:
        """The full search's hold, if quicker from where the robot is than the hold it follows."""
        kind, value = result
        if kind == "fail":
            self.feedback_message = f"kept the provisional hold (the search found none: {value})"
            return Status.SUCCESS
        _, q_grasp, goals, q_pregrasp, pre_goals, summary, move = value
        q_now = self.bb.observation.qpos
        t_found = hold_time_s(self.tools, q_now, q_pregrasp, q_grasp, move)
        t_followed = hold_time_s(self.tools, q_now, self.bb.q_pregrasp, self.bb.q_grasp, move)
        if t_found < t_followed - HOLD_SWITCH_MARGIN_S:
            self.write_hold(q_grasp, goals, q_pregrasp, pre_goals)
            self.feedback_message = f"switched to the searched hold: {t_found:.2f} s from here, not {t_followed:.2f} s"
        else:
            self.feedback_message = f"kept the provisional hold: {t_followed:.2f} s from here ({t_found:.2f} s searched)"
        return Status.SUCCESS


def move_while_planning(name: str, move: py_trees.behaviour.Behaviour,
                        planner: py_trees.behaviour.Behaviour) -> py_trees.composites.Parallel:
    """A move with a plan that may change its goal running beside it: the search for a quicker hold
    (:class:`HoldPlanStages`) beside the move toward the provisional one, or the hand-eye correction beside the
    lowering. Done when the move is; a plan still running then is cancelled. The planner must command nothing while
    it plans (``holds_still`` False). It is the first child: in lockstep, where it plans in its tick, the move
    starts on its result in the same tick, as when the two ran in sequence; in real time it commands nothing and
    the move beside it goes on toward the goal it has until the plan changes it."""
    if getattr(planner, "holds_still", False):
        raise ValueError(f"{planner.name}: a plan beside a move must not hold the robot still (holds_still=False)")
    return py_trees.composites.Parallel(name, policy=ParallelPolicy.SuccessOnSelected(children=[move]),
                                        children=[planner, move])


class MoveBothArms(Skill):
    """Drive the base, torso and both arms to the configuration under ``target_key`` along a synchronized
    :class:`JointReference`. SUCCESS when every tool centre is within ``position_tolerance_m`` and
    ``angle_tolerance_rad`` of its goal under ``pose_key`` (side -> X_WG); when the error stops shrinking for
    ``patience`` steps after the reference arrived: SUCCESS within ``accept_stall_m``, else FAILURE.
    ``gripper_key``: a blackboard key holding the fingers' opening (m) on the way (pre-shaped to the part, so
    that closing takes a few steps), used instead of ``gripper`` when set."""

    def __init__(self, name, tools, target_key: str, pose_key: str, position_tolerance_m=0.015,
                 angle_tolerance_rad=0.1, gripper="open", patience=10, accept_stall_m=0.03, speed_fraction=0.9,
                 gripper_key: str | None = None, torso_first: bool = False):
        reads = ("observation", "tick", target_key, pose_key) + ((gripper_key,) if gripper_key else ())
        super().__init__(name, tools, reads=reads, writes=("command", "reference"))
        self.gripper_key = gripper_key
        self.target_key, self.pose_key = target_key, pose_key
        self.position_tolerance_m, self.angle_tolerance_rad = position_tolerance_m, angle_tolerance_rad
        self.gripper, self.accept_stall_m = gripper, accept_stall_m
        self.progress = ProgressWatch(patience)
        # torso_first: the torso (the slowest joint) rises at its own full speed instead of arriving with the
        # rest, so that arms swinging in from the robot's sides pass higher over the object on their way.
        self.reference = JointReference(tools, speed_fraction,
                                        independent=(tools.base_index[3],) if torso_first else ())

    def initialise(self):
        self.progress.reset()
        self.reference.restart()

    def update(self):
        obs: Observation = self.bb.observation
        goals = self.bb.get(self.pose_key)
        q_target = self.bb.get(self.target_key)
        position_error, angle_error = 0.0, 0.0
        for side, X_WG in goals.items():
            X_WT = obs.X_WT[side]
            position_error = max(position_error, float(np.linalg.norm(X_WT[:3, 3] - X_WG[:3, 3])))
            angle_error = max(angle_error, rotation_angle_rad(X_WG[:3, :3].T @ X_WT[:3, :3]))
        self.feedback_message = f"worst tcp {100 * position_error:.1f} cm, {math.degrees(angle_error):.0f} deg off"
        if position_error < self.position_tolerance_m and angle_error < self.angle_tolerance_rad:
            return Status.SUCCESS
        qvel, arrived = self.reference.follow(q_target, obs, self.bb)
        if self.progress.stalled(position_error + 0.2 * angle_error, arrived):
            if position_error < self.accept_stall_m and angle_error < 2 * self.angle_tolerance_rad:
                self.feedback_message = f"held short by contact: {self.feedback_message}"
                return Status.SUCCESS
            return self.fail(f"no progress: {self.feedback_message}")
        opening = self.bb.get(self.gripper_key) if self.gripper_key else None
        self.send(qvel, self.gripper if opening is None else float(opening))
        return Status.RUNNING


class GrippersHolding(Skill):
    """Check: every gripper closed on something (its fingers stopped apart), not on empty air.

    Once, right after closing (SUCCESS / FAILURE); or, with ``held`` naming the part, all along a move that
    carries it, beside the move in a Parallel: RUNNING while held, FAILURE when it slipped out. ``when``:
    an optional (blackboard key, value) pair; the check only applies while the key holds that value."""

    def __init__(self, name, tools, held: str | None = None, when: tuple[str, object] | None = None,
                 min_gap_m: float = FINGER_GAP_EMPTY_M):
        super().__init__(name, tools, reads=("observation",) + ((when[0],) if when else ()))
        self.held, self.when, self.min_gap_m = held, when, min_gap_m

    def update(self):
        passed = Status.SUCCESS if self.held is None else Status.RUNNING
        if self.when is not None and self.bb.get(self.when[0]) != self.when[1]:
            return passed
        obs: Observation = self.bb.observation
        gaps = {s: finger_gap_m(obs, self.tools, s) for s in self.tools.sides}
        self.feedback_message = ", ".join(f"{s} {1000 * g:.0f} mm" for s, g in gaps.items())
        empty = [s for s, g in gaps.items() if g < self.min_gap_m]
        if empty:
            if self.held is None:
                return self.fail(f"{' and '.join(empty)} gripper closed on nothing ({self.feedback_message})")
            return self.fail(f"{self.held} slipped out of the {' and '.join(empty)} gripper")
        return passed


class MoveBaseHolding(Skill):
    """Move the base (x, y and optionally torso height) by the offset under ``offset_key`` while the arms hold
    their configuration: the held object goes where the base goes. ``offset_key`` holds (dx, dy, dz) in the
    world frame (m), read when the move starts. SUCCESS once the base has arrived and slowed down.

    ``independent_height``: the torso rises at its own full speed instead of arriving with the base (a lift
    that must be over before the base reaches an edge); ``delay_key``: a blackboard key holding how long (s)
    the base waits before it starts, the torso already moving. ``gripper_key``: a blackboard key holding the
    grippers' command (the hold decides it), used instead of ``gripper`` when set.

    ``lower_key``: a blackboard key holding (travel m, dz m) or None: once the base has gone this far from where
    it started and the torso has arrived at its height, the torso's goal moves by dz (a set-down begun while the
    base still moves); the node then writes (0, 0, 0) under ``lowered_key`` (the set-down's own offset, now done
    here)."""

    def __init__(self, name, tools, offset_key: str, gripper="close", speed_fraction=1.0, settle_mps=0.05,
                 tolerance_m=0.01, ramp_s: float = HELD_RAMP_S, independent_height: bool = False,
                 delay_key: str | None = None, gripper_key: str | None = None, lower_key: str | None = None,
                 lowered_key: str | None = None):
        if (lower_key is None) != (lowered_key is None):
            raise ValueError("MoveBaseHolding: give lower_key and lowered_key together")
        reads = ("observation", "tick", offset_key) + tuple(k for k in (delay_key, gripper_key, lower_key) if k)
        super().__init__(name, tools, reads=reads,
                         writes=("command", "reference") + ((lowered_key,) if lowered_key else ()))
        self.offset_key, self.gripper, self.delay_key = offset_key, gripper, delay_key
        self.gripper_key = gripper_key
        self.lower_key, self.lowered_key = lower_key, lowered_key
        self.settle_mps, self.tolerance_m = settle_mps, tolerance_m
        independent = (tools.base_index[3],) if independent_height else ()
        # The base's heading does not change in these moves: its x/y limits are budgeted in its own frame.
        self.reference = JointReference(tools, speed_fraction, ramp_s, independent=independent,
                                        base_frame_budget=True, base_lead_s=BASE_VELOCITY_LAG_S)

    def initialise(self):
        self.q_target = None
        self.ticks = 0
        self.lower = None  # (travel m, dz m) until the set-down on the way has begun; read at the first tick

    def update(self):
        obs: Observation = self.bb.observation
        tools = self.tools
        x, y, _, height = tools.base_index
        if self.q_target is None:
            offset = np.asarray(self.bb.get(self.offset_key), dtype=float)
            self.reference.start(obs, self.bb.reference, self.bb.tick)
            # From the reference, not the measured configuration: the arms hold where they were told to be.
            self.q_target = self.reference.q.copy()
            self.q_target[[x, y]] += offset[:2]
            if len(offset) > 2:
                self.q_target[height] = np.clip(self.q_target[height] + offset[2], *tools.model.joint_limits[height])
            delay_s = float(self.bb.get(self.delay_key) or 0.0) if self.delay_key else 0.0
            self.delay_steps = math.ceil(delay_s / tools.model.control_dt_s)
            self.q_start_xy = self.reference.q[[x, y]].copy()
            self.lower = self.bb.get(self.lower_key) if self.lower_key else None
        self.ticks += 1
        if self.lower is not None:
            travel_m, dz = self.lower
            travelled_m = float(np.linalg.norm(obs.qpos[[x, y]] - self.q_start_xy))
            lifted = abs(self.reference.q[height] - self.q_target[height]) < 1e-4
            if travelled_m >= travel_m and lifted:  # over the platform: set down on the way
                self.q_target[height] = np.clip(self.q_target[height] + dz, *tools.model.joint_limits[height])
                self.bb.set(self.lowered_key, np.zeros(3))
                self.lower = None
        q_target = self.q_target
        if self.ticks <= self.delay_steps:  # the base waits where it is
            q_target = q_target.copy()
            q_target[[x, y]] = self.q_start_xy
        qvel, arrived = self.reference.advance(q_target, obs)
        arrived = arrived and self.ticks > self.delay_steps
        self.bb.reference = self.reference.handover(self.bb.tick)
        error_m = float(np.linalg.norm(self.q_target[[x, y, height]] - obs.qpos[[x, y, height]]))
        speed_mps = float(np.linalg.norm(obs.qvel[[x, y, height]]))
        self.feedback_message = f"base {100 * error_m:.1f} cm from its goal, {speed_mps:.2f} m/s"
        if arrived and error_m < self.tolerance_m and speed_mps < self.settle_mps:
            return Status.SUCCESS
        gripper = self.bb.get(self.gripper_key) if self.gripper_key else None
        self.send(qvel, self.gripper if gripper is None else gripper)
        return Status.RUNNING


class ReleaseAndBackOff(Skill):
    """Recovery before a retry, and the last step of a set-down: open both grippers, then raise the torso and
    back the base away along its heading. SUCCESS at once on a first attempt when ``only_on_retry``."""

    def __init__(self, name, tools, back_m: float = 0.2, raise_m: float = 0.05, open_steps: int = 12,
                 only_on_retry: bool = True, reset_keys: tuple[str, ...] = ()):
        super().__init__(name, tools, reads=("observation", "attempt", "tick"),
                         writes=("command", "attempt", "reference", *reset_keys))
        self.back_m, self.raise_m, self.open_steps = back_m, raise_m, open_steps
        self.only_on_retry, self.reset_keys = only_on_retry, reset_keys
        self.reference = JointReference(tools, 0.8)

    def initialise(self):
        self.ticks, self.q_target, self.q_hold = 0, None, None

    def update(self):
        obs: Observation = self.bb.observation
        if self.only_on_retry:
            if self.ticks == 0:
                self.bb.attempt = self.bb.attempt + 1
                for key in self.reset_keys:
                    self.bb.set(key, None)
            if self.bb.attempt <= 1:
                return Status.SUCCESS
        self.ticks += 1
        tools = self.tools
        if self.ticks <= self.open_steps:
            if self.q_hold is None:
                self.q_hold = obs.qpos.copy()
            self.send(tools.pid.step(self.q_hold, obs.qpos), "open")
            return Status.RUNNING
        x, y, yaw, height = tools.base_index
        if self.q_target is None:
            self.reference.start(obs, None, self.bb.tick)
            self.q_target = obs.qpos.copy()
            heading = np.array([math.cos(obs.qpos[yaw]), math.sin(obs.qpos[yaw])])
            self.q_target[[x, y]] -= self.back_m * heading
            self.q_target[height] = min(self.q_target[height] + self.raise_m, tools.model.joint_limits[height][1])
        qvel, arrived = self.reference.advance(self.q_target, obs)
        self.bb.reference = self.reference.handover(self.bb.tick)
        if arrived:
            return Status.SUCCESS
        self.send(qvel, "open")
        return Status.RUNNING
