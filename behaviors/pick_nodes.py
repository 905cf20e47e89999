"""Nodes of the pick-and-place trees (bundled PickCube and PickObject, ManiSkill3 PickCube-v1 and StackCube-v1).

An arm bolted to a table: the arm's IK (Drake) and motion planner (mplib) work in the robot's root frame B
(its URDF root, at ``Observation.X_WB`` in the world W); the nodes keep poses in the world (what
:class:`~behaviors.common.MoveToConfiguration` compares the tool centre with) and convert at the planners'
door (:func:`ik_pose`, :func:`points_in_planner_frame`). A robot with base joints plans in the world.

Blackboard keys (in the solver's namespace), besides those of ``TreeSolver``:
    target            TabletopObject: the object to pick, from its latest points (frozen while it is held)
    place             TabletopObject: the object to place it on (StackCube), or None
    support_z         height (m) of the table under the target, or None
    target_at_grasp   TabletopObject: the target as seen when its grasp was planned
    arm_plan          handleit.planning.motion_planning.Plan: the collision-free path to the pregrasp
    goal_W            [3] where the object's centre must go (world, m)
    q_lift, X_WG_lift / q_via, X_WG_via / q_goal, X_WG_goal / q_retreat, X_WG_retreat: the carry's targets
    failed_grasps     [(X_WG, object centre)] grasps that failed, not retried while the object stays put
"""

from __future__ import annotations

import math
import time

import numpy as np
from py_trees.common import Status

from handleit.perception.grasp_refinement import closing_shift_m, recenter_grasp
from handleit.perception.handle_grasps import flipped_grasp_pose, pregrasp_pose
from handleit.perception.point_cloud import voxel_downsample
from handleit.perception.tabletop_objects import (
    TabletopObject,
    estimate_support_height,
    estimate_tabletop_object,
    top_down_grasps,
)
from handleit.poses import rotation_of_yaw
from handleit.types import Observation, RobotModel

from .background import BackgroundPlanning
from .common import (
    WRIST_ROLL_STARTS_RAD,
    JointReference,
    Skill,
    Tools,
    wrist_roll_starts,
)
from .planners import arm_motion_planner

MIN_TARGET_POINTS = 5  # fewer points of the target than this: not seen (ManiSkill3's cube shows ~26)
PREGRASP_DISTANCE_M = 0.05  # back-off along the approach: the grasp sampler checks this much of the hand's path
MAX_GRASP_CANDIDATES = 12  # grasps tried (IK, then mplib) per plan, best ranked first
SCORE_TIE = 0.01  # grasps scored this close to the best (a tie) are taken quickest first
PLANNING_BUDGET_S = 4.0  # wall time for one plan's candidates (IK + RRT); planning costs no control steps
RRT_TIME_S = 0.5  # RRTConnect time limit per candidate (s)
OBSTACLE_VOXEL_M = 0.01  # point-cloud resolution for mplib (its octree voxel is 1 cm too)
TABLE_KEEP_M = -0.01  # obstacle points lower than this in the root frame are dropped (the floor), the table kept
# The planned path's timing: this fraction of the velocity limits, reached in PATH_RAMP_S (acceleration limit
# = speed / ramp): the tracking needs headroom above the planned speed.
PATH_SPEED_FRACTION = 0.85
PATH_RAMP_S = 0.15
LIFT_M = 0.05  # straight up after the grasp before moving to the goal: the object leaves the table cleanly
PLACE_ABOVE_M = 0.03  # the via point above a placing goal, from which the object is lowered straight down
PLACE_CLEARANCE_M = 0.002  # the held object's bottom stops this far above the place target's top, then drops
RETREAT_M = 0.06  # after releasing, the hand rises this far straight up
BACK_OFF_M = 0.08  # after a failed attempt the open hand rises this far before the scene is observed again
# A failed grasp is not tried again while the object's centre stays within this of where it was (m, rad).
SAME_GRASP_M, SAME_GRASP_RAD = 0.01, 0.3
SAME_PLACE_M = 0.01
# "object in gripper?" (behaviors/object_in_gripper.py): the target's points off where the hand held them for
# this many steps in a row, it is lost.
HELD_DRIFT_STEPS = 3
# Goal orientations tried for the carry: the grasp's, then turned about the vertical through the object.
CARRY_YAWS_RAD = (0.0, math.pi / 4, -math.pi / 4, math.pi / 2, -math.pi / 2, 3 * math.pi / 4, -3 * math.pi / 4, math.pi)
# Extra IK starts of the pick trees: the wrist rolled a quarter turn either way, as they were tuned, without the
# handle trees' half turn (each grasp's half-turn twin is a goal of its own in _reach, and one more start would
# cost one more IK solve for every grasp the arm cannot reach).
PICK_WRIST_ROLLS_RAD = WRIST_ROLL_STARTS_RAD[:2]


