"""The check "object in gripper?" of the pick trees, fixed-arm (behaviors/pick_trees.py) and mobile
(behaviors/mobile_pick_trees.py): ticked alongside every move with the object held."""

from __future__ import annotations

import numpy as np
from py_trees.common import Status

from handleit.types import Observation

from .common import FINGER_GAP_EMPTY_M, Skill, Tools, finger_gap_m

# The held object's points (centroid) may move this far relative to the hand: occlusion by the fingers shifts a
# partial view's centroid by 1-2 cm.
HELD_DRIFT_M = 0.04
FINGER_SPREAD_M = 0.015  # fingers this much wider than they clamped have been pried open


class ObjectInGripper(Skill):
    """Check, every tick of a move with the object held: the fingers still clamp it (not closed on each other,
    not pried open past the ``clamped_gap_m`` the grasp check wrote) and its points (``object_mask``, when at
    least ``min_points`` are in view) keep their place relative to the tool centre, in the hand's frame, within
    :data:`HELD_DRIFT_M` (farther for ``drift_steps`` ticks in a row: lost). RUNNING while it holds.

    In the hand's frame: a hand that turns while it carries (the mobile base turning, a fixed arm's carry
    turned about the vertical) turns the offset with it; in the world's frame that read as drift."""

    def __init__(self, name: str, tools: Tools, object_mask: str, min_points: int, drift_steps: int):
        super().__init__(name, tools, reads=("observation", "clamped_gap_m"))
        self.object_mask, self.min_points, self.drift_steps_lost = object_mask, min_points, drift_steps

    def initialise(self):
        self.offset_T, self.drift_steps = None, 0
        self.feedback_message = ""

    def update(self):
        obs: Observation = self.bb.observation
        gap = finger_gap_m(obs, self.tools)
        if gap < FINGER_GAP_EMPTY_M:
            return self.fail(f"object slipped out (gap {gap * 1000:.1f} mm)")
        clamped = self.bb.clamped_gap_m
        if clamped is not None and gap > clamped + FINGER_SPREAD_M:
            return self.fail(f"fingers spread to {gap * 1000:.0f} mm (clamped at {clamped * 1000:.0f} mm)")
        mask = obs.masks.get(self.object_mask)
        points = obs.points[:0] if mask is None else obs.points[np.asarray(mask, dtype=bool)]
        self.feedback_message = f"gap {gap * 1000:.0f} mm"
        if len(points) >= self.min_points:
            # The hand where it was when the cloud was taken (in real time the state handed on is newer).
            X_WT = (self.observation_at_cloud() or obs).X_WT[self.tools.side]
            offset_T = X_WT[:3, :3].T @ (points.mean(axis=0) - X_WT[:3, 3])
            if self.offset_T is None:
                self.offset_T = offset_T
            drift = float(np.linalg.norm(offset_T - self.offset_T))
            self.drift_steps = self.drift_steps + 1 if drift > HELD_DRIFT_M else 0
            self.feedback_message += f", points {100 * drift:.1f} cm off the hand"
            if self.drift_steps >= self.drift_steps_lost:
                return self.fail(f"object left the hand: its points {100 * drift:.1f} cm off where they were held")
        return Status.RUNNING
