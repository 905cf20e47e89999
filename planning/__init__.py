"""Planning: features -> targets. Numpy in, numpy out; no simulator imports.

- :mod:`handleit.planning.whole_body_ik`: :class:`WholeBodyIK` (Drake, Let's Handle It (arXiv 2202.11792) Sec. 2.4):
  base x, y, yaw, torso height and one or two arms solved together; :class:`IKResult`.
- :mod:`handleit.planning.motion_planning`: :class:`ArmMotionPlanner` (mplib 0.1.1: RRTConnect and screw
  motions with the observed point cloud as obstacles); :class:`Plan`.
- :mod:`handleit.planning.trajectories`: gripper pose sequences (:func:`pregrasp_approach`,
  :func:`linear_pull`, :func:`hinge_arc`) and :func:`estimate_hinge_from_motion`.

The Drake and mplib modules load on first use, so importing the trajectories does not pay for them.
"""

import importlib

from .trajectories import estimate_hinge_from_motion, hinge_arc, linear_pull, pregrasp_approach, swept_angle_rad

_LAZY = {
    "WholeBodyIK": "whole_body_ik",
    "IKResult": "whole_body_ik",
    "ArmMotionPlanner": "motion_planning",
    "Plan": "motion_planning",
}

__all__ = [
    "ArmMotionPlanner", "IKResult", "Plan", "WholeBodyIK",
    "estimate_hinge_from_motion", "hinge_arc", "linear_pull", "pregrasp_approach", "swept_angle_rad",
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
