"""Nodes of the cabinet trees: perception updates, approach, grasp planning, pulling, and the failure checks.

Blackboard keys (in the solver's namespace):
    observation      Observation, written by the solver before each tick
    command          Command, written by the one action node that runs this tick
    handle           HandleAccumulator: target-handle points merged over steps ("Let's Handle It", arXiv 2202.11792,
                     Sec. 2.3)
    front_normal_W   [3] outward normal of the target part's front (toward the robot), or None
    open_state       OpenStateEstimator of the target part (from its masked points), or None
    attempt          int: grasp attempts started (selects the grasp candidate; recoveries increment it)
    grasped          bool: the gripper holds (or held) the handle: the part may move, stop merging points
    grasp / q_pregrasp / X_WG_pregrasp / q_grasp / X_WG_grasp: the planned grasp and its joint targets
    q_hold           joint configuration a holding skill keeps
"""

from __future__ import annotations

import math

import numpy as np
from py_trees.common import Status

from handleit.perception.depth_denoise import denoise_along_rays, range_noise_m
from handleit.perception.handle_grasps import CLEARANCE_M as GRASP_CLEARANCE_M
from handleit.perception.handle_grasps import FINGERTIP_CLEARANCE_M, flipped_grasp_pose, pregrasp_pose
from handleit.perception.handle_points import HandleAccumulator, estimate_handle_frame
from handleit.perception.open_state import OpenStateEstimator
from handleit.perception.point_cloud import estimate_front_normal, voxel_downsample
from handleit.types import Grasp, Observation

from .background import BackgroundPlanning
from .camera_correction import HAND_OFFSET_MIN_M, camera_offset_at_tool
from .cloud_stall import CloudStallTracker
from .common import (
    FINGER_GAP_EMPTY_M,
    JointReference,
    Skill,
    finger_gap_m,
    largest_arm_turn_rad,
    wrist_roll_starts,
)

FLOOR_CLEARANCE_M = 0.03  # points lower than this are floor
MIN_LINK_POINTS = 30  # fewer target-part points than this give no reliable front plane
APPROACH_STANDOFF_M = 0.9  # base distance from the target while the handle is being found
PREGRASP_DISTANCE_M = 0.15  # back-off along the approach axis before the final straight move
# Fingers spread this much wider than when they clamped, and than the planned opening, have been pried open.
# A plate-like handle turning between the pads spreads them ~17 mm from the clamp (a 16 mm lip, 33 mm)
# while still held: that alone is no failure; a hold that is really lost shows as the gap collapsing or
# the door no longer following the hand.
FINGER_GAP_SPREAD_M = 0.015
FINGER_GAP_OVER_GRASP_M = 0.010
PULL_RAMP_STEPS = 10  # control steps to reach full pulling speed
PAD_WIDTH_M = 0.0175  # Panda finger pad width (x of the gripper frame)
OBSTACLE_VOXEL_M = 0.01  # point-cloud resolution handed to the motion planner (its octree is 1 cm too)
KNOB_ALIGNMENT_M = 0.003  # how far off a knob's centre the pads may close
# Range noise (m) above which grasps are planned on the recent views denoised along their rays (a camera with
# noise of 5 mm at 1 m reads 4-12 mm on a handle 1-2 m away) instead of on the merged points; the simulator's
# clean depth reads 0-1.2 mm (perception.depth_denoise.NOISE_RADIUS_M), and plans as before.
NOISY_RANGE_M = 0.002
MIN_DENOISE_POINTS = 30  # fewer recent handle points than this: plan on the merged points
DENOISED_VOXEL_M = 0.003  # the denoised views are merged on the accumulator's grid
REFINE_MIN_SHIFT_M = 0.002  # a refined grasp closer than this to the planned one is not worth a new IK
REFINE_MAX_TILT_RAD = 0.35  # candidates whose approach differs more from the planned grasp's are not refinements
# A refined grasp's posture leaves the planned one by at most this per arm joint, and its base by at most this.
REFINE_MAX_ARM_JUMP_RAD = 0.5
REFINE_MAX_BASE_MOVE_M = 0.10
# IK cost weights (1/m^2, 1/rad^2) for reaching a handle: the torso is the slowest joint (0.5 m/s), so
# raising it is made dear and the arm reaches up and down instead, where it can.
REACH_WEIGHTS = {"base_height": 40.0}


def _horizontal_unit(v: np.ndarray) -> np.ndarray | None:
    v = np.array([v[0], v[1], 0.0])
    n = np.linalg.norm(v)
    return v / n if n > 1e-6 else None


