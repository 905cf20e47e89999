"""A simulated robot that does not wait for the tree: a bundled env in its own process, on its own clock.

The lockstep harness (``handleit.harness.evaluation``) steps the env once per tree tick, so the robot stands still while
a tick plans. :class:`RealtimeSimRobot` is a :class:`~handleit.types.RobotInterface` whose env runs in a child
process and advances at the control rate (100 Hz of simulated time) whatever the tree does; the tree ticks in
a :class:`~handleit.harness.realtime_runner.RealtimeRunner` in this process, each tick with the newest observation it
may see. Like a real robot, the simulated one has:

- a camera rate: the point cloud is rendered only every ``1 / camera_hz`` of simulated time (joint states,
  base and tool poses come every control step);
- sensor latency: a reading becomes visible ``sensor_latency_s`` after it was taken;
- command latency: a command takes effect ``command_latency_s`` after it was sent, and one older than the
  command timeout (0.1 s, a base driver's ``cmd_vel`` timeout) counts as zero velocity.

Real time, honestly: a rendered step costs ~20-60 ms on this CPU machine, so 100 Hz of wall-clock time is out
of reach. The simulated clock runs at ``real_time_factor`` (rtf) simulated seconds per wall second, as
``serve-ros`` does (:class:`PacedStepLoop` is shared with it), and every delay is on the simulated clock; so is
the tree's compute time: a tick that takes 0.4 s of wall time at rtf 0.25 costs the robot 0.1 s of motion. The
factor reached and the slips (the child fell more than ``MAX_LAG_S`` wall seconds behind its schedule) are
reported with each episode.

The child is a fresh interpreter (``subprocess`` running this module's :func:`_child_main`, the equivalent of
multiprocessing's spawn; a multiprocessing child is not allowed from the evaluation's daemon workers), talking
over two pipes with ``multiprocessing.connection``. It sends ``/clock`` every step, undelayed, and the sensor
readings once they are visible; the ground truth (success) comes back at the end of the episode for the record
only, never through :meth:`RealtimeSimRobot.observe`.

``--perturb`` keys (:func:`split_perturbation`): ``latency=0.1`` (sensor latency, s), ``command_latency=0.05``
(s), ``camera_hz=15``, ``rtf=0.25``, ``planning=process|thread|inline`` (default ``process``; ``background`` is
the old name of ``thread``), ``gc=freeze|auto`` (default ``freeze``: the tree process's heap frozen out of Python's
garbage collector for the episode, handleit.harness.gc_pauses); they mix with the env's sensor
keys (``depth_noise=...``), which ``envs/sensor_model.parse_perturbation`` reads. Any of them runs the episode
through this robot.
"""

from __future__ import annotations

import dataclasses
import math
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable

import numpy as np

import handleit.envs
from handleit.envs.sensor_model import SensorPerturbation, parse_perturbation
from handleit.harness.gc_pauses import DEFAULT_GC_MODE, GC_MODES
from handleit.harness.realtime_runner import DEFAULT_MAX_AGE_S, RealtimeRunner, zero_command
from handleit.harness.sim_robot import SimRobot
from handleit.harness.solvers import make_solver
from handleit.harness.tree_phases import PhaseTracker
from handleit.poses import pose7_to_matrix
from handleit.types import Command, Observation, RobotModel

MAX_LAG_S = 0.25  # wall seconds behind the schedule before a paced loop lets go of it (counted as a slip)
DEFAULT_CAMERA_HZ = 30.0  # a depth camera's usual rate; the lockstep harness renders every step (100 Hz)
DEFAULT_REAL_TIME_FACTOR = 0.25  # simulated s per wall s: a camera step (~55 ms) fits a 30 Hz camera's budget
DEFAULT_COMMAND_TIMEOUT_S = 0.1  # simulated s after it took effect before a command counts as zero (cmd_vel)
DEFAULT_WATCHDOG_TIMEOUT_S = 0.25  # wall s without a completed tick before the runner commands zero velocity
START_TIMEOUT_S = 300.0  # wall s for the child to import SAPIEN, build the env and reset (slow on a loaded CPU)
# Where planning nodes plan in real time (behaviors/background.py); process measured best (docs/benchmarks.md,
# issue 15, "Planning in another process").
PLANNING_VALUES = ("process", "thread", "inline")
DEFAULT_PLANNING = "process"
REALTIME_KEYS = ("latency", "command_latency", "camera_hz", "rtf", "planning", "compensation", "gc")
_EPS_S = 1e-9  # simulated times are sums of 0.01 s steps: compare them with this tolerance


