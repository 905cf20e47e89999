"""Grasps and holds corrected by where the cameras see the robot's own hands.

A camera whose pose is off (extrinsics error), or a base whose odometry has drifted, shifts what the trees
plan on: a target seen 2-4 cm from where it is. The hands are in view when they arrive above or in front of
the target, and the robot's model says where they are from the joints; the gap between the two
(:func:`handleit.perception.hand_eye.camera_offset_at_hand`) is the shift the target next to them was seen
with. :func:`camera_offset_at_tool` measures it for one arm; the cabinet trees' ``RefineGrasp`` moves a handle
grasp by it, :class:`CorrectHoldForCameras` a dual-arm hold or a pick's grasp. On calibrated cameras every robot's
hand reads under 1 mm off its model.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from py_trees.common import Status

from handleit.perception.hand_eye import HandOffset, camera_offset_at_hand
from handleit.types import Observation

from .background import BackgroundPlanning
from .bimanual_nodes import reached_goals
from .common import Skill, Tools

# The robot's points within this distance of the tool centre, on the links within it, are the hand's.
HAND_RADIUS_M = 0.3
# Offsets under this are left alone: the simulator's calibrated cameras read < 0.5 mm; 1 cm and 1 degree of
# extrinsics error 5-25 mm.
HAND_OFFSET_MIN_M = 0.003


def camera_offset_at_tool(tools: Tools, obs: Observation, side: str,
                          radius_m: float = HAND_RADIUS_M) -> HandOffset | None:
    """The offset (observed minus model) of ``side``'s hand, from the camera that sees most of it; None without
    a robot mask, a self filter, or enough of the hand in view."""
    if tools.self_filter is None or "robot" not in obs.masks or side not in obs.X_WT:
        return None
    p_WT = obs.X_WT[side][:3, 3]
    near = obs.masks["robot"] & (np.linalg.norm(obs.points - p_WT, axis=1) < radius_m)
    if obs.sensor_index is not None and near.any():  # one camera's points: each camera has its own error
        near &= obs.sensor_index == np.bincount(obs.sensor_index[near]).argmax()
    self_filter = tools.self_filter()
    X_WL = self_filter.link_poses(obs.qpos, obs.X_WB)
    # Every link with a shape that reaches into the ball the points were taken from: a link left out whose
    # surface lies in it (the forearm near the wrist) would pull the fit onto its points.
    links = sorted({s.link for s in self_filter.shapes
                    if np.linalg.norm(X_WL[s.link][:3, :3] @ s.center_L + X_WL[s.link][:3, 3] - p_WT)
                    < radius_m + s.radius_m})
    if not links:
        return None
    return camera_offset_at_hand(obs.points[near], self_filter, obs.qpos, obs.X_WB, links)


class CorrectHoldForCameras(BackgroundPlanning, Skill):
    """Above (or beside) the object, the hands in view: each hand's goal under ``pose_key`` (side -> X_WG, or
    one X_WG for the tree's arm) moved by the offset at which its camera sees that hand, and the configuration
    under ``target_key`` solved again (IK from the planned one). Keeps the plan (and says why) when every
    offset is under ``HAND_OFFSET_MIN_M``, when no hand is in view, or when IK fails. Always SUCCESS. In real
    time (``tools.realtime``) off the tick thread, the robot held still meanwhile (behaviors/background.py), or,
    with ``holds_still=False``, going on with the move beside it (``bimanual_nodes.move_while_planning``: the
    lowering, whose goal the correction then moves; the hands are compared with the model at the cloud's stamp).

    ``ik_goal(obs, X_WG)``: the goal as the tree's IK takes it (the pick trees' IK works in the arm's base
    frame); default the world pose."""

    needs_cloud_at_rest = True  # compares the hand seen with the model's (behaviors/background.py)

    def __init__(self, name, tools, target_key: str = "q_grasp", pose_key: str = "X_WG_grasp",
                 weights: dict | None = None, tilt_rad: float = 0.0, radius_m: float = HAND_RADIUS_M,
                 ik_goal: Callable[[Observation, np.ndarray], np.ndarray] | None = None, holds_still: bool = True):
        super().__init__(name, tools, reads=("observation", target_key, pose_key), writes=(target_key, pose_key))
        self.holds_still = holds_still
        self.target_key, self.pose_key = target_key, pose_key
        self.weights, self.tilt_rad, self.radius_m = weights, tilt_rad, radius_m
        self.ik_goal = ik_goal

    def warm_up(self) -> None:
        """The robot's collision model, built once per process before the first tick (TreeSolver.reset)."""
        if self.tools.self_filter is not None:
            self.tools.self_filter()

    def snapshot(self) -> dict:
        planned = self.bb.get(self.pose_key)
        return {"observation": self.observation_for_plan(), "q": np.array(self.bb.get(self.target_key)),
                "planned": ({s: np.array(X) for s, X in planned.items()} if isinstance(planned, dict)
                            else np.array(planned))}

    def plan(self, snap: dict) -> tuple[str, object]:
        """("keep", why) or ("moved", (q, poses, why)); no blackboard."""
        obs: Observation = snap["observation"]
        planned = snap["planned"]
        one_arm = not isinstance(planned, dict)
        goals: dict[str, np.ndarray] = {self.tools.side: planned} if one_arm else planned
        offsets = {side: camera_offset_at_tool(self.tools, obs, side, self.radius_m) for side in goals}
        seen = {s: o.t_W for s, o in offsets.items() if o is not None}
        described = ", ".join(f"{s} {np.round(t * 1e3).astype(int).tolist()} mm" for s, t in seen.items())
        moved = {s: t for s, t in seen.items() if np.linalg.norm(t) >= HAND_OFFSET_MIN_M}
        if not moved:
            return "keep", f"hands seen at {described or 'no hand in view'}"
        shifted = {}
        for side, X in goals.items():
            shifted[side] = np.array(X)
            if side in moved:
                shifted[side][:3, 3] -= moved[side]
        ik_goals = shifted if self.ik_goal is None else {s: self.ik_goal(obs, X) for s, X in shifted.items()}
        ik = self.tools.ik.solve(snap["q"], ik_goals, weights=self.weights, closing_axis_tilt_rad=self.tilt_rad)
        if not ik.success:
            return "keep", f"IK failed for hands seen at {described}: {ik.message}"
        reached = shifted if self.tilt_rad == 0.0 else reached_goals(self.tools, ik.q, shifted)
        return "moved", (ik.q, reached[self.tools.side] if one_arm else reached,
                         f"moved the hold by the hands' offsets: {described}")

    def apply(self, result: tuple[str, object]) -> Status:
        kind, value = result
        if kind == "keep":
            self.feedback_message = f"kept the plan: {value}"
            return Status.SUCCESS
        q, poses, why = value
        self.bb.set(self.target_key, q)
        self.bb.set(self.pose_key, poses)
        self.feedback_message = why
        return Status.SUCCESS
