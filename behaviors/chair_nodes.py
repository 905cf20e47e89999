"""Nodes of the PushChair tree: chair perception, the two-handed hold on the backrest, pushing the chair's
estimated centre to the target, the nudging loop, and the checks.

Blackboard keys (besides the common ones):
    target_xy_W      [2] where the chair must go (the ManiSkill1 protocol puts it at the world origin)
    chair_center_W   [3] latest chair-centre estimate (Let's Handle It (arXiv 2202.11792) Fig. 10), or None
    backrest         the latest backrest estimate (handleit.perception.chair_center.Backrest), or None
    q_pregrasp / X_WG_pregrasp / q_grasp / X_WG_grasp: the hold's joint targets and tool-centre goals
                     (X_WG_* are dicts side -> 4x4)
    push_offset_W    [3] base move that brings the estimated centre onto the target
    backrest_top_z_m backrest top height when the hold closed (the tipping check's reference)
"""

from __future__ import annotations

import math

import numpy as np
from py_trees.common import Status

from handleit.perception.chair_center import estimate_chair_center
from handleit.types import Observation

from .background import BackgroundPlanning
from .bimanual_nodes import HoldPlanStages, flipped_about_approach, quickest_hold_for_move, reached_goals, shifted_goals
from .common import Skill

MIN_CHAIR_POINTS = 200  # fewer chair points than this give no reliable estimate
PERCEIVE_EVERY_STEPS = 2  # the estimates cost a few ms; the chair barely moves in 20 ms
PRESHAPE_MARGIN_M = 0.03  # fingers opened this much wider than the backrest on the way down
HOLD_DEPTH_M = 0.02  # finger pads centred this far below the backrest's top edge (pads span +-9 mm)
HOLD_INSET_M = 0.07  # grippers this far in from the backrest's side edges
# Each gripper may turn about its closing axis (across the panel) this far from pointing straight down: the pads
# still lie flat on both faces (their upper corners stay ~8 mm under the top edge), and the wrists, the slowest
# part of the reach from the sideways rest pose, turn less.
HOLD_TILT_RAD = math.radians(35.0)
MIN_HOLD_SEPARATION_M = 0.2  # two Panda hands side by side need about this much
PREGRASP_HEIGHT_M = 0.15  # above the grasp: the arms swing in from the robot's sides above the backrest
CENTERED_TOLERANCE_M = 0.08  # nudge until the estimate is this close (success needs 0.15 m; the estimate's RMS
# error is ~2 cm, and every nudge sets the chair moving again, while success needs it static)
PUSH_SPEED_FRACTION = 0.9  # of the base's per-axis limits: headroom for the tracking's corrections at full speed
PUSH_STOP_SHORT_M = 0.07  # the push ends this far before the target: 8 cm inside the success radius, 4x the
# centre estimate's RMS error (docs/benchmarks.md), and ~7 steps sooner at the base's 1 m/s
MAX_NUDGE_M = 0.35  # a nudge moves the base at most this far (a wild estimate must not fling the chair)
TIPPING_DROP_M = 0.06  # the backrest top moving this far up or down means the chair is tipping
# The robot's base (its torso box reaches 0.15 m ahead of the base origin) stays out of a disc this wide around
# the estimated chair centre: the star base and its casters reach ~0.37 m out, and a nudge rolls the chair.
CHAIR_KEEP_OUT_M = 0.55
# IK cost weights tried for the hold (the quickest solution to reach wins): the torso is the slowest joint
# (0.5 m/s), and a heavy weight on it finds the reach with the arms alone where there is one.
HOLD_IK_WEIGHTS = ({"base_height": 20.0}, {"base_height": 400.0})


