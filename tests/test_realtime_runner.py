"""RealtimeRunner: freshness check, watchdog and safe stops, against a small in-process robot that records every
command it receives (a test double of a robot: the runner under test is real)."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from handleit.harness.realtime_runner import FRESHNESS_CHECK, RealtimeRunner

# The small model's URDF does not exist: its runners predict the tool poses with the base only, and say so (tested
# below); the other tests need not hear it.
pytestmark = pytest.mark.filterwarnings("ignore:latency compensation. no forward kinematics:RuntimeWarning")
from handleit.types import Command, Observation, RobotModel

JOINTS = ("base_x", "arm_1", "arm_2", "finger_1", "finger_2")


def small_model() -> RobotModel:
    return RobotModel(urdf_path=Path("none.urdf"), srdf_path=Path("none.srdf"), joint_names=JOINTS,
                      joint_limits=np.tile([-1.0, 1.0], (5, 1)), velocity_limits=np.ones(5),
                      base_joint_names=("base_x",), arm_joint_names={"right": ("arm_1", "arm_2")},
                      finger_joint_names={"right": ("finger_1", "finger_2")}, tcp_link_names={"right": "tcp"},
                      base_link_name="base")


class RecordingRobot:
    """A robot in this process: sensors stamped on the wall clock (until ``sensors_stop``), commands recorded."""

    def __init__(self, per_stream: bool = True):
        self.model = small_model()
        self.commands: list[tuple[str, Command]] = []  # (thread name, command)
        self.lock = threading.Lock()
        self.sensors_stop = threading.Event()
        self._frozen_s: float | None = None
        if per_stream:
            self.sensor_stamps_s = self._stamps

    def _stamp(self) -> float:
        if self.sensors_stop.is_set():
            if self._frozen_s is None:
                self._frozen_s = time.time()
            return self._frozen_s
        return time.time()

    def _stamps(self) -> dict[str, float]:
        t = self._stamp()
        return {"joint_states": t, "odom": t, "points": t}

    def observe(self) -> Observation:
        return Observation(time_s=self._stamp(), points=np.zeros((1, 3), np.float32), colors=np.zeros((1, 3), np.uint8),
                           masks={}, frame="world", joint_names=JOINTS, qpos=np.zeros(5), qvel=np.zeros(5),
                           X_WB=np.eye(4))

    def act(self, command: Command) -> None:
        with self.lock:
            self.commands.append((threading.current_thread().name, command))

    def moving(self) -> list[bool]:
        """Per command sent by the runner's own loop (not its watchdog): was it a non-zero velocity?"""
        with self.lock:
            return [bool(np.any(c.qvel != 0)) for name, c in self.commands if name != "handleit-watchdog"]


class MovingSolver:
    """Commands 0.5 on every joint; ``hang_at`` makes step number n block until ``release`` is set."""

    def __init__(self, hang_at: int | None = None, fail_at: int | None = None):
        self.calls, self.hang_at, self.fail_at = 0, hang_at, fail_at
        self.hanging, self.release = threading.Event(), threading.Event()
        self.observations: list[Observation] = []

    def reset(self, observation):
        pass

    def step(self, observation):
        self.calls += 1
        self.observations.append(observation)
        if self.calls == self.hang_at:
            self.hanging.set()
            self.release.wait(timeout=30)
        if self.calls == self.fail_at:
            raise RuntimeError("planner crashed")
        return Command(qvel=np.full(5, 0.5), gripper={"right": "close"})


def run_in_thread(runner, **kwargs):
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("report", runner.run(**kwargs)))
    thread.start()
    return thread, out


