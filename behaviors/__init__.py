"""Per-task behavior trees (py_trees) that wire perception, planning and control through the robot
interface (``handleit.types``). Nothing here imports ``handleit.envs`` or reads simulator ground truth."""

from __future__ import annotations

from handleit.types import RobotModel

from .backchaining import create_goal_tree, expand_goal, tree_for_goal
from .bucket_trees import BUCKET_BLACKBOARD, create_move_bucket_tree
from .cabinet_trees import create_door_tree, create_drawer_tree
from .chair_trees import CHAIR_BLACKBOARD, create_push_chair_tree
from .pick_trees import PICK_BLACKBOARD, create_pick_tree, create_stack_tree
from .predicate_nodes import GOAL_BLACKBOARD
from .skills import MOBILE_SKILLS, PICK_PLACE_BLACKBOARD, SkillSpec
from .tree_solver import TreeSolver

TREES = {
    "OpenCabinetDrawer": create_drawer_tree,
    "OpenCabinetDoor": create_door_tree,
    "PushChair": create_push_chair_tree,
    "MoveBucket": create_move_bucket_tree,
    "PickCube": create_pick_tree,
    "PickObject": create_pick_tree,
    "ms3:PickCube-v1": create_pick_tree,  # ManiSkill3's own tasks, through handleit.harness.ms3_adapter
    "ms3:StackCube-v1": create_stack_tree,
}
# Solver options per task: the dual-arm trees drive both arms and keep their own blackboard keys.
_DUAL_ARM = ("left", "right")
TREE_OPTIONS = {
    "PushChair": {"sides": _DUAL_ARM, "blackboard": CHAIR_BLACKBOARD, "segment_target": "floor_object"},
    "MoveBucket": {"sides": _DUAL_ARM, "blackboard": BUCKET_BLACKBOARD, "segment_target": "floor_object"},
}
# The tabletop arm (bundled and ManiSkill3) is the side "arm"; its grasps come from the 6-DoF object sampler
# unless the solver names another predictor ("bt:learned_scorer", see handleit.harness.solvers).
_PICK = {"side": "arm", "grasp_predictor": "antipodal_6dof", "blackboard": PICK_BLACKBOARD,
         "segment_target": "table_object"}
TREE_OPTIONS.update({task: _PICK for task in ("PickCube", "PickObject", "ms3:PickCube-v1", "ms3:StackCube-v1")})


def make_tree_solver(task: str, model: RobotModel, **kwargs) -> TreeSolver:
    """The behavior-tree solver of ``task``; ``ValueError`` for a task without a tree.

    Keyword arguments go to :class:`TreeSolver`, e.g. ``grasp_predictor="learned_scorer"``,
    ``segmenter="geometric"`` (the masks the tree reads; default ``"simulator"``) and ``segmenter_kwargs``.
    """
    if task not in TREES:
        raise ValueError(f"no behavior tree for task {task!r}; trees exist for {', '.join(TREES)}")
    return TreeSolver(task, model, TREES[task], **{**TREE_OPTIONS.get(task, {}), **kwargs})


def make_goal_solver(goal: str, task: str, model: RobotModel, skills: tuple[SkillSpec, ...] = MOBILE_SKILLS,
                     entity_masks: dict[str, str] | None = None, max_attempts: int | None = None,
                     **kwargs) -> TreeSolver:
    """A solver whose tree is composed for ``goal`` (``"Open(drawer)"``) from ``skills`` by backchaining
    (:func:`~handleit.behaviors.backchaining.create_goal_tree`) instead of the task's hand-written tree;
    on the single-arm mobile robot. The goal is composed here, so that a goal no skill reaches is refused
    before any episode runs. ``max_attempts``: failed runs allowed per skill and episode (None: each skill's
    own, ``SkillSpec.max_attempts``). Keyword arguments go to :class:`TreeSolver`; ``hold_keeps_grip`` is on
    unless they say otherwise (a held object is carried through checks, plans and hand-offs)."""
    # Refuses what cannot be composed, needs a skill not built, or a bad max_attempts.
    tree_for_goal(goal, skills, tools=None, max_attempts=max_attempts)

    def build(tools):
        return create_goal_tree(goal, skills, tools, entity_masks, max_attempts=max_attempts)

    blackboard = {**GOAL_BLACKBOARD, **PICK_PLACE_BLACKBOARD, **kwargs.pop("blackboard", {})}
    solver = TreeSolver(task, model, build, blackboard=blackboard, **{"hold_keeps_grip": True, **kwargs})
    solver.name = f"goal:{goal}"
    return solver


__all__ = [
    "TREES",
    "TreeSolver",
    "create_goal_tree",
    "create_door_tree",
    "create_drawer_tree",
    "create_move_bucket_tree",
    "create_pick_tree",
    "create_push_chair_tree",
    "create_stack_tree",
    "expand_goal",
    "make_goal_solver",
    "make_tree_solver",
    "tree_for_goal",
]
