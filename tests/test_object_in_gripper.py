"""The check "object in gripper?" (behaviors/object_in_gripper.py) of the fixed-arm and mobile pick trees, on
synthetic observations: a hand that turns with the object is no drift; points that leave the hand are."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np
import py_trees
from py_trees.common import Access, Status

from handleit.behaviors.object_in_gripper import ObjectInGripper
from handleit.types import Observation


def _check(drift_steps=3):
    tools = SimpleNamespace(namespace=f"/held_test_{time.monotonic_ns()}", side="arm",
                            finger_indices={"arm": np.array([0, 1])}, failures=[], failure_reasons=[])
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("observation", "clamped_gap_m"):
        bb.register_key(key, access=Access.WRITE)
    bb.clamped_gap_m = 0.04
    return ObjectInGripper("object in gripper?", tools, "object", 5, drift_steps), bb


def _observation(yaw_rad, points_T, shift_W=(0.0, 0.0, 0.0)):
    """The hand at (0.5, 0, 0.3) turned by ``yaw_rad`` about the vertical, the object's points ``points_T``
    held in the hand's frame (then moved by ``shift_W`` in the world), the fingers 4 cm apart."""
    X_WT = np.eye(4)
    c, s = math.cos(yaw_rad), math.sin(yaw_rad)
    X_WT[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    X_WT[:3, 3] = [0.5, 0.0, 0.3]
    points = (points_T @ X_WT[:3, :3].T + X_WT[:3, 3] + np.asarray(shift_W)).astype(np.float32)
    n = len(points)
    return Observation(0.0, points, np.zeros((n, 3), np.uint8), {"object": np.ones(n, bool)}, "world",
                       ("f1", "f2"), np.array([0.02, 0.02]), np.zeros(2), np.eye(4), {"arm": X_WT})


def test_a_hand_that_turns_with_the_object_is_no_drift_and_points_that_leave_it_fail():
    # The object's seen points 5 cm off the tool centre: turned by half a turn, 10 cm off in the world.
    points_T = np.random.default_rng(0).normal([0.05, 0.0, 0.0], 0.005, size=(30, 3))
    node, bb = _check()
    for yaw in np.linspace(0.0, math.pi, 10):
        bb.observation = _observation(yaw, points_T)
        node.tick_once()
        assert node.status == Status.RUNNING, node.feedback_message
    for _ in range(3):  # 10 cm off the hand, three ticks in a row: lost
        bb.observation = _observation(math.pi, points_T, shift_W=(0.1, 0.0, 0.0))
        node.tick_once()
    assert node.status == Status.FAILURE and "left the hand" in node.feedback_message


def test_fingers_that_met_or_spread_fail_and_an_unseen_object_is_not_judged():
    points_T = np.zeros((3, 3))  # fewer points than the check needs: not judged
    node, bb = _check()
    bb.observation = _observation(0.0, points_T)
    node.tick_once()
    assert node.status == Status.RUNNING and node.feedback_message == "gap 40 mm"
    bb.observation = _observation(0.0, points_T)
    bb.observation.qpos[:] = 0.001
    node.tick_once()
    assert node.status == Status.FAILURE and "slipped out" in node.feedback_message
    node, bb = _check()
    bb.observation = _observation(0.0, points_T)
    bb.observation.qpos[:] = 0.03  # 6 cm, clamped at 4
    node.tick_once()
    assert node.status == Status.FAILURE and "fingers spread" in node.feedback_message
