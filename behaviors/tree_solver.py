"""A behavior tree as a solver: observation in, command out, one tick per control step."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import py_trees

from handleit.perception.handle_points import HandleAccumulator
from handleit.perception.segmenters import SIMULATOR, TARGET_MASKS, get_segmenter
from handleit.types import Command, Observation, RobotModel

from .background import BackgroundPlanning
from .camera_calibration_nodes import CalibrateCameras
from .common import Tools
from .planning_worker import calibration_worker, planning_worker, segmentation_worker
from .segment_nodes import Segment, with_segmentation
from .solver_tools import TRACKING_GAINS, ToolsSpec, make_tools  # noqa: F401  TRACKING_GAINS: re-exported
from .state_history import StateHistory

_instances = itertools.count()
_solvers = itertools.count()
PLANNING_MODES = ("process", "thread")  # where a real-time plan runs (behaviors/background.py)
# A composed tree with a skill out of attempts whose root has failed this many ticks in a row has given up (the
# predicates it reads change only after 20 ticks in a row, behaviors/predicate_nodes.py).
GIVE_UP_TICKS = 50


def keep_grip(command: Command, gripper_commanded: dict[str, Any]) -> Command:
    """``command`` with each gripper's "hold" replaced by "close" where that gripper was last commanded to close
    (``gripper_commanded``: side -> its last command other than "hold"): a closed gripper keeps squeezing."""
    kept = {side: "close" if _is(g, "hold") and _is(gripper_commanded.get(side), "close") else g
            for side, g in command.gripper.items()}
    return command if kept == command.gripper else dataclasses.replace(command, gripper=kept)


def _is(command, word: str) -> bool:
    return isinstance(command, str) and command == word


class TreeSolver:
    """Runs a task tree: writes the observation to the blackboard, ticks, reads the command.

    Args:
        task: task name (for records).
        model: the robot model.
        build: ``build(tools) -> root`` (e.g. :func:`create_drawer_tree`).
        grasp_predictor: name of a registered grasp predictor (plug-ins replace the analytic sampler).
        side: the arm used by a single-arm tree.
        sides: every arm the tree drives (default: ``side`` alone); the dual-arm trees pass both.
        blackboard: extra blackboard keys of the tree and their initial values.
        segmenter: name of a registered segmenter (``handleit.perception.segmenters``): the masks the tree
            reads. Only ``simulator`` reads the simulator's masks.
        segment_target: what the tree targets ("cabinet_part", "floor_object", "table_object").
        segmenter_kwargs: passed to the segmenter's factory (e.g. ``marker_rgb`` for ``color_marker``).
        realtime: plan off the tick thread (behaviors/background.py); False (lockstep) plans in the tick. Read at
            ``reset()``.
        planning: where a real-time plan runs: "process" (the planning worker process, behaviors/planning_worker.py:
            no solver holds the tick process's GIL) or "thread" (a worker thread of this process). Read at
            ``reset()``; lockstep ignores it.
        calibrate_cameras: start the tree with "calibrate cameras (robot seen)" (behaviors/camera_calibration_nodes.py:
            each camera's pose error read off the robot in its view); False for cameras known to be calibrated.
        hold_keeps_grip: a gripper last commanded to close keeps closing where a tick says "hold" (or nothing acts:
            a check, a plan in progress, a skill's effects awaited), so that it keeps its grip on what it holds.
            "hold" is a finger velocity of 0, and the fingers' velocity drive then squeezes with no force: a
            held object slipped out within 3-20 ticks (TidyIntoDrawer test seed 19, traced on simulator state).
            On for the composed trees (:func:`~handleit.behaviors.make_goal_solver`); off for the per-task trees,
            whose figures were measured without it.
    """

    def __init__(self, task: str, model: RobotModel, build: Callable[[Tools], py_trees.behaviour.Behaviour],
                 grasp_predictor: str = "antipodal", side: str = "right", sides: tuple[str, ...] = (),
                 blackboard: dict[str, Any] | None = None, segmenter: str = SIMULATOR,
                 segment_target: str = "cabinet_part", segmenter_kwargs: dict[str, Any] | None = None,
                 realtime: bool = False, planning: str = "process", calibrate_cameras: bool = True,
                 hold_keeps_grip: bool = False):
        self.name, self.task, self.model, self.build = "bt", task, model, build
        self.hold_keeps_grip = hold_keeps_grip
        self.realtime, self.planning = realtime, planning
        self.calibrate_cameras = calibrate_cameras
        self.segmenter_name = segmenter
        self.segmenter = get_segmenter(segmenter, segment_target, model, **(segmenter_kwargs or {}))
        # The same segmenter, as the segmentation worker process builds it (real time, planning="process").
        self.segmenter_spec = (segmenter, segment_target, model, dict(segmenter_kwargs or {}))
        self._number, self._resets = next(_solvers), 0
        missing = [m for m in TARGET_MASKS[segment_target] if m not in self.segmenter.mask_names]
        if segmenter != SIMULATOR and missing:
            raise ValueError(f"segmenter {segmenter!r} makes the masks {list(self.segmenter.mask_names)}; the {task} "
                             f"tree needs {list(TARGET_MASKS[segment_target])} (missing {missing})")
        self.grasp_predictor_name, self.side = grasp_predictor, side
        self.sides = tuple(sides) or (side,)
        self.extra_blackboard = dict(blackboard or {})
        self.tools: Tools | None = None
        self.root = None
        self.step_times_s: list[float] = []

    # Solver protocol ---------------------------------------------------------------------------------
    def reset(self, observation: Observation) -> None:
        namespace = f"/handleit_{next(_instances)}"
        if self.planning not in PLANNING_MODES:
            raise ValueError(f"planning must be one of {PLANNING_MODES}, got {self.planning!r}")
        spec = ToolsSpec(self.model, self.grasp_predictor_name, self.side, self.sides)
        self.tools = make_tools(spec, namespace, segmenter=self.segmenter, realtime=self.realtime,
                                planning=self.planning)
        self._resets += 1
        self.tools.segmenter_spec, self.tools.segmenter_key = self.segmenter_spec, (self._number, self._resets)
        old_root, self.root = self.root, None
        if old_root is not None:  # a segmentation still running on a thread must not see the reset below
            for node in old_root.iterate():
                if isinstance(node, Segment):
                    node.wait_idle()
        self.segmenter.reset()
        self.root = with_segmentation(self.build(self.tools), self.tools, self.segmenter_name,
                                      calibrate_cameras=self.calibrate_cameras)
        # What a node builds before its first tick (a robot model, ~1 s; in real time the motion planners too):
        # before the clock runs (a model built later on a planning thread would hold Python's lock and stall the
        # ticks). Planning in the worker process: built there (and waited for), not here.
        in_worker = self.realtime and self.planning == "process"
        planners = [node for node in self.root.iterate() if isinstance(node, BackgroundPlanning)]
        for node in self.root.iterate():
            if in_worker and isinstance(node, BackgroundPlanning):
                continue
            warm_up = getattr(node, "warm_up", None)
            if callable(warm_up):
                warm_up()
            if self.realtime and isinstance(node, BackgroundPlanning):
                node.warm_up_planners()
        if in_worker and planners:
            planning_worker().warm_up(spec, planners)
        calibrators = [node for node in self.root.iterate() if isinstance(node, CalibrateCameras)]
        if in_worker and calibrators:
            calibration_worker().warm_up(spec, calibrators)
        if in_worker and not getattr(self.segmenter, "runs_in_tick", False):
            # Built in the segmentation worker on the first reset (waited for: before the clock runs), reset after.
            segmentation_worker().prepare_segmenter(self.tools.segmenter_key, self.segmenter_spec)
        self.tree = py_trees.trees.BehaviourTree(self.root)
        self.bb = py_trees.blackboard.Client(name="solver", namespace=namespace)
        for key, value in self._initial_blackboard().items():
            self.bb.register_key(key, access=py_trees.common.Access.WRITE)
            self.bb.set(key, value, overwrite=True)
        self.step_times_s = []
        self._failed_ticks = 0

    def _initial_blackboard(self) -> dict[str, Any]:
        return {
            "observation": None, "command": None, "gripper_commanded": {}, "handle": HandleAccumulator(),
            "front_normal_W": None, "open_state": None, "attempt": 0, "grasped": False, "grasp": None,
            "q_pregrasp": None, "X_WG_pregrasp": None, "q_grasp": None, "X_WG_grasp": None, "q_hold": None,
            "tick": -1, "reference": None, "grasp_tolerance_G": None, "hinge": None, "arm_path": None,
            "clamped_gap_m": None, "segmentation_error": None, "close_started": None,
            "grasp_arm_stretched": False,
            "state_history": StateHistory(),  # the robot's states by stamp (behaviors/state_history.py)
            **self.extra_blackboard,
        }

    def step(self, observation: Observation) -> Command:
        start = time.perf_counter()
        self.bb.observation = observation
        self.bb.state_history.add(observation)
        self.bb.tick = self.bb.tick + 1
        self.bb.command = None
        self.tree.tick()
        self._failed_ticks = self._failed_ticks + 1 if self.root.status == py_trees.common.Status.FAILURE else 0
        command = self.bb.command
        if command is None:  # nothing acted this tick (e.g. the tree ended): hold still
            command = Command(qvel=np.zeros(len(self.model.joint_names)), gripper={s: "hold" for s in self.sides})
        if self.hold_keeps_grip:
            command = keep_grip(command, self.bb.gripper_commanded)
        # Each gripper's last command that moved it ("hold" keeps the fingers where they are): the gripper's
        # state, for the predicates that read what the fingers closed on.
        self.bb.gripper_commanded.update({s: g for s, g in command.gripper.items() if not _is(g, "hold")})
        self.step_times_s.append(time.perf_counter() - start)
        return command

    @property
    def gave_up(self) -> bool:
        """The tree will not act again: a skill is out of attempts (behaviors/backchaining.py) and the root has
        failed for :data:`GIVE_UP_TICKS` ticks in a row. The harness ends such an episode."""
        return bool(self.tools is not None and self.tools.out_of_attempts and self._failed_ticks >= GIVE_UP_TICKS)

    @property
    def failed_node(self) -> str | None:
        return self.tools.failures[-1] if self.tools and self.tools.failures else None

    def diagnostics(self) -> dict[str, Any]:
        times = np.array(self.step_times_s) * 1e3
        return {
            "failures": list(self.tools.failure_reasons) if self.tools else [],
            "step_ms_median": float(np.median(times)) if len(times) else None,
            "step_ms_p95": float(np.percentile(times, 95)) if len(times) else None,
            "tree": self.unicode_tree(),
            **({"skill_events": [list(e) for e in self.tools.skill_events]} if self.tools and self.tools.skill_events
               else {}),
            **({"handoffs": list(self.tools.handoffs)} if self.tools and self.tools.handoffs else {}),
            **({"out_of_attempts": list(self.tools.out_of_attempts)} if self.tools and self.tools.out_of_attempts
               else {}),
            **({"gave_up": True} if self.gave_up else {}),
        }

    # Display ----------------------------------------------------------------------------------------
    def unicode_tree(self, show_status: bool = True) -> str:
        return py_trees.display.unicode_tree(self.root, show_status=show_status)

    def dot_tree(self) -> str:
        return py_trees.display.dot_tree(self.root).to_string()