class PerceiveChair(Skill):
    """Every other tick: the chair's points (target mask, minus the robot) -> centre and backrest estimates.
    Always SUCCESS (estimates stay None until enough of the chair is seen).

    The centre is the swivel axis, from the casters' circle or the gas-lift column when they are seen. Close
    behind the chair, holding its backrest, the robot often hides them and only the seat part of the paper's
    box is left, up to 20 cm off (chair-test-008). While held, the chair moves with the hands: the centre is
    kept in a frame H on the hands (:func:`hands_frame`) from the last view of the casters or column, and a view
    without them puts it where H has carried it."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "tick", "holding", "center_in_hands_H"),
                         writes=("chair_center_W", "backrest", "center_in_hands_H", "last_sure_center_W"))

    def update(self):
        obs: Observation = self.bb.observation
        if self.bb.tick % PERCEIVE_EVERY_STEPS:
            return Status.SUCCESS
        points = obs.points[obs.masks["target_link"] & ~obs.masks["robot"]]
        if len(points) < MIN_CHAIR_POINTS:
            self.feedback_message = f"only {len(points)} chair points"
            return Status.SUCCESS
        try:
            chair = estimate_chair_center(points)
        except ValueError as e:  # too few upper-body points this step: keep the last estimates
            self.feedback_message = f"no estimate: {e}"
            return Status.SUCCESS
        self.bb.backrest = chair.backrest
        # The swivel axis (what the task measures): casters' circle, else column, else the seat part of the
        # paper's upper-body box (benchmarks/perception_accuracy.py compares them).
        center = np.asarray(chair.swivel_center_W, dtype=float)
        sure = chair.swivel_source in ("base", "column")
        if sure:
            self.bb.last_sure_center_W = center
            if self.bb.holding:
                self.bb.center_in_hands_H = in_hands_frame(obs, center)
        elif self.bb.holding and self.bb.center_in_hands_H is not None:
            center = (hands_frame(obs) @ np.append(self.bb.center_in_hands_H, 1.0))[:3]
        self.bb.chair_center_W = center
        source = chair.swivel_source if sure or not self.bb.holding else "hands"
        self.feedback_message = f"{len(points)} points, centre ({center[0]:.2f}, {center[1]:.2f}) from the {source}"
        return Status.SUCCESS


def hands_frame(obs: Observation) -> np.ndarray:
    """4x4 frame H on both tool centres: origin at their midpoint, x from the right hand to the left one in the
    floor plane, z up. A chair held by its backrest moves with it."""
    left, right = obs.X_WT["left"][:3, 3], obs.X_WT["right"][:3, 3]
    x = np.array([left[0] - right[0], left[1] - right[1], 0.0])
    x /= max(float(np.linalg.norm(x)), 1e-9)
    z = np.array([0.0, 0.0, 1.0])
    X = np.eye(4)
    X[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
    X[:3, 3] = 0.5 * (left + right)
    return X


def in_hands_frame(obs: Observation, p_W) -> np.ndarray:
    """The point ``p_W`` (world, m) in the hands' frame H (:func:`hands_frame`)."""
    return np.linalg.solve(hands_frame(obs), np.append(np.asarray(p_W, dtype=float), 1.0))[:3]


def backrest_hold_poses(backrest, X_WB: np.ndarray) -> dict[str, np.ndarray]:
    """Tool-centre goals (side -> X_WG) that pinch the backrest's top edge with both grippers: pointing down,
    closing across the panel, one on each half, the left gripper on the robot's left."""
    w = np.array([*backrest.width_axis_W[:2], 0.0])
    w /= np.linalg.norm(w)
    n = np.array([*backrest.normal_W[:2], 0.0])
    n /= np.linalg.norm(n)
    half = max(0.5 * backrest.width_m - HOLD_INSET_M, 0.5 * MIN_HOLD_SEPARATION_M)
    center = np.array([backrest.top_center_W[0], backrest.top_center_W[1], backrest.top_height_m - HOLD_DEPTH_M])
    left_W = X_WB[:3, 1]
    a, b = center + half * w, center - half * w
    points = {"left": a, "right": b} if (a - b) @ left_W > 0 else {"left": b, "right": a}
    z = np.array([0.0, 0.0, -1.0])
    R = np.stack([np.cross(n, z), n, z], axis=1)
    goals = {}
    for side, p in points.items():
        X = np.eye(4)
        X[:3, :3], X[:3, 3] = R, p
        goals[side] = X
    return goals


