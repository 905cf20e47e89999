"""JointReference advances by the robot's time: one control period per tick in lockstep, and the time since the
last tick where ticks were missed (real time on a busy computer, the robot moving on at the last command)."""

from __future__ import annotations

import time

import numpy as np

from handleit.behaviors.common import MAX_CATCH_UP_STEPS, JointReference
from handleit.behaviors.solver_tools import ToolsSpec, make_tools
from handleit.types import Observation


def _obs(model, t):
    n = len(model.joint_names)
    return Observation(time_s=t, points=np.zeros((0, 3)), colors=np.zeros((0, 3), np.uint8), masks={}, frame="world",
                       joint_names=model.joint_names, qpos=np.zeros(n), qvel=np.zeros(n), X_WB=np.eye(4))


def _reference_after(model, times):
    tools = make_tools(ToolsSpec(model), namespace=f"/reference_test_{time.monotonic_ns()}")
    reference = JointReference(tools, speed_fraction=1.0)
    target = np.zeros(len(model.joint_names))
    target[tools.arm_index[0]] = 1.0  # far: the reference moves at full speed throughout
    reference.start(_obs(model, times[0]), None, 0)
    for t in times:
        reference.advance(target, _obs(model, t))
    return reference.q[tools.arm_index[0]], tools


def test_the_reference_advances_by_the_robots_time(drawer_model):
    dt = drawer_model.control_dt_s
    every_step, tools = _reference_after(drawer_model, [k * dt for k in range(13)])
    speed = tools.model.velocity_limits[tools.arm_index[0]]
    assert 0 < every_step < 12 * dt * speed
    # Ticks every third step (two missed each time): the same robot time covered, about the same distance; before,
    # five ticks moved the reference five periods' worth, under half of it.
    skipping, _ = _reference_after(drawer_model, [k * 3 * dt for k in range(5)])
    four_ticks, _ = _reference_after(drawer_model, [k * dt for k in range(5)])
    assert abs(skipping - every_step) < 0.15 * every_step and skipping > 2 * four_ticks
    # A long stall is not caught up in one jump.
    stalled, _ = _reference_after(drawer_model, [0.0, 1.0])
    assert stalled <= (1 + MAX_CATCH_UP_STEPS) * dt * speed + 1e-12
