"""The MoveBucket behavior tree (Let's Handle It (arXiv 2202.11792) Fig. 13: test the rim's thickness; pinch the rim
with both grippers or hug the bucket between both arms; lift with the torso; carry onto the platform; set down; let go).

    move bucket (Sequence)
    ├── perceive bucket                          every other tick: rim (z-slices), ball points, platform top
    └── task (Sequence, memory)
        ├── hold and carry (Retry x3)
        │   └── attempt (Sequence, memory)
        │       ├── recover                      after a failure: open both grippers, back off, re-plan
        │       ├── hold (Selector)
        │       │   ├── pinch rim (Sequence)
        │       │   │   ├── rim thin enough?     condition: the rim fits between the fingers
        │       │   │   ├── plan rim hold        dual-goal IK: both grippers on the rim, left and right
        │       │   │   │                        (in real time a quick first plan: fewer candidates)
        │       │   │   ├── reach above rim, quicker hold searched (Parallel)
        │       │   │   │   ├── search quicker rim hold   real time: the full search beside the move
        │       │   │   │   └── reach above rim
        │       │   │   ├── lower onto rim, hands seen (Parallel)
        │       │   │   │   ├── correct hold (hands seen)   cameras off: the hold moved by the hands' offsets
        │       │   │   │   └── lower onto rim   (in real time the correction redirects the lowering)
        │       │   │   ├── close grippers
        │       │   │   └── rim held?            check: neither gripper closed on air
        │       │   └── hug (Sequence)
        │       │       ├── plan hug             closed hands on the walls' left and right, pressing in
        │       │       ├── reach beside bucket, quicker hug searched (Parallel)
        │       │       │   ├── search quicker hug   real time: the full search beside the move
        │       │       │   └── reach beside bucket
        │       │       └── hug walls            held short by the wall: the arms squeeze it
        │       ├── plan carry                   lift-and-carry and set-down moves from the rim and the platform
        │       └── carry (Parallel)
        │           ├── lift, carry, lower       torso and base each at full speed (the base waits for the
        │           │                            lift only as long as the platform's edge needs), then down
        │           ├── bucket follows?          check: rim rises with the torso (not above the hands),
        │           │                            same radius, upright, ball inside
        │           └── rim in grippers?         check (rim hold): no gripper closed on air
        ├── let go                               open both grippers, raise the torso, back off
        └── hold still
"""

from __future__ import annotations

import py_trees
from py_trees.common import ParallelPolicy

from .bimanual_nodes import GrippersHolding, MoveBaseHolding, MoveBothArms, ReleaseAndBackOff, move_while_planning
from .bucket_nodes import (
    HOLD_IK_WEIGHTS,
    RIM_TILT_RAD,
    HUG_GRIPPER,
    HUG_PATIENCE_STEPS,
    HUG_SQUEEZE_M,
    HUG_SQUEEZE_SPEED,
    BucketFollows,
    PerceiveBucket,
    PlanBucketHold,
    PlanCarry,
    RimIsThin,
)
from .camera_correction import CorrectHoldForCameras
from .common import HoldStill, OperateGripper, StepTimeout, Tools

MAX_ATTEMPTS = 3
BUCKET_BLACKBOARD = {"target_xy_W": (0.0, 0.0), "rim": None, "bucket_points_W": None, "bucket_height_m": None,
                     "ball_points_W": None, "platform_top_z_m": None, "platform_points_W": None, "hold": None,
                     "rim_z_at_grasp_m": None, "torso_at_grasp_m": None, "rim_radius_at_grasp_m": None,
                     "carry_offset_W": None, "carry_delay_s": None,
                     "carry_gripper": None, "lower_offset_W": None, "lower_in_carry": None,
                     "preshape_opening_m": None}


