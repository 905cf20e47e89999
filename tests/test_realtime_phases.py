"""Where an episode's steps go (harness/tree_phases.py, kept by both harnesses; benchmarks/realtime_phases.py):
the tree's tip per step, run-length coded, with holds for a background plan and waits for rest marked."""

from __future__ import annotations

import numpy as np
import py_trees
from py_trees.common import Status

from handleit.behaviors.background import HOLD_STILL_FEEDBACK, SETTLE_FEEDBACK
from handleit.harness.realtime_sim import TrackedSolver
from handleit.harness.tree_phases import working_tip
from handleit.types import Command, Observation


class _Scripted(py_trees.behaviour.Behaviour):
    """RUNNING with the scripted feedback for its ticks, then SUCCESS."""

    def __init__(self, name, feedbacks):
        super().__init__(name)
        self.feedbacks, self.ticks = list(feedbacks), 0

    def update(self):
        if self.ticks >= len(self.feedbacks):
            return Status.SUCCESS
        self.feedback_message = self.feedbacks[self.ticks]
        self.ticks += 1
        return Status.RUNNING


class _Solver:
    def __init__(self):
        root = py_trees.composites.Sequence("root", memory=True, children=[
            _Scripted("plan", [f"{HOLD_STILL_FEEDBACK} (1 ticks)"] * 3),
            _Scripted("refine", [f"{SETTLE_FEEDBACK} (moving, 0 clouds)"] * 2 + [f"{HOLD_STILL_FEEDBACK} (1)"]),
            _Scripted("move", ["tcp 3 cm aside"] * 4)])
        self.root, self.tree = root, py_trees.trees.BehaviourTree(root)

    def reset(self, observation):
        pass

    def step(self, observation):
        self.tree.tick()
        return Command(qvel=np.zeros(1), gripper={})


def test_the_tip_per_step_is_run_length_coded_with_planning_and_settling_marked():
    tracked = TrackedSolver(_Solver())
    obs = Observation(time_s=0.0, points=np.zeros((0, 3)), colors=np.zeros((0, 3), np.uint8), masks={},
                      frame="world", joint_names=("j",), qpos=np.zeros(1), qvel=np.zeros(1), X_WB=np.eye(4))
    tracked.reset(obs)
    for k in range(9):
        tracked.step(Observation(**{**obs.__dict__, "time_s": 0.01 * k}))
    phases = tracked.phases()
    assert [(label, steps) for label, _, steps in phases] == [
        ("plan (planning)", 3), ("refine (settling)", 2), ("refine (planning)", 1), ("move", 3)]
    assert phases[1][1] == 0.03  # the robot's clock at the phase's first step


def test_a_parallel_counts_its_work_not_the_check_beside_it():
    """In a Parallel (a push with its checks) the step goes to the first running child's tip, not to the check
    that py_trees ticked last."""
    push = py_trees.composites.Sequence("push and nudge", memory=True, children=[
        _Scripted("plan push", []), _Scripted("push to target", ["moving"] * 5)])
    check = _Scripted("backrest in grippers?", ["holding"] * 10)
    root = py_trees.composites.Parallel("push", policy=py_trees.common.ParallelPolicy.SuccessOnSelected([push]),
                                        children=[push, check])
    tree = py_trees.trees.BehaviourTree(root)
    tree.tick()
    assert tree.tip().name == "backrest in grippers?"  # what py_trees reports
    assert working_tip(root).name == "push to target"


def test_a_plan_beside_a_move_gives_its_steps_to_the_move():
    """A plan that runs beside a move without holding the robot still (behaviors/bimanual_nodes.move_while_planning)
    is passed over: the step is the move's."""
    search = _Scripted("search quicker hold", ["planning"] * 10)
    search.holds_still = False
    move = _Scripted("reach above backrest", ["moving"] * 10)
    root = py_trees.composites.Parallel("reach", policy=py_trees.common.ParallelPolicy.SuccessOnSelected([move]),
                                        children=[search, move])
    py_trees.trees.BehaviourTree(root).tick()
    assert search.status == Status.RUNNING
    assert working_tip(root).name == "reach above backrest"
