"""The tools of one tree solver (behaviors.common.Tools), built from a small picklable spec: in the tick process
by :class:`~handleit.behaviors.tree_solver.TreeSolver`, and the same way in the planning worker process
(behaviors/planning_worker.py), which builds and keeps its own IK and motion planners per robot."""

from __future__ import annotations

from dataclasses import dataclass

from handleit.control.pid import PART_GAINS, PIDGains, make_robot_pid
from handleit.perception.grasp_predictors import get_grasp_predictor
from handleit.types import RobotModel

from .common import Tools
from .planners import arm_motion_planner, robot_self_filter, whole_body_ik

# Reference tracking: the Let's Handle It (arXiv 2202.11792) proportional gains without integral (see
# MoveToConfiguration), except the base rotation: its kp = 0.5 corrects a 0.01 rad heading error (1 cm at the hand) at
# 0.005 rad/s, too slow for a 2 s episode; it gets the arm's kp.
TRACKING_GAINS = {part: PIDGains(g.kp, 0.0, g.kd) for part, g in PART_GAINS.items()}
TRACKING_GAINS["base_rotation"] = PIDGains(PART_GAINS["arm"].kp, 0.0, 0.0)


@dataclass(frozen=True, eq=False)
class ToolsSpec:
    """What a process needs to build a solver's tools: the robot, the grasp predictor's registered name (plug-ins
    registered by entry point load in any process; one registered only in the tick process's ``__main__`` does
    not exist in the planning worker) and the arms the tree drives."""

    model: RobotModel
    grasp_predictor: str = "antipodal"
    side: str = "right"
    sides: tuple[str, ...] = ()

    def key(self) -> tuple:
        """Hashable identity (the model by its description file and joint order, as behaviors.planners caches)."""
        return (str(self.model.urdf_path), tuple(self.model.joint_names), self.grasp_predictor, self.side,
                tuple(self.sides))


def make_tools(spec: ToolsSpec, namespace: str, segmenter=None, realtime: bool = False,
               planning: str = "thread") -> Tools:
    """The tools of one solver: IK and planners shared per process (behaviors.planners), PIDs and the grasp
    predictor new. ``planning``: where a real-time plan runs ("thread" or "process", behaviors/background.py)."""
    model, side = spec.model, spec.side
    return Tools(
        model=model, ik=whole_body_ik(model), pid=make_robot_pid(model),
        tracking_pid=make_robot_pid(model, presets=TRACKING_GAINS),
        grasp_predictor=get_grasp_predictor(spec.grasp_predictor), namespace=namespace, side=side,
        sides=spec.sides,
        motion_planner=lambda: arm_motion_planner(model, side), segmenter=segmenter,
        self_filter=lambda: robot_self_filter(model),
        realtime=realtime, planning=planning, spec=spec,
    )