def create_move_bucket_tree(tools: Tools) -> py_trees.behaviour.Behaviour:
    """The MoveBucket tree, with its failure checks and recovery."""
    pinch = py_trees.composites.Sequence("pinch rim", memory=True, children=[
        RimIsThin("rim thin enough?", tools),
        PlanBucketHold("plan rim hold", tools, "rim", stage="provisional"),
        move_while_planning("reach above rim, quicker hold searched", StepTimeout(
            "above rim in time?", MoveBothArms("reach above rim", tools, "q_pregrasp", "X_WG_pregrasp",
                                               position_tolerance_m=0.03, angle_tolerance_rad=0.15,
                                               gripper_key="preshape_opening_m"), 250, tools),
            PlanBucketHold("search quicker rim hold", tools, "rim", stage="search")),
        # Both hands in view above the rim: move the hold by the offsets at which the cameras see them (in real
        # time beside the lowering, whose goal it then moves).
        move_while_planning("lower onto rim, hands seen", StepTimeout(
            "lowered in time?", MoveBothArms("lower onto rim", tools, "q_grasp", "X_WG_grasp",
                                             position_tolerance_m=0.012, speed_fraction=0.8,
                                             gripper_key="preshape_opening_m"), 100, tools),
                            CorrectHoldForCameras("correct hold (hands seen)", tools, weights=HOLD_IK_WEIGHTS[0],
                                                  tilt_rad=RIM_TILT_RAD, holds_still=False)),
        OperateGripper("close grippers", tools, "close", max_steps=15),
        GrippersHolding("rim held?", tools),
    ])
    hug = py_trees.composites.Sequence("hug", memory=True, children=[
        PlanBucketHold("plan hug", tools, "hug", stage="provisional"),
        move_while_planning("reach beside bucket, quicker hug searched", StepTimeout(
            "beside bucket in time?", MoveBothArms("reach beside bucket", tools, "q_pregrasp", "X_WG_pregrasp",
                                                   position_tolerance_m=0.03, angle_tolerance_rad=0.15,
                                                   gripper=HUG_GRIPPER), 250, tools),
            PlanBucketHold("search quicker hug", tools, "hug", stage="search")),
        StepTimeout("hugged in time?", MoveBothArms("hug walls", tools, "q_grasp", "X_WG_grasp",
                                                    position_tolerance_m=0.01, accept_stall_m=HUG_SQUEEZE_M + 0.04,
                                                    speed_fraction=HUG_SQUEEZE_SPEED, patience=HUG_PATIENCE_STEPS,
                                                    gripper=HUG_GRIPPER), 120, tools),
    ])
    carry_moves = py_trees.composites.Sequence("lift, carry, lower", memory=True, children=[
        StepTimeout("carried in time?", MoveBaseHolding("lift and carry", tools, "carry_offset_W",
                                                        independent_height=True, delay_key="carry_delay_s",
                                                        gripper_key="carry_gripper", lower_key="lower_in_carry",
                                                        lowered_key="lower_offset_W"),
                    500, tools),
        StepTimeout("lowered onto platform in time?",
                    MoveBaseHolding("lower", tools, "lower_offset_W", gripper_key="carry_gripper"), 150, tools),
    ])
    carry = py_trees.composites.Parallel(
        "carry", policy=ParallelPolicy.SuccessOnSelected(children=[carry_moves]),
        children=[carry_moves, BucketFollows("bucket follows?", tools), GrippersHolding("rim in grippers?", tools, held="rim", when=("hold", "rim"))],
    )
    attempt = py_trees.composites.Sequence("attempt", memory=True, children=[
        ReleaseAndBackOff("recover", tools, reset_keys=("rim_z_at_grasp_m", "rim_radius_at_grasp_m", "hold")),
        py_trees.composites.Selector("hold", memory=True, children=[pinch, hug]),
        PlanCarry("plan carry", tools),
        carry,
    ])
    task = py_trees.composites.Sequence("task", memory=True, children=[
        py_trees.decorators.Retry("hold and carry", attempt, MAX_ATTEMPTS),
        ReleaseAndBackOff("let go", tools, only_on_retry=False, back_m=0.25, raise_m=0.08),
        HoldStill("hold still", tools, gripper="open"),
    ])
    return py_trees.composites.Sequence("move bucket", memory=False, children=[PerceiveBucket("perceive bucket", tools),
                                                                              task])
