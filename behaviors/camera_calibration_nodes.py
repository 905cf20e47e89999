"""The cameras calibrated against the robot's own body, before anything is segmented.

    calibrate cameras (robot seen)     each camera's pose error read off the robot in its view
                                       (perception/camera_calibration.py) and every cloud corrected by it

A camera's error is fixed to the body it rides on (the mobile robot's base; the tabletop robot's world), so it
is fitted once per camera, expressed in the base frame, and applied to every later cloud at the base's pose
then. A camera whose view of the robot does not pin its six numbers down (only the flat top of the base in
view) is tried again every ``RETRY_EVERY_TICKS`` ticks, as the arms move into its view, up to
``MAX_TRIES`` times; until then its points are left as they are. A fit that finds no real error (the simulator's
calibrated cameras) is a calibration too: nothing is changed. Always SUCCESS: a camera left uncalibrated is
what the trees had before, and the grasp and hold corrections at the hands (camera_correction.py) still apply.

A camera on a hand (its centre near a tool centre: common.cameras_on_hands) is not fitted: its error rides on the arm,
not on the base, and the hand-eye corrections at the hands (camera_correction.py) take what the arm's adds.

Cameras are told apart by where they sit on the base (their centres in the base frame), not by their index in
a cloud: a driver may list them in another order from one cloud to the next (over ROS the index follows the
order in which the viewpoints first appear).

In real time the fits run off the tick (each takes 0.3-2 s on this CPU): in a calibration worker process with
``planning="process"`` (the default; behaviors/planning_worker.py: not the planning worker, where the tree's grasp
plans of 20 ms waited up to 1.3 s behind the fits), else on a thread; the clouds meanwhile pass as they are.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from py_trees.common import Status

from handleit.clouds import finite_rows
from handleit.perception.camera_calibration import (
    CameraCorrection,
    correct_cloud,
    correction_in_base,
    fit_camera_correction,
)
from handleit.types import Observation

from .common import Skill, Tools, cameras_on_hands
from .planning_worker import calibration_worker

RETRY_EVERY_TICKS = 20
MAX_TRIES = 6  # per camera
# A fit is trusted when its six numbers are pinned down this well (one standard deviation): a camera that sees
# the robot's arms reads 0.04-0.15 degrees and 0.4-2.6 mm; one that sees only the base's top, 0.4 degrees and 7 mm.
MAX_ROTATION_STD_DEG = 0.2
MAX_TRANSLATION_STD_M = 0.004
# Camera centres this close in the base frame, looking within SAME_CAMERA_DEG, are one camera. The centre is put in
# the base frame with the newest base pose, while the cloud may be older (sensor latency): at 1 m/s and 100 ms the
# same camera seems 10 cm away, and with 5 cm here every such cloud made a new camera (ten ids for three seen in
# real time), each fitted again in the planning worker ahead of the tree's plans.
SAME_CAMERA_M = 0.25
SAME_CAMERA_DEG = 50.0
MEAN_RAY_STRIDE = 8  # a camera's mean ray (which camera it is) from every 8th point of the cloud


class CalibrateCameras(Skill):
    """Fits each camera's correction from its view of the robot and applies the ones found to every cloud.
    Writes the corrected ``observation``; ``corrections_B`` holds, per camera identity (an index into
    ``cameras_B``), its correction (4x4 in the base frame), or None for a camera found calibrated. Always
    SUCCESS."""

    def __init__(self, name: str, tools: Tools):
        super().__init__(name, tools, reads=("observation", "tick"), writes=("observation",))
        # Each camera's centre and mean viewing direction in the base frame, as first seen: its identity.
        self.cameras_B: list[tuple[np.ndarray, np.ndarray]] = []
        self.corrections_B: dict[int, np.ndarray | None] = {}  # per camera: a correction, or None (none needed)
        self.tries: dict[int, int] = {}
        self.notes: dict[int, str] = {}
        self._last = None  # (raw points, corrected points, corrected centres): one cloud corrected once
        self._pool: ThreadPoolExecutor | None = None
        self._job = None  # a Future (thread) or a ProcessJob (planning worker process)

    def warm_up(self) -> None:
        if self.tools.self_filter is not None:
            self.tools.self_filter()

    def terminate(self, new_status: Status) -> None:
        if new_status == Status.INVALID:
            if self._job is not None:
                self._job.cancel()
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool, self._job = None, None

    def plan(self, snapshot: tuple[Observation, dict[int, int]]) -> dict:
        """The fits of the cameras named in the snapshot (identity -> index in its observation); no blackboard."""
        obs, cameras = snapshot
        return self._fit(obs, cameras)

    def _camera_ids(self, obs: Observation) -> tuple[list[int], np.ndarray]:
        """For each of the observation's cameras, its identity (an index into ``cameras_B``; -1 for a camera on a
        hand, never fitted), and its number of finite points. One pass over the cloud, the mean rays from a sample
        (every tick: it is on the tick's path)."""
        X_BW = np.linalg.inv(obs.X_WB)
        origins_W = np.asarray(obs.sensor_origins, dtype=np.float64)
        finite = finite_rows(obs.points)
        counts = np.bincount(obs.sensor_index[finite], minlength=len(origins_W))[:len(origins_W)]
        # The mean ray from every 8th point: as good for telling cameras apart (degrees), 8 times less work.
        every = slice(None, None, MEAN_RAY_STRIDE)
        sample = finite[every]
        index, points = obs.sensor_index[every][sample], np.asarray(obs.points[every][sample], np.float64)
        sums = np.stack([np.bincount(index, weights=points[:, k], minlength=len(origins_W))[:len(origins_W)]
                         for k in range(3)], axis=1)
        sample_counts = np.bincount(index, minlength=len(origins_W))[:len(origins_W)]
        ids = []
        on_hand = cameras_on_hands(obs)
        for c, origin_W in enumerate(origins_W):
            if on_hand[c]:
                ids.append(-1)
                continue
            p_B = X_BW[:3, :3] @ origin_W + X_BW[:3, 3]
            # the mean ray of its points
            look_W = sums[c] / sample_counts[c] - origin_W if sample_counts[c] else np.zeros(3)
            look_B = X_BW[:3, :3] @ look_W / max(float(np.linalg.norm(look_W)), 1e-9)
            angles = [np.degrees(np.arccos(np.clip(look_B @ d, -1.0, 1.0))) if np.linalg.norm(q - p_B) < SAME_CAMERA_M
                      else np.inf for q, d in self.cameras_B]
            if angles and min(angles) < SAME_CAMERA_DEG:
                ids.append(int(np.argmin(angles)))
            else:
                self.cameras_B.append((p_B, look_B))
                ids.append(len(self.cameras_B) - 1)
        return ids, counts

    def _fit(self, obs: Observation, cameras: dict[int, int]) -> dict[int, tuple[CameraCorrection | None, np.ndarray]]:
        """``cameras``: identity -> index in this observation."""
        self_filter = self.tools.self_filter()
        finite = finite_rows(obs.points)  # an organized cloud's invalid pixels are NaN
        return {cid: (fit_camera_correction(obs.points[finite & (obs.sensor_index == c)], obs.sensor_origins[c],
                                            self_filter, obs.qpos, obs.X_WB), np.array(obs.X_WB))
                for cid, c in cameras.items()}

    def _take(self, fits: dict[int, tuple[CameraCorrection | None, np.ndarray]]) -> None:
        for camera, (fit, X_WB) in fits.items():
            self.tries[camera] = self.tries.get(camera, 0) + 1
            if fit is None:
                self.notes[camera] = "too little of the robot in view"
            elif fit.rotation_std_deg > MAX_ROTATION_STD_DEG or fit.translation_std_m > MAX_TRANSLATION_STD_M:
                self.notes[camera] = (f"view does not pin the pose down (+-{fit.rotation_std_deg:.2f} deg, "
                                      f"+-{1000 * fit.translation_std_m:.1f} mm)")
            elif fit.significant:
                self.corrections_B[camera] = correction_in_base(fit, X_WB)
                self.notes[camera] = (f"corrected {fit.rotation_deg:.2f} deg, {1000 * fit.translation_m:.0f} mm "
                                      f"(robot RMS {1000 * fit.rms_before_m:.1f} -> {1000 * fit.rms_after_m:.1f} mm)")
            else:
                self.corrections_B[camera] = None
                self.notes[camera] = f"calibrated ({fit.rotation_deg:.2f} deg, {1000 * fit.translation_m:.0f} mm)"

    def update(self) -> Status:
        obs: Observation = self.bb.observation
        if (self.tools.self_filter is None or obs.sensor_origins is None or obs.sensor_index is None
                or len(obs.points) == 0):
            self.feedback_message = "no camera centres or no robot model: clouds left as they are"
            return Status.SUCCESS
        if self._job is not None and self._job.done():
            job, self._job = self._job, None
            try:
                self._take(job.result())
            except Exception as error:  # a fit that raised leaves the cameras as they were, and says why
                self.feedback_message = f"calibration failed: {error}"
        ids, counts = self._camera_ids(obs)
        pending = {cid: c for c, cid in enumerate(ids)
                   if cid >= 0 and cid not in self.corrections_B and self.tries.get(cid, 0) < MAX_TRIES}
        if pending and self._job is None and self.bb.tick % RETRY_EVERY_TICKS == 0:
            cameras = {cid: c for cid, c in pending.items() if counts[c]}
            if cameras:
                if self.tools.realtime and getattr(self.tools, "planning", "thread") == "process":
                    self._job = calibration_worker().submit(self, (obs, cameras))
                elif self.tools.realtime:
                    self._pool = self._pool or ThreadPoolExecutor(1, thread_name_prefix="calibrate-cameras")
                    self._job = self._pool.submit(self._fit, obs, cameras)
                else:
                    try:
                        self._take(self._fit(obs, cameras))
                    except ValueError as error:  # a cloud the fit cannot use: the cameras stay as they were
                        self.feedback_message = f"calibration failed: {error}"
                        self.tries.update({c: self.tries.get(c, 0) + 1 for c in cameras})
        active = {c: self.corrections_B[cid] for c, cid in enumerate(ids) if self.corrections_B.get(cid) is not None}
        self.feedback_message = "; ".join(f"camera {c}: {n}" for c, n in sorted(self.notes.items())) or "fitting"
        if not active:
            return Status.SUCCESS
        if self._last is not None and obs.points is self._last[0]:
            points, origins = self._last[1], self._last[2]  # the same cloud as last tick: the same arrays
        else:
            points = correct_cloud(obs.points, obs.sensor_index, active, obs.X_WB)
            origins = correct_cloud(obs.sensor_origins, np.arange(len(obs.sensor_origins)), active, obs.X_WB)
            self._last = (obs.points, points, origins)
        self.bb.observation = dataclasses.replace(obs, points=points, sensor_origins=origins)
        return Status.SUCCESS
