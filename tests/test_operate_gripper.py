"""OperateGripper on late finger states: it ends once the fingers have moved and stopped, or were at the limit its
action drives them to already; not on fingers that have not yet been seen to move (real time, sensor latency)."""

from __future__ import annotations

import time

import numpy as np
import py_trees
from py_trees.common import Access, Status

from handleit.behaviors.common import OperateGripper
from handleit.behaviors.solver_tools import ToolsSpec, make_tools
from handleit.types import Observation


def _setup(model, action):
    tools = make_tools(ToolsSpec(model), namespace=f"/gripper_test_{time.monotonic_ns()}")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("observation", "command", "q_hold"):
        bb.register_key(key, access=Access.WRITE)
    bb.command = None
    return OperateGripper("operate gripper", tools, action), bb, tools


def _observe(model, fingers, fingers_index):
    qpos = np.zeros(len(model.joint_names))
    qpos[fingers_index] = fingers
    return Observation(time_s=0.0, points=np.zeros((1, 3)), colors=np.zeros((1, 3), np.uint8), masks={},
                       frame="world", joint_names=model.joint_names, qpos=qpos, qvel=np.zeros(len(qpos)),
                       X_WB=np.eye(4))


def test_close_waits_for_the_fingers_to_move_then_settle(drawer_model):
    node, bb, tools = _setup(drawer_model, "close")
    index = tools.finger_index
    open_ = drawer_model.joint_limits[index, 1]
    # Ten ticks of finger states from before the command (100 ms of latency): still open, not moving.
    for _ in range(10):
        bb.observation = _observe(drawer_model, open_, index)
        node.tick_once()
        assert node.status == Status.RUNNING, "ended on fingers not yet seen to move"
    for gap in (0.03, 0.02, 0.015, 0.015, 0.015):  # closing, then stopped on a handle
        bb.observation = _observe(drawer_model, np.full(len(index), gap), index)
        node.tick_once()
    assert node.status == Status.SUCCESS
    assert bb.command.gripper[tools.side] == "close"


def test_fingers_already_where_the_action_drives_them_end_it_at_once(drawer_model):
    node, bb, tools = _setup(drawer_model, "open")
    index = tools.finger_index
    ticks = 0
    while node.status != Status.SUCCESS and ticks < 40:
        bb.observation = _observe(drawer_model, drawer_model.joint_limits[index, 1], index)
        node.tick_once()
        ticks += 1
    assert node.status == Status.SUCCESS and ticks == node.min_steps


def test_a_close_begun_by_the_move_before_ends_once_the_fingers_settle(drawer_model):
    """The door's move to the grasp starts closing the fingers on its last centimetre (``close_started``: the
    fingers when it did). The close that follows finds them already stopped on the handle: moved since the close
    began, so it ends as soon as they are seen settled, not after ``max_steps``."""
    node, bb, tools = _setup(drawer_model, "close")
    bb.register_key("close_started", access=Access.WRITE)
    index = tools.finger_index
    bb.close_started = np.full(len(index), 0.03)  # the fingers when the move began to close them
    ticks = 0
    while node.status != Status.SUCCESS and ticks < node.max_steps:
        bb.observation = _observe(drawer_model, np.full(len(index), 0.012), index)  # stopped on the handle
        node.tick_once()
        ticks += 1
    assert node.status == Status.SUCCESS and ticks == node.min_steps
    # Without that record the same stopped fingers were never seen to move: the close waits (latency).
    waiting, bb2, _ = _setup(drawer_model, "close")
    bb2.register_key("close_started", access=Access.WRITE)
    bb2.close_started = None
    for _ in range(node.min_steps + 2):
        bb2.observation = _observe(drawer_model, np.full(len(index), 0.012), index)
        waiting.tick_once()
    assert waiting.status == Status.RUNNING
