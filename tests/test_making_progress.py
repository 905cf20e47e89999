""""making progress?" measured on the clouds taken since a pull or push began (behaviors/cabinet_nodes.py
MakingProgress, behaviors/skills.py MakingClosingProgress): in real time clouds are late and slower than ticks."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np
import py_trees
from py_trees.common import Access, Status

from handleit.behaviors.cabinet_nodes import MakingProgress
from handleit.behaviors.skills import MakingClosingProgress
from handleit.behaviors.solver_tools import ToolsSpec, make_tools
from handleit.types import Observation


def _run(drawer_model, make_node, opening_at, latency_s=0.0, camera_hz=None, ticks=80):
    """Tick the check from t = 1 s; the part's opening (m) as a cloud stamped at s shows it is
    ``opening_at(s - 1)``; clouds ``latency_s`` late, one a tick or at ``camera_hz``. Statuses per tick."""
    tools = make_tools(ToolsSpec(drawer_model), namespace=f"/progress_test_{time.monotonic_ns()}")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("observation", "open_state", "part_opening_m"):
        bb.register_key(key, access=Access.WRITE)
    bb.part_opening_m = {"target": 0.2}
    node = make_node(tools)
    dof, dt = len(drawer_model.joint_names), drawer_model.control_dt_s
    statuses = []
    for k in range(ticks):
        t = 1.0 + k * dt
        stamp = t - latency_s
        if camera_hz is not None:
            stamp = math.floor(stamp * camera_hz + 1e-9) / camera_hz
        bb.open_state = SimpleNamespace(state=SimpleNamespace(displacement_m=opening_at(stamp - 1.0)))
        bb.observation = Observation(time_s=t, points=np.zeros((1, 3)), colors=np.zeros((1, 3), np.uint8), masks={},
                                     frame="world", joint_names=drawer_model.joint_names, qpos=np.zeros(dof),
                                     qvel=np.zeros(dof), X_WB=np.eye(4), points_time_s=stamp)
        node.tick_once()
        statuses.append(node.status)
        if node.status != Status.RUNNING:
            break
    return statuses


def _opening_from(start_s: float, speed_mps: float):
    return lambda s: 0.1 + max(0.0, s - start_s) * speed_mps


def test_in_lockstep_a_part_that_does_not_move_fails_at_the_thirtieth_tick(drawer_model):
    statuses = _run(drawer_model, lambda tools: MakingProgress("making progress?", tools), lambda s: 0.1)
    assert statuses == [Status.RUNNING] * 29 + [Status.FAILURE]


def test_a_part_opening_on_late_and_slow_clouds_is_making_progress(drawer_model):
    """The door starts opening 0.15 s after the check starts and moves 0.3 m/s: at 200 ms and 10 Hz its first
    2 cm show in a cloud about 0.5 s after the start, later than 30 ticks. Counted in ticks it failed."""
    opening = _opening_from(0.15, 0.3)
    statuses = _run(drawer_model, lambda tools: MakingProgress("making progress?", tools), opening,
                    latency_s=0.2, camera_hz=10.0)
    assert Status.FAILURE not in statuses
    # ...and a part that does not move still fails, once clouds from the whole window have come.
    still = _run(drawer_model, lambda tools: MakingProgress("making progress?", tools), lambda s: 0.1,
                 latency_s=0.2, camera_hz=10.0)
    assert still[-1] == Status.FAILURE and len(still) > 30


def test_closing_progress_is_measured_the_same_way(drawer_model):
    closing = lambda s: 0.2 - max(0.0, s - 0.15) * 0.3  # noqa: E731
    make = lambda tools: MakingClosingProgress("making progress?", tools, "target")  # noqa: E731
    assert Status.FAILURE not in _run(drawer_model, make, closing, latency_s=0.2, camera_hz=10.0)
    assert _run(drawer_model, make, lambda s: 0.2) == [Status.RUNNING] * 29 + [Status.FAILURE]
