"""The planners (and the robot self filter) the trees use, built once per robot per process: parsing a robot's
description into Drake's plant (whole-body IK, the self filter) or into mplib's planner takes seconds, and every
episode's tree asks for them again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from handleit.perception.robot_self_filter import RobotSelfFilter
from handleit.planning.whole_body_ik import WholeBodyIK
from handleit.types import RobotModel

_PLANNERS: dict[tuple, Any] = {}  # one per robot (and side and options) per process


def _cached(key: tuple, build: Callable[[], Any]) -> Any:
    if key not in _PLANNERS:
        _PLANNERS[key] = build()
    return _PLANNERS[key]


def _robot_key(model: RobotModel) -> tuple:
    return (str(model.urdf_path), tuple(model.joint_names))


def _options_key(options: dict[str, Any]) -> tuple:
    """A hashable form of keyword options (arrays by their contents)."""
    return tuple(sorted((k, (v.dtype.str, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else v)
                        for k, v in options.items()))


def whole_body_ik(model: RobotModel) -> WholeBodyIK:
    """The robot's whole-body IK (a fixed arm, with no base joints: its root is the world)."""
    return _cached(("ik", *_robot_key(model)), lambda: WholeBodyIK.from_robot_model(model))


def robot_self_filter(model: RobotModel) -> RobotSelfFilter:
    """The robot's self filter (its collision shapes at the measured joints: the robot's own points in a cloud)."""
    return _cached(("self filter", *_robot_key(model)), lambda: RobotSelfFilter.from_robot_model(model))


def arm_motion_planner(model: RobotModel, side: str, **options):
    """The mplib planner of ``side``'s arm (a ``handleit.planning.motion_planning.ArmMotionPlanner``);
    ``options`` go to ``ArmMotionPlanner.from_robot_model``, and each set of them is a planner of its own."""
    from handleit.planning.motion_planning import ArmMotionPlanner  # lazy: mplib, only trees that plan paths

    key = ("mplib", *_robot_key(model), side, _options_key(options))
    return _cached(key, lambda: ArmMotionPlanner.from_robot_model(model, side, **options))
