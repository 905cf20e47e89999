"""The dual-arm hold plan in stages (behaviors/bimanual_nodes.HoldPlanStages): in real time a quick provisional plan
that the robot starts on, and the full search beside the move, which commands nothing and replaces the hold only
when its own is quicker from where the robot is then. In lockstep the stages are the full search, as before."""

from __future__ import annotations

import math
import threading
import time
from types import SimpleNamespace

import numpy as np
import py_trees
import pytest
from py_trees.common import Access, Status

import handleit.envs
from handleit.behaviors.background import FOLLOWING_FEEDBACK, BackgroundPlanning
from handleit.behaviors.bimanual_nodes import (
    HOLD_SWITCH_MARGIN_S,
    HoldPlanStages,
    hold_time_s,
    move_while_planning,
    quickest_hold_for_move,
)
from handleit.behaviors.common import Skill, Tools
from handleit.harness.sim_robot import robot_model_of
from handleit.types import Command, Observation

HOLD_KEYS = ("q_pregrasp", "X_WG_pregrasp", "q_grasp", "X_WG_grasp")


@pytest.fixture(scope="module")
def chair_model():
    env = handleit.envs.make("PushChair", obs_mode="pointcloud", camera_width=64, camera_height=32)
    model = robot_model_of(env)
    env.close()
    return model


class _ScriptedHoldPlan(HoldPlanStages, BackgroundPlanning, Skill):
    """A hold plan whose ``plan`` waits for ``release`` and returns ``result``; records whether it was asked for
    a provisional plan."""

    def __init__(self, name, tools, stage, result, release):
        super().__init__(name, tools, reads=("observation",), writes=HOLD_KEYS)
        self.set_stage(stage)
        self.result, self.release, self.asked = result, release, []

    def snapshot(self):
        return self.provisional_argument()

    def plan(self, provisional):
        self.asked.append(provisional)
        assert self.release.wait(30)
        return self.result

    def apply_plan(self, kind, value):
        _, q_grasp, goals, q_pregrasp, pre_goals, _, _ = value
        self.write_hold(q_grasp, goals, q_pregrasp, pre_goals)
        return Status.SUCCESS


def _setup(model, realtime: bool):
    tools = Tools(model=model, ik=None, pid=None, tracking_pid=None, grasp_predictor=None,
                  namespace=f"/hold_stages_{realtime}_{time.monotonic_ns()}", side="right", sides=("left", "right"),
                  realtime=realtime, planning="thread")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in (*HOLD_KEYS, "observation", "command"):
        bb.register_key(key, access=Access.WRITE)
    n = len(model.joint_names)
    bb.observation = Observation(time_s=0.0, points=np.zeros((0, 3)), colors=np.zeros((0, 3), np.uint8), masks={},
                                 frame="world", joint_names=model.joint_names, qpos=np.zeros(n), qvel=np.zeros(n),
                                 X_WB=np.eye(4))
    bb.command = None
    return tools, bb


def _hold(tools, base_x_m: float, tag: str):
    """A hold result whose pregrasp and grasp are the base moved by ``base_x_m``; goals tagged to tell apart."""
    q = np.zeros(len(tools.model.joint_names))
    q[tools.base_index[0]] = base_x_m
    goals = {"left": tag, "right": tag}
    return "hold", (None, q.copy(), goals, q.copy(), goals, "", np.array([0.3, 0.0]))


def test_in_lockstep_the_stages_are_the_full_search_and_the_search_node_does_nothing(chair_model):
    tools, bb = _setup(chair_model, realtime=False)
    release = threading.Event()
    release.set()
    first = _ScriptedHoldPlan("plan hold", tools, "provisional", _hold(tools, 0.5, "full"), release)
    search = _ScriptedHoldPlan("search quicker hold", tools, "search", _hold(tools, 0.1, "searched"), release)
    first.tick_once()
    assert first.status == Status.SUCCESS and first.asked == [None]  # not provisional: the full search
    assert bb.X_WG_grasp["left"] == "full"
    search.tick_once()
    assert search.status == Status.SUCCESS and search.asked == []  # nothing planned, nothing written
    assert bb.X_WG_grasp["left"] == "full" and bb.command is None


@pytest.mark.parametrize("searched_x, switched", [(0.1, True), (0.5, False), (0.8, False)])
def test_in_real_time_the_search_runs_beside_the_move_and_switches_only_to_a_quicker_hold(chair_model, searched_x,
                                                                                        switched):
    tools, bb = _setup(chair_model, realtime=True)
    release = threading.Event()
    release.set()
    first = _ScriptedHoldPlan("plan hold", tools, "provisional", _hold(tools, 0.5, "provisional"), release)
    while first.status != Status.SUCCESS:
        first.tick_once()
        assert first.status != Status.FAILURE
    assert first.asked == ["all flips"] and bb.X_WG_grasp["left"] == "provisional"

    release.clear()
    search = _ScriptedHoldPlan("search quicker hold", tools, "search", _hold(tools, searched_x, "searched"), release)
    assert not search.holds_still
    move_command = Command(qvel=np.ones(len(chair_model.joint_names)), gripper={})
    bb.command = move_command  # the move beside it commanded this tick
    search.tick_once()
    assert search.status == Status.RUNNING and search.planning()
    assert bb.command is move_command  # the search commands nothing: the robot goes on toward the first hold
    assert search.feedback_message.startswith(FOLLOWING_FEEDBACK)
    assert search.asked == [None] or not search.asked  # the full search (its thread may not have started yet)
    release.set()
    assert search._job.join(timeout_s=30)
    search.tick_once()
    assert search.status == Status.SUCCESS and search.asked == [None]
    assert bb.X_WG_grasp["left"] == ("searched" if switched else "provisional")
    assert bb.q_pregrasp[tools.base_index[0]] == pytest.approx(searched_x if switched else 0.5)
    assert ("switched" if switched else "kept") in search.feedback_message