# ----------------------------------------------------------------------------------------------------
# The --perturb keys
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RealtimeSettings:
    """How the simulated robot differs from the lockstep one; every time on the simulated clock.

    ``sensor_latency_s``: a reading becomes visible this long after it was taken [s].
    ``command_latency_s``: a command takes effect this long after it was sent [s].
    ``camera_hz``: point clouds per simulated second (rounded to a whole number of control steps).
    ``real_time_factor``: simulated seconds per wall second the child's clock runs at.
    ``planning``: where a tree's planning nodes plan (behaviors/background.py): ``process`` (the planning worker
    process: no solver holds the tick process's GIL), ``thread`` (a thread of the tick process), or ``inline``
    (in the tick, as in lockstep, to measure what that costs).
    ``compensate_latency``: the runner moves late joint states on by the commands sent since their stamp
    (handleit.control.latency); False (``compensation=off``) hands the tree the late state as it is.
    ``gc``: Python's garbage collector in the tree's process (handleit.harness.gc_pauses): ``freeze`` the heap
    the episode starts with, or ``auto`` (Python's default, to measure what freezing saves).
    """

    sensor_latency_s: float = 0.0
    command_latency_s: float = 0.0
    camera_hz: float = DEFAULT_CAMERA_HZ
    real_time_factor: float = DEFAULT_REAL_TIME_FACTOR
    planning: str = DEFAULT_PLANNING
    compensate_latency: bool = True
    gc: str = DEFAULT_GC_MODE

    @property
    def background_planning(self) -> bool:
        """Planning runs off the tick thread (in the worker process or on a thread)."""
        return self.planning != "inline"

    def __post_init__(self):
        for name in ("sensor_latency_s", "command_latency_s"):
            value = getattr(self, name)
            if not _finite_real(value) or not 0 <= value <= 5:
                raise ValueError(f"RealtimeSettings.{name} must be in [0, 5] s, got {value!r}")
        if not _finite_real(self.camera_hz) or not 0 < self.camera_hz <= 100:
            raise ValueError(f"RealtimeSettings.camera_hz must be in (0, 100], got {self.camera_hz!r}")
        if self.planning not in PLANNING_VALUES:
            raise ValueError(f"RealtimeSettings.planning must be one of {PLANNING_VALUES}, got {self.planning!r}")
        if self.gc not in GC_MODES:
            raise ValueError(f"RealtimeSettings.gc must be one of {GC_MODES}, got {self.gc!r}")
        if not _finite_real(self.real_time_factor) or not 0 < self.real_time_factor <= 10:
            raise ValueError(f"RealtimeSettings.real_time_factor must be in (0, 10], got {self.real_time_factor!r}")

    def describe(self) -> str:
        """The canonical text: every key, fixed order, ``planning``, ``compensation`` and ``gc`` only when not
        their defaults (``split_perturbation(s.describe())[0] == s``)."""
        return (f"latency={_num(self.sensor_latency_s)},command_latency={_num(self.command_latency_s)},"
                f"camera_hz={_num(self.camera_hz)},rtf={_num(self.real_time_factor)}"
                + ("" if self.planning == DEFAULT_PLANNING else f",planning={self.planning}")
                + ("" if self.compensate_latency else ",compensation=off")
                + ("" if self.gc == DEFAULT_GC_MODE else f",gc={self.gc}"))

    def __str__(self) -> str:
        return self.describe()


_FIELD_OF_KEY = {"latency": "sensor_latency_s", "command_latency": "command_latency_s", "camera_hz": "camera_hz",
                 "rtf": "real_time_factor", "planning": "planning",
                 "compensation": "compensate_latency", "gc": "gc"}


def split_perturbation(text: str | None) -> tuple[RealtimeSettings | None, str]:
    """Split a ``--perturb`` text into the real-time settings (None when it has no real-time key) and the rest,
    the env's sensor perturbation text ("" when none), tokens in their order. ``ValueError`` naming the bad
    token. Latencies are seconds, or milliseconds with ``ms`` (``latency=100ms``)."""
    if text is None or not text.strip() or text.strip().lower() == "none":
        return None, ""
    values: dict[str, float] = {}
    rest = []
    for token in text.split(","):
        stripped = token.strip()
        if not stripped:
            raise ValueError(f"perturbation {text!r} has an empty token (two commas, or one at an end)")
        key, sep, value = stripped.partition("=")
        key = key.strip().lower()
        if key not in _FIELD_OF_KEY:
            rest.append(stripped)  # the env's key (or a bad one): parse_perturbation judges it
            continue
        if not sep or not value.strip():
            raise ValueError(f"real-time perturbation token {stripped!r} is not key=value; keys: "
                             f"{', '.join(REALTIME_KEYS)}")
        if _FIELD_OF_KEY[key] in values:
            raise ValueError(f"real-time perturbation {key!r} given twice (token {stripped!r})")
        values[_FIELD_OF_KEY[key]] = _parse_value(key, value.strip(), stripped)
    if not values:
        return None, ",".join(rest)
    try:
        settings = RealtimeSettings(**values)
    except ValueError as error:
        raise ValueError(f"perturbation {text!r}: {error}") from None
    return settings, ",".join(rest)


def _parse_value(key: str, value: str, token: str) -> float | bool | str:
    if key == "compensation":
        if value.lower() not in ("on", "off"):
            raise ValueError(f"real-time perturbation token {token!r}: compensation is 'on' or 'off'")
        return value.lower() == "on"
    if key == "gc":
        if value.lower() not in GC_MODES:
            raise ValueError(f"real-time perturbation token {token!r}: gc is one of {', '.join(GC_MODES)}")
        return value.lower()
    if key == "planning":
        value = {"background": "thread"}.get(value.lower(), value.lower())  # the old name of thread
        if value not in PLANNING_VALUES:
            raise ValueError(f"real-time perturbation token {token!r}: planning is one of {', '.join(PLANNING_VALUES)}")
        return value
    per_unit = 1.0
    if key in ("latency", "command_latency"):
        lower = value.lower()
        if lower.endswith("ms"):
            value, per_unit = value[:-2], 1000.0
        elif lower.endswith("s"):
            value = value[:-1]
    try:
        x = float(value) / per_unit  # a division: 100 / 1000 is the same float as 0.1
    except ValueError:
        raise ValueError(f"real-time perturbation token {token!r}: {value.strip()!r} is not a number") from None
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"real-time perturbation token {token!r}: the value must be finite and >= 0")
    return x


