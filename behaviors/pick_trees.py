"""Pick-and-place trees for an arm at a table, built by plain functions: bundled PickCube and PickObject,
ManiSkill3's PickCube-v1 (through ``handleit.harness.ms3_adapter``) and StackCube-v1.

    pick and place (Sequence)
    ├── perceive                              every tick: target centre and top, table height (not while held)
    └── task (Sequence, memory)
        └── pick (Retry)                      while the episode lasts
            └── attempt (Sequence, memory)
                ├── recover                   after a failure: open, raise the hand, remember the failed grasp
                ├── target seen in time?      wait for the target's points
                ├── plan grasp (Selector)
                │   ├── plan grasp (IK + mplib)   the predictor's ranked grasps; the first with IK and a
                │   │                             collision-free arm path to its pregrasp (ManiSkill2, arXiv
                │   │                             2302.04659, Sec. 5.1)
                │   └── plan footprint grasp      fallback: top-down across the target's footprint -> no plan
                ├── pregrasp in time?         follow the planned path
                ├── correct grasp (hand seen) cameras off: the grasp moved by the hand's offset
                ├── grasp in time?            straight in along the approach
                ├── close gripper
                ├── grasp closed on object?   check: the fingers stopped on something
                ├── goal                      the task's goal position
                ├── plan carry (IK)           lift, goal (tool centre = goal + its offset from the object)
                └── carry and hold (Parallel)
                    ├── move (Sequence)       lift, to the goal, hold still
                    └── object in gripper?    check, every tick: fingers clamp, the points follow the hand

The stacking tree (StackCube) puts the goal on the place target's top (its points), carries through a via
point above it, and then, instead of holding, lets go: release, retreat straight up, hold still.

Failure checks are nodes; a failed check or skill fails the attempt and the Retry starts the next one:
the gripper opens, the hand rises, the scene is observed again and the grasps re-planned (the failed grasp
is skipped while the object stays where it was).
"""

from __future__ import annotations

import functools

import py_trees
from py_trees.common import ParallelPolicy

from .camera_correction import CorrectHoldForCameras
from .common import GraspIsHolding, HoldStill, MoveToConfiguration, OperateGripper, StepTimeout, Tools
from .object_in_gripper import ObjectInGripper
from .pick_nodes import (
    HELD_DRIFT_STEPS,
    MIN_TARGET_POINTS,
    FollowPlan,
    GoalFromTask,
    GoalOnPlaceTarget,
    ObserveObjects,
    PlanCarry,
    PlanPick,
    Recover,
    WaitForTarget,
    ik_goal_in_planner_frame,
    seconds_to_steps,
)

MAX_ATTEMPTS = 20  # in effect: retry while the episode lasts
# The fingers go in wide open, not preshaped to the grasp's opening: on a sparse cloud (a cube ~0.5 m from the
# 128x128 camera shows 4 x 4 points on its top) the predicted opening can miss a centimetre or two of the
# object, and a finger preshaped to it lands on top (PickCube test seed 5).

# Blackboard keys of the pick trees (beyond TreeSolver's) and their initial values.
PICK_BLACKBOARD = {
    "target": None, "place": None, "support_z": None, "target_at_grasp": None, "arm_plan": None, "goal_W": None,
    "q_lift": None, "X_WG_lift": None, "q_via": None, "X_WG_via": None, "q_goal": None, "X_WG_goal": None,
    "q_retreat": None, "X_WG_retreat": None, "failed_grasps": [],
}