def grasp_points_W(handle_points_W: np.ndarray, recent_points_W: np.ndarray,
                   recent_origins_W: np.ndarray) -> tuple[np.ndarray, float | None]:
    """The handle points a grasp is planned on, and the cameras' range noise (m; None when not measured).

    The merged points (``handle_points_W``) where the cameras are clean or did not say where they were; the
    recent views (raw points and each one's camera centre) denoised along their rays
    (:func:`~handleit.perception.depth_denoise.denoise_along_rays`) where their range noise exceeds
    ``NOISY_RANGE_M``: merged noisy views stand 1-2 cm proud of the handle and centimetres too wide."""
    if len(recent_points_W) < MIN_DENOISE_POINTS:
        return handle_points_W, None
    noise_m = range_noise_m(recent_points_W, recent_origins_W)
    if noise_m <= NOISY_RANGE_M:
        return handle_points_W, noise_m
    return voxel_downsample(denoise_along_rays(recent_points_W, recent_origins_W), DENOISED_VOXEL_M), noise_m


class Perceive(Skill):
    """Every tick: merge handle points (until the part is grasped), estimate the front's normal while the
    part is closed, and track the part's opening from its points. Always SUCCESS."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "grasped"),
                         writes=("handle", "front_normal_W", "open_state"))

    def update(self):
        obs: Observation = self.bb.observation
        handle_points = obs.points[obs.masks["target_handle"]]
        link_points = obs.points[obs.masks["target_link"]]
        if not self.bb.grasped and len(handle_points):
            self.bb.handle.add(handle_points, origins_W=obs.point_origins(obs.masks["target_handle"]))
        if self.bb.open_state is None and len(link_points) >= MIN_LINK_POINTS:
            try:
                normal = estimate_front_normal(link_points, toward_W=obs.X_WB[:3, 3])
            except ValueError:
                normal = None
            if normal is not None:
                self.bb.front_normal_W = normal
                self.bb.open_state = OpenStateEstimator(link_points, normal)
        elif self.bb.open_state is not None and len(link_points):
            self.bb.open_state.update(link_points)
        n = self.bb.handle.n_points
        self.feedback_message = f"{n} handle points" + ("" if self.bb.open_state is None else
                                                         f", opened {self.bb.open_state.state.displacement_m:.3f} m")
        return Status.SUCCESS


def target_point_W(obs: Observation, handle: HandleAccumulator) -> np.ndarray | None:
    """Where the target is, best guess first: merged handle points, the target part's points, the operator's
    prompt, or the nearest object (points off the floor that are not the robot's, nor another mask's) when
    the part is not in view yet. (The nearest object was the table in a long-horizon scene: the robot drove to
    it and never saw the handle.)"""
    if handle.n_points:
        return handle.points.mean(axis=0)
    part = obs.points[obs.masks["target_link"]]
    if len(part) >= 5:
        return part.mean(axis=0)
    if obs.target_prompt_W is not None:  # the operator's prompt (a point, or a box: its centre)
        prompt = np.asarray(obs.target_prompt_W, dtype=np.float64)
        return prompt if prompt.ndim == 1 else prompt.mean(axis=0)
    # Not the robot, nor what another mask names (a table, an object in a scene with several).
    claimed = obs.masks["robot"].copy()
    for name, mask in obs.masks.items():
        if name not in ("target_link", "target_handle"):
            claimed |= np.asarray(mask, dtype=bool)
    objects = obs.points[(obs.points[:, 2] > FLOOR_CLEARANCE_M) & ~claimed]
    if not len(objects):
        return None
    d = np.linalg.norm(objects[:, :2] - obs.X_WB[:2, 3], axis=1)
    return objects[d < d.min() + 0.5].mean(axis=0)


# Sides from which the handle is looked for, one per approach that ended without seeing it (rad, about the
# target from the first side, the robot's): a long-horizon scene may start the robot beside or behind the cabinet.
SEARCH_TURNS_RAD = (0.0, math.pi / 2, -math.pi / 2, math.pi)


class ApproachPart(Skill):
    """Drive the base to a stand-off in front of the target, facing it, arm held: brings the handle into
    view and the cabinet into reach while its points are merged. Before the front is seen, the stand-off lies
    toward where the robot stood at the approach's start; each approach that ends without a handle point looks
    from the next side (:data:`SEARCH_TURNS_RAD`). RUNNING (ended by its parallel sibling)."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "handle", "front_normal_W"), writes=("command",))
        self.unseen_approaches, self.started = 0, False

    def initialise(self):
        if self.started and not self.bb.handle.n_points:
            self.unseen_approaches += 1
        self.started = True
        self.q_hold, self.side_W = None, None

    def update(self):
        obs: Observation = self.bb.observation
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        q_target = self.q_hold.copy()
        p = target_point_W(obs, self.bb.handle)
        if p is not None:
            outward = None if self.bb.front_normal_W is None else _horizontal_unit(self.bb.front_normal_W)
            if outward is None:
                if self.side_W is None:
                    toward = _horizontal_unit(obs.X_WB[:3, 3] - p)
                    if toward is not None:
                        turn = SEARCH_TURNS_RAD[self.unseen_approaches % len(SEARCH_TURNS_RAD)]
                        c, s = math.cos(turn), math.sin(turn)
                        self.side_W = np.array([c * toward[0] - s * toward[1], s * toward[0] + c * toward[1], 0.0])
                outward = self.side_W
            if outward is not None:
                base_xy = p[:2] + APPROACH_STANDOFF_M * outward[:2]
                yaw = math.atan2(-outward[1], -outward[0])
                i = self.tools.base_index
                q_target[i[0]], q_target[i[1]], q_target[i[2]] = base_xy[0], base_xy[1], yaw
                self.feedback_message = f"target at {np.round(p, 2)}"
        self.send(self.tools.pid.step(q_target, obs.qpos), "open")
        return Status.RUNNING