def _finite_real(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x)


def _num(x: float) -> str:
    """Shortest text that parses back to the same float, without a trailing ".0"."""
    s = repr(float(x))
    return s[:-2] if s.endswith(".0") else s


# ----------------------------------------------------------------------------------------------------
# Latency buffers (simulated clock)
# ----------------------------------------------------------------------------------------------------
class LatencyBuffer:
    """Readings stamped when taken, released ``latency_s`` later, oldest first (a sensor's pipeline)."""

    def __init__(self, latency_s: float):
        if not latency_s >= 0:
            raise ValueError(f"latency_s must be >= 0, got {latency_s}")
        self.latency_s = float(latency_s)
        self._items: deque[tuple[float, Any]] = deque()

    def push(self, stamp_s: float, value: Any) -> None:
        if self._items and stamp_s < self._items[-1][0]:
            raise ValueError(f"stamp {stamp_s} s is older than the last one pushed ({self._items[-1][0]} s)")
        self._items.append((float(stamp_s), value))

    def release(self, now_s: float) -> list[tuple[float, Any]]:
        """Every (stamp, value) visible at ``now_s`` (stamp + latency <= now) and not released before."""
        out = []
        while self._items and self._items[0][0] + self.latency_s <= now_s + _EPS_S:
            out.append(self._items.popleft())
        return out

    def __len__(self) -> int:
        return len(self._items)


class DelayedCommand:
    """The command in effect at the robot: the newest one sent at least ``latency_s`` ago; none (the robot
    stops) once ``timeout_s`` has passed since it took effect, as a driver's command timeout does."""

    def __init__(self, latency_s: float, timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S):
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self._pending = LatencyBuffer(latency_s)
        self.timeout_s = float(timeout_s)
        self._current: tuple[float, Command] | None = None  # (time it took effect, command)
        self._last_stamp_s = -math.inf

    def send(self, stamp_s: float, command: Command) -> None:
        """A command sent at ``stamp_s`` (the sender's reading of the robot's clock). Commands arrive in the
        order sent; two senders (the tick and the watchdog) may have read the clock in the other order, so a
        stamp older than the previous one counts as the previous one's."""
        self._last_stamp_s = max(float(stamp_s), self._last_stamp_s)
        self._pending.push(self._last_stamp_s, command)

    def in_effect(self, now_s: float) -> Command | None:
        """The command to apply at ``now_s``; None when there is none or it timed out."""
        for stamp, command in self._pending.release(now_s):
            self._current = (stamp + self._pending.latency_s, command)
        if self._current is None or now_s - self._current[0] > self.timeout_s + _EPS_S:
            return None
        return self._current[1]


# ----------------------------------------------------------------------------------------------------
# Stepping on a simulated clock paced to the wall clock (shared with serve-ros)
# ----------------------------------------------------------------------------------------------------
def step_sim_robot(robot: SimRobot, command: Command, render: bool) -> None:
    """One control step; only a camera step renders. The env renders in every step of its ``pointcloud`` mode,
    so the other steps run in its ``state`` mode (~1-2 ms instead of ~20-60 ms); their observation holds the
    proprioception only (``robot._obs["agent"]``), and ``robot.observe()`` is valid after camera steps only.
    The env offers no switch for this; flipping ``obs_mode`` is the stop-gap (envs/ should offer a step
    without the observation)."""
    base = robot.env.unwrapped
    if not render:
        base.obs_mode = "state"
    try:
        robot.act(command)
    finally:
        base.obs_mode = "pointcloud"


@dataclass
class PacingReport:
    steps: int = 0
    wall_s: float = 0.0
    real_time_factor: float = 0.0  # achieved: simulated seconds per wall second
    slips: int = 0  # times the loop fell more than MAX_LAG_S behind and let go of its schedule
    step_ms_median: float | None = None  # wall ms of a step without rendering
    camera_step_ms_median: float | None = None  # wall ms of a camera step


class PacedStepLoop:
    """Steps at ``dt_s`` of simulated time, ``dt_s / real_time_factor`` of wall time apart; camera steps (the
    first, then every ``camera_every``-th) render. When a camera step overruns, the next steps catch up (physics
    keeps going while a camera works); when the loop falls more than ``max_lag_s`` behind, it lets go of the
    schedule and counts a slip."""

    def __init__(self, dt_s: float, real_time_factor: float, camera_hz: float, max_lag_s: float = MAX_LAG_S):
        if not 0 < real_time_factor <= 10 or not 0 < camera_hz <= 100 or not dt_s > 0:
            raise ValueError(f"real_time_factor {real_time_factor} must be in (0, 10], camera_hz {camera_hz} in "
                             f"(0, 100], dt_s {dt_s} > 0")
        self.dt_s, self.rtf, self.max_lag_s = dt_s, real_time_factor, max_lag_s
        self.camera_every = max(1, round(1.0 / (camera_hz * dt_s)))

    @property
    def camera_hz(self) -> float:
        """The camera rate reached: a whole number of control steps per frame."""
        return 1.0 / (self.camera_every * self.dt_s)

    def run(self, step: Callable[[bool], None], done: Callable[[], bool],
            stop: threading.Event | None = None) -> PacingReport:
        """Call ``step(render)`` on schedule until ``done()`` or ``stop`` is set."""
        period_wall = self.dt_s / self.rtf
        report = PacingReport()
        step_wall, render_wall = [], []
        wall0 = time.monotonic()
        next_wall = wall0
        while not done() and not (stop is not None and stop.is_set()):
            next_wall += period_wall
            delay = next_wall - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif -delay > self.max_lag_s:
                report.slips += 1
                next_wall = time.monotonic()
            # The first step renders too: gymnasium's env checker inspects the first step's observation.
            render = report.steps == 0 or (report.steps + 1) % self.camera_every == 0
            start = time.perf_counter()
            step(render)
            (render_wall if render else step_wall).append(time.perf_counter() - start)
            report.steps += 1
        report.wall_s = time.monotonic() - wall0
        report.real_time_factor = report.steps * self.dt_s / max(report.wall_s, 1e-9)
        report.step_ms_median = 1e3 * float(np.median(step_wall)) if step_wall else None
        report.camera_step_ms_median = 1e3 * float(np.median(render_wall)) if render_wall else None
        return report