def _grasp_steps(tools: Tools) -> list[py_trees.behaviour.Behaviour]:
    def steps(seconds: float) -> int:  # timeouts in seconds, whatever the control rate
        return seconds_to_steps(tools, seconds)

    return [
        Recover("recover", tools),
        StepTimeout("target seen in time?", WaitForTarget("wait for target", tools), steps(1.0), tools),
        py_trees.composites.Selector("plan grasp", memory=True, children=[
            PlanPick("plan grasp (IK + mplib)", tools),
            PlanPick("plan footprint grasp (fallback)", tools, footprint=True)]),
        StepTimeout("pregrasp in time?", FollowPlan("follow arm path", tools), steps(4.0), tools),
        # The hand in view above the object: move the grasp by the offset at which the camera sees the hand.
        CorrectHoldForCameras("correct grasp (hand seen)", tools,
                              ik_goal=functools.partial(ik_goal_in_planner_frame, tools.model)),
        StepTimeout("grasp in time?", MoveToConfiguration(
            # Held short by the object (a finger on its top): close anyway if aligned and within 1 cm.
            "move in along the approach", tools, "q_grasp", "X_WG_grasp", lateral_tolerance_m=0.005,
            axial_tolerance_m=0.005, angle_tolerance_rad=0.05, patience=steps(0.1), accept_stall_m=0.008,
            accept_stall_axial_m=0.01, speed_fraction=0.4), steps(1.5), tools),
        OperateGripper("close gripper", tools, "close", max_steps=steps(0.6)),
        GraspIsHolding("grasp closed on object?", tools),
    ]


def _move(name: str, tools: Tools, key: str, tolerance_m: float, speed_fraction: float, gripper: str = "close"):
    return StepTimeout(f"{name} in time?", MoveToConfiguration(
        name, tools, f"q_{key}", f"X_WG_{key}", lateral_tolerance_m=tolerance_m, axial_tolerance_m=tolerance_m,
        angle_tolerance_rad=0.05, speed_fraction=speed_fraction, gripper=gripper),
        seconds_to_steps(tools, 3.0), tools)


def _checked(name: str, tools: Tools, moves: list[py_trees.behaviour.Behaviour]) -> py_trees.behaviour.Behaviour:
    """The moves in sequence, with the check "object in gripper?" ticked alongside; SUCCESS when they end."""
    sequence = py_trees.composites.Sequence("move", memory=True, children=moves)
    return py_trees.composites.Parallel(
        name, policy=ParallelPolicy.SuccessOnSelected(children=[sequence]),
        children=[sequence,
                  ObjectInGripper("object in gripper?", tools, "target", MIN_TARGET_POINTS, HELD_DRIFT_STEPS)])


def create_pick_tree(tools: Tools) -> py_trees.behaviour.Behaviour:
    """Pick the target and hold it at the task's goal position (PickCube, PickObject, ManiSkill3 PickCube-v1)."""
    carry = _checked("carry and hold", tools, [
        _move("lift", tools, "lift", 0.02, 0.5),
        _move("to the goal", tools, "goal", 0.005, 0.5),
        HoldStill("hold still", tools, gripper="close"),  # RUNNING: the check keeps watching
    ])
    attempt = py_trees.composites.Sequence("attempt", memory=True, children=[
        *_grasp_steps(tools), GoalFromTask("goal", tools), PlanCarry("plan carry (IK)", tools), carry])
    task = py_trees.composites.Sequence("task", memory=True, children=[
        py_trees.decorators.Retry("pick", attempt, MAX_ATTEMPTS)])
    return py_trees.composites.Sequence("pick and place", memory=False,
                                        children=[ObserveObjects("perceive", tools), task])


def create_stack_tree(tools: Tools) -> py_trees.behaviour.Behaviour:
    """Pick the target and set it on the place target, then let go (ManiSkill3 StackCube-v1: cube A on cube B,
    static, released)."""
    carry = _checked("carry", tools, [
        _move("lift", tools, "lift", 0.02, 0.5),
        _move("above the place target", tools, "via", 0.01, 0.5),
        _move("lower onto it", tools, "goal", 0.004, 0.3),
    ])
    attempt = py_trees.composites.Sequence("attempt", memory=True, children=[
        *_grasp_steps(tools), GoalOnPlaceTarget("goal on place target", tools),
        PlanCarry("plan carry (IK)", tools, place=True), carry])
    task = py_trees.composites.Sequence("task", memory=True, children=[
        py_trees.decorators.Retry("pick", attempt, MAX_ATTEMPTS),
        OperateGripper("release", tools, "open", max_steps=seconds_to_steps(tools, 0.6)),
        _move("retreat", tools, "retreat", 0.02, 0.4, gripper="open"),
        HoldStill("hold still", tools, gripper="open"),
    ])
    return py_trees.composites.Sequence("stack", memory=False, children=[ObserveObjects("perceive", tools), task])