class PlanBackrestHold(HoldPlanStages, BackgroundPlanning, Skill):
    """Plan the hold: both tool-centre goals on the backrest's top edge, and one whole-body IK solve for the
    grasp and one for the pregrasp above it (two goals at once, Let's Handle It Sec. 2.4), the base kept out of
    the chair's footprint. ``refine``: only the grasp again, from a fresh estimate, once above the backrest
    (the chair may have rolled a little). FAILURE (IK failed, or no backrest seen) leads to recovery. In real
    time (``tools.realtime``) off the tick thread, the robot held still meanwhile (behaviors/background.py), or, with
    ``stage`` "provisional" and "search", on a quick plan while the full search runs (:class:`HoldPlanStages`;
    ``provisional_search``: which candidates the quick plan tries, :func:`quickest_hold_for_move`)."""

    def __init__(self, name, tools, refine: bool = False, stage: str = "full",
                 provisional_search: str = "nearest heading"):
        super().__init__(name, tools,
                         reads=("observation", "backrest", "chair_center_W", "X_WG_grasp", "target_xy_W"),
                         writes=("q_pregrasp", "X_WG_pregrasp", "q_grasp", "X_WG_grasp", "preshape_opening_m"))
        self.refine = refine
        self.set_stage(stage, provisional_search)

    def snapshot(self) -> dict:
        center, previous = self.bb.chair_center_W, self.bb.X_WG_grasp
        return {"observation": self.bb.observation, "backrest": self.bb.backrest,
                "chair_center_W": None if center is None else np.array(center),
                "X_WG_grasp": None if previous is None else {s: np.array(X) for s, X in previous.items()},
                "target_xy_W": np.array(self.bb.target_xy_W, dtype=float), "provisional": self.provisional_argument()}

    def plan(self, snap: dict) -> tuple[str, object]:
        """("fail", why), ("refined", (q_grasp, goals, why)) or ("hold", (backrest, q_grasp, goals, q_pregrasp,
        pregrasp goals, summary, push)); no blackboard."""
        obs: Observation = snap["observation"]
        backrest, center = snap["backrest"], snap["chair_center_W"]
        if backrest is None:
            return "fail", "no backrest estimate"
        keep_out = None if center is None else (center[:2], CHAIR_KEEP_OUT_M)
        options = flipped_about_approach(backrest_hold_poses(backrest, obs.X_WB))
        if self.refine:  # keep the finger orientation each gripper is already turned to
            previous = snap["X_WG_grasp"]
            options = [g for g in options if previous is None
                       or all(g[s][:3, 1] @ previous[s][:3, 1] > 0 for s in g)][:1]
            # The arms alone first: a base that moves while the fingers go down around the panel sweeps them
            # sideways across it.
            planar = self.tools.model.base_joint_names[:3]
            for fixed in (planar, ()):
                grasp = self.tools.ik.solve(obs.qpos, options[0], weights=HOLD_IK_WEIGHTS[0], base_keep_out=keep_out,
                                            closing_axis_tilt_rad=HOLD_TILT_RAD, fixed_joints=fixed)
                if grasp.success:
                    break
            if not grasp.success:
                return "fail", f"IK failed: {grasp.message}"
            return "refined", (grasp.q, reached_goals(self.tools, grasp.q, options[0]),
                               f"grasp refined, top {backrest.top_height_m:.2f} m")
        push = None if center is None else snap["target_xy_W"] - center[:2]
        try:
            (grasp, pre, goals, above), summary = quickest_hold_for_move(
                self.tools, obs, lambda heading: options, lambda g: shifted_goals(g, [0.0, 0.0, PREGRASP_HEIGHT_M]),
                HOLD_IK_WEIGHTS, push, base_keep_out=keep_out, tilt_rad=HOLD_TILT_RAD,
                provisional=snap.get("provisional"))
        except RuntimeError as e:
            return "fail", f"IK failed: {e}"
        return "hold", (backrest, grasp.q, goals, pre.q, above, summary, push)

    def apply_plan(self, kind: str, value) -> Status:
        if kind == "refined":
            self.bb.q_grasp, self.bb.X_WG_grasp, self.feedback_message = value
            return Status.SUCCESS
        backrest, q_grasp, goals, q_pregrasp, above, summary, _ = value
        self.write_hold(q_grasp, goals, q_pregrasp, above)
        self.bb.preshape_opening_m = min(backrest.thickness_m + PRESHAPE_MARGIN_M,
                                         self.tools.model.gripper_max_opening_m)
        self.feedback_message = (f"{'provisional ' if self.provisional_plan else ''}hold planned, top "
                                 f"{backrest.top_height_m:.2f} m; heading to the push and time to reach and push: "
                                 f"{summary}")
        return Status.SUCCESS