# ----------------------------------------------------------------------------------------------------
# The child process: the env, its clock, the latency buffers
# ----------------------------------------------------------------------------------------------------
def _state_of(robot: SimRobot) -> dict[str, Any]:
    """The proprioception of the last step (any obs_mode): joint states, base and tool poses, goal, prompt
    (``SimRobot.observe`` without the cloud)."""
    o = robot._obs
    agent, extra = o["agent"], o.get("extra", {})
    prompt_key = f"target_prompt_{robot.prompt}"
    sides = robot.env.unwrapped.robot.sides
    return {"qpos": np.asarray(agent["qpos"], np.float64), "qvel": np.asarray(agent["qvel"], np.float64),
            "X_WB": pose7_to_matrix(agent["base_pose"]),
            "X_WT": {s: pose7_to_matrix(agent["tcp_pose"][7 * i: 7 * i + 7]) for i, s in enumerate(sides)},
            "goal_W": np.asarray(extra["goal_pos"], np.float64) if "goal_pos" in extra else None,
            "target_prompt_W": np.asarray(extra[prompt_key], np.float64) if prompt_key in extra else None}


def _cloud_of(observation: Observation) -> dict[str, Any]:
    return {"points": observation.points, "colors": observation.colors, "masks": observation.masks,
            "frame": observation.frame, "sensor_origins": observation.sensor_origins,
            "sensor_index": observation.sensor_index}


class _Sender:
    """Sends from a thread, so that the env's stepping never waits on a full pipe."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="realtime-sim-sender", daemon=True)
        self._thread.start()

    def send(self, message) -> None:
        self._queue.put(message)

    def _run(self) -> None:
        while True:
            message = self._queue.get()
            if message is None:
                return
            try:
                self.conn.send(message)
            except OSError:  # the parent is gone
                return

    def flush_and_close(self, timeout_s: float = 10.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout=timeout_s)


class _SimulatedRobotProcess:
    """What runs in the child: one env (reset per episode) stepped in real time by a PacedStepLoop."""

    def __init__(self, config: dict[str, Any], inbox: Connection, sender: _Sender):
        self.inbox, self.sender = inbox, sender
        self.settings: RealtimeSettings = config["settings"]
        options = {}
        if config.get("sensor_perturbation") is not None:
            options["sensor_perturbation"] = config["sensor_perturbation"]
        if config.get("target_marker_rgb") is not None:
            options["target_marker_rgb"] = tuple(config["target_marker_rgb"])
        self.env = handleit.envs.make(config["task"], obs_mode="pointcloud", split=config["split"],
                                      max_episode_steps=config["max_steps"], **options)
        self.robot = SimRobot(self.env, prompt=config.get("prompt", "box"), sim_masks=config.get("sim_masks", True))
        self.command_timeout_s = config.get("command_timeout_s", DEFAULT_COMMAND_TIMEOUT_S)
        self.loop = PacedStepLoop(self.robot.model.control_dt_s, self.settings.real_time_factor,
                                  self.settings.camera_hz)
        self.closing = False

    def reset(self, seed: int, model_id: str | None) -> None:
        options = {"model_id": model_id} if model_id is not None else None
        first = self.robot.reset(seed=seed, options=options)
        self.sender.send(("ready", first, self.robot.info.get("target_link")))

    def run_episode(self) -> None:
        robot, dt = self.robot, self.robot.model.control_dt_s
        zero = zero_command(robot)
        commands = DelayedCommand(self.settings.command_latency_s, self.command_timeout_s)
        sensors = LatencyBuffer(self.settings.sensor_latency_s)
        stop = threading.Event()
        counts = {"commands": 0, "timed_out_steps": 0, "camera_frames": 0}

        def step(render: bool) -> None:
            now = robot.steps * dt
            while self.inbox.poll():  # every command that arrived since the last step
                try:
                    message = self.inbox.recv()
                except EOFError:  # the parent is gone: stop stepping
                    self.closing = True
                    stop.set()
                    return
                if message[0] == "cmd":
                    commands.send(min(message[1], now), message[2])
                    counts["commands"] += 1
                elif message[0] in ("stop", "close"):
                    self.closing = message[0] == "close"
                    stop.set()
                    return
            command = commands.in_effect(now)
            if command is None:
                command = zero
                counts["timed_out_steps"] += 1
            step_sim_robot(robot, command, render)
            t = robot.steps * dt
            sensors.push(t, ("state", _state_of(robot)))
            if render:
                sensors.push(t, ("cloud", _cloud_of(robot.observe())))
                counts["camera_frames"] += 1
            self.sender.send(("clock", t, sensors.release(t)))

        pacing = self.loop.run(step, done=lambda: robot.done, stop=stop)
        info = {k: (bool(v) if isinstance(v, (bool, np.bool_)) else float(v))
                for k, v in robot.info.items() if isinstance(v, (bool, np.bool_, int, float, np.number))}
        self.sender.send(("result", {
            "success": bool(robot.info.get("success", False)), "steps": robot.steps, "done": robot.done,
            "open_fraction": info.get("open_fraction"), "info": info, "pacing": dataclasses.asdict(pacing),
            "camera_hz_reached": self.loop.camera_hz, **counts}))


def _child_main(fd_in: int, fd_out: int) -> None:
    """The child's entry: a config, then ``reset`` / ``start`` / ``close`` messages until the parent closes."""
    inbox, outbox = Connection(fd_in, writable=False), Connection(fd_out, readable=False)
    sender = _Sender(outbox)
    try:
        config = inbox.recv()
        sim = _SimulatedRobotProcess(config, inbox, sender)
        sender.send(("model", sim.robot.model))
        while not sim.closing:
            message = inbox.recv()
            if message[0] == "reset":
                sim.reset(message[1], message[2])
            elif message[0] == "start":
                sim.run_episode()
            elif message[0] == "close":
                break
            # a "cmd" or "stop" between episodes: nothing is moving, nothing to do
    except EOFError:  # the parent is gone
        pass
    except Exception:  # noqa: BLE001  tell the parent why, then end
        sender.send(("error", traceback.format_exc(limit=8)))
    finally:
        sender.flush_and_close()