def wait_for(predicate, timeout_s=20.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def test_ticks_with_fresh_observations_and_stops_with_zero_velocity():
    robot, solver = RecordingRobot(), MovingSolver()
    report = RealtimeRunner(robot, solver, rate_hz=100).run(max_ticks=20)
    assert report.ticks == 20 and solver.calls == 20 and report.error is None
    moving = robot.moving()
    assert moving[:20] == [True] * 20 and moving[-1] is False  # the run ends on zero velocity
    stats = report.tick_stats()
    assert stats["tick_max_s"] >= stats["tick_p99_s"] >= stats["tick_median_s"] > 0
    assert 0 <= stats["overruns"] <= 20 and report.stale_ticks == 0


def test_watchdog_stops_the_robot_while_a_tick_hangs():
    robot, solver = RecordingRobot(), MovingSolver(hang_at=5)
    runner = RealtimeRunner(robot, solver, rate_hz=100, watchdog_timeout_s=0.1)
    thread, out = run_in_thread(runner, max_ticks=10)
    assert solver.hanging.wait(timeout=20)
    # While the solver is stuck in its 5th step, the watchdog thread commands zero velocity.
    assert wait_for(lambda: any(name == "handleit-watchdog" and not np.any(c.qvel) for name, c in robot.commands))
    assert solver.calls == 5  # still inside the hung step
    with robot.lock:
        watchdog_commands = [c for name, c in robot.commands if name == "handleit-watchdog"]
    assert all(not np.any(c.qvel) and c.gripper == {"right": "hold"} for c in watchdog_commands)
    solver.release.set()
    thread.join(timeout=30)
    report = out["report"]
    assert report.error is None and report.ticks == 10
    assert any("tree stopped ticking" in s["reason"] for s in report.watchdog_stops)
    # The hung tick's own command, computed on an observation the world has moved past, is not sent: the
    # command right after the watchdog's stop is zero.
    with robot.lock:
        tick_commands = [c for name, c in robot.commands if name != "handleit-watchdog"]
    assert not np.any(tick_commands[4].qvel) and np.any(tick_commands[5].qvel)


def test_stale_sensors_are_not_handed_to_the_tree():
    robot, solver = RecordingRobot(), MovingSolver()
    runner = RealtimeRunner(robot, solver, rate_hz=100, watchdog_timeout_s=0.2)
    thread, out = run_in_thread(runner, max_ticks=3000,
                                until=lambda: runner.report.stale_ticks >= 5 and runner.report.watchdog_stops)
    assert wait_for(lambda: solver.calls >= 3)
    robot.sensors_stop.set()
    thread.join(timeout=30)
    report = out["report"]
    assert report.stale_ticks >= 5 and report.error is None
    assert {f["check"] for f in report.failures} == {FRESHNESS_CHECK}
    assert "joint_states" in report.failures[0]["reason"] and "old" in report.failures[0]["reason"]
    frozen = robot._frozen_s
    assert all(o.time_s < frozen or o.time_s == frozen for o in solver.observations)
    # Every command after the sensors stopped aging past the limit was zero velocity.
    moving = robot.moving()
    assert moving[-report.stale_ticks:] == [False] * report.stale_ticks
    assert report.stop_reason == "until() is true"
    assert any("sensors stale" in s["reason"] for s in report.watchdog_stops)


def test_observation_time_is_the_freshness_without_per_stream_stamps():
    robot, solver = RecordingRobot(per_stream=False), MovingSolver()
    robot.sensors_stop.set()
    robot._frozen_s = time.time() - 5.0  # the only observation there is, 5 s old
    report = RealtimeRunner(robot, solver, rate_hz=100).run(max_ticks=3)
    assert solver.calls == 0 and report.stale_ticks == 3
    assert "5." in report.failures[0]["reason"] and not any(robot.moving())


@pytest.mark.parametrize("where", ["solver", "robot"])
def test_an_exception_ends_the_run_with_zero_velocity(where):
    robot, solver = RecordingRobot(), MovingSolver(fail_at=4 if where == "solver" else None)
    if where == "robot":
        calls = {"n": 0}
        observe = robot.observe

        def failing_observe():
            calls["n"] += 1
            if calls["n"] == 4:
                raise ConnectionError("driver gone")
            return observe()

        robot.observe = failing_observe
    report = RealtimeRunner(robot, solver, rate_hz=100).run(max_ticks=50)
    assert report.stop_reason == "error" and report.ticks == 3
    assert ("planner crashed" if where == "solver" else "driver gone") in report.error
    assert robot.moving() == [True, True, True, False]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="rate_hz"):
        RealtimeRunner(RecordingRobot(), MovingSolver(), rate_hz=0)


def test_a_robot_without_forward_kinematics_is_said_so(tmp_path):
    robot = RecordingRobot()
    robot.model = dataclasses.replace(robot.model, urdf_path=tmp_path / "missing.urdf")
    with pytest.warns(RuntimeWarning, match="no forward kinematics.*follow the base only"):
        runner = RealtimeRunner(robot, MovingSolver(), rate_hz=100)
    assert runner._kinematics is None