class WaitForHandle(Skill):
    """RUNNING until enough handle points are merged (50 points or ten steps with points, Let's Handle It)."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("handle",))

    def update(self):
        handle: HandleAccumulator = self.bb.handle
        self.feedback_message = f"{handle.n_points} points over {handle.n_steps} steps"
        return Status.SUCCESS if handle.ready else Status.RUNNING


class PlanGrasp(BackgroundPlanning, Skill):
    """Predict grasps on the merged handle points, then find, in rank order (offset by the attempt number),
    the first whose pregrasp and grasp poses whole-body IK can reach. FAILURE when none is reachable.
    In real time (``tools.realtime``) the planning runs off the tick thread, the robot held still meanwhile
    (behaviors/background.py)."""

    def __init__(self, name, tools, max_candidates: int = 6, base_keep_out_m: float | None = None,
                 pregrasp_distance_m: float = PREGRASP_DISTANCE_M, hook_knobs: bool = False,
                 reach_time_weight: float = 0.0, max_approach_arm_rad: float | None = None):
        """``base_keep_out_m``: keep the base this far beyond the door's sweep (the blackboard's ``hinge``).
        ``hook_knobs``: close on a knob's stem just behind its head rather than on the head (see
        :func:`hooked_knob_grasp`). ``max_approach_arm_rad``: the most any arm joint may turn between the
        pregrasp's and the grasp's postures; a grasp the arm alone reaches only by folding over into another
        branch (a low handle, the arm stretched at the pregrasp) is reached with the base's help instead, and
        a grasp neither reaches so is skipped; the blackboard's ``grasp_arm_stretched`` says which it was."""
        super().__init__(name, tools, reads=("observation", "handle", "front_normal_W", "attempt", "hinge"),
                         writes=("grasp", "q_pregrasp", "X_WG_pregrasp", "q_grasp", "X_WG_grasp", "grasp_tolerance_G",
                                 "grasp_arm_stretched"))
        self.max_candidates, self.base_keep_out_m = max_candidates, base_keep_out_m
        self.pregrasp_distance_m = pregrasp_distance_m
        self.hook_knobs = hook_knobs
        # > 0: the pregrasp's IK also counts the time to reach it at the velocity limits (cost per second).
        self.reach_time_weight = reach_time_weight
        self.max_approach_arm_rad = max_approach_arm_rad

    def _folds_over(self, q_from: np.ndarray, q_to: np.ndarray) -> bool:
        """Whether the straight joint-space move from ``q_from`` to ``q_to`` turns an arm joint by more than
        ``max_approach_arm_rad``: the hand would sweep far off the approach line on its way in."""
        if self.max_approach_arm_rad is None:
            return False
        return largest_arm_turn_rad(self.tools, q_from, q_to) > self.max_approach_arm_rad

    def snapshot(self) -> dict:
        """What planning reads, copied: Perceive keeps merging handle points while a background plan runs."""
        normal = self.bb.front_normal_W
        recent_points_W, recent_origins_W = self.bb.handle.recent_views()
        return {"observation": self.bb.observation, "handle_points_W": np.array(self.bb.handle.points),
                "recent_points_W": recent_points_W, "recent_origins_W": recent_origins_W,
                "front_normal_W": None if normal is None else np.array(normal), "attempt": self.bb.attempt,
                "hinge": self.bb.hinge}

    def plan(self, snap: dict) -> tuple[str, object]:
        """("fail", why) or ("grasp", (grasp, X_WG, X_WP, tolerance_G, q_pregrasp, q_grasp, arm_stretched)); no
        blackboard."""
        obs: Observation = snap["observation"]
        front_normal_W = snap["front_normal_W"]
        handle_points_W, _ = grasp_points_W(snap["handle_points_W"], snap["recent_points_W"], snap["recent_origins_W"])
        grasps = self.tools.grasp_predictor.predict(
            obs.points, obs.masks, handle_points_W=handle_points_W, front_normal_W=front_normal_W,
            X_WB=obs.X_WB,
        )
        if not grasps:
            return "fail", "no grasp fits the handle points"
        if self.hook_knobs and front_normal_W is not None:
            frame = estimate_handle_frame(handle_points_W, front_normal_W)
            if frame.shape == "compact":
                link = obs.points[obs.masks["target_link"] & ~obs.masks["target_handle"]]
                grasps = [hooked_knob_grasp(g, link) for g in grasps]
        offset = snap["attempt"] % len(grasps)
        ordered = grasps[offset:] + grasps[:offset]
        ik, side = self.tools.ik, self.tools.side
        base_joints = self.tools.model.base_joint_names
        keep_out = None
        if self.base_keep_out_m is not None and snap["hinge"] is not None:
            p_W, _, radius_m = snap["hinge"]
            keep_out = (p_W, radius_m + self.base_keep_out_m)
        # SNOPT is local: goals needing a large wrist roll are found from starts with the wrist rolled.
        starts = wrist_roll_starts(self.tools, obs.qpos)
        reasons = []
        for grasp in ordered[: self.max_candidates]:
            for X_WG in (grasp.X_WG, flipped_grasp_pose(grasp.X_WG)):
                X_WP = pregrasp_pose(X_WG, self.pregrasp_distance_m)
                pre = ik.solve(obs.qpos, {side: X_WP}, initial_guesses=starts, weights=REACH_WEIGHTS,
                               base_keep_out=keep_out, velocity_limits=self.tools.model.velocity_limits,
                               time_weight=self.reach_time_weight)
                if not pre.success:
                    reasons.append(f"pregrasp: {pre.message}")
                    continue
                # The last approach is the arm's alone, so the base stays put for the pull that follows.
                final = ik.solve(pre.q, {side: X_WG}, fixed_joints=base_joints)
                stretched = final.success and self._folds_over(pre.q, final.q)
                if not final.success or stretched:
                    final = ik.solve(pre.q, {side: X_WG}, base_keep_out=keep_out)
                if not final.success:
                    reasons.append(f"grasp: {final.message}")
                    continue
                if self._folds_over(pre.q, final.q):
                    reasons.append(f"grasp: an arm joint turns more than {self.max_approach_arm_rad} rad from the "
                                   "pregrasp's posture")
                    continue
                tolerance_G = grasp_tolerance_G(handle_points_W, X_WG, grasp.width_m)
                return "grasp", (grasp, X_WG, X_WP, tolerance_G, pre.q, final.q, stretched)
        return "fail", f"IK failed for {len(ordered[: self.max_candidates])} grasps ({reasons[-1] if reasons else ''})"

    def apply(self, result: tuple[str, object]) -> Status:
        kind, value = result
        if kind == "fail":
            return self.fail(value)
        grasp, X_WG, X_WP, tolerance_G, q_pregrasp, q_grasp, arm_stretched = value
        self.bb.grasp, self.bb.X_WG_grasp, self.bb.X_WG_pregrasp = grasp, X_WG, X_WP
        self.bb.grasp_arm_stretched = arm_stretched
        self.bb.grasp_tolerance_G = tolerance_G
        self.bb.q_pregrasp, self.bb.q_grasp = q_pregrasp, q_grasp
        self.feedback_message = f"grasp {grasp.width_m * 100:.1f} cm wide at {np.round(X_WG[:3, 3], 2)}"
        return Status.SUCCESS


