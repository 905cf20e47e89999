"""Tick a solver against a robot in real time, with a freshness check and a watchdog that stops the robot.

The world does not wait for the tree: :class:`RealtimeRunner` ticks at the control rate on a clock (the wall
clock, or a simulator's clock), each tick with the robot's newest observation. Safety comes first, as in ROS
base drivers (a ``cmd_vel`` timeout stops the base):

- a stale observation (a sensor older than its limit) is not handed to the tree: the tick commands zero
  velocity and records the failed check ``observation fresh?``;
- a watchdog thread commands zero velocity when no tick completed within ``watchdog_timeout_s`` of wall time
  (a tick that hangs in planning), when the sensors stop, or when the robot reports its link down;
- an exception from the robot or the solver commands zero velocity and ends the run with the error.

Per-tick wall times are recorded (median, p99, max) and overruns of the control period counted. The heap the
run starts with is frozen out of Python's garbage collector for the run, and the collector's pauses are recorded
per tick (handleit.harness.gc_pauses).

A robot may offer, beyond :class:`~handleit.types.RobotInterface`:
``sensor_stamps_s() -> {stream: stamp of its newest message, s on the runner's clock}``, ``link_ok() -> (bool,
reason)``, and ``now_s()`` (the robot's clock: a simulator's ``/clock``); without them the runner uses
``Observation.time_s`` and the wall clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from handleit.control.actions import saturated_velocity
from handleit.control.latency import predicted_joint_positions
from handleit.planning.whole_body_ik import WholeBodyIK
from handleit.harness.gc_pauses import DEFAULT_GC_MODE, GC_MODES, GcPauses, frozen_heap
from handleit.harness.realtime_priority import request_realtime, restore_normal
from handleit.types import Command, Observation, RobotInterface, RobotState

FRESHNESS_CHECK = "observation fresh?"
# Default age limits (s) per sensor stream: joint states and odometry come at the control rate (100 Hz), so
# 10 periods late means the link or the driver is in trouble; a camera at 10-30 Hz plus processing may lag
# a few hundred ms, and trees re-perceive every tick, so a cloud older than 0.5 s is not trusted.
DEFAULT_MAX_AGE_S = {"joint_states": 0.1, "odom": 0.1, "points": 0.5}
DEFAULT_OBSERVATION_MAX_AGE_S = 0.1  # robots without per-stream stamps: the age of Observation.time_s


def zero_command(robot: RobotInterface) -> Command:
    """Zero velocity on every joint, grippers holding."""
    m = robot.model
    return Command(qvel=np.zeros(len(m.joint_names)), gripper={s: "hold" for s in m.finger_joint_names})


class WallClock:
    """Seconds since the epoch (the clock of ROS stamps without simulated time)."""

    def now_s(self) -> float:
        return time.time()

    def sleep_until(self, t_s: float) -> None:
        delay = t_s - time.time()
        if delay > 0:
            time.sleep(delay)


@dataclass
class RunReport:
    ticks: int = 0
    tick_wall_s: list[float] = field(default_factory=list)  # per tick: observe + freshness + solver + act
    solver_wall_s: list[float] = field(default_factory=list)  # per tree tick: solver.step alone
    # per tick: CPU seconds of the tick's thread (time.thread_time); far below the wall time, the tick waited
    # (for Python's GIL, held by another thread, or for a CPU, taken by other processes)
    tick_cpu_s: list[float] = field(default_factory=list)
    # per tick: seconds the tick's thread waited on the kernel's run queue (runnable, no CPU free: other processes);
    # Linux only (/proc/thread-self/schedstat), else empty. Wall - CPU - this: the tick waited for the GIL (or I/O).
    tick_runqueue_s: list[float] = field(default_factory=list)
    overruns: int = 0  # ticks during which the clock advanced by more than the control period
    # Per overrun: (tick index, the tick's wall s, how far the clock advanced during it, s): a short tick can
    # overrun where the robot's clock jumps (a simulator catching up after it fell behind its schedule).
    overrun_ticks: list[tuple[int, float, float]] = field(default_factory=list)
    stale_ticks: int = 0  # ticks where the observation was not fresh (zero velocity commanded)
    failures: list[dict[str, Any]] = field(default_factory=list)  # {"check", "reason", "time_s"}
    predicted_ages_s: list[float] = field(default_factory=list)  # per tick: how far the state was predicted
    # Latency compensation checked against the robot: per measurement whose moment a tick predicted to, |predicted -
    # measured| per joint ([dof], m or rad; the fingers are not predicted: 0).
    prediction_errors: list[np.ndarray] = field(default_factory=list)
    joint_names: tuple[str, ...] = ()  # the robot's joint order (prediction_errors' columns), where it has a model
    watchdog_stops: list[dict[str, Any]] = field(default_factory=list)  # {"reason", "wall_s"}
    error: str | None = None  # what ended the run, if it did not end normally
    stop_reason: str = ""
    scheduling: str = "SCHED_OTHER"  # the tick thread's policy (handleit.harness.realtime_priority)
    # Python's garbage collector (handleit.harness.gc_pauses): per tick, the seconds it held this process during
    # the tick; collections per generation during the run; the mode, and the objects frozen at the start.
    tick_gc_s: list[float] = field(default_factory=list)
    gc_collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    gc_longest_s: float = 0.0
    gc_mode: str = DEFAULT_GC_MODE
    gc_frozen_objects: int = 0

    def prediction_error_stats(self) -> dict[str, list[float]]:
        """Per joint (``joints``: their names), the median, p95 and max of ``prediction_errors`` (m or rad), and
        ``n`` the measurements compared; empty lists without any."""
        stats: dict = {"joints": list(self.joint_names), "n": len(self.prediction_errors)}
        if not self.prediction_errors:
            return {**stats, "median": [], "p95": [], "max": []}
        e = np.asarray(self.prediction_errors)
        return {**stats, **{name: [round(float(x), 5) for x in values] for name, values in
                            (("median", np.median(e, axis=0)), ("p95", np.percentile(e, 95, axis=0)),
                             ("max", e.max(axis=0)))}}

    def tick_stats(self) -> dict[str, float | str]:
        """Median, p99 and max tick time (s), overruns, and the share of ticks that overran."""
        t = np.asarray(self.tick_wall_s) if self.tick_wall_s else np.zeros(1)
        s = np.asarray(self.solver_wall_s) if self.solver_wall_s else np.zeros(1)
        return {"ticks": self.ticks, "tick_median_s": float(np.median(t)), "tick_p99_s": float(np.percentile(t, 99)),
                "tick_max_s": float(t.max()), "solver_median_s": float(np.median(s)),
                "solver_p99_s": float(np.percentile(s, 99)), "solver_max_s": float(s.max()),
                "overruns": self.overruns, "overrun_share": self.overruns / max(self.ticks, 1),
                "stale_ticks": self.stale_ticks, "watchdog_stops": len(self.watchdog_stops),
                "scheduling": self.scheduling, "gc_mode": self.gc_mode, "gc_frozen_objects": self.gc_frozen_objects,
                "gc_collections": list(self.gc_collections), "gc_longest_s": self.gc_longest_s,
                "tick_gc_max_s": max(self.tick_gc_s, default=0.0)}


class RealtimeRunner:
    """Ticks ``solver`` against ``robot`` at ``rate_hz`` on ``clock``; see the module docstring.

    Args:
        robot: a RobotInterface; ``act`` must be callable from the watchdog thread too (it sends zero velocity).
        solver: ``reset(observation)`` and ``step(observation) -> Command`` (handleit.harness.solvers).
        rate_hz: ticks per second of ``clock``.
        clock: ``now_s()`` and ``sleep_until(t_s)``; default: the robot's clock if it has ``now_s``, else wall.
        max_age_s: per stream (see DEFAULT_MAX_AGE_S), or one number for every stream / ``Observation.time_s``.
        watchdog_timeout_s: wall seconds without a completed tick (or with stale sensors, or the link down)
            before the watchdog commands zero velocity.
        rt_priority: run the tick thread at Linux SCHED_FIFO at this priority (1-98), and the watchdog one above
            it, as a robot's control loop runs (handleit.harness.realtime_priority); None: the default policy.
            Where the permission is missing the run goes on at the default policy, with a warning, and
            ``report.scheduling`` says why.
        gc_mode: ``"freeze"`` (default): the objects alive when the run starts are frozen out of the garbage
            collector's reach for the run (handleit.harness.gc_pauses: a full collection of a tree process's heap
            takes hundreds of ms); ``"auto"``: Python's collector as it is. Either way the collector's pauses per
            tick are recorded (``report.tick_gc_s``).
    """

    def __init__(self, robot: RobotInterface, solver, *, rate_hz: float = 100.0, clock=None,
                 max_age_s: float | dict[str, float] | None = None, watchdog_timeout_s: float = 0.25,
                 compensate_latency: bool = True, rt_priority: int | None = None,
                 gc_mode: str = DEFAULT_GC_MODE):
        if rate_hz <= 0 or watchdog_timeout_s <= 0:
            raise ValueError(f"rate_hz ({rate_hz}) and watchdog_timeout_s ({watchdog_timeout_s}) must be > 0")
        if rt_priority is not None and (isinstance(rt_priority, bool) or not isinstance(rt_priority, int)
                                        or not 1 <= rt_priority <= 98):
            raise ValueError(f"rt_priority must be an integer in 1-98 (the watchdog runs one above), got "
                             f"{rt_priority!r}")
        if gc_mode not in GC_MODES:
            raise ValueError(f"gc_mode must be one of {GC_MODES}, got {gc_mode!r}")
        self.rt_priority, self.gc_mode = rt_priority, gc_mode
        self.robot, self.solver = robot, solver
        self.period_s = 1.0 / rate_hz
        if clock is None:
            clock = _RobotClock(robot) if hasattr(robot, "now_s") else WallClock()
        self.clock = clock
        self.max_age_s = max_age_s if max_age_s is not None else (
            dict(DEFAULT_MAX_AGE_S) if hasattr(robot, "sensor_stamps_s") else DEFAULT_OBSERVATION_MAX_AGE_S)
        self.watchdog_timeout_s = watchdog_timeout_s
        # Late joint states moved on by the commands sent since their stamp (handleit.control.latency): the tree
        # acts on where the robot is now, not where it was when measured.
        self.compensate_latency = compensate_latency
        self._sent: list[tuple[float, np.ndarray]] = []  # (clock time, qvel) of the commands of the last second
        self._predicted_joints: list[int] | None = None
        self._predictions: dict[float, np.ndarray] = {}  # the moment predicted to -> the joints predicted there
        # Forward kinematics for the predicted tool poses (built before the clock runs; one per robot description)
        self._kinematics = _kinematics_of(getattr(robot, "model", None)) if compensate_latency else None
        self.report = RunReport(joint_names=tuple(getattr(getattr(robot, "model", None), "joint_names", ())),
                                gc_mode=gc_mode)
        self._lock = threading.Lock()  # guards the heartbeat and the stopped flag
        self._last_tick_wall = time.monotonic()
        self._stopped_by_watchdog = False
        self._stop = threading.Event()

    # -- freshness ------------------------------------------------------------------------------------
    def stale_reason(self, observation: Observation | None) -> str | None:
        """Why the newest sensor data may not be used now (None: fresh)."""
        now = self.clock.now_s()
        if hasattr(self.robot, "sensor_stamps_s"):
            stamps = self.robot.sensor_stamps_s()
            limits = self.max_age_s if isinstance(self.max_age_s, dict) else {k: self.max_age_s for k in stamps}
            old = []
            for stream, limit in limits.items():
                stamp = stamps.get(stream)
                if stamp is None:
                    old.append(f"{stream}: nothing received")
                elif now - stamp > limit:
                    old.append(f"{stream}: {now - stamp:.3f} s old > {limit} s")
            return "; ".join(old) or None
        if observation is None:
            return "no observation"
        limit = self.max_age_s if not isinstance(self.max_age_s, dict) else min(self.max_age_s.values())
        age = now - observation.time_s
        return f"observation {age:.3f} s old > {limit} s" if age > limit else None

    # -- the loop -------------------------------------------------------------------------------------
    def run(self, max_ticks: int | None = None, until: Callable[[], bool] | None = None) -> RunReport:
        """Tick until ``max_ticks``, ``until()`` is true, :meth:`stop`, or an error; zero velocity at the end."""
        watchdog = threading.Thread(target=self._watchdog, name="handleit-watchdog", daemon=True)
        self._last_tick_wall = time.monotonic()
        if self.rt_priority is not None:
            self.report.scheduling = request_realtime(self.rt_priority).describe()
        # Frozen before the watchdog starts and unfrozen after it has stopped: the heap as the run found it.
        collector = contextlib.ExitStack()
        self.report.gc_frozen_objects = collector.enter_context(frozen_heap(self.gc_mode == "freeze"))
        pauses = collector.enter_context(GcPauses())
        watchdog.start()
        reset = False
        t_next = self.clock.now_s()
        try:
            while not self._stop.is_set():
                if max_ticks is not None and self.report.ticks >= max_ticks:
                    self.report.stop_reason = f"{max_ticks} ticks"
                    break
                if until is not None and until():
                    self.report.stop_reason = "until() is true"
                    break
                self.clock.sleep_until(t_next)
                if until is not None and until():  # e.g. the episode ended while this loop waited for the clock
                    self.report.stop_reason = "until() is true"
                    break
                start, clock_start, cpu_start = time.perf_counter(), self.clock.now_s(), time.thread_time()
                queued_start = _runqueue_wait_s()
                gc_start = pauses.total_s()
                observation = self.robot.observe()
                stale = self.stale_reason(observation)
                if stale is not None:
                    self.report.stale_ticks += 1
                    self.report.failures.append({"check": FRESHNESS_CHECK, "reason": stale,
                                                 "time_s": self.clock.now_s()})
                    command = zero_command(self.robot)
                else:
                    solver_start = time.perf_counter()
                    if not reset:
                        self.solver.reset(observation)
                        reset = True
                    if self.compensate_latency:
                        observation = self._predicted(observation, clock_start)
                    command = self.solver.step(observation)
                    self.report.solver_wall_s.append(time.perf_counter() - solver_start)
                with self._lock:
                    if self._stopped_by_watchdog:
                        # The tick outlived the watchdog: its command rests on an old observation. Stay stopped
                        # this tick; the next tick starts from a new observation.
                        command = zero_command(self.robot)
                        self._stopped_by_watchdog = False
                    self._last_tick_wall = time.monotonic()
                self.robot.act(command)
                self._sent.append((self.clock.now_s(), self._applied(command, observation)))
                while self._sent and self._sent[0][0] < self._sent[-1][0] - 1.0:
                    self._sent.pop(0)
                elapsed = time.perf_counter() - start
                self.report.tick_wall_s.append(elapsed)
                self.report.tick_cpu_s.append(time.thread_time() - cpu_start)
                self.report.tick_gc_s.append(pauses.total_s() - gc_start)
                if queued_start is not None:
                    self.report.tick_runqueue_s.append(_runqueue_wait_s() - queued_start)
                self.report.ticks += 1
                # An overrun: the robot's clock moved on by more than a period during the tick (on a
                # simulator's clock at a real-time factor below 1 the wall budget is longer than the period). A
                # simulated clock moves in whole periods: a tolerance keeps one period's rounding from counting.
                advance_s = self.clock.now_s() - clock_start
                if advance_s > self.period_s * (1 + 1e-6):
                    self.report.overruns += 1
                    self.report.overrun_ticks.append((self.report.ticks - 1, elapsed, advance_s))
                # A late tick does not try to catch up (that would send a burst of commands): next tick one
                # period after this one started when behind (on a stepped clock, never twice at one reading).
                t_next = max(t_next + self.period_s, clock_start + self.period_s)
            else:
                self.report.stop_reason = self.report.stop_reason or "stop()"
        except Exception as error:  # noqa: BLE001  any failure: the robot must not keep moving
            self.report.error = f"{type(error).__name__}: {error}"
            self.report.stop_reason = "error"
        finally:
            self._stop.set()
            watchdog.join(timeout=2.0)
            self._safe_stop("run ended")
            if self.rt_priority is not None:
                restore_normal()
            self.report.gc_collections = list(pauses.collections)
            self.report.gc_longest_s = pauses.longest_s
            collector.close()
        return self.report

    def stop(self) -> None:
        self._stop.set()

    def _applied(self, command: Command, observation: Observation | None) -> np.ndarray:
        """The velocities the robot applies for ``command``, as latency compensation integrates them: saturated at
        the model's limits (control.actions.saturated_velocity), the base's planar part in the frame of the heading
        the tick saw. A P term on a large lag asks the torso for 0.8-0.95 m/s where it moves at 0.5 at most:
        integrated unsaturated, the prediction put the hands 1.3 cm below where they were at the end of
        PushChair's lowering."""
        qvel = np.asarray(command.qvel, dtype=np.float64)
        model = getattr(self.robot, "model", None)
        limits = getattr(model, "velocity_limits", None)
        if limits is None or np.shape(limits) != qvel.shape:
            return qvel
        base_xy, yaw = None, 0.0
        if len(model.base_joint_names) >= 3 and observation is not None:
            base_xy = model.index(model.base_joint_names[:2])
            yaw = float(observation.qpos[int(model.index(model.base_joint_names[2:3])[0])])
        return saturated_velocity(qvel, limits, base_xy, yaw)

    def _check_prediction(self, observation: Observation) -> None:
        """A measurement stamped at a moment a tick predicted the joints to: keep how far off that prediction was
        (``report.prediction_errors``), and forget the predictions older than it."""
        stamp = float(observation.time_s)
        near = [t for t in self._predictions if abs(t - stamp) <= 0.5 * self.period_s]
        if near:
            predicted = self._predictions[min(near, key=lambda t: abs(t - stamp))]
            if predicted.shape == np.shape(observation.qpos):
                self.report.prediction_errors.append(np.abs(predicted - np.asarray(observation.qpos, np.float64)))
        for t in [t for t in self._predictions if t <= stamp + 0.5 * self.period_s]:
            del self._predictions[t]

    def _predicted(self, observation: Observation, now_s: float) -> Observation:
        """The observation with its joint positions, base pose and tool poses moved on from its stamp to now by
        the commands sent since, ``state_stamp_s`` now (base x/y velocities are in the world, as the trees command them).
        The tool poses follow the base, and the arm by forward kinematics: each measured pose is moved by the change
        in the tool's pose in the base frame from the measured joints to the predicted ones (a late tool pose
        judged a move 100 ms behind the predicted joints that drove it: the pregrasp overshot and stalled). The
        fingers are not predicted (gripper commands are not velocities)."""
        model = getattr(self.robot, "model", None)
        if model is None or not self._sent or now_s <= observation.time_s:
            return observation
        if self._predicted_joints is None:  # every joint but the fingers, once per run
            fingers = {n for names in model.finger_joint_names.values() for n in names}
            self._predicted_joints = [i for i, n in enumerate(model.joint_names) if n not in fingers]
        self.report.predicted_ages_s.append(now_s - observation.time_s)
        self._check_prediction(observation)
        q = predicted_joint_positions(observation.qpos, observation.time_s, now_s, self._sent,
                                      joints=self._predicted_joints, qvel=observation.qvel,
                                      time_constants_s=getattr(model, "drive_time_constants_s", None))
        X_WB, X_WT = observation.X_WB, observation.X_WT
        if len(model.base_joint_names) >= 3:
            x, y, yaw = model.index(model.base_joint_names[:3])
            dx, dy, dyaw = q[x] - observation.qpos[x], q[y] - observation.qpos[y], q[yaw] - observation.qpos[yaw]
            c, s = np.cos(dyaw), np.sin(dyaw)
            # The base's motion in the world: a turn about the base's position, then a shift.
            T = np.eye(4)
            T[:2, :2] = [[c, -s], [s, c]]
            p = X_WB[:2, 3]
            T[:2, 3] = p - T[:2, :2] @ p + np.array([dx, dy])
            X_WB = T @ X_WB
            X_WT = {side: T @ X for side, X in X_WT.items()}
        if self._kinematics is not None and X_WT:
            kin = self._kinematics
            X_BW_measured, X_BW_predicted = (np.linalg.inv(kin.base_pose(observation.qpos)),
                                            np.linalg.inv(kin.base_pose(q)))
            X_WT = {side: X @ np.linalg.inv(X_BW_measured @ kin.tcp_pose(observation.qpos, side))
                    @ (X_BW_predicted @ kin.tcp_pose(q, side)) for side, X in X_WT.items()}
        self._predictions[float(now_s)] = q
        # The state is the prediction for now; time_s stays the measurement's stamp (the cloud keeps its own).
        measured = RobotState(observation.time_s, observation.qpos, observation.qvel, observation.X_WB, observation.X_WT)
        return dataclasses.replace(observation, state_stamp_s=now_s, qpos=q, X_WB=X_WB, X_WT=X_WT,
                                   measured_state=measured)

    # -- safety ---------------------------------------------------------------------------------------
    def _safe_stop(self, reason: str) -> None:
        try:
            self.robot.act(zero_command(self.robot))
        except Exception as error:  # noqa: BLE001  the link may be gone: report, nothing else can be done
            self.report.watchdog_stops.append({"reason": f"{reason}; zero velocity failed: {error}",
                                               "wall_s": time.time()})

    def _watchdog(self) -> None:
        """Zero velocity while the tree is stuck, the sensors are stale or the link is down."""
        if self.rt_priority is not None:  # the safety thread preempts the tree's
            request_realtime(self.rt_priority + 1)
        poll_s = min(self.watchdog_timeout_s / 4, 0.05)
        while not self._stop.wait(poll_s):
            reasons = []
            with self._lock:
                silent_s = time.monotonic() - self._last_tick_wall
            if silent_s > self.watchdog_timeout_s:
                reasons.append(f"no tick for {silent_s:.2f} s (tree stopped ticking)")
            try:
                stale = self.stale_reason(None) if hasattr(self.robot, "sensor_stamps_s") else None
            except Exception as error:  # noqa: BLE001
                stale = f"sensor check failed: {error}"
            if stale:
                reasons.append(f"sensors stale: {stale}")
            if hasattr(self.robot, "link_ok"):
                ok, why = self.robot.link_ok()
                if not ok:
                    reasons.append(f"link down: {why}")
            if not reasons:
                continue
            with self._lock:
                first = not self._stopped_by_watchdog
                self._stopped_by_watchdog = True
            if first or silent_s > self.watchdog_timeout_s:
                # Repeated while the cause lasts: a driver with its own command timeout keeps getting zeros.
                self._safe_stop("; ".join(reasons))
                if first:
                    self.report.watchdog_stops.append({"reason": "; ".join(reasons), "wall_s": time.time()})


