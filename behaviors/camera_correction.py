"""Grasps and holds corrected by where the cameras see the robot's own hands.

A camera whose pose is off (extrinsics error), or a base whose odometry has drifted, shifts what the trees
plan on: a target seen 2-4 cm from where it is. The hands are in view when they arrive above or in front of
the target, and the robot's model says where they are from the joints; the gap between the two
(:func:`handleit.perception.hand_eye.camera_offset_at_hand`) is the shift the target next to them was seen
with. :func:`camera_offset_at_tool` measures it for one arm; the cabinet trees' ``RefineGrasp`` moves a handle
grasp by it. The dual-arm robot's hands and the stationary arm's hand read 8-47 mm off on calibrated cameras
(their collision shapes and what the cameras see of them do not match as the mobile arm's do), so the pick
and dual-arm trees do not use it yet.
"""

from __future__ import annotations

import numpy as np

from handleit.perception.hand_eye import HandOffset, camera_offset_at_hand
from handleit.types import Observation

from .common import Tools

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
    links = [name for name, X in X_WL.items() if np.linalg.norm(X[:3, 3] - p_WT) < radius_m]
    if not links:
        return None
    return camera_offset_at_hand(obs.points[near], self_filter, obs.qpos, obs.X_WB, links)
