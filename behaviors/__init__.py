"""Per-task behavior trees (py_trees) that wire perception, planning and control through the robot
interface (``handleit.types``). Nothing here imports ``handleit.envs`` or reads simulator ground truth."""

from __future__ import annotations

from handleit.types import RobotModel

from .bucket_trees import BUCKET_BLACKBOARD, create_move_bucket_tree
from .cabinet_trees import create_door_tree, create_drawer_tree
from .chair_trees import CHAIR_BLACKBOARD, create_push_chair_tree
from .tree_solver import TreeSolver

TREES = {
    "OpenCabinetDrawer": create_drawer_tree,
    "OpenCabinetDoor": create_door_tree,
    "PushChair": create_push_chair_tree,
    "MoveBucket": create_move_bucket_tree,
}
# Solver options per task: the dual-arm trees drive both arms and keep their own blackboard keys.
_DUAL_ARM = ("left", "right")
TREE_OPTIONS = {
    "PushChair": {"sides": _DUAL_ARM, "blackboard": CHAIR_BLACKBOARD},
    "MoveBucket": {"sides": _DUAL_ARM, "blackboard": BUCKET_BLACKBOARD},
}


def make_tree_solver(task: str, model: RobotModel, **kwargs) -> TreeSolver:
    """The behavior-tree solver of ``task``; ``ValueError`` for a task without a tree."""
    if task not in TREES:
        raise ValueError(f"no behavior tree for task {task!r}; trees exist for {', '.join(TREES)}")
    return TreeSolver(task, model, TREES[task], **{**TREE_OPTIONS.get(task, {}), **kwargs})


__all__ = [
    "TREES",
    "TreeSolver",
    "create_door_tree",
    "create_drawer_tree",
    "create_move_bucket_tree",
    "create_push_chair_tree",
    "make_tree_solver",
]
