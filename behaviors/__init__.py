"""Per-task behavior trees (py_trees) that wire perception, planning and control through the robot
interface (``handleit.types``). Nothing here imports ``handleit.envs`` or reads simulator ground truth."""

from __future__ import annotations

from handleit.types import RobotModel

from .cabinet_trees import create_door_tree, create_drawer_tree
from .tree_solver import TreeSolver

TREES = {"OpenCabinetDrawer": create_drawer_tree, "OpenCabinetDoor": create_door_tree}


def make_tree_solver(task: str, model: RobotModel, **kwargs) -> TreeSolver:
    """The behavior-tree solver of ``task``; ``ValueError`` for a task without a tree."""
    if task not in TREES:
        raise ValueError(f"no behavior tree for task {task!r}; trees exist for {', '.join(TREES)}")
    return TreeSolver(task, model, TREES[task], **kwargs)


__all__ = ["TREES", "TreeSolver", "create_door_tree", "create_drawer_tree", "make_tree_solver"]