def hooked_knob_grasp(grasp: Grasp, front_points_W: np.ndarray) -> Grasp:
    """The grasp moved deeper along its approach so the pads close on the knob's stem, just behind the head.

    Pulled straight out (a door swinging open), pads closed on a round head's equator hold by friction alone
    and the head squeezes out between them; closed behind it, the head hooks on the fingers. The move is half
    the head's width (the sampler's clearance excluded), and at most what keeps the tool centre as far off
    the front as the sampler does (the median depth of ``front_points_W``, the part's points without the
    handle)."""
    X_WG = grasp.X_WG
    depth = max(0.0, grasp.width_m - 2 * GRASP_CLEARANCE_M) / 2
    if len(front_points_W):
        to_front = float(np.median((front_points_W - X_WG[:3, 3]) @ X_WG[:3, 2]))
        depth = min(depth, to_front - FINGERTIP_CLEARANCE_M)
    if depth <= 0:
        return grasp
    X = X_WG.copy()
    X[:3, 3] += depth * X_WG[:3, 2]
    return Grasp(X_WG=X, width_m=grasp.width_m, score=grasp.score)


def grasp_tolerance_G(handle_points_W: np.ndarray, X_WG: np.ndarray, width_m: float,
                      max_opening_m: float = 0.08) -> np.ndarray:
    """How far (m) the tool centre may end from a grasp along each axis of G and still hold the handle.

    x (along the pads' width): a bar longer than the pads forgives a centimetre and more; a knob only a
    few millimetres (fingers closing off-centre on a round head slide off it). y (closing): whatever the
    opening leaves beside the handle. z (depth): the pads span only -9 to +9.5 mm around the centre."""
    p_G = (np.asarray(handle_points_W) - X_WG[:3, 3]) @ X_WG[:3, :3]
    extent_x = float(np.ptp(p_G[:, 0])) if len(p_G) else 0.0
    x = float(np.clip((extent_x - PAD_WIDTH_M) / 2, KNOB_ALIGNMENT_M, 0.015))
    y = float(np.clip((max_opening_m - width_m) / 2 - 0.005, 0.004, 0.015))
    return np.array([x, y, 0.004])