# ----------------------------------------------------------------------------------------------------
# Frames and tools
# ----------------------------------------------------------------------------------------------------
def planner_frame(obs: Observation, model: RobotModel) -> np.ndarray:
    """``X_WP``: the frame the IK and mplib work in: the robot's root (``X_WB``) for an arm without base
    joints (its URDF root is their world), else the world."""
    return obs.X_WB if not model.base_joint_names else np.eye(4)


def ik_pose(obs: Observation, model: RobotModel, X_WG: np.ndarray) -> np.ndarray:
    """``X_PG``: a world pose in the planners' frame."""
    return np.linalg.inv(planner_frame(obs, model)) @ X_WG


def ik_goal_in_planner_frame(model: RobotModel, obs: Observation, X_WG: np.ndarray) -> np.ndarray:
    """:func:`ik_pose` with the model first: ``functools.partial(ik_goal_in_planner_frame, model)`` is a node's
    ``ik_goal`` that pickles (a lambda does not: the planning worker process gets a copy of the node)."""
    return ik_pose(obs, model, X_WG)


def points_in_planner_frame(obs: Observation, model: RobotModel, p_W: np.ndarray) -> np.ndarray:
    X_WP = planner_frame(obs, model)
    return (np.asarray(p_W, dtype=np.float64) - X_WP[:3, 3]) @ X_WP[:3, :3]


def pick_motion_planner(model: RobotModel, side: str):
    """The mplib planner of ``side``'s arm for table-top picking (cached per robot): the table's points kept
    as obstacles, paths timed at :data:`PATH_SPEED_FRACTION` of the velocity limits."""
    speed = PATH_SPEED_FRACTION * np.where(model.velocity_limits > 0, model.velocity_limits, 1.0)
    return arm_motion_planner(model, side, joint_vel_limits=speed, joint_acc_limits=speed / PATH_RAMP_S,
                              ignore_below_z_m=TABLE_KEEP_M, time_step_s=0.05)


def seconds_to_steps(tools: Tools, seconds: float) -> int:
    """Control steps in ``seconds`` of the robot's control period (100 Hz bundled, 20 Hz ManiSkill3)."""
    return max(1, math.ceil(seconds / tools.model.control_dt_s))


def _solve(tools: Tools, obs: Observation, q_start: np.ndarray, X_WG: np.ndarray, **kwargs):
    """IK (arm alone for a fixed robot) for the tool centre at the world pose ``X_WG``, near ``q_start``."""
    return tools.ik.solve(q_start, {tools.side: ik_pose(obs, tools.model, X_WG)}, **kwargs)


def _joint_distance(tools: Tools, q_a: np.ndarray, q_b: np.ndarray) -> float:
    return float(np.max(np.abs((q_a - q_b)[tools.controlled])))


def _time_to_reach_s(tools: Tools, q_from: np.ndarray, q_to: np.ndarray) -> float:
    """Seconds the slowest joint needs at its velocity limit (ramps left out)."""
    dq = np.abs(q_to - q_from)[tools.controlled]
    return float(np.max(dq / np.maximum(tools.model.velocity_limits[tools.controlled], 1e-9)))