class PlanPush(Skill):
    """The base move that carries the estimated chair centre onto the target (Let's Handle It: "moves the base
    such that the chair center is at the world center"); remembers the backrest height for the tipping check.
    ``stop_short_m``: end the move this much before the target (inside the success radius: the push is the
    longest move of the episode, and the nudges correct the rest). FAILURE without a centre estimate."""

    def __init__(self, name, tools, max_offset_m: float = math.inf, stop_short_m: float = 0.0):
        super().__init__(name, tools, reads=("observation", "chair_center_W", "target_xy_W", "backrest",
                                             "last_sure_center_W", "holding", "center_in_hands_H"),
                         writes=("push_offset_W", "backrest_top_z_m", "holding", "center_in_hands_H",
                                 "chair_center_W"))
        self.max_offset_m, self.stop_short_m = max_offset_m, stop_short_m

    def update(self):
        if not self.bb.holding:
            # The hold has just closed: from now on the chair moves with the hands. Its centre in their frame
            # comes from the last view of its casters or column (the chair stands still until it is held),
            # else from the current estimate.
            self.bb.holding = True
            center = self.bb.last_sure_center_W if self.bb.last_sure_center_W is not None else self.bb.chair_center_W
            if center is not None:
                self.bb.center_in_hands_H = in_hands_frame(self.bb.observation, center)
                self.bb.chair_center_W = np.asarray(center, dtype=float)
        center = self.bb.chair_center_W
        if center is None:
            return self.fail("no chair centre estimate")
        offset = np.asarray(self.bb.target_xy_W, dtype=float) - center[:2]
        distance = float(np.linalg.norm(offset))
        if distance > self.max_offset_m:
            offset *= self.max_offset_m / distance
        elif distance > 0.0:
            offset *= max(distance - self.stop_short_m, 0.0) / distance
        self.bb.push_offset_W = np.array([offset[0], offset[1], 0.0])
        if self.bb.backrest_top_z_m is None and self.bb.backrest is not None:
            self.bb.backrest_top_z_m = float(self.bb.backrest.top_height_m)
        self.feedback_message = f"centre {100 * distance:.1f} cm from the target"
        return Status.SUCCESS


class ChairCentered(Skill):
    """Check: the estimated chair centre is within ``tolerance_m`` of the target. Averaged over the last
    ``window`` estimates, so that one noisy view does not decide."""

    def __init__(self, name, tools, tolerance_m: float = CENTERED_TOLERANCE_M, window: int = 3):
        super().__init__(name, tools, reads=("chair_center_W", "target_xy_W"))
        self.tolerance_m, self.window = tolerance_m, window
        self.history: list[np.ndarray] = []

    def initialise(self):
        self.history = []

    def update(self):
        center = self.bb.chair_center_W
        if center is None:
            return self.fail("no chair centre estimate")
        self.history.append(center[:2].copy())
        if len(self.history) < self.window:
            return Status.RUNNING
        mean = np.mean(self.history[-self.window:], axis=0)
        distance = float(np.linalg.norm(mean - np.asarray(self.bb.target_xy_W)))
        self.feedback_message = f"centre {100 * distance:.1f} cm from the target"
        return Status.SUCCESS if distance < self.tolerance_m else Status.FAILURE


class ChairUpright(Skill):
    """Check, while pushing: the backrest top stays at the height it had when the hold closed. RUNNING while
    it does, FAILURE (chair tipping) when it moved more than ``max_change_m``."""

    def __init__(self, name, tools, max_change_m: float = TIPPING_DROP_M):
        super().__init__(name, tools, reads=("backrest", "backrest_top_z_m"))
        self.max_change_m = max_change_m

    def update(self):
        backrest, reference = self.bb.backrest, self.bb.backrest_top_z_m
        if backrest is None or reference is None:
            return Status.RUNNING
        change = float(backrest.top_height_m - reference)
        self.feedback_message = f"backrest top {100 * change:+.1f} cm"
        if abs(change) > self.max_change_m:
            return self.fail(f"chair tipping: backrest top moved {100 * change:+.1f} cm")
        return Status.RUNNING