# ----------------------------------------------------------------------------------------------------
# The robot, in the tree's process
# ----------------------------------------------------------------------------------------------------
class RealtimeSimError(RuntimeError):
    """The simulated robot's process failed or stopped answering."""


class RealtimeSimRobot:
    """A :class:`~handleit.types.RobotInterface` over a bundled env stepped in real time in a child process.

    Args:
        task, split, max_steps: the bundled env (``handleit.envs.make``).
        settings: latencies, camera rate and real-time factor (simulated clock).
        sensor_perturbation: the env's ``sensor_perturbation`` option (a SensorPerturbation), or None.
        target_marker_rgb: the env's ``target_marker_rgb`` option (the ``color_marker`` segmenter), or None.
        prompt, sim_masks: as :class:`~handleit.harness.sim_robot.SimRobot` (``sim_masks=False``: no simulator masks).
        command_timeout_s: simulated seconds after it took effect before a command counts as zero.

    Use: ``reset(seed, model_id) -> Observation``; build the solver; ``start()``; tick with a RealtimeRunner
    ``until=robot.episode_over``; ``result()`` (ground truth, for the record only); ``close()``. Beyond the
    RobotInterface it offers the runner's ``now_s``, ``sleep_until``, ``sensor_stamps_s`` and ``link_ok``.
    """

    def __init__(self, task: str, settings: RealtimeSettings, *, split: str = "test", max_steps: int = 200,
                 sensor_perturbation: SensorPerturbation | None = None, target_marker_rgb=None,
                 prompt: str = "box", sim_masks: bool = True,
                 command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S, start_timeout_s: float = START_TIMEOUT_S):
        self.task, self.settings = task, settings
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._reset_state()
        self._fault: str | None = None
        self._closed = False
        to_child_r, to_child_w = _pipe()
        from_child_r, from_child_w = _pipe()
        code = ("import sys; from handleit.harness.realtime_sim import _child_main; "
                "_child_main(int(sys.argv[1]), int(sys.argv[2]))")
        self._process = subprocess.Popen([sys.executable, "-c", code, str(to_child_r), str(from_child_w)],
                                         pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL)
        _close_fds(to_child_r, from_child_w)
        self._to_child = Connection(to_child_w, readable=False)
        self._from_child = Connection(from_child_r, writable=False)
        self._send(dict(task=task, split=split, max_steps=max_steps, settings=settings,
                        sensor_perturbation=sensor_perturbation, target_marker_rgb=target_marker_rgb,
                        prompt=prompt, sim_masks=sim_masks, command_timeout_s=command_timeout_s))
        self._receiver = threading.Thread(target=self._receive, name="realtime-sim-receiver", daemon=True)
        self._receiver.start()
        self.model: RobotModel = self._wait_for("model", start_timeout_s)[1]
        self.start_timeout_s = start_timeout_s

    # -- episode ----------------------------------------------------------------------------------------
    def reset(self, seed: int, model_id: str | None = None) -> Observation:
        """Reset the env (not yet stepping); returns the first observation, visible at once (the robot stood
        still before the episode, so older readings equal it)."""
        with self._cond:
            self._reset_state()
        self._send(("reset", int(seed), model_id))
        _, first, self.target_link = self._wait_for("ready", self.start_timeout_s)
        with self._cond:
            self._clock_s = first.time_s
            self._state = (first.time_s, {k: getattr(first, k) for k in
                                          ("qpos", "qvel", "X_WB", "X_WT", "goal_W", "target_prompt_W")})
            self._cloud = (first.time_s, _cloud_of(first))
        return first

    def start(self) -> None:
        """The clock starts: the env steps at the control rate from now on, whatever the tree does."""
        self._send(("start",))

    def episode_over(self) -> bool:
        """The episode ended (success, horizon), or the child failed."""
        with self._cond:
            return self._result is not None or self._fault is not None

    def result(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """The episode's end: success, steps, env info, pacing (ground truth: for the record, never a solver)."""
        end = time.monotonic() + timeout_s
        with self._cond:
            while self._result is None:
                if self._fault is not None:
                    raise RealtimeSimError(self._fault)
                if time.monotonic() > end:
                    raise RealtimeSimError(f"no episode result within {timeout_s} s")
                self._cond.wait(timeout=0.1)
            return self._result

    def stop_episode(self) -> None:
        """End the episode early (the child stops stepping and reports)."""
        self._send(("stop",))

    def close(self) -> None:
        """Stop the child process (zero velocity first)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._send(("cmd", self.now_s(), zero_command(self)))
            self._send(("close",))
        except (OSError, RealtimeSimError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        self._to_child.close()

    # -- RobotInterface ---------------------------------------------------------------------------------
    def observe(self) -> Observation:
        """The newest visible readings: joint states and poses of the newest state, the newest cloud."""
        with self._cond:
            if self._fault is not None:
                raise RealtimeSimError(self._fault)
            if self._state is None or self._cloud is None:
                raise RealtimeSimError("no observation yet (call reset() first)")
            (t_state, s), (t_cloud, c) = self._state, self._cloud
        return Observation(time_s=t_state, points_time_s=t_cloud, points=c["points"], colors=c["colors"],
                           masks=c["masks"], frame=c["frame"], joint_names=self.model.joint_names, qpos=s["qpos"], qvel=s["qvel"],
                           X_WB=s["X_WB"], X_WT=s["X_WT"], goal_W=s["goal_W"], target_prompt_W=s["target_prompt_W"],
                           sensor_origins=c.get("sensor_origins"), sensor_index=c.get("sensor_index"))

    def act(self, command: Command) -> None:
        """Send a command stamped with the robot's clock; it takes effect ``command_latency_s`` later."""
        self._send(("cmd", self.now_s(), command))

    # -- what the RealtimeRunner reads ------------------------------------------------------------------
    def now_s(self) -> float:
        with self._cond:
            return self._clock_s

    def sleep_until(self, t_s: float) -> None:
        """Until the robot's clock reaches ``t_s``, the episode ends or the child fails."""
        with self._cond:
            while self._clock_s < t_s - _EPS_S and self._result is None and self._fault is None:
                self._cond.wait(timeout=0.05)

    def sensor_stamps_s(self) -> dict[str, float]:
        with self._cond:
            stamps = {}
            if self._state is not None:
                stamps["joint_states"] = stamps["odom"] = self._state[0]
            if self._cloud is not None:
                stamps["points"] = self._cloud[0]
            return stamps

    def link_ok(self) -> tuple[bool, str]:
        with self._cond:
            return self._fault is None, self._fault or ""

    # -- plumbing ---------------------------------------------------------------------------------------
    def _reset_state(self) -> None:
        self._clock_s = 0.0
        self._state: tuple[float, dict] | None = None
        self._cloud: tuple[float, dict] | None = None
        self._result: dict | None = None
        self._mailbox: deque = deque()  # replies to reset/start (model, ready)

    def _send(self, message) -> None:
        if self._fault is not None and message[0] != "cmd":
            raise RealtimeSimError(self._fault)
        with self._send_lock:
            try:
                self._to_child.send(message)
            except OSError as error:
                self._set_fault(f"the simulated robot's process is gone: {error}")

    def _wait_for(self, kind: str, timeout_s: float):
        end = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if self._mailbox and self._mailbox[0][0] == kind:
                    return self._mailbox.popleft()
                if self._fault is not None:
                    raise RealtimeSimError(self._fault)
                if time.monotonic() > end:
                    self._process.kill()
                    raise RealtimeSimError(f"the simulated robot sent no {kind!r} within {timeout_s} s")
                self._cond.wait(timeout=0.1)

    def _set_fault(self, reason: str) -> None:
        with self._cond:
            self._fault = self._fault or reason
            self._cond.notify_all()

    def _receive(self) -> None:
        while True:
            try:
                message = self._from_child.recv()
            except (EOFError, OSError):
                if not self._closed:
                    self._set_fault(f"the simulated robot's process ended (exit code {self._process.poll()})")
                return
            kind = message[0]
            with self._cond:
                if kind == "clock":
                    _, t, readings = message
                    self._clock_s = t
                    for stamp, (stream, value) in readings:
                        if stream == "state":
                            self._state = (stamp, value)
                        else:
                            self._cloud = (stamp, value)
                elif kind == "result":
                    self._result = message[1]
                elif kind == "error":
                    self._fault = f"the simulated robot failed:\n{message[1]}"
                else:
                    self._mailbox.append(message)
                self._cond.notify_all()


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    return r, w


def _close_fds(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


# ----------------------------------------------------------------------------------------------------
# One evaluation episode in real time (handleit.harness.evaluation branches here)
# ----------------------------------------------------------------------------------------------------
class TrackedSolver:
    """The solver, with each change of its ``failed_node`` recorded (the lockstep harness's ``failures``),
    per step whether a planning node planned (its plan ran in the tick, completed, or runs in the background),
    and where the robot's time went: the tree's tip per step, run-length coded (:meth:`phases`)."""

    def __init__(self, solver):
        self.solver = solver
        self.failures: list[str] = []
        self.planning_ticks: list[bool] = []  # per solver step
        self._planners: list = []
        self._phases = PhaseTracker()  # the tip node per step (harness/tree_phases.py)

    def reset(self, observation: Observation) -> None:
        self.solver.reset(observation)
        root = getattr(self.solver, "root", None)
        self._planners = [n for n in root.iterate() if hasattr(n, "planning")] if root is not None else []

    def step(self, observation: Observation) -> Command:
        before = sum(len(getattr(n, "plan_wall_s", ())) for n in self._planners)
        command = self.solver.step(observation)
        after = sum(len(getattr(n, "plan_wall_s", ())) for n in self._planners)
        self.planning_ticks.append(after > before or any(n.planning() for n in self._planners))
        node = getattr(self.solver, "failed_node", None)
        if node and (not self.failures or self.failures[-1] != node):
            self.failures.append(node)
        self._phases.track(self.solver, observation.time_s)
        return command

    def phases(self) -> list[list]:
        """Where the episode's steps went: [tip node, robot clock s at its first step, steps], in order."""
        return self._phases.phases()

    def plans(self) -> list[dict[str, Any]]:
        """Each plan of the episode: node, wall seconds from sending to the result, and the planning worker's
        own seconds on it (None for a plan on a thread or in the tick)."""
        plans = []
        for n in self._planners:
            worker_s = list(getattr(n, "plan_worker_s", ()))
            for i, t in enumerate(getattr(n, "plan_wall_s", ())):
                w = worker_s[i] if i < len(worker_s) else None
                plans.append({"node": n.name, "wall_s": round(t, 4), "worker_s": None if w is None else round(w, 4)})
        return plans


def warm_up_solver(solver, first: Observation) -> str:
    """Build what a tree builds on first use (the IK at reset, the motion planner at the first re-plan: seconds
    of parsing that hold the GIL) before the robot's clock starts, as a robot's software starts before it
    moves. The runner resets the solver again at its first tick (cheap once built). Returns what was done."""
    if not hasattr(solver, "tools"):
        return "nothing to build"
    start = time.perf_counter()
    solver.reset(first)
    done = "reset"
    if getattr(solver, "realtime", False) and getattr(solver, "planning", "thread") == "process":
        return f"{done}, planners in the worker process, in {time.perf_counter() - start:.1f} s"
    try:
        if solver.tools is not None and solver.tools.motion_planner is not None:
            solver.tools.motion_planner()
            done += ", motion planner"
    except Exception as error:  # noqa: BLE001  a tree that never plans arm paths may have no planner
        done += f", no motion planner ({type(error).__name__}: {error})"
    return f"{done} in {time.perf_counter() - start:.1f} s"


def runner_max_age_s(settings: RealtimeSettings) -> dict[str, float]:
    """The freshness limits for a robot whose readings arrive ``sensor_latency_s`` late by design: the
    runner's defaults on top of that latency (stale means later than the robot's known latency)."""
    return {stream: limit + settings.sensor_latency_s for stream, limit in DEFAULT_MAX_AGE_S.items()}


# Simulated robots kept alive between episodes by one evaluation worker: each is a process of ~0.7 GB with its env
# built. One per env configuration without a bound filled 24 GB and met the OOM killer on a grid of 5 tasks x 2
# splits x 6 real-time settings (60 configurations); an evaluation runs its episodes grouped by configuration, so
# the last two used are the ones it needs again.
MAX_KEPT_ROBOTS = 2


class RealtimeEpisodes:
    """Runs evaluation episodes in real time, a :class:`RealtimeSimRobot` process kept per env configuration
    (the child builds its env once, as the lockstep workers keep theirs) for the ``max_robots`` configurations
    used last; the one used longest ago is closed (its process ended) when another is needed."""

    def __init__(self, watchdog_timeout_s: float = DEFAULT_WATCHDOG_TIMEOUT_S, max_robots: int = MAX_KEPT_ROBOTS):
        if max_robots < 1:
            raise ValueError(f"max_robots must be at least 1, got {max_robots}")
        self.watchdog_timeout_s = watchdog_timeout_s
        self.max_robots = max_robots
        self._robots: dict[tuple, RealtimeSimRobot] = {}  # in the order of their last use, the oldest first

    def robot(self, spec, settings: RealtimeSettings, sensor_perturbation: SensorPerturbation | None,
              sim_masks: bool, target_marker_rgb) -> RealtimeSimRobot:
        # Where the tree plans, and its garbage collector, are no matter of the robot's: one robot process serves
        # every planning and gc mode.
        robot_settings = dataclasses.replace(settings, planning=DEFAULT_PLANNING, gc=DEFAULT_GC_MODE)
        key = (spec.task, spec.split, spec.max_steps, robot_settings,
               sensor_perturbation, sim_masks,
               None if target_marker_rgb is None else tuple(target_marker_rgb))
        robot = self._robots.pop(key, None)
        if robot is not None and not robot.link_ok()[0]:
            robot.close()
            robot = None
        if robot is None:
            while len(self._robots) >= self.max_robots:  # the configuration used longest ago makes room
                self._robots.pop(next(iter(self._robots))).close()
            robot = RealtimeSimRobot(spec.task, settings, split=spec.split, max_steps=spec.max_steps,
                                     sensor_perturbation=sensor_perturbation, target_marker_rgb=target_marker_rgb,
                                     sim_masks=sim_masks)
        self._robots[key] = robot  # the newest use last
        return robot

    def run(self, spec, record, settings: RealtimeSettings, *, sensor_text: str = "", sim_masks: bool = True,
            target_marker_rgb=None):
        """Run ``spec`` (an evaluation EpisodeSpec) in real time and fill ``record`` (its EpisodeRecord): the
        same fields as a lockstep episode, and ``record.diagnostics["realtime"]`` with the tick statistics,
        the factor reached and the slips. ``sensor_text``: the env's sensor perturbation, if any."""
        if spec.task.startswith("ms3:"):
            raise ValueError(f"{spec.task}: real-time episodes run the bundled envs only")
        sensor = None
        if sensor_text:
            sensor = dataclasses.replace(parse_perturbation(sensor_text), horizon_steps=spec.max_steps)
        robot = self.robot(spec, settings, sensor, sim_masks, target_marker_rgb)
        try:
            first = robot.reset(spec.seed, spec.model_id)
            record.target_link = robot.target_link
            solver = make_solver(spec.solver, spec.task, robot.model, segmenter=spec.segmenter)
            if hasattr(solver, "realtime"):  # a tree solver: plan off the tick thread (read at its reset)
                solver.realtime = settings.background_planning
                if settings.background_planning:
                    solver.planning = settings.planning
            warm_up = warm_up_solver(solver, first)
            tracked = TrackedSolver(solver)
            runner = RealtimeRunner(robot, tracked, rate_hz=1.0 / robot.model.control_dt_s,
                                    max_age_s=runner_max_age_s(settings), watchdog_timeout_s=self.watchdog_timeout_s,
                                    compensate_latency=settings.compensate_latency, gc_mode=settings.gc)
            robot.start()
            report = runner.run(until=robot.episode_over)
            if not robot.episode_over():  # the runner stopped first (an error): end the episode there
                robot.stop_episode()
            result = robot.result()
        except BaseException:
            robot.close()  # a half-run episode leaves the child in an unknown state: start afresh next time
            self._robots = {k: r for k, r in self._robots.items() if r is not robot}
            raise
        record.success = bool(result["success"])
        record.steps = int(result["steps"])
        record.open_fraction = result.get("open_fraction")
        record.failures = list(tracked.failures)
        record.failed_node = None if record.success else (getattr(solver, "failed_node", None) or "timeout")
        if report.error is not None:
            record.error = f"real-time runner: {report.error}"
            record.failed_node = "error"
        if hasattr(solver, "diagnostics"):
            record.diagnostics = solver.diagnostics()
        record.diagnostics["realtime"] = realtime_diagnostics(settings, report, result)
        rt = record.diagnostics["realtime"]
        rt["background_planning"] = bool(getattr(solver, "realtime", False))
        rt["planning"] = settings.planning if rt["background_planning"] else "inline"
        rt["compensate_latency"] = settings.compensate_latency
        rt["plans"] = tracked.plans()
        rt["warm_up"] = warm_up
        rt["planning_tick"] = [int(p) for p in tracked.planning_ticks]  # per solver step (solver_wall_ms)
        rt["phases"] = tracked.phases()
        return record

    def close(self) -> None:
        for robot in self._robots.values():
            robot.close()
        self._robots.clear()


def realtime_diagnostics(settings: RealtimeSettings, report, result: dict[str, Any]) -> dict[str, Any]:
    """What a record keeps of a real-time episode: settings, pacing, tick statistics (wall s) and the raw tick
    and solver times (wall ms), stale ticks and watchdog stops with their first reasons."""
    pacing = result["pacing"]
    stale = [f["reason"] for f in report.failures if f.get("check")]
    return {
        "settings": settings.describe(), "camera_hz_reached": result["camera_hz_reached"],
        "real_time_factor_target": settings.real_time_factor, "real_time_factor": pacing["real_time_factor"],
        "slips": pacing["slips"], "step_ms_median": pacing["step_ms_median"],
        "camera_step_ms_median": pacing["camera_step_ms_median"], "sim_steps": result["steps"],
        "camera_frames": result["camera_frames"], "commands_received": result["commands"],
        "zero_command_steps": result["timed_out_steps"],  # steps with no command in effect (timeout, none yet)
        **report.tick_stats(), "stop_reason": report.stop_reason, "runner_error": report.error,
        "stale_reasons": stale[:3], "watchdog_reasons": [w["reason"] for w in report.watchdog_stops[:3]],
        "tick_wall_ms": [round(1e3 * t, 2) for t in report.tick_wall_s],
        "tick_cpu_ms": [round(1e3 * t, 2) for t in report.tick_cpu_s],
        "tick_runqueue_ms": [round(1e3 * t, 2) for t in report.tick_runqueue_s],
        "tick_gc_ms": [round(1e3 * t, 2) for t in report.tick_gc_s],  # the garbage collector's pause in each tick
        # per overrun: tick index, its wall ms, the simulated ms the robot's clock advanced during it
        "overrun_ticks": [[i, round(1e3 * wall, 2), round(1e3 * advance, 2)] for i, wall, advance in report.overrun_ticks],
        "solver_wall_ms": [round(1e3 * t, 2) for t in report.solver_wall_s],
        # latency compensation against the robot: per joint (the model's order), how far off its predictions were
        "prediction_error": report.prediction_error_stats(),
    }