def _up(X_WG: np.ndarray, dz_m: float) -> np.ndarray:
    X = X_WG.copy()
    X[2, 3] += dz_m
    return X


def _scene_mask(obs: Observation) -> np.ndarray:
    """Points that are neither the robot nor a labelled object (the table and what else is there)."""
    mask = ~obs.masks["robot"]
    for name in ("target", "target_link", "place_target", "objects"):
        if name in obs.masks:
            mask &= ~obs.masks[name]
    return mask


# ----------------------------------------------------------------------------------------------------
# Perception
# ----------------------------------------------------------------------------------------------------
class ObserveObjects(Skill):
    """Every tick: the target's centre, top and footprint from its masked points (and the place target's,
    where the task has one), and the height of the table under it; frozen while the target is held (the
    hand hides and moves it). Always SUCCESS."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "grasped"), writes=("target", "place", "support_z"))

    def update(self):
        obs: Observation = self.bb.observation
        target = obs.points[obs.masks["target"]]
        if not self.bb.grasped and len(target) >= MIN_TARGET_POINTS:
            support = estimate_support_height(obs.points[_scene_mask(obs)], target)
            if support is not None:
                self.bb.support_z = support
            self.bb.target = estimate_tabletop_object(target, self.bb.support_z)
        place = obs.points[obs.masks["place_target"]] if "place_target" in obs.masks else np.zeros((0, 3))
        if len(place) >= MIN_TARGET_POINTS and not self.bb.grasped:
            self.bb.place = estimate_tabletop_object(place, self.bb.support_z)
        t: TabletopObject | None = self.bb.target
        self.feedback_message = (f"{len(target)} target points" +
                                 ("" if t is None else f", centre {np.round(t.center_W, 3)}"))
        return Status.SUCCESS


class WaitForTarget(Skill):
    """Hold still, RUNNING until the target is seen (at least :data:`MIN_TARGET_POINTS` points now)."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation",), writes=("command",))

    def initialise(self):
        self.q_hold = None

    def update(self):
        obs: Observation = self.bb.observation
        n = int(np.count_nonzero(obs.masks["target"]))
        self.feedback_message = f"{n} target points"
        if n >= MIN_TARGET_POINTS:
            return Status.SUCCESS
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        self.send(self.tools.pid.step(self.q_hold, obs.qpos), "open")
        return Status.RUNNING


