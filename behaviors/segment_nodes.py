"""The nodes that make the masks a tree reads: a segmenter (``handleit.perception.segmenters``) runs on every
tick, before the task's nodes, and a visible check says when it found no target.

    <task> (Sequence)
    ├── calibrate cameras (robot seen)   each camera's pose error read off the robot in view, clouds corrected
    ├── segment: <segmenter>       the observation's masks replaced by the segmenter's (invalid points dropped)
    ├── look again (FailureIsSuccess)
    │   └── target found?          fails when the segmenter raised (no marker, prompt outside the cloud, ...):
    │                              the task sees empty target masks this tick, as when the target is hidden,
    │                              and the segmenter looks again on the next tick
    └── <the task's tree>

Only the ``simulator`` segmenter reads the simulator's masks; with any other, the observation the solver is
handed carries none (the harness drops them), and the masks the nodes read are the segmenter's alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import py_trees
from py_trees.common import Status

from handleit.perception.segmentation_errors import SegmentationError
from handleit.types import Observation

from .camera_calibration_nodes import CalibrateCameras
from .common import Skill, Tools


class Segment(Skill):
    """Replace the observation on the blackboard by one whose masks are the segmenter's. Points that are not
    finite (an organized cloud's invalid pixels) are dropped first, and counted in the feedback. On a
    SegmentationError the target masks are empty (the robot's too when the error came before it was
    computed) and ``segmentation_error`` holds the message for "target found?". A cloud seen on the last tick
    again (a camera slower than the control rate) keeps its masks. Always SUCCESS."""

    def __init__(self, name: str, tools: Tools):
        super().__init__(name, tools, reads=("observation",), writes=("observation", "segmentation_error"))
        self._last = None  # (the cloud last segmented, its observation with masks, the error): reused below

    def update(self) -> Status:
        obs: Observation = self.bb.observation
        segmenter = self.tools.segmenter
        if self._last is not None and obs.points is self._last[0]:
            # The same cloud as on the last tick (a real-time robot's camera runs slower than the control
            # rate and hands on its newest cloud): its masks are still its masks; segment once per cloud.
            _, segmented, error = self._last
            self.bb.observation = dataclasses.replace(obs, points=segmented.points, colors=segmented.colors,
                                                      masks=segmented.masks, sensor_index=segmented.sensor_index)
            self.bb.segmentation_error = error
            return Status.SUCCESS
        cloud = obs.points
        finite = np.isfinite(obs.points).all(axis=1) if len(obs.points) else np.zeros(0, dtype=bool)
        dropped = int(len(finite) - finite.sum())
        if dropped:
            obs = dataclasses.replace(obs, points=obs.points[finite], colors=obs.colors[finite],
                                      masks={k: np.asarray(v)[finite] for k, v in obs.masks.items()},
                                      sensor_index=None if obs.sensor_index is None else obs.sensor_index[finite])
        n = len(obs.points)
        try:
            masks = segmenter.segment(obs)
            self.bb.segmentation_error = None
        except SegmentationError as error:
            masks = {name: np.zeros(n, dtype=bool) for name in segmenter.mask_names}
            self.bb.segmentation_error = str(error)
        self.bb.observation = dataclasses.replace(obs, masks=masks)
        self._last = (cloud, self.bb.observation, self.bb.segmentation_error)
        found = ", ".join(f"{k} {int(v.sum())}" for k, v in masks.items())
        self.feedback_message = found + (f"; {dropped} invalid points dropped" if dropped else "")
        return Status.SUCCESS


class TargetFound(Skill):
    """Check: the segmenter found the target on this tick (FAILURE with its message otherwise)."""

    def __init__(self, name: str, tools: Tools):
        super().__init__(name, tools, reads=("segmentation_error",))
        self.missing = False  # the target was missing on the last tick

    def update(self) -> Status:
        error = self.bb.segmentation_error
        if not error:
            self.missing, self.feedback_message = False, ""
            return Status.SUCCESS
        if self.missing and self.feedback_message == error:
            return Status.FAILURE  # the same failure as on the last tick: recorded once
        self.missing = True
        return self.fail(error)


def with_segmentation(task_root: py_trees.behaviour.Behaviour, tools: Tools, segmenter_name: str
                      ) -> py_trees.behaviour.Behaviour:
    """The task's tree behind the segment node and the visible "target found?" check."""
    look_again = py_trees.decorators.FailureIsSuccess("look again", TargetFound("target found?", tools))
    return py_trees.composites.Sequence(
        f"{task_root.name} ({segmenter_name} masks)", memory=False,
        children=[CalibrateCameras("calibrate cameras (robot seen)", tools), Segment(f"segment: {segmenter_name}", tools),
                  look_again, task_root],
    )
