"""The garbage collector in the control loop: the heap frozen for a run and unfrozen after it, each collection's
pause counted in the tick it fell in, and the --perturb key that turns freezing off."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from handleit.harness.gc_pauses import GcPauses, frozen_heap
from handleit.harness.realtime_runner import RealtimeRunner
from handleit.harness.realtime_sim import RealtimeSettings, split_perturbation
from handleit.types import Command
from tests.test_realtime_runner import RecordingRobot

pytestmark = pytest.mark.filterwarnings("ignore:latency compensation. no forward kinematics:RuntimeWarning")


class _Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self):
        self.other = self


def test_frozen_heap_keeps_old_objects_out_of_collections_and_unfreezes_after():
    gc.collect()
    old = [_Node() for _ in range(20_000)]
    with frozen_heap() as frozen:
        assert frozen >= len(old) and abs(gc.get_freeze_count() - frozen) < 100
        del old  # garbage, but frozen: a full collection does not see it
        assert gc.collect() < 20_000
    assert gc.get_freeze_count() == 0
    assert gc.collect() >= 20_000  # unfrozen: collected now
    with frozen_heap(enabled=False) as frozen:
        assert frozen == 0 and gc.get_freeze_count() == 0


def test_pauses_are_counted_per_generation_with_their_time():
    with GcPauses() as pauses:
        before = pauses.total_s()
        gc.collect(0)
        gc.collect(2)
    assert pauses.collections[0] >= 1 and pauses.collections[2] >= 1
    assert pauses.total_s() > before and pauses.longest_s > 0
    gc.collect()  # after stop: not counted
    assert pauses.collections[2] == 1


class CollectingSolver:
    """Moves every joint; its third step makes garbage in reference cycles and collects it (as Python's collector
    would in the middle of a tick); records the freeze count it sees."""

    def __init__(self):
        self.calls, self.freeze_counts = 0, []

    def reset(self, observation):
        pass

    def step(self, observation):
        self.calls += 1
        self.freeze_counts.append(gc.get_freeze_count())
        if self.calls == 3:
            garbage = [_Node() for _ in range(50_000)]
            del garbage
            gc.collect()
        return Command(qvel=np.full(5, 0.5), gripper={"right": "close"})


@pytest.mark.parametrize("mode", ["freeze", "auto"])
def test_runner_freezes_the_heap_for_the_run_and_records_each_ticks_pause(mode):
    gc.collect()
    solver = CollectingSolver()
    report = RealtimeRunner(RecordingRobot(), solver, rate_hz=100, gc_mode=mode).run(max_ticks=6)
    assert report.error is None and report.ticks == 6 and len(report.tick_gc_s) == 6
    if mode == "freeze":
        assert report.gc_frozen_objects > 1000
        assert min(solver.freeze_counts) > report.gc_frozen_objects - 100  # frozen during every tick
    else:
        assert report.gc_frozen_objects == 0 and solver.freeze_counts == [0] * 6
    assert gc.get_freeze_count() == 0  # the run leaves the heap as it found it
    # the tick that collected holds the pause, the others none of that size
    assert int(np.argmax(report.tick_gc_s)) == 2 and report.tick_gc_s[2] > 0
    assert report.gc_collections[2] >= 1 and report.gc_longest_s >= report.tick_gc_s[2] * 0.5
    stats = report.tick_stats()
    assert stats["gc_mode"] == mode and stats["tick_gc_max_s"] == max(report.tick_gc_s)


def test_runner_rejects_an_unknown_gc_mode():
    with pytest.raises(ValueError, match="gc_mode must be one of"):
        RealtimeRunner(RecordingRobot(), CollectingSolver(), gc_mode="off")


def test_gc_key_of_the_perturbation_text():
    auto = split_perturbation("latency=0.1,gc=AUTO")[0]
    assert auto.gc == "auto" and str(auto).endswith(",gc=auto") and split_perturbation(str(auto))[0] == auto
    default = split_perturbation("latency=0.1,gc=freeze")[0]
    assert default == RealtimeSettings(sensor_latency_s=0.1) and "gc" not in str(default)
    with pytest.raises(ValueError, match="gc is one of"):
        split_perturbation("latency=0,gc=never")
