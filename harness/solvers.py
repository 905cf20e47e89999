"""Solvers the evaluation harness can run, chosen by name.

A solver maps observations to commands through the robot interface only:

    solver = make_solver("bt", task="OpenCabinetDrawer", model=robot.model)
    solver.reset(observation)
    command = solver.step(observation)   # every control step
    solver.failed_node                   # for trees: the node whose failure last triggered a recovery

Names: ``bt`` (the task's behavior tree), ``bt:<grasp predictor>`` (the tree with a registered grasp
predictor instead of the task's default, e.g. ``bt:learned_scorer``), ``goal:<goal>`` (a tree composed for a goal
over predicates from the skills by backchaining, e.g. ``goal:Open(drawer)``; ``handleit.behaviors.backchaining``),
``idle`` (does nothing: a floor for
every table), ``bc:<checkpoint>``, ``td3bc:<checkpoint>`` or ``policy:<checkpoint>`` (a trained policy,
``handleit.baselines.policy``; ``{task}`` in the path is replaced by the task's name), or
``package.module:factory`` for a user's solver, where ``factory(task=..., model=...)`` returns an object
with ``reset``, ``step`` and optionally ``failed_node`` and ``diagnostics()``.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import numpy as np

from handleit.behaviors import make_goal_solver, make_tree_solver
from handleit.behaviors.backchaining import BackchainingError
from handleit.perception.grasp_predictors import available_grasp_predictors
from handleit.types import Command, Observation, RobotModel


class Solver(Protocol):
    name: str
    failed_node: str | None

    def reset(self, observation: Observation) -> None: ...

    def step(self, observation: Observation) -> Command: ...

    def diagnostics(self) -> dict[str, Any]: ...


class IdleSolver:
    """Holds still: zero velocities, grippers held."""

    name = "idle"
    failed_node = None

    def __init__(self, model: RobotModel):
        self.model = model

    def reset(self, observation: Observation) -> None:
        pass

    def step(self, observation: Observation) -> Command:
        return Command(qvel=np.zeros(len(self.model.joint_names)))

    def diagnostics(self) -> dict[str, Any]:
        return {}


def make_solver(spec: str, task: str, model: RobotModel, segmenter: str = "simulator",
                segmenter_kwargs: dict[str, Any] | None = None) -> Solver:
    """Build the solver named by ``spec`` for ``task``; ``ValueError`` names what is wrong.

    ``segmenter`` names the segmenter whose masks a behavior tree reads (``handleit.perception.segmenters``);
    the other solvers read the simulator's masks, if any, and accept only ``"simulator"``.
    """
    if spec == "idle":
        return IdleSolver(model)
    if spec.startswith("goal:"):
        try:
            return make_goal_solver(spec[len("goal:"):], task, model, segmenter=segmenter,
                                    segmenter_kwargs=segmenter_kwargs)
        except BackchainingError as e:
            raise ValueError(f"solver {spec!r}: {e}") from None
    is_tree = spec == "bt" or spec.startswith("bt:")
    if segmenter != "simulator" and not is_tree:
        raise ValueError(f"solver {spec!r}: only behavior trees (bt, bt:<grasp predictor>) choose a segmenter; "
                         f"got segmenter {segmenter!r}")
    if is_tree:
        predictor = spec[len("bt:"):]
        options = {"segmenter": segmenter, "segmenter_kwargs": segmenter_kwargs}
        if not predictor:
            return make_tree_solver(task, model, **options)
        if predictor not in available_grasp_predictors():
            raise ValueError(f"solver {spec!r}: unknown grasp predictor {predictor!r}; "
                             f"available: {', '.join(available_grasp_predictors())}")
        return make_tree_solver(task, model, grasp_predictor=predictor, **options)
    if spec.partition(":")[0] in ("bc", "td3bc", "policy"):  # a trained policy (handleit.baselines.policy)
        from handleit.baselines.policy import make_policy_solver  # lazy: torch, for learned policies only

        return make_policy_solver(spec, task, model)
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"cannot load solver {spec!r}: {e}") from None
        return factory(task=task, model=model)
    raise ValueError(f"unknown solver {spec!r}; choose 'bt', 'bt:<grasp predictor>', 'goal:<goal>', 'idle', "
                     f"'bc:<checkpoint>', 'td3bc:<checkpoint>', 'policy:<checkpoint>' or 'package.module:factory'")
