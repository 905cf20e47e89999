"""Real-time scheduling of a control loop's thread (SCHED_FIFO): granted where permitted, a warning and the default
policy where not, and the tick thread of a RealtimeRunner at the priority asked for."""

from __future__ import annotations

import argparse
import os
import threading
import warnings

import numpy as np
import pytest

from handleit.harness.realtime_priority import current_scheduling, request_realtime, restore_normal
from handleit.harness.realtime_runner import RealtimeRunner
from handleit.harness.ros_commands import add_commands
from handleit.types import Command

from tests.test_realtime_runner import RecordingRobot  # the tests' in-process robot

linux_only = pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="POSIX scheduling is Linux's")


def in_thread(fn):
    """fn() in a new thread (its scheduling stays with that thread); its result."""
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", fn()))
    thread.start()
    thread.join(timeout=30)
    return out["value"]


def fifo_permitted() -> bool:
    def attempt():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            return True
        except PermissionError:
            return False
    return in_thread(attempt)


@pytest.mark.parametrize("priority", [0, 100, -3, 2.5, "10", True])
def test_a_priority_outside_1_to_99_is_refused(priority):
    with pytest.raises(ValueError, match="1-99"):
        request_realtime(priority)


@linux_only
def test_the_calling_thread_gets_fifo_where_permitted_and_back_to_normal():
    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            granted = request_realtime(30)
        during = current_scheduling()
        restore_normal()
        return granted, during, current_scheduling(), len(caught)

    granted, during, after, warned = in_thread(run)
    assert granted == during  # what it reports is what the kernel says
    if fifo_permitted():
        assert (during.policy, during.priority) == ("SCHED_FIFO", 30)
        assert warned == 0
    else:
        assert during.policy == "SCHED_OTHER" and "not permitted" in granted.reason and warned == 1
    assert after.policy == "SCHED_OTHER"
    assert current_scheduling().policy == "SCHED_OTHER"  # the test's own thread was never touched


@linux_only
def test_without_the_permission_it_warns_names_why_and_keeps_the_policy(monkeypatch):
    def refuse(*_):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    with pytest.warns(RuntimeWarning, match="CAP_SYS_NICE"):
        granted = in_thread(lambda: request_realtime(50))
    assert granted.policy == "SCHED_OTHER" and "SCHED_FIFO 50 not permitted" in granted.describe()


class SchedulingSolver:
    """Records the scheduling of the thread that ticks it."""

    def __init__(self):
        self.seen = []

    def reset(self, observation):
        pass

    def step(self, observation):
        self.seen.append(current_scheduling())
        return Command(qvel=np.zeros(5), gripper={"right": "hold"})


@linux_only
@pytest.mark.filterwarnings("ignore:latency compensation. no forward kinematics:RuntimeWarning")  # a robot without a URDF
def test_the_runner_ticks_at_the_priority_asked_for_and_gives_it_back():
    robot, solver = RecordingRobot(), SchedulingSolver()
    runner = RealtimeRunner(robot, solver, rate_hz=100, rt_priority=40)
    report, after = in_thread(lambda: (runner.run(max_ticks=10), current_scheduling()))
    assert report.error is None and len(solver.seen) == 10
    if fifo_permitted():
        assert {(s.policy, s.priority) for s in solver.seen} == {("SCHED_FIFO", 40)}
        assert report.scheduling == "SCHED_FIFO 40"
    else:
        assert {s.policy for s in solver.seen} == {"SCHED_OTHER"} and "not permitted" in report.scheduling
    assert after.policy == "SCHED_OTHER"  # the thread that ran it is back to the default policy


def test_the_runner_refuses_a_priority_the_watchdog_cannot_exceed():
    for bad in (0, 99, 1.5, True):
        with pytest.raises(ValueError, match="rt_priority"):
            RealtimeRunner(RecordingRobot(), SchedulingSolver(), rt_priority=bad)



@pytest.mark.parametrize("command", ["serve-ros", "run-ros"])
def test_the_ros_commands_refuse_a_bad_priority_by_name(command, capsys):
    parser = argparse.ArgumentParser(prog="handleit")
    add_commands(parser.add_subparsers(dest="command"))
    assert parser.parse_args([command, "--rt-priority", "50"]).rt_priority == 50
    for bad in ("99", "-1", "high"):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--rt-priority", bad])
        assert "--rt-priority: must be 0 (off) or a SCHED_FIFO priority 1-98" in capsys.readouterr().err
