"""Planning nodes for the planning worker's tests (tests/test_planning_worker.py): module-level classes, so that the
worker process can unpickle their copies (it imports this module as ``tests.planning_nodes``)."""

from __future__ import annotations

import gc
import time

from py_trees.common import Access, Status

from handleit.behaviors.background import BackgroundPlanning
from handleit.behaviors.common import Skill


class SleepThenDouble(BackgroundPlanning, Skill):
    """Reads ``value`` (and ``sleep_s``), sleeps that long in ``plan``, writes 2 * value to ``result``."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("value", "sleep_s"), writes=("result",))

    def snapshot(self):
        return {"value": self.bb.value, "sleep_s": self.bb.sleep_s}

    def plan(self, snap):
        time.sleep(snap["sleep_s"])
        return 2 * snap["value"]

    def apply(self, result):
        self.bb.result = result
        return Status.SUCCESS


class DoubleOnACloudAtRest(SleepThenDouble):
    """SleepThenDouble that, like the hand-eye corrections, plans on a cloud taken after the robot came to rest."""

    needs_cloud_at_rest = True

    def __init__(self, name, tools):
        super().__init__(name, tools)
        self.bb.register_key("observation", access=Access.READ)


class DoubleOnTheStateOfItsCloud(DoubleOnACloudAtRest):
    """DoubleOnACloudAtRest that also hands back the base x its plan saw (``observation_for_plan``): the robot's
    state at the cloud's stamp where the cloud carries one."""

    def snapshot(self):
        return {**super().snapshot(), "x": float(self.observation_for_plan().qpos[0])}

    def plan(self, snap):
        return 2 * snap["value"], snap["x"]


class FreezeCountOfTheWorker(SleepThenDouble):
    """Plans ``gc.get_freeze_count()`` where it plans: the objects frozen out of the garbage collector there."""

    def plan(self, snap):
        return gc.get_freeze_count()