class RefineGrasp(BackgroundPlanning, Skill):
    """At the pregrasp, with the hand beside the handle in the cameras' view, two corrections of the grasp:

    - depth noise: where the cameras are noisy, re-plan on the recent views denoised along their rays and take
      the candidate nearest the planned grasp (the first plan was made on the first views, 1.5-2 m away, where
      a depth camera's noise is largest);
    - the camera's pose: the hand as the camera sees it against the model's hand at the measured joints
      (perception.hand_eye); the grasp is moved by that offset, since the camera sees the handle next to the
      hand shifted alike (extrinsics error, and the odometry's drift between the base and the world).

    Then the arm alone reaches it (IK from the planned posture). Keeps the planned grasp (and says why) when
    the cameras are clean and calibrated, when the grasp moved less than ``REFINE_MIN_SHIFT_M``, or when IK
    fails. Always SUCCESS. In real time (``tools.realtime``) off the tick thread (behaviors/background.py)."""

    needs_cloud_at_rest = True  # compares the hand seen with the model's (behaviors/background.py)

    def __init__(self, name, tools, hook_knobs: bool = False):
        super().__init__(name, tools, reads=("observation", "handle", "front_normal_W", "grasp", "X_WG_grasp", "q_grasp"),
                         writes=("grasp", "q_grasp", "X_WG_grasp", "grasp_tolerance_G"))
        self.hook_knobs = hook_knobs

    def warm_up(self) -> None:
        """The robot's collision model for the hand's offset, built once per process (TreeSolver.reset)."""
        if self.tools.self_filter is not None:
            self.tools.self_filter()

    def snapshot(self) -> dict:
        recent_points_W, recent_origins_W = self.bb.handle.recent_views()
        normal = self.bb.front_normal_W
        return {"observation": self.observation_for_plan(), "recent_points_W": recent_points_W,
                "recent_origins_W": recent_origins_W, "front_normal_W": None if normal is None else np.array(normal),
                "X_WG": np.array(self.bb.X_WG_grasp), "q_grasp": np.array(self.bb.q_grasp), "grasp": self.bb.grasp,
                "handle_points_W": np.array(self.bb.handle.points)}

    def plan(self, snap: dict) -> tuple[str, object]:
        """("keep", why) or ("grasp", (grasp, X_WG, tolerance_G, q_grasp, why)); no blackboard."""
        obs: Observation = snap["observation"]
        if snap["front_normal_W"] is None:
            return "keep", "no front normal"
        X_planned = snap["X_WG"]
        grasp, X_WG, notes = snap["grasp"], X_planned, []
        points_W, noise_m = grasp_points_W(np.zeros((0, 3)), snap["recent_points_W"], snap["recent_origins_W"])
        if len(points_W):
            notes.append(f"range noise {noise_m * 1e3:.1f} mm")
            denoised = self._nearest_grasp(obs, points_W, snap["front_normal_W"], X_planned)
            if denoised is None:
                notes.append("no denoised grasp near the planned one")
            else:
                grasp, X_WG = denoised
        offset = camera_offset_at_tool(self.tools, obs, self.tools.side)
        if offset is not None:
            notes.append(f"hand seen {np.round(offset.t_W * 1e3).astype(int).tolist()} mm off the model's")
            if np.linalg.norm(offset.t_W) >= HAND_OFFSET_MIN_M:
                X_WG = X_WG.copy()
                X_WG[:3, 3] -= offset.t_W
        shift = float(np.linalg.norm(X_WG[:3, 3] - X_planned[:3, 3]))
        noise = "; ".join(notes) or "cameras clean"
        if shift < REFINE_MIN_SHIFT_M:
            return "keep", f"{noise}; the grasp moved {shift * 1e3:.1f} mm"
        if len(points_W) == 0:
            points_W = snap["handle_points_W"]
        ik, why_not = self._nearby_ik(snap["q_grasp"], obs.qpos, X_WG)
        if ik is None:
            return "keep", f"{noise}; the grasp {shift * 1e3:.0f} mm away: {why_not}"
        tolerance_G = grasp_tolerance_G(points_W, X_WG, grasp.width_m)
        return "grasp", (grasp, X_WG, tolerance_G, ik.q, f"{noise}; grasp moved {shift * 1e3:.0f} mm")

    def _nearby_ik(self, q_planned: np.ndarray, q_now: np.ndarray, X_WG: np.ndarray):
        """(IK result, "") for a posture near the planned grasp's that reaches ``X_WG``, or (None, why).

        Tried in turn: the arm alone from the planned posture, the arm alone from where the robot stands (at
        the pregrasp), then base and arm (as PlanGrasp, where the arm alone cannot reach). A solution whose arm
        joints leave the planned posture by more than ``REFINE_MAX_ARM_JUMP_RAD``, or whose base moves more than
        ``REFINE_MAX_BASE_MOVE_M``, is refused: a shift of a few centimetres needs no other arm branch, and the
        joint-space move to one sweeps the hand around the handle for 100+ steps (the combined perturbation,
        drawer: 15 of 22 failures on 50 episodes per split moved to the grasp in 50-120 steps against 28
        unperturbed; test episode 4 had a 2.3 rad elbow jump)."""
        tools = self.tools
        base = tools.model.base_joint_names
        tries = ((q_planned, base), (q_now, base), (q_planned, ()))
        jumps = []
        for seed, fixed in tries:
            ik = tools.ik.solve(seed, {tools.side: X_WG}, fixed_joints=fixed)
            if not ik.success:
                continue
            arm_jump = largest_arm_turn_rad(tools, q_planned, ik.q)
            base_move = float(np.linalg.norm(ik.q[tools.base_index[:2]] - q_planned[tools.base_index[:2]]))
            if arm_jump <= REFINE_MAX_ARM_JUMP_RAD and base_move <= REFINE_MAX_BASE_MOVE_M:
                return ik, ""
            jumps.append(f"arm {arm_jump:.2f} rad, base {base_move * 100:.0f} cm")
        if jumps:
            return None, f"IK only far from the planned posture ({'; '.join(jumps)})"
        return None, "IK failed"

    def _nearest_grasp(self, obs: Observation, points_W: np.ndarray, front_normal_W: np.ndarray,
                       X_planned: np.ndarray) -> tuple[Grasp, np.ndarray] | None:
        """The grasp on ``points_W`` nearest the planned one (turned by at most REFINE_MAX_TILT_RAD), or None."""
        grasps = self.tools.grasp_predictor.predict(obs.points, obs.masks, handle_points_W=points_W,
                                                    front_normal_W=front_normal_W, X_WB=obs.X_WB)
        if self.hook_knobs and grasps and estimate_handle_frame(points_W, front_normal_W).shape == "compact":
            link = obs.points[obs.masks["target_link"] & ~obs.masks["target_handle"]]
            grasps = [hooked_knob_grasp(g, link) for g in grasps]
        best = None
        for grasp in grasps:
            for X_WG in (grasp.X_WG, flipped_grasp_pose(grasp.X_WG)):
                tilt = math.acos(float(np.clip(X_WG[:3, 2] @ X_planned[:3, 2], -1.0, 1.0)))
                turn = math.acos(float(np.clip(X_WG[:3, 1] @ X_planned[:3, 1], -1.0, 1.0)))
                if tilt > REFINE_MAX_TILT_RAD or turn > REFINE_MAX_TILT_RAD:
                    continue
                shift = float(np.linalg.norm(X_WG[:3, 3] - X_planned[:3, 3]))
                if best is None or shift < best[0]:
                    best = (shift, grasp, X_WG)
        return None if best is None else (best[1], best[2])

    def apply(self, result: tuple[str, object]) -> Status:
        kind, value = result
        if kind == "keep":
            self.feedback_message = f"kept the planned grasp: {value}"
            return Status.SUCCESS
        grasp, X_WG, tolerance_G, q_grasp, why = value
        self.bb.grasp, self.bb.X_WG_grasp, self.bb.grasp_tolerance_G, self.bb.q_grasp = grasp, X_WG, tolerance_G, q_grasp
        self.feedback_message = f"refined: {why}"
        return Status.SUCCESS