def test_a_search_that_finds_nothing_keeps_the_hold_the_robot_follows(chair_model):
    tools, bb = _setup(chair_model, realtime=True)
    release = threading.Event()
    release.set()
    _, hold = _hold(tools, 0.5, "provisional")
    bb.q_grasp, bb.X_WG_grasp, bb.q_pregrasp, bb.X_WG_pregrasp = hold[1], hold[2], hold[3], hold[4]
    search = _ScriptedHoldPlan("search quicker hold", tools, "search", ("fail", "IK failed: no solution"), release)
    while search.status != Status.SUCCESS:
        search.tick_once()
        assert search.status != Status.FAILURE  # a failed search must not fail the move beside it
    assert bb.X_WG_grasp["left"] == "provisional" and "the search found none" in search.feedback_message
    assert not tools.failures


def test_the_parallel_ends_with_the_move_and_cancels_a_search_still_running(chair_model):
    tools, bb = _setup(chair_model, realtime=True)
    release = threading.Event()
    search = _ScriptedHoldPlan("search quicker hold", tools, "search", _hold(tools, 0.1, "searched"), release)

    class _Move(py_trees.behaviour.Behaviour):
        def __init__(self):
            super().__init__("reach")
            self.ticks = 0

        def update(self):
            self.ticks += 1
            return Status.SUCCESS if self.ticks >= 3 else Status.RUNNING

    _, hold = _hold(tools, 0.5, "provisional")
    bb.q_grasp, bb.X_WG_grasp, bb.q_pregrasp, bb.X_WG_pregrasp = hold[1], hold[2], hold[3], hold[4]
    parallel = move_while_planning("reach, quicker hold searched", _Move(), search)
    tree = py_trees.trees.BehaviourTree(parallel)
    for _ in range(3):
        tree.tick()
    assert parallel.status == Status.SUCCESS
    job = search._job
    assert job is None or job.cancelled  # stopped with the move: its result is dropped
    release.set()
    assert bb.X_WG_grasp["left"] == "provisional"


def test_hold_time_adds_the_move_at_the_grasp_heading_and_bad_stages_are_refused(chair_model):
    tools, _ = _setup(chair_model, realtime=True)
    q = np.zeros(len(chair_model.joint_names))
    q_far = q.copy()
    q_far[tools.base_index[0]] = 0.5
    assert hold_time_s(tools, q, q_far, q_far) > hold_time_s(tools, q, q, q) == 0.0
    assert hold_time_s(tools, q, q, q, np.array([0.4, 0.0])) > 0.0
    assert HOLD_SWITCH_MARGIN_S > 0.0
    release = threading.Event()
    with pytest.raises(ValueError, match="stage 'eventually'"):
        _ScriptedHoldPlan("plan hold", tools, "eventually", None, release)
    with pytest.raises(ValueError, match="provisional plan 'some flips'"):
        quickest_hold_for_move(tools, None, lambda heading: [{}], lambda g: g, [{}], None, provisional="some flips")


def test_a_plan_that_holds_the_robot_still_is_refused_beside_a_move(chair_model):
    tools, _ = _setup(chair_model, realtime=True)
    holding = _ScriptedHoldPlan("plan hold", tools, "provisional", None, threading.Event())
    with pytest.raises(ValueError, match="must not hold the robot still"):
        move_while_planning("reach", py_trees.behaviours.Running("reach"), holding)


@pytest.mark.parametrize("facing_deg, nearest_deg", [(10.0, 45), (-10.0, -45), (80.0, 45)])
def test_the_nearest_heading_plan_tries_every_flip_at_the_diagonal_the_base_turns_least_to(chair_model, facing_deg,
                                                                                          nearest_deg):
    """The chair's provisional plan ("nearest heading"): one heading of the full search's three (the base as it
    stands, and 45 degrees either side of the push), the diagonal nearest the base's heading, with every flip."""
    tools, bb = _setup(chair_model, realtime=True)
    yaw = tools.base_index[2]
    asked = []

    class _IK:
        def solve(self, q, goals, q_nominal=None, fixed_joints=(), **kwargs):
            if not fixed_joints:  # a grasp (a pregrasp is solved from its grasp with the base fixed)
                asked.append((None if q_nominal is None else round(math.degrees(q_nominal[yaw])), goals["left"]))
            return SimpleNamespace(success=True, q=np.array(q if q_nominal is None else q_nominal), message="")

    tools.ik = _IK()
    obs = bb.observation
    obs.qpos[yaw] = math.radians(facing_deg)
    flips = lambda heading: [{"left": "flip a", "right": "flip a"}, {"left": "flip b", "right": "flip b"}]  # noqa: E731
    push_W = np.array([1.0, 0.0])
    quickest_hold_for_move(tools, obs, flips, lambda g: g, [{}, {"base_height": 400.0}], push_W)
    assert {heading for heading, _ in asked} == {None, 45, -45}
    asked.clear()
    quickest_hold_for_move(tools, obs, flips, lambda g: g, [{}, {"base_height": 400.0}], push_W,
                           provisional="nearest heading")
    assert {heading for heading, _ in asked} == {nearest_deg}
    assert {flip for _, flip in asked} == {"flip a", "flip b"}
