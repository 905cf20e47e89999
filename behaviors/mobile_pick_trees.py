"""Pick and place subtrees for the single-arm mobile Panda (the long-horizon tasks of issue 19), built by plain
functions. Each returns a subtree that ends SUCCESS once its effect should hold (a skill framework wraps them
with their predicates); ``hold=True`` adds a final hold, for running one alone as a task's whole tree.

    pick object (Sequence)                      effect aimed at: Grasped(object), the object off its support
    ├── perceive object                         every tick: object centre and footprint, support height, table top
    └── pick (Retry x3)
        └── attempt (Sequence, memory)
            ├── recover                         after a failure: open, raise the hand, skip the failed grasp
            ├── drive to the object in time?    base to a far stand-off off the table's edge (arm held)
            ├── look from the hand (Selector)   robots with a camera on the hand only
            │   ├── object on the table?        check: then the base's cameras see it
            │   ├── look into the drawer        the hand (IK) over the object or the drawer's middle, looking
            │   │                               down: arm raised, then the base in; "object seen from the
            │   │                               hand?" (waits 1 s)
            │   └── without the hand's view     a look that failed: go on with the base's cameras
            ├── object seen?                    check: the object's points (waits 1 s for them)
            ├── plan grasp (whole-body IK)      antipodal grasps from above (only the top seen: across the
            │                                   footprint); IK pregrasp (base kept off the table), grasp and
            │                                   lift (arm alone)
            ├── raise arm in time?              arm and torso to the pregrasp posture, base where it is
            ├── drive to pregrasp in time?      base in, arm held
            ├── grasp in time?                  straight in along the approach
            ├── close gripper
            ├── grasp closed on object?         check: the fingers stopped on something
            ├── record held object              its points in the hand frame, for placing
            ├── lift (Parallel)                 straight up, with "object in gripper?" every tick
            └── lifted?                         check: the object's lowest point above its support

    place inside drawer / place on table (Sequence)    effects: InsideOf(object, drawer) or OnTopOf(object,
    ├── perceive place region                          table), HandEmpty()
    └── place (Sequence, memory)
        ├── carry to the drawer/table (Parallel)       tuck the arm (IK), base to a far stand-off around the
        │                                              table, "object in gripper?" every tick
        ├── drawer opening seen? / table top seen?     check: the estimator's estimate (or why not)
        ├── plan placement (IK)                        object's footprint inside the opening; IK above, release,
        │                                              retreat
        ├── carry over it (Parallel)                   raise arm, drive in (the base stopped short: the arm
        │                                              re-planned from there, "arm over it"), lower (stalled
        │                                              short: "held over the place?"); "object in gripper?"
        ├── open gripper
        ├── released?                                  check: the fingers opened
        ├── plan retreat (torso up)                    the hand straight up by the torso, arm and base held
        ├── retreat in time?                           hand straight up
        └── object left behind?                        check: its points stayed down, where they were put
"""

from __future__ import annotations

import py_trees
from py_trees.common import ParallelPolicy

from .common import GraspIsHolding, HoldStill, MoveToConfiguration, OperateGripper, StepTimeout, Tools
from .mobile_pick_nodes import (
    HELD_DRIFT_STEPS,
    MIN_OBJECT_POINTS,
    MOBILE_PICK_BLACKBOARD,
    ApproachStandoff,
    HeldOverPlace,
    Lifted,
    MoveJoints,
    ObjectLeftBehind,
    ObjectOnTable,
    ObjectSeen,
    PerceiveObject,
    PerceivePlaceRegion,
    PlaceRegionSeen,
    PlanHandLook,
    PlanMobileGrasp,
    PlanPlace,
    PlanRetreat,
    PlanTuck,
    RecordHeldObject,
    Released,
    ReplanArmFromBase,
    SeenFromHand,
)
from .object_in_gripper import ObjectInGripper
from .pick_nodes import Recover, seconds_to_steps

PICK_ATTEMPTS = 3

__all__ = ["MOBILE_PICK_BLACKBOARD", "create_mobile_pick_tree", "create_place_tree", "create_pick_tree"]


def _timed(name: str, child, tools: Tools, seconds: float):
    return StepTimeout(name, child, seconds_to_steps(tools, seconds), tools)