class PlanArmPath(BackgroundPlanning, Skill):
    """Re-plan (after a blocked move): reach the pose under ``pose_key`` with the arm alone from where the base
    stands (IK), and find a collision-free arm path there with mplib's RRTConnect, the observed point cloud
    (robot points removed) as the collision world. Writes the path and the new target; FAILURE when IK or
    the planner finds nothing. In real time (``tools.realtime``) off the tick thread (behaviors/background.py)."""

    def __init__(self, name, tools, target_key: str, pose_key: str, planning_time_s: float = 0.5):
        super().__init__(name, tools, reads=("observation", pose_key, "attempt"), writes=(target_key, "arm_path"))
        self.target_key, self.pose_key, self.planning_time_s = target_key, pose_key, planning_time_s

    def warm_up_planners(self) -> None:
        """mplib's planner of the arm (seconds of parsing), built before the clock runs (real time)."""
        if self.tools.motion_planner is not None:
            self.tools.motion_planner()

    def snapshot(self) -> dict:
        return {"observation": self.bb.observation, "X_WG": np.array(self.bb.get(self.pose_key)),
                "attempt": self.bb.attempt}

    def plan(self, snap: dict) -> tuple[str, object]:
        """("fail", why) or ("path", (q_target, q_path)); no blackboard."""
        obs: Observation = snap["observation"]
        tools, side = self.tools, self.tools.side
        reach = tools.ik.solve(obs.qpos, {side: snap["X_WG"]}, fixed_joints=tools.model.base_joint_names)
        if not reach.success:
            return "fail", f"IK failed with the base where it is: {reach.message}"
        obstacles = voxel_downsample(obs.points[~obs.masks["robot"]], OBSTACLE_VOXEL_M)
        plan = tools.motion_planner().plan_to_configuration(
            obs.qpos, reach.q, obstacles, planning_time_s=self.planning_time_s, base_fixed=True, seed=snap["attempt"])
        if not plan.success:
            return "fail", f"no collision-free arm path: {plan.message}"
        return "path", (reach.q, plan.q_path)

    def apply(self, result: tuple[str, object]) -> Status:
        kind, value = result
        if kind == "fail":
            return self.fail(value)
        q_target, q_path = value
        self.bb.set(self.target_key, q_target)
        self.bb.arm_path = q_path
        self.feedback_message = f"{len(q_path)} waypoints"
        return Status.SUCCESS


