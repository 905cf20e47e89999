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

In real time the other segmenters (tens to hundreds of ms a cloud) segment off the tick, in a worker process of
their own (:class:`Segment`); the tick hands on the newest segmented cloud, and "target found?" fails when it
is stale.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses

import numpy as np
import py_trees
from py_trees.common import Status

from handleit.types import Observation

from .camera_calibration_nodes import CalibrateCameras
from .common import Skill, Tools
from .planning_worker import PlanningWorkerDied, segmentation_worker
from .segmentation import finite_points, segment_cloud

# A segmented cloud that arrived longer ago than this (s, the observation's clock) is not trusted: as the
# real-time runner's limit for a cloud (handleit.harness.realtime_runner.DEFAULT_MAX_AGE_S["points"]).
SEGMENTATION_MAX_AGE_S = 0.5
# Real time with planning="thread": segmentation on a thread of its own (never behind a plan), one cloud at a time.
_SEGMENT_THREAD = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="handleit-segment")


class Segment(Skill):
    """Replace the observation on the blackboard by one whose masks are the segmenter's. Points that are not
    finite (an organized cloud's invalid pixels) are dropped first, and counted in the feedback. On a
    SegmentationError the target masks are empty (the robot's too when the error came before it was
    computed) and ``segmentation_error`` holds the message for "target found?". A cloud seen on the last tick
    again (a camera slower than the control rate) keeps its masks. Always SUCCESS, but in real time before the
    first cloud is segmented (RUNNING, the robot held still).

    In real time (``tools.realtime``) a segmenter that does not run in the tick (all but ``simulator``, which
    copies masks) segments off it: in the segmentation worker process (``tools.planning == "process"``:
    behaviors/planning_worker.py) or on a thread ("thread"), one cloud at a time, the newest cloud next (older
    ones waiting are skipped). Each tick hands on the newest segmented cloud with the newest joint states and
    poses; a segmented cloud that arrived more than ``SEGMENTATION_MAX_AGE_S`` ago (on the observation's clock)
    is stale: its target masks are emptied and "target found?" fails, saying so."""

    def __init__(self, name: str, tools: Tools):
        super().__init__(name, tools, reads=("observation",), writes=("observation", "segmentation_error"))
        self._last = None  # (the cloud last segmented, its observation with masks, the error): reused below
        # Off the tick (real time): the cloud last seen, the newest cloud waiting (observation, when it was
        # first seen), the job segmenting one, and the newest result (segmented observation, error, seen at).
        self._seen = None
        self._waiting: tuple[Observation, float] | None = None
        self._job = None
        self._newest: tuple[Observation, str | None, float] | None = None
        self._worker_died: str | None = None

    def update(self) -> Status:
        obs: Observation = self.bb.observation
        segmenter = self.tools.segmenter
        if getattr(self.tools, "realtime", False) and not getattr(segmenter, "runs_in_tick", False):
            return self._update_off_the_tick(obs)
        if self._last is not None and obs.points is self._last[0]:
            # The same cloud as on the last tick (a real-time robot's camera runs slower than the control
            # rate and hands on its newest cloud): its masks are still its masks; segment once per cloud.
            _, segmented, error = self._last
            self.bb.observation = dataclasses.replace(obs, points=segmented.points, colors=segmented.colors,
                                                      masks=segmented.masks, sensor_index=segmented.sensor_index)
            self.bb.segmentation_error = error
            return Status.SUCCESS
        cloud = obs.points
        keep, masks, error = segment_cloud(segmenter, obs)
        obs = finite_points(obs, keep)
        self.bb.segmentation_error = error
        self.bb.observation = dataclasses.replace(obs, masks=masks)
        self._last = (cloud, self.bb.observation, self.bb.segmentation_error)
        self.feedback_message = _found(masks, keep)
        return Status.SUCCESS

    def _update_off_the_tick(self, obs: Observation) -> Status:
        if obs.points is not self._seen:  # a new cloud: the next to segment (an older one waiting is skipped)
            # Segmented with the robot where it was when the cloud was taken: the self filter puts the robot's
            # model at those joints (the state handed on is predicted to now; the cloud is older).
            self._seen, self._waiting = obs.points, (self.observation_at_cloud() or obs, obs.time_s)
        if self._job is not None and self._job.done():
            job, self._job = self._job, None
            sent, seen_s = job.cloud
            try:
                keep, masks, error = job.result()  # an exception other than SegmentationError ends the tick, as in it
                self._newest = (dataclasses.replace(finite_points(sent, keep), masks=masks), error, seen_s)
            except PlanningWorkerDied as died:  # restarted; the next cloud goes to the new worker
                self._worker_died = f"segmentation worker died: {died}"
        if self._job is None and self._waiting is not None:
            (sent, seen_s), self._waiting = self._waiting, None
            if self.tools.planning == "process":
                self._job = segmentation_worker().segment(self.tools.segmenter_key, self.tools.segmenter_spec, sent)
            else:
                self._job = _SEGMENT_THREAD.submit(segment_cloud, self.tools.segmenter, sent)
            self._job.cloud = (sent, seen_s)
        if self._newest is None:
            self.feedback_message = "waiting for the first segmented cloud: holding still"
            return Status.RUNNING
        segmented, error, seen_s = self._newest
        masks = segmented.masks
        age_s = obs.time_s - seen_s
        if age_s > SEGMENTATION_MAX_AGE_S:
            error = (f"segmentation stale: the newest segmented cloud arrived {age_s:.2f} s ago "
                     f"(> {SEGMENTATION_MAX_AGE_S} s)")
            masks = {k: (v if k == "robot" else np.zeros_like(v)) for k, v in masks.items()}
        self.bb.observation = dataclasses.replace(
            obs, points=segmented.points, colors=segmented.colors, masks=masks,
            sensor_index=segmented.sensor_index, sensor_origins=segmented.sensor_origins)
        if self._worker_died is not None and error is None:  # said once, by "target found?"
            error, self._worker_died = self._worker_died, None
        self.bb.segmentation_error = error
        self.feedback_message = f"{_found(masks, None)}; cloud {1e3 * age_s:.0f} ms old"
        return Status.SUCCESS

    def wait_idle(self, timeout_s: float = 60.0) -> None:
        """Wait for a segmentation still running on a thread (the solver resets the segmenter after)."""
        job, self._job = self._job, None
        if isinstance(job, concurrent.futures.Future):  # on a thread (the worker process's segmenter is its own)
            concurrent.futures.wait([job], timeout=timeout_s)


def _found(masks: dict[str, np.ndarray], keep: np.ndarray | None) -> str:
    dropped = 0 if keep is None else int(len(keep) - keep.sum())
    found = ", ".join(f"{k} {int(v.sum())}" for k, v in masks.items())
    return found + (f"; {dropped} invalid points dropped" if dropped else "")


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


def with_segmentation(task_root: py_trees.behaviour.Behaviour, tools: Tools, segmenter_name: str,
                      calibrate_cameras: bool = True) -> py_trees.behaviour.Behaviour:
    """The task's tree behind the segment node and the visible "target found?" check, and first (unless
    ``calibrate_cameras`` is False) the cameras' calibration against the robot's own body."""
    look_again = py_trees.decorators.FailureIsSuccess("look again", TargetFound("target found?", tools))
    return py_trees.composites.Sequence(
        f"{task_root.name} ({segmenter_name} masks)", memory=False,
        children=[*([CalibrateCameras("calibrate cameras (robot seen)", tools)] if calibrate_cameras else []),
                  Segment(f"segment: {segmenter_name}", tools), look_again, task_root],
    )