def _with_object_check(name: str, tools: Tools, moves, object_mask: str):
    """The moves in sequence, "object in gripper?" ticked alongside; SUCCESS when the moves end."""
    sequence = py_trees.composites.Sequence("moves", memory=True, children=list(moves))
    return py_trees.composites.Parallel(name, policy=ParallelPolicy.SuccessOnSelected(children=[sequence]),
                                        children=[sequence, ObjectInGripper("object in gripper?", tools, object_mask,
                                                                            MIN_OBJECT_POINTS, HELD_DRIFT_STEPS)])


def create_pick_tree(tools: Tools, object_mask: str = "object", table_mask: str = "table",
                     hold: bool = False, grasp_predictor=None) -> py_trees.behaviour.Behaviour:
    """Pick the object (``object_mask``: the mask name the segmenter writes) from where it rests, with the
    mobile base: drive, plan grasps with whole-body IK, grasp for real, lift. See the module docstring.
    ``grasp_predictor``: the object grasps' predictor, if not ``tools.grasp_predictor``."""
    grasp = MoveToConfiguration(
        "move in along the approach", tools, "q_grasp", "X_WG_grasp", lateral_tolerance_m=0.006,
        axial_tolerance_m=0.006, angle_tolerance_rad=0.05, base_tolerance_m=0.03, patience=10,
        accept_stall_m=0.01, accept_stall_axial_m=0.015, speed_fraction=0.3, gripper_key="grasp_opening")
    lift = _with_object_check("lift", tools, [MoveJoints("lift straight up", tools, "q_lift", gripper="close",
                                                         speed_fraction=0.3)], object_mask)
    # A robot with a camera on its hand looks into a drawer from above before it plans the grasp: the base's
    # cameras, 1.5 m up, see over a low drawer's front wall only part of the way in (SetTable).
    look = []
    if tools.side in tools.model.hand_camera_sides:
        look = [py_trees.composites.Selector("look from the hand", memory=True, children=[
            ObjectOnTable("object on the table?", tools),
            py_trees.composites.Sequence("look into the drawer", memory=True, children=[
                PlanHandLook("plan the look (IK)", tools),
                _timed("raise arm to look in time?", MoveJoints("raise arm to look", tools, "q_look_raise"), tools,
                       5.0),
                _timed("hand over the drawer in time?", MoveJoints("hand over the drawer", tools, "q_look",
                                                                   tolerance=0.015), tools, 8.0),
                SeenFromHand("object seen from the hand?", tools, object_mask)]),
            # A look that cannot be planned or made (no drawer in view, a blocked arm) is no reason to give up:
            # the pick goes on with what the base's cameras see.
            py_trees.behaviours.Success("without the hand's view")])]
    attempt = py_trees.composites.Sequence("attempt", memory=True, children=[
        Recover("recover", tools),
        _timed("drive to the object in time?", ApproachStandoff("drive to the object", tools, "object"), tools, 12.0),
        *look,
        ObjectSeen("object seen?", tools, object_mask),
        PlanMobileGrasp("plan grasp (whole-body IK)", tools, object_mask, grasp_predictor),
        _timed("raise arm in time?", MoveJoints("raise arm", tools, "q_raise"), tools, 5.0),
        _timed("drive to pregrasp in time?", MoveJoints("drive to pregrasp", tools, "q_pregrasp", tolerance=0.015),
               tools, 8.0),
        _timed("grasp in time?", grasp, tools, 3.0),
        OperateGripper("close gripper", tools, "close", max_steps=seconds_to_steps(tools, 0.8)),
        GraspIsHolding("grasp closed on object?", tools),
        RecordHeldObject("record held object", tools),
        _timed("lift in time?", lift, tools, 4.0),
        Lifted("lifted?", tools, object_mask),
    ])
    children = [py_trees.decorators.Retry("pick", attempt, PICK_ATTEMPTS)]
    if hold:
        children.append(HoldStill("hold still", tools, gripper="close"))
    task = py_trees.composites.Sequence("pick task", memory=True, children=children)
    return py_trees.composites.Sequence("pick object", memory=False,
                                        children=[PerceiveObject("perceive object", tools, object_mask, table_mask),
                                                  task])