# ----------------------------------------------------------------------------------------------------
# Grasp planning (ManiSkill2 (arXiv 2302.04659) Sec. 5.1: ranked grasps, the first that the motion planner reaches)
# ----------------------------------------------------------------------------------------------------
class PlanPick(BackgroundPlanning, Skill):
    """Predict grasps on the target's points (the tree's grasp predictor, ranked), then take them in rank
    order until one has IK solutions for its pregrasp and grasp poses and mplib finds a collision-free arm
    path to the pregrasp, the observed scene (robot points removed, the target included) as obstacles.

    ``footprint=True``: the candidates are instead the top-down grasps across the target's footprint
    rectangle (:func:`~handleit.perception.tabletop_objects.top_down_grasps`), the fallback for when the
    predictor finds none (sparse or oddly turned views).

    Writes the grasp, its poses and joint targets, the path (``arm_plan``) and the target as seen now.
    FAILURE ("no plan") when no candidate passes, saying how many failed where. In real time
    (``tools.realtime``) off the tick thread, the robot held still meanwhile (behaviors/background.py)."""

    def __init__(self, name, tools, max_candidates: int = MAX_GRASP_CANDIDATES, footprint: bool = False):
        super().__init__(name, tools, reads=("observation", "target", "support_z", "attempt", "failed_grasps"),
                         writes=("grasp", "X_WG_pregrasp", "X_WG_grasp", "q_pregrasp", "q_grasp", "arm_plan",
                                 "target_at_grasp"))
        self.max_candidates, self.footprint = max_candidates, footprint

    def warm_up_planners(self) -> None:
        """The table-top mplib planner (seconds of parsing), built before the clock runs (real time)."""
        pick_motion_planner(self.tools.model, self.tools.side)

    def snapshot(self) -> dict:
        return {"observation": self.bb.observation, "target": self.bb.target, "support_z": self.bb.support_z,
                "attempt": int(self.bb.attempt), "failed_grasps": list(self.bb.failed_grasps)}

    def plan(self, snap: dict) -> tuple[str, object]:
        """("fail", why) or ("plan", (grasp, X_WG, X_WP, q_pre, q_grasp, path, target, why)); no blackboard."""
        obs: Observation = snap["observation"]
        tools, target = self.tools, snap["target"]
        start = time.perf_counter()
        if self.footprint:
            grasps = [] if target is None else top_down_grasps(target, tools.model.gripper_max_opening_m)
        else:
            grasps = tools.grasp_predictor.predict(obs.points, obs.masks, table_z=snap["support_z"],
                                                   seed=snap["attempt"])
        target_points = obs.points[obs.masks["target"]]
        grasps = [recenter_grasp(g, target_points) for g in grasps[: self.max_candidates]]
        grasps = [g for g in grasps if not _failed_before(snap["failed_grasps"], g.X_WG, target)]
        if not grasps:
            return "fail", "no plan: no grasp fits the target's points"
        planner = pick_motion_planner(tools.model, tools.side)
        obstacles_W = voxel_downsample(obs.points[~obs.masks["robot"]], OBSTACLE_VOXEL_M)
        obstacles_P = points_in_planner_frame(obs, tools.model, obstacles_W)
        counts = {"IK": 0, "path": 0}
        last = ""
        for grasp, solution in self._reachable_in_order(obs, grasps):
            if counts["IK"] + counts["path"] and time.perf_counter() - start > PLANNING_BUDGET_S:
                break  # one candidate at least, however slow the machine
            if isinstance(solution, str):
                counts["IK"] += 1
                last = solution
                continue
            X_WG, X_WP, q_pre, q_grasp = solution
            plan = planner.plan_to_configuration(obs.qpos, q_pre, obstacles_P, planning_time_s=RRT_TIME_S,
                                                 seed=snap["attempt"] + 1)
            if not plan.success:
                counts["path"] += 1
                last = plan.message
                continue
            why = (f"grasp {grasp.width_m * 100:.1f} cm wide at {np.round(X_WG[:3, 3], 3)}, "
                   f"path {plan.duration_s:.2f} s ({time.perf_counter() - start:.1f} s to plan)")
            return "plan", (grasp, X_WG, X_WP, q_pre, q_grasp, plan, target, why)
        tried = counts["IK"] + counts["path"]
        return "fail", (f"no plan: {tried} of {len(grasps)} grasps tried, {counts['IK']} without IK, "
                        f"{counts['path']} without a collision-free path ({last})")

    def apply(self, result: tuple[str, object]) -> Status:
        kind, value = result
        if kind == "fail":
            return self.fail(value)
        grasp, X_WG, X_WP, q_pre, q_grasp, plan, target, why = value
        self.bb.grasp, self.bb.X_WG_grasp, self.bb.X_WG_pregrasp = grasp, X_WG, X_WP
        self.bb.q_pregrasp, self.bb.q_grasp, self.bb.arm_plan = q_pre, q_grasp, plan
        self.bb.target_at_grasp = target
        self.feedback_message = why
        return Status.SUCCESS

    def _reachable_in_order(self, obs: Observation, grasps: list):
        """(grasp, IK solution or why not) in rank order, except that the grasps scored within
        :data:`SCORE_TIE` of the best come first ordered by the time the arm needs to reach them (a cube's
        two face pairs score alike; one may need a quarter turn less of the wrist)."""
        best = grasps[0].score
        tied = [g for g in grasps if g.score >= best - SCORE_TIE]
        solved = [(g, self._reach(obs, g.X_WG)) for g in tied]
        reachable = sorted((item for item in solved if not isinstance(item[1], str)),
                           key=lambda item: _time_to_reach_s(self.tools, obs.qpos, item[1][2]))
        yield from reachable
        yield from (item for item in solved if isinstance(item[1], str))
        for g in grasps[len(tied):]:
            yield g, self._reach(obs, g.X_WG)

    def _reach(self, obs: Observation, X_WG_predicted: np.ndarray):
        """(X_WG, X_WG_pregrasp, q_pregrasp, q_grasp) for the grasp or its half-turn twin, whichever the arm
        reaches with less joint motion; a message when neither has IK solutions."""
        tools = self.tools
        best, why = None, "IK failed"
        for X_WG in (X_WG_predicted, flipped_grasp_pose(X_WG_predicted)):
            X_WP = pregrasp_pose(X_WG, PREGRASP_DISTANCE_M)
            starts = wrist_roll_starts(tools, obs.qpos, PICK_WRIST_ROLLS_RAD)
            pre = _solve(tools, obs, obs.qpos, X_WP, initial_guesses=starts)
            if not pre.success:
                why = f"pregrasp: {pre.message}"
                continue
            final = _solve(tools, obs, pre.q, X_WG)
            if not final.success:
                why = f"grasp: {final.message}"
                continue
            cost = _joint_distance(tools, pre.q, obs.qpos)
            if best is None or cost < best[0]:
                best = (cost, (X_WG, X_WP, pre.q, final.q))
        return why if best is None else best[1]


