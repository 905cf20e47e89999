"""The drawer pull's and push's end: the drawer has stopped moving, judged on new clouds, not on ticks (a real
robot's camera is slower than the control rate)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import py_trees
from py_trees.common import Access, Status

from handleit.behaviors.cabinet_nodes import PullDrawer
from handleit.behaviors.skills import TARGET_PART, PushDrawer
from handleit.behaviors.solver_tools import ToolsSpec, make_tools
from handleit.types import Observation


def _ticker(drawer_model, make_node):
    """``make_node(tools)`` on a fresh blackboard, and ``tick(points, opened_m) -> status``: one tick on an
    observation with cloud ``points`` and the drawer ``opened_m`` open (m)."""
    tools = make_tools(ToolsSpec(drawer_model), namespace=f"/pull_test_{time.monotonic_ns()}")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("observation", "front_normal_W", "open_state", "part_opening_m", "command"):
        bb.register_key(key, access=Access.WRITE)
    dof = len(drawer_model.joint_names)
    bb.front_normal_W = np.array([-1.0, 0.0, 0.0])
    bb.part_opening_m = None
    node = make_node(tools)

    def tick(points, opened_m):
        bb.open_state = SimpleNamespace(state=SimpleNamespace(displacement_m=opened_m))
        bb.observation = Observation(time_s=0.0, points=points, colors=np.zeros((1, 3), np.uint8), masks={},
                                     frame="world", joint_names=drawer_model.joint_names, qpos=np.zeros(dof),
                                     qvel=np.zeros(dof), X_WB=np.eye(4))
        node.tick_once()
        return node.status

    return node, bb, tick


def test_a_pull_ends_after_the_opening_stalls_on_new_clouds_not_on_ticks_without_one(drawer_model):
    node, bb, tick = _ticker(drawer_model, lambda tools: PullDrawer("pull drawer", tools))
    cloud = np.zeros((1, 3))
    assert tick(cloud, 0.06) == Status.RUNNING
    # A 15 Hz camera at 100 Hz control: many ticks on one cloud, the opening the same on each. Not a stall.
    for _ in range(20):
        assert tick(cloud, 0.06) == Status.RUNNING
    assert np.any(bb.command.qvel)  # still pulling
    # New clouds on which the opening no longer grows: the drawer is at its end after stall_steps of them.
    statuses = [tick(np.full((1, 3), float(k)), 0.06) for k in range(1, node.stall_steps + 1)]
    assert statuses == [Status.RUNNING] * (node.stall_steps - 1) + [Status.SUCCESS]


def test_a_push_ends_after_the_opening_stalls_on_new_clouds_not_on_ticks_without_one(drawer_model):
    node, bb, tick = _ticker(drawer_model, lambda tools: PushDrawer("push drawer", tools, TARGET_PART))
    # The drawer closes from 10 to 5 cm over five new clouds (more than min_travel_m).
    openings = [0.10, 0.09, 0.08, 0.07, 0.06, 0.05]
    clouds = [np.full((1, 3), float(k)) for k in range(len(openings))]
    for cloud, opened_m in zip(clouds, openings):
        assert tick(cloud, opened_m) == Status.RUNNING
    # Many ticks on the last cloud, the opening the same on each: not a stall (counted in ticks, it was).
    for _ in range(20):
        assert tick(clouds[-1], 0.05) == Status.RUNNING
    assert np.any(bb.command.qvel)  # still pushing
    # New clouds on which the opening no longer shrinks: the drawer is shut after stall_steps of them.
    statuses = [tick(np.full((1, 3), float(k)), 0.05) for k in range(len(openings), len(openings) + node.stall_steps)]
    assert statuses == [Status.RUNNING] * (node.stall_steps - 1) + [Status.SUCCESS]
