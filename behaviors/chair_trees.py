"""The PushChair behavior tree (Let's Handle It (arXiv 2202.11792) Fig. 14: hug, push the chair centre to the target,
then nudge).

    push chair (Sequence)
    ├── perceive chair                           every other tick: chair centre and backrest; while held,
    │                                            the centre rides in the hands' frame between views of the
    │                                            casters
    └── task (Sequence, memory)
        ├── hold and push (Retry x3)
        │   └── attempt (Sequence, memory)
        │       ├── recover                      after a failure: open both grippers, back off, re-plan
        │       ├── plan hold                    both grippers on the backrest's top edge: dual-goal IK
        │       │                                (in real time a quick first plan: fewer candidates)
        │       ├── reach above backrest, quicker hold searched (Parallel)
        │       │   ├── search quicker hold      real time: the full search, off the tick thread; its hold
        │       │   │                            replaces the first if quicker from where the robot is
        │       │   └── reach above backrest     base, torso (rising first) and both arms together
        │       ├── refine hold                  the grasp again from a fresh estimate
        │       ├── lower onto backrest, hands seen (Parallel)
        │       │   ├── correct hold (hands seen)   cameras off: the hold moved by the hands' offsets (in real
        │       │   │                            time beside the lowering, which it then redirects)
        │       │   └── lower onto backrest      fingers pre-shaped around the panel
        │       └── push (Parallel)              the grippers close as the base starts (a 0.3 s ramp)
        │           ├── push and nudge (Sequence)
        │           │   ├── plan push            base offset = target - estimated centre, 7 cm short
        │           │   ├── push to target       the base carries the held chair
        │           │   └── nudge (Retry x6)     re-estimate; centred? else a correcting base move
        │           ├── chair tipping?           check: the backrest top keeps its height
        │           └── backrest in grippers?    check: no gripper closed on air
        └── hold still                           keep the chair static

The hold pinches the backrest's top edge with both grippers instead of the paper's hug around it: the
chair then follows the base in every direction (the base is holonomic) and stops when the base stops.
Closing is not a step of its own: the push commands closed grippers from its first tick, so the ~10 steps
the fingers take to close overlap the base's ramp-up, and "backrest in grippers?" fails the attempt if a
gripper closes on air.
"""

from __future__ import annotations

import py_trees
from py_trees.common import ParallelPolicy

from .bimanual_nodes import (
    HELD_RAMP_S,
    GrippersHolding,
    MoveBaseHolding,
    MoveBothArms,
    ReleaseAndBackOff,
    move_while_planning,
)
from .camera_correction import CorrectHoldForCameras
from .chair_nodes import (
    HOLD_IK_WEIGHTS,
    HOLD_TILT_RAD,
    MAX_NUDGE_M,
    PUSH_SPEED_FRACTION,
    PUSH_STOP_SHORT_M,
    ChairCentered,
    ChairUpright,
    PerceiveChair,
    PlanBackrestHold,
    PlanPush,
)
from .common import HoldStill, StepTimeout, Tools

MAX_ATTEMPTS = 3
# The lowering onto the backrest hands over to the push this close to the grasp: the push holds the arms at the
# lowering's reference, so the hands cover the rest while the fingers close. At 1.2 cm (before) the lowering's last
# 2-3 steps were spent on the last centimetre; lockstep, seeds 0-19 of both splits: 38/40 both ways, 2.5 steps
# quicker (median).
LOWERED_TOLERANCE_M = 0.025
MAX_NUDGES = 6
# The push's ramp from rest to full speed and back (s): the held moves' 0.3 s. Shorter ramps were slower and failed
# more (lockstep, train seeds 0-19: 0.2 s 16/20, 0.15 s 14/20, against 19/20; docs/benchmarks.md, issue 15).
PUSH_RAMP_S = HELD_RAMP_S
CHAIR_BLACKBOARD = {"target_xy_W": (0.0, 0.0), "chair_center_W": None, "backrest": None, "push_offset_W": None,
                    "backrest_top_z_m": None, "preshape_opening_m": None, "holding": False,
                    "center_in_hands_H": None, "last_sure_center_W": None}


def create_push_chair_tree(tools: Tools) -> py_trees.behaviour.Behaviour:
    """The PushChair tree, with its failure checks and recovery."""
    nudge_once = py_trees.decorators.SuccessIsFailure("then check again", py_trees.composites.Sequence(
        "nudge", memory=True, children=[
            PlanPush("plan nudge", tools, max_offset_m=MAX_NUDGE_M),
            StepTimeout("nudge in time?", MoveBaseHolding("nudge base", tools, "push_offset_W"), 150, tools),
        ]))
    centred_or_nudge = py_trees.composites.Selector("centred or nudge", memory=True, children=[
        ChairCentered("chair centred?", tools), nudge_once])
    push_and_nudge = py_trees.composites.Sequence("push and nudge", memory=True, children=[
        PlanPush("plan push", tools, stop_short_m=PUSH_STOP_SHORT_M),
        StepTimeout("push in time?", MoveBaseHolding("push to target", tools, "push_offset_W",
                                                     speed_fraction=PUSH_SPEED_FRACTION, ramp_s=PUSH_RAMP_S),
                                                     400, tools),
        py_trees.decorators.Retry("nudge", centred_or_nudge, MAX_NUDGES),
    ])
    push = py_trees.composites.Parallel(
        "push", policy=ParallelPolicy.SuccessOnSelected(children=[push_and_nudge]),
        children=[push_and_nudge, ChairUpright("chair tipping?", tools), GrippersHolding("backrest in grippers?", tools, held="backrest")],
    )
    attempt = py_trees.composites.Sequence("attempt", memory=True, children=[
        ReleaseAndBackOff("recover", tools, reset_keys=("backrest_top_z_m", "holding", "center_in_hands_H",
                                                         "last_sure_center_W")),
        PlanBackrestHold("plan hold", tools, stage="provisional"),
        move_while_planning("reach above backrest, quicker hold searched", StepTimeout(
            "above backrest in time?", MoveBothArms("reach above backrest", tools, "q_pregrasp", "X_WG_pregrasp",
                                                    position_tolerance_m=0.03, angle_tolerance_rad=0.15,
                                                    gripper_key="preshape_opening_m", torso_first=True), 250, tools),
                            PlanBackrestHold("search quicker hold", tools, stage="search")),
        PlanBackrestHold("refine hold", tools, refine=True),
        # Both hands in view above the backrest: move the hold by the offsets at which the cameras see them.
        # In real time the lowering starts at once and the correction moves its goal when it is done.
        move_while_planning("lower onto backrest, hands seen", StepTimeout(
            "lowered in time?", MoveBothArms("lower onto backrest", tools, "q_grasp", "X_WG_grasp",
                                             position_tolerance_m=LOWERED_TOLERANCE_M, speed_fraction=0.9,
                                             gripper_key="preshape_opening_m"), 100, tools),
                            CorrectHoldForCameras("correct hold (hands seen)", tools, weights=HOLD_IK_WEIGHTS[0],
                                                  tilt_rad=HOLD_TILT_RAD, holds_still=False)),
        push,
    ])
    task = py_trees.composites.Sequence("task", memory=True, children=[
        py_trees.decorators.Retry("hold and push", attempt, MAX_ATTEMPTS),
        HoldStill("hold still", tools),
    ])
    return py_trees.composites.Sequence("push chair", memory=False, children=[PerceiveChair("perceive chair", tools),
                                                                             task])