def _failed_before(failed_grasps, X_WG: np.ndarray, target: TabletopObject | None) -> bool:
    """The grasp is one that failed before on the target where it stands now (``failed_grasps``: the
    blackboard's (X_WG, target centre) pairs)."""
    for X_failed, centre in failed_grasps:
        if target is None or np.linalg.norm(target.center_W - centre) > SAME_PLACE_M:
            continue
        near = np.linalg.norm(X_failed[:3, 3] - X_WG[:3, 3]) < SAME_GRASP_M
        same_approach = X_failed[:3, 2] @ X_WG[:3, 2] > math.cos(SAME_GRASP_RAD)
        same_closing = abs(X_failed[:3, 1] @ X_WG[:3, 1]) > math.cos(SAME_GRASP_RAD)
        if near and same_approach and same_closing:
            return True
    return False


class FollowPlan(Skill):
    """Track the time-parameterized path under ``arm_plan``: the reference is the path at the elapsed time
    (its velocity fed forward), so the arm moves as the planner timed it. SUCCESS once the path has ended
    and every joint is within ``tolerance_rad`` of its end."""

    def __init__(self, name, tools, tolerance_rad: float = 0.03):
        super().__init__(name, tools, reads=("observation", "tick", "arm_plan"), writes=("command", "reference"))
        self.tolerance_rad = tolerance_rad

    def initialise(self):
        self.t = 0.0

    def update(self):
        obs: Observation = self.bb.observation
        plan, tools = self.bb.arm_plan, self.tools
        dt = tools.model.control_dt_s
        q_end = plan.q_path[-1]
        error = _joint_distance(tools, q_end, obs.qpos)
        self.feedback_message = f"{min(self.t, plan.duration_s):.2f} / {plan.duration_s:.2f} s, {error:.3f} rad from the end"
        if self.t >= plan.duration_s and error < self.tolerance_rad:
            return Status.SUCCESS
        q_ref = _interpolate(plan, self.t)
        self.t += dt
        ff = (_interpolate(plan, self.t) - q_ref) / dt
        ff[~np.isin(np.arange(len(ff)), tools.controlled)] = 0.0
        self.send(tools.tracking_pid.step(q_ref, obs.qpos) + ff, "open")
        # The next move continues from this reference, ramping up from rest (see JointReference).
        self.bb.reference = (self.bb.tick, q_ref, ff, 0.0)
        return Status.RUNNING