class FollowPath(Skill):
    """Track the waypoints under ``arm_path`` one after the other with the joint reference; SUCCESS once the
    last is reached and the joints are within ``tolerance_rad`` of it."""

    def __init__(self, name, tools, speed_fraction: float = 0.6, tolerance_rad: float = 0.03):
        super().__init__(name, tools, reads=("observation", "tick", "arm_path", "reference"),
                         writes=("command", "reference"))
        self.reference = JointReference(tools, speed_fraction)
        self.tolerance_rad = tolerance_rad

    def initialise(self):
        self.index = 1
        self.reference.restart()

    def update(self):
        obs: Observation = self.bb.observation
        path = self.bb.arm_path
        last = len(path) - 1
        qvel, arrived = self.reference.follow(path[min(self.index, last)], obs, self.bb)
        if arrived and self.index < last:
            self.index += 1
        error = float(np.max(np.abs((path[last] - obs.qpos)[self.tools.controlled])))
        self.feedback_message = f"waypoint {min(self.index, last)}/{last}, {error:.3f} rad from the end"
        if self.index >= last and arrived and error < self.tolerance_rad:
            return Status.SUCCESS
        self.send(qvel, "open")
        return Status.RUNNING


class HandleInGripper(Skill):
    """Check, every tick of a pull or swing: the fingers still clamp the handle: not closed on each other
    (it slipped out) and not spread well beyond both the gap they closed to and the planned opening (pried
    open, or the gripper opened; fingers may close on the handle and an edge behind it, wider than planned).
    RUNNING while they hold."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "clamped_gap_m", "grasp"))

    def update(self):
        gap = finger_gap_m(self.bb.observation, self.tools)
        if gap < FINGER_GAP_EMPTY_M:
            return self.fail(f"handle slipped out (gap {gap * 1000:.1f} mm)")
        clamped, grasp = self.bb.clamped_gap_m, self.bb.grasp
        if clamped is not None and grasp is not None:
            limit = max(clamped + FINGER_GAP_SPREAD_M, grasp.width_m + FINGER_GAP_OVER_GRASP_M)
            if gap > limit:
                return self.fail(f"fingers spread to {gap * 1000:.0f} mm (closed at {clamped * 1000:.0f} mm, "
                                 f"planned {grasp.width_m * 1000:.0f} mm)")
        return Status.RUNNING


class MakingProgress(Skill):
    """Check: the part opens by at least ``min_opening_m`` within ``within_steps`` control periods of the start
    of a pull, measured on the clouds taken since then (by their stamps): in real time a cloud is older than the
    tick (latency) and a camera slower than the control rate, and counted in ticks, a door at 200 ms and 10 Hz
    failed this check while it opened (4 of 6, docs/benchmarks.md). In lockstep a cloud a tick: the ticks.
    ``sign`` -1 (:class:`handleit.behaviors.skills.MakingClosingProgress`): closing instead."""

    sign = 1.0
    verb = "opened"

    def __init__(self, name, tools, within_steps=30, min_opening_m=0.02, reads=()):
        super().__init__(name, tools, reads=("observation", "open_state", *reads))
        self.within_steps, self.min_opening_m = within_steps, min_opening_m

    def initialise(self):
        self.ticks = 0
        self.start = None
        self.needed = self.min_opening_m

    def started(self, state) -> None:
        """Hook at the first tick with a state (``self.needed`` may be changed here)."""

    def update(self):
        state = self.bb.open_state
        if state is None:
            return Status.RUNNING
        obs: Observation = self.bb.observation
        if self.start is None:
            self.start, self.start_time_s = state.state.displacement_m, obs.time_s
            self.started(state)
        self.ticks += 1
        moved = self.sign * (state.state.displacement_m - self.start)
        cloud_time_s = obs.cloud_time_s
        window_s = (self.within_steps - 1) * self.tools.model.control_dt_s
        self.feedback_message = f"{self.verb} {moved * 100:.1f} cm in {self.ticks} steps"
        if cloud_time_s - self.start_time_s >= window_s - 1e-6 and moved < self.needed:
            return self.fail(f"no progress: {self.feedback_message}")
        return Status.RUNNING


class PullDrawer(Skill):
    """Back the base away along the drawer's outward normal with the arm and gripper locked; SUCCESS when
    the drawer stops following (it reached its end) after having moved: its opening, measured on
    ``stall_steps`` new clouds, grew by less than ``stall_m``. New clouds, not ticks: a real robot's camera
    (10-30 Hz) is slower than the control rate, and over ticks that saw no new cloud the opening cannot
    change; counted in ticks, a drawer still sliding out at 5-6 cm was taken for one at its end (the drawer
    through ROS at a 15 Hz camera: the tree then held still for the rest of the episode)."""

    def __init__(self, name, tools, speed_mps=1.0, stall_steps=6, stall_m=0.002, min_travel_m=0.05):
        super().__init__(name, tools, reads=("observation", "front_normal_W", "open_state"), writes=("command",))
        self.speed_mps, self.stall_steps, self.stall_m, self.min_travel_m = speed_mps, stall_steps, stall_m, min_travel_m

    def initialise(self):
        self.q_hold, self.ticks = None, 0
        self.stall = CloudStallTracker(self.stall_steps)

    def update(self):
        obs: Observation = self.bb.observation
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        outward = _horizontal_unit(self.bb.front_normal_W)
        displacement = self.bb.open_state.state.displacement_m if self.bb.open_state else 0.0
        self.ticks += 1
        grown = self.stall.change(obs.points, displacement)
        self.feedback_message = f"opened {displacement * 100:.1f} cm"
        if grown is not None and displacement > self.min_travel_m and grown < self.stall_m:
            return Status.SUCCESS
        qvel = self.tools.pid.step(self.q_hold, obs.qpos)
        i = self.tools.base_index
        # Ramp up over RAMP_STEPS: a jerk at the start would tear the handle out of the fingers.
        speed = self.speed_mps * min(1.0, self.ticks / PULL_RAMP_STEPS)
        qvel[i[:2]] = speed * outward[:2]
        self.send(qvel, "close")
        return Status.RUNNING


class Recover(Skill):
    """Before a new attempt: forget the handle points (the part may have moved), count the attempt, and, when
    the hand is at the cabinet, open the gripper and back the base off for ``steps`` steps. At once
    (SUCCESS) on the first attempt or when the hand is clear."""

    def __init__(self, name, tools, steps=10, back_off_mps=0.6, clear_m=0.25):
        super().__init__(name, tools, reads=("observation", "front_normal_W", "attempt", "grasped", "X_WG_grasp",
                                             "open_state"),
                         writes=("command", "attempt", "grasped", "handle", "front_normal_W"))
        self.steps, self.back_off_mps, self.clear_m = steps, back_off_mps, clear_m
        self.first = True

    def initialise(self):
        self.ticks = 0
        self.q_hold = None
        self.back_off = False
        if self.first:
            return
        obs: Observation = self.bb.observation
        near = self.bb.X_WG_grasp is not None and np.linalg.norm(
            obs.X_WT[self.tools.side][:3, 3] - self.bb.X_WG_grasp[:3, 3]) < self.clear_m
        self.back_off = bool(self.bb.grasped or near)
        self.bb.attempt = self.bb.attempt + 1
        self.bb.grasped = False
        self.bb.handle.reset()
        if self.bb.open_state is not None:
            # A door that was partly opened has turned: grasps are planned on its front as it is now.
            self.bb.front_normal_W = self.bb.open_state.state.front_normal_W

    def update(self):
        if self.first or not self.back_off:
            self.first = False
            return Status.SUCCESS
        obs: Observation = self.bb.observation
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        self.ticks += 1
        qvel = self.tools.pid.step(self.q_hold, obs.qpos)
        outward = None if self.bb.front_normal_W is None else _horizontal_unit(self.bb.front_normal_W)
        if outward is not None:
            qvel[self.tools.base_index[:2]] = self.back_off_mps * outward[:2]
        self.send(qvel, "open")
        self.feedback_message = f"attempt {self.bb.attempt + 1}: backing off"
        return Status.SUCCESS if self.ticks >= self.steps else Status.RUNNING
