"""A background plan that holds the robot still pauses the move's reference instead of dropping it: the move after the
plan continues the reference where it was (as in lockstep, where the plan takes none of the robot's time), so that
the tracking lag the robot was closing is not lost and the move does not restart its speed ramp from the measured
joints. Real time only; planning on a thread of this process (no worker process to start)."""

from __future__ import annotations

import time

import numpy as np
import py_trees
from py_trees.common import Access, Status

from handleit.behaviors.common import JointReference
from handleit.behaviors.solver_tools import ToolsSpec, make_tools
from handleit.types import Observation

from .planning_nodes import SleepThenDouble


def _observation(model, qpos) -> Observation:
    dof = len(model.joint_names)
    return Observation(time_s=0.0, points=np.zeros((1, 3), np.float32), colors=np.zeros((1, 3), np.uint8), masks={},
                       frame="world", joint_names=model.joint_names, qpos=np.asarray(qpos, float),
                       qvel=np.zeros(dof), X_WB=np.eye(4))


def _node_and_blackboard(model):
    tools = make_tools(ToolsSpec(model), namespace=f"/hold_ref_{time.monotonic_ns()}", realtime=True,
                       planning="thread")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("value", "sleep_s", "result", "command", "reference", "tick"):
        bb.register_key(key, access=Access.WRITE)
    bb.value, bb.sleep_s, bb.result, bb.command, bb.reference, bb.tick = 1, 0.3, None, None, None, 10
    return SleepThenDouble("plan", tools), bb, tools


def test_the_reference_is_paused_in_place_while_a_plan_holds_still(drawer_model):
    node, bb, tools = _node_and_blackboard(drawer_model)
    dof = len(drawer_model.joint_names)
    q_ref, ff = np.full(dof, 0.2), np.full(dof, 0.3)
    bb.reference = (9, q_ref, ff, 0.7)  # the move before the plan handed it over on the last tick
    node.tick_once()
    assert node.status == Status.RUNNING and not np.any(bb.command.qvel)  # held still
    tick, q, ff_now, k = bb.reference
    assert tick == 10 and np.array_equal(q, q_ref) and not np.any(ff_now) and k == 0.0  # paused, in place
    for t in range(11, 200):  # on every tick of the hold, as long as the plan runs
        bb.tick = t
        node.tick_once()
        if node.status != Status.RUNNING:
            break
        assert bb.reference[0] == t and np.array_equal(bb.reference[1], q_ref)
        time.sleep(0.01)
    assert node.status == Status.SUCCESS

    # The next move starts from the paused reference, not from the measured joints (the robot stopped behind it).
    reference = JointReference(tools, speed_fraction=0.9)
    reference.restart()
    measured = np.zeros(dof)
    reference.follow(np.full(dof, 0.25), _observation(drawer_model, measured), bb)
    start = bb.reference[1]
    assert np.all(np.abs(start[tools.controlled] - q_ref[tools.controlled]) < 0.01)
    np.testing.assert_array_equal(start[[i for i in range(dof) if i not in set(tools.controlled)]],
                                  q_ref[[i for i in range(dof) if i not in set(tools.controlled)]])


def test_a_reference_that_had_lapsed_is_left_alone(drawer_model):
    node, bb, _ = _node_and_blackboard(drawer_model)
    dof = len(drawer_model.joint_names)
    old = (5, np.full(dof, 0.2), np.full(dof, 0.3), 0.7)  # handed over ticks ago: the next move starts afresh
    bb.reference = old
    node.tick_once()
    assert node.status == Status.RUNNING
    assert bb.reference is old
    node.stop(Status.INVALID)