def _interpolate(plan, t: float) -> np.ndarray:
    times = plan.times_s
    if t >= times[-1]:
        return plan.q_path[-1].copy()
    k = int(np.searchsorted(times, t, side="right")) - 1
    s = (t - times[k]) / max(times[k + 1] - times[k], 1e-9)
    return plan.q_path[k] + s * (plan.q_path[k + 1] - plan.q_path[k])


# ----------------------------------------------------------------------------------------------------
# Goals and the carry
# ----------------------------------------------------------------------------------------------------
class GoalFromTask(Skill):
    """The object's goal position as the task gives it (``Observation.goal_W``); FAILURE when it gives none."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation",), writes=("goal_W",))

    def update(self):
        goal = self.bb.observation.goal_W
        if goal is None:
            return self.fail("the task gives no goal position")
        self.bb.goal_W = np.asarray(goal, dtype=np.float64)
        self.feedback_message = f"goal {np.round(self.bb.goal_W, 3)}"
        return Status.SUCCESS


class GoalOnPlaceTarget(Skill):
    """The held object's goal on top of the place target (StackCube): above the place target's footprint
    centre, its bottom :data:`PLACE_CLEARANCE_M` above the place target's top. FAILURE when the place target
    was not seen."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("place", "target_at_grasp"), writes=("goal_W",))

    def update(self):
        place: TabletopObject | None = self.bb.place
        held: TabletopObject = self.bb.target_at_grasp
        if place is None:
            return self.fail("the place target was not seen")
        goal = place.center_W.copy()
        goal[2] = place.top_z + 0.5 * held.height_m + PLACE_CLEARANCE_M
        self.bb.goal_W = goal
        self.feedback_message = f"goal {np.round(goal, 3)} on the place target"
        return Status.SUCCESS


class PlanCarry(Skill):
    """Joint targets for the carry, by IK, each from the previous one: straight up by the lift height, (when
    placing) a via point :data:`PLACE_ABOVE_M` above the goal, the goal, (when placing) the retreat above it.

    The tool centre's goal keeps the object where the hand holds it: ``goal + (tool centre - object centre)``
    at grasp time, the object's centre estimated before the grasp and moved along the closing axis as the
    closing moves it (:func:`closing_shift_m`: the clamped part ends centred between the fingers; an
    L-shape's centre is not on that part). The grasp's orientation is kept, or turned about
    the vertical (:data:`CARRY_YAWS_RAD`) when the arm cannot reach the goal with it. FAILURE: no IK."""

    def __init__(self, name, tools, place: bool = False):
        super().__init__(name, tools, reads=("observation", "goal_W", "target_at_grasp", "place"),
                         writes=("q_lift", "X_WG_lift", "q_via", "X_WG_via", "q_goal", "X_WG_goal", "q_retreat",
                                 "X_WG_retreat"))
        self.place = place

    def update(self):
        obs: Observation = self.bb.observation
        tools = self.tools
        X_WT = obs.X_WT[tools.side]
        held: TabletopObject = self.bb.target_at_grasp
        # The object's centre in the hand: where it was, moved along the closing axis by the closing.
        centre_T = X_WT[:3, :3].T @ (held.center_W - X_WT[:3, 3])
        centre_T[1] += closing_shift_m(X_WT, held.points_W)
        offset_T = -centre_T
        lift_m = LIFT_M
        if self.place and self.bb.place is not None:  # the held object's bottom clears the place target
            lift_m = max(lift_m, self.bb.place.top_z + PLACE_ABOVE_M - held.support_z)
        X_lift = _up(X_WT, lift_m)
        lift = _solve(tools, obs, obs.qpos, X_lift)
        if not lift.success:
            return self.fail(f"no IK to lift: {lift.message}")
        goal_W = self.bb.goal_W
        why = ""
        for yaw in CARRY_YAWS_RAD:
            Rz = rotation_of_yaw(yaw)
            X_goal = np.eye(4)
            X_goal[:3, :3] = Rz @ X_WT[:3, :3]
            X_goal[:3, 3] = goal_W + X_goal[:3, :3] @ offset_T
            targets = [("via", _up(X_goal, PLACE_ABOVE_M))] if self.place else []
            targets += [("goal", X_goal)]
            targets += [("retreat", _up(X_goal, RETREAT_M))] if self.place else []
            q, solved = lift.q, {}
            for key, X in targets:
                result = _solve(tools, obs, q, X)
                if not result.success:
                    why = f"{key}: {result.message}"
                    break
                q = result.q
                solved[key] = (q, X)
            if len(solved) == len(targets):
                self.bb.q_lift, self.bb.X_WG_lift = lift.q, X_lift
                for key, (q, X) in solved.items():
                    self.bb.set(f"q_{key}", q)
                    self.bb.set(f"X_WG_{key}", X)
                if not self.place:  # no via point: the via move is the goal move
                    self.bb.q_via, self.bb.X_WG_via = solved["goal"]
                self.feedback_message = f"tool centre to {np.round(X_goal[:3, 3], 3)} (turned {math.degrees(yaw):.0f} deg)"
                return Status.SUCCESS
        return self.fail(f"no IK for the goal at {np.round(goal_W, 3)} ({why})")


