"""Control: joint-space PID with an output low-pass filter, and joint velocities to the env's normalized
action (numpy in, numpy out; no simulator imports).

- :mod:`handleit.control.pid`: :class:`PIDController`, :class:`LowPassFilter`, the Let's Handle It (arXiv 2202.11792)
  Sec. 2.6 gain presets and :func:`make_robot_pid` for a :class:`~handleit.types.RobotModel`.
- :mod:`handleit.control.actions`: :func:`normalize_velocity` and its inverse, :func:`gripper_velocity`,
  :func:`world_to_base_velocity` and its inverse.
"""

from .actions import (
    base_to_world_velocity,
    denormalize_velocity,
    gripper_velocity,
    normalize_velocity,
    world_to_base_velocity,
)
from .pid import (
    ARM_GAINS,
    BASE_HEIGHT_GAINS,
    BASE_ROTATION_GAINS,
    BASE_TRANSLATION_GAINS,
    PART_GAINS,
    LowPassFilter,
    PIDController,
    PIDGains,
    gains_for,
    joint_parts,
    make_robot_pid,
)

__all__ = [
    "ARM_GAINS",
    "BASE_HEIGHT_GAINS",
    "BASE_ROTATION_GAINS",
    "BASE_TRANSLATION_GAINS",
    "PART_GAINS",
    "LowPassFilter",
    "PIDController",
    "PIDGains",
    "base_to_world_velocity",
    "denormalize_velocity",
    "gains_for",
    "gripper_velocity",
    "joint_parts",
    "make_robot_pid",
    "normalize_velocity",
    "world_to_base_velocity",
]