# The mobile robot's pick tree under the name the task registry may use.
create_mobile_pick_tree = create_pick_tree


def create_place_tree(tools: Tools, where: str = "inside", object_mask: str = "object",
                      part_mask: str = "target_link", handle_mask: str = "target_handle", table_mask: str = "table",
                      hold: bool = False) -> py_trees.behaviour.Behaviour:
    """Put the held object ``where="inside"`` the open drawer (``part_mask``: its points) or ``"on"`` the
    table (``table_mask``), then let go and retreat. See the module docstring."""
    if where not in ("inside", "on"):
        raise ValueError(f"where must be 'inside' (the drawer) or 'on' (the table), got {where!r}")
    entity = "drawer" if where == "inside" else "table"
    seen = "drawer opening seen?" if where == "inside" else "table top seen?"
    carry_to = _with_object_check(f"carry to the {entity}", tools, [
        PlanTuck("plan tuck (IK)", tools),
        _timed("tuck arm in time?", MoveJoints("tuck arm", tools, "q_tuck", gripper="close", speed_fraction=0.3),
               tools, 5.0),
        _timed(f"drive to the {entity} in time?", ApproachStandoff(f"drive to the {entity}", tools, entity, "close"),
               tools, 25.0)], object_mask)
    lower = MoveToConfiguration("lower", tools, "q_release", "X_WG_release", lateral_tolerance_m=0.01,
                                axial_tolerance_m=0.008, angle_tolerance_rad=0.08, base_tolerance_m=0.04,
                                gripper="close", patience=10, accept_stall_m=0.02, accept_stall_axial_m=0.04,
                                speed_fraction=0.3)
    carry_over = _with_object_check(f"carry over the {entity}", tools, [
        _timed("raise arm in time?", MoveJoints("raise arm", tools, "q_raise", gripper="close"), tools, 5.0),
        # The base may stop short of its planned pose (3-4.5 cm, TidyIntoDrawer test seeds 1 and 2): the arm is
        # then planned again for where it stands and reaches over the place alone.
        py_trees.composites.Selector("over it", memory=True, children=[
            _timed("drive over it in time?", MoveJoints("drive over it", tools, "q_above", gripper="close",
                                                        tolerance=0.015), tools, 8.0),
            py_trees.composites.Sequence("arm over it from where the base stopped", memory=True, children=[
                ReplanArmFromBase("re-plan arm (base where it stopped)", tools),
                _timed("arm over it in time?", MoveJoints("arm over it", tools, "q_above", gripper="close",
                                                          tolerance=0.015), tools, 4.0)])]),
        py_trees.composites.Selector("lower", memory=True, children=[
            _timed("lower in time?", lower, tools, 4.0), HeldOverPlace("held over the place?", tools, where)]),
    ], object_mask)
    children = [
        carry_to,
        PlaceRegionSeen(seen, tools),
        PlanPlace("plan placement (IK)", tools, where),
        carry_over,
        OperateGripper("open gripper", tools, "open", max_steps=seconds_to_steps(tools, 0.6)),
        Released("released?", tools),
        PlanRetreat("plan retreat (torso up)", tools),
        _timed("retreat in time?", MoveJoints("retreat", tools, "q_retreat", gripper="open", speed_fraction=0.4),
               tools, 4.0),
        ObjectLeftBehind("object left behind?", tools, object_mask),
    ]
    if hold:
        children.append(HoldStill("hold still", tools, gripper="open"))
    task = py_trees.composites.Sequence("place", memory=True, children=children)
    perceive = PerceivePlaceRegion("perceive place region", tools, where, part_mask, handle_mask, table_mask,
                                   object_mask)
    return py_trees.composites.Sequence(f"place {where} {entity}", memory=False, children=[perceive, task])


def create_pick_and_place_tree(tools: Tools, where: str = "inside") -> py_trees.behaviour.Behaviour:
    """Pick the object, then place it ``where`` ("inside" the drawer, "on" the table), then hold still: the
    two subtrees chained by hand, for measuring the place skill (a held object is no initial state the envs
    sample)."""
    return py_trees.composites.Sequence("pick and place", memory=True, children=[
        create_pick_tree(tools), create_place_tree(tools, where), HoldStill("hold still", tools, gripper="open")])