# ----------------------------------------------------------------------------------------------------
# Recovery
# ----------------------------------------------------------------------------------------------------
class Recover(Skill):
    """Before a new attempt: count it, remember the grasp that failed (not retried while the object stays
    put), let go of the object, open the gripper and raise the hand :data:`BACK_OFF_M` so that the scene is
    observed again unobstructed. At once (SUCCESS) on the first attempt."""

    def __init__(self, name, tools, open_s: float = 0.15, timeout_s: float = 1.5):
        super().__init__(name, tools, reads=("observation", "tick", "attempt", "grasp", "X_WG_grasp",
                                             "target_at_grasp", "failed_grasps", "reference"),
                         writes=("command", "attempt", "grasped", "failed_grasps", "reference", "clamped_gap_m"))
        self.open_steps = seconds_to_steps(tools, open_s)
        self.timeout_steps = seconds_to_steps(tools, timeout_s)
        self.reference = JointReference(tools, speed_fraction=0.5)
        self.first = True

    def initialise(self):
        self.ticks, self.q_up, self.X_up = 0, None, None
        self.reference.restart()
        if self.first:
            return
        self.bb.attempt = self.bb.attempt + 1
        if self.bb.X_WG_grasp is not None and self.bb.target_at_grasp is not None:
            self.bb.failed_grasps = [*self.bb.failed_grasps, (self.bb.X_WG_grasp, self.bb.target_at_grasp.center_W)]
        self.bb.grasped = False
        self.bb.clamped_gap_m = None
        obs: Observation = self.bb.observation
        self.X_up = _up(obs.X_WT[self.tools.side], BACK_OFF_M)
        result = _solve(self.tools, obs, obs.qpos, self.X_up)
        self.q_up = result.q if result.success else None
        self.q_hold = obs.qpos.copy()

    def update(self):
        if self.first:
            self.first = False
            return Status.SUCCESS
        obs: Observation = self.bb.observation
        self.ticks += 1
        self.feedback_message = f"attempt {self.bb.attempt + 1}: opening and backing off"
        if self.ticks <= self.open_steps or self.q_up is None:
            if self.ticks > self.open_steps:
                return Status.SUCCESS  # nowhere to back off to: observe from here
            self.send(self.tools.pid.step(self.q_hold, obs.qpos), "open")
            return Status.RUNNING
        qvel, arrived = self.reference.follow(self.q_up, obs, self.bb, continue_handover=False)
        up_error = float(np.linalg.norm(obs.X_WT[self.tools.side][:3, 3] - self.X_up[:3, 3]))
        if (arrived and up_error < 0.02) or self.ticks >= self.timeout_steps:
            return Status.SUCCESS
        self.send(qvel, "open")
        return Status.RUNNING