_KINEMATICS: dict[str, WholeBodyIK | None] = {}


def _kinematics_of(model) -> WholeBodyIK | None:
    """Forward kinematics of ``model``'s robot (a Drake plant of its URDF), one per description and process; None
    where there is no model or its URDF does not load (the tool poses then follow the base only)."""
    if model is None or not getattr(model, "tcp_link_names", None):
        return None
    key = str(model.urdf_path)
    if key not in _KINEMATICS:
        try:
            _KINEMATICS[key] = WholeBodyIK.from_robot_model(model)
        except Exception as error:  # noqa: BLE001  a robot whose URDF Drake cannot load: base-only prediction
            warnings.warn(f"latency compensation: no forward kinematics for {key} ({type(error).__name__}: {error}); "
                          "the tool poses handed to the tree follow the base only", RuntimeWarning, stacklevel=2)
            _KINEMATICS[key] = None
    return _KINEMATICS[key]


def _runqueue_wait_s() -> float | None:
    """Seconds this thread has waited on the kernel's run queue so far (Linux schedstat), or None."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) * 1e-9
    except (OSError, IndexError, ValueError):
        return None


class _RobotClock:
    """The robot's own clock (``robot.now_s()``, e.g. a simulator's ``/clock``)."""

    def __init__(self, robot):
        self.robot = robot

    def now_s(self) -> float:
        return self.robot.now_s()

    def sleep_until(self, t_s: float) -> None:
        if hasattr(self.robot, "sleep_until"):
            self.robot.sleep_until(t_s)
            return
        while self.robot.now_s() < t_s:
            time.sleep(0.001)
