"""Shared types: the robot interface between the sense-plan-act layers and a robot, simulated or real.

Perception, planning, control and behaviors see the world only through these: an :class:`Observation` in,
a :class:`Command` out. They never import ``handleit.envs`` and never read simulator ground truth; a
simulated robot (``handleit.harness.sim_robot.SimRobot``) and a real one implement :class:`RobotInterface`.

Poses are 4x4 homogeneous matrices named by their frames: ``X_WB`` is the pose of frame B (the mobile
base) in frame W (the world).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import numpy as np

GripperCommand = Literal["open", "close", "hold"] | float  # a float: the opening (m) to move the fingers to
# The colour marker the bundled envs paint on a target when asked (``target_marker_rgb``) and the
# ``color_marker`` segmenter looks for by default: lime green tape, as a linear render base colour in [0, 1].
# Let's Handle It (arXiv 2202.11792) used red tape on a real drawer; red is taken here by PushChair's target hemisphere.
DEFAULT_MARKER_RGB = (0.15, 0.85, 0.0)


@dataclass(frozen=True)
class RobotState:
    """The robot's joint positions and velocities, base and tool poses at one moment (s, on the robot's clock)."""

    time_s: float
    qpos: np.ndarray
    qvel: np.ndarray
    X_WB: np.ndarray
    X_WT: dict[str, np.ndarray]


@dataclass(frozen=True)
class Observation:
    """What the robot's sensors report at one control step (numpy arrays, SI units)."""

    time_s: float
    points: np.ndarray  # [N, 3] float32, the fused point cloud in `frame`
    colors: np.ndarray  # [N, 3] uint8
    masks: dict[str, np.ndarray]  # name -> [N] bool: "target_handle", "target_link", "robot"
    frame: str  # the frame of `points`, e.g. "world"
    joint_names: tuple[str, ...]
    qpos: np.ndarray  # [dof] joint positions (m or rad), in `joint_names` order
    qvel: np.ndarray  # [dof] joint velocities
    X_WB: np.ndarray  # 4x4 pose of the mobile base in the world
    X_WT: dict[str, np.ndarray] = field(default_factory=dict)  # arm side -> 4x4 tool-centre pose in the world
    goal_W: np.ndarray | None = None  # [3] the task's goal position in the world (m), where the task gives one
    # The operator's prompt naming the target (a segmenter's input, as a person on a robot would click on it):
    # [3] a point, or [2, 3] an axis-aligned box (min corner, max corner), in the world (m); None: no prompt.
    target_prompt_W: np.ndarray | None = None
    # The operator's prompts per named entity of a scene with several ("object", "table", "drawer" in the
    # long-horizon tasks), each a point [3] or a box [2, 3] as ``target_prompt_W``; empty where none are given.
    prompts_W: dict[str, np.ndarray] = field(default_factory=dict)
    # Where the cameras were, in `frame` (m), [C, 3], and which of them saw each point, [N] int (PCL's
    # `sensor_origin_`): the rays along which depth noise lies. None where the robot does not report them.
    sensor_origins: np.ndarray | None = None
    sensor_index: np.ndarray | None = None
    # When the cloud was taken, on `time_s`'s clock (a PointCloud2's header stamp); None: with the joint states
    # (a simulator in lockstep). In real time a cloud is older than the joint states: nodes that compare the
    # robot seen with its model look the robot's state up at this stamp (behaviors/state_history.py).
    points_time_s: float | None = None
    # The moment the joint positions, base and tool poses describe where it is not `time_s` (their measurement's
    # stamp): latency compensation moved them on to the moment they were handed to the tree
    # (harness/realtime_runner.py), or they were looked up at the cloud's stamp (behaviors/state_history.py).
    state_stamp_s: float | None = None
    # The state as measured at `time_s`, where the one above was predicted on from it (latency compensation):
    # what the tree's state history keeps, measurements being exact at their stamps. None: not predicted.
    measured_state: RobotState | None = None

    @property
    def state_time_s(self) -> float:
        """The moment ``qpos``, ``X_WB`` and ``X_WT`` describe: ``state_stamp_s`` if set, else ``time_s``."""
        return self.time_s if self.state_stamp_s is None else self.state_stamp_s

    @property
    def cloud_time_s(self) -> float:
        """The moment the cloud was taken: ``points_time_s`` if set, else ``time_s`` (lockstep)."""
        return self.time_s if self.points_time_s is None else self.points_time_s

    def point_origins(self, mask: np.ndarray | None = None) -> np.ndarray | None:
        """``[M, 3]`` the camera centre each (masked) point was seen from, or None when not reported."""
        if self.sensor_origins is None or self.sensor_index is None:
            return None
        index = self.sensor_index if mask is None else self.sensor_index[mask]
        return np.asarray(self.sensor_origins, dtype=np.float64)[index]

    def q(self, names) -> np.ndarray:
        """Joint positions of the named joints, in the order given."""
        index = {n: i for i, n in enumerate(self.joint_names)}
        return self.qpos[[index[n] for n in names]]


@dataclass(frozen=True)
class Command:
    """Joint velocity targets for the controlled joints (base and arms), and one command per gripper.

    ``normalized_qvel``, when given, is the whole command as the challenge's action (Let's Handle It footnote 2):
    every joint's velocity as a fraction in [-1, 1] of its velocity limit (``RobotModel.velocity_limits``),
    fingers included, base x/y in the base frame. A robot applies it as it is and ignores ``qvel`` and
    ``gripper`` (kept consistent, for logs): learned policies trained on the envs' actions use it, so that
    their actions reach the robot unchanged.
    """

    qvel: np.ndarray  # [dof] target velocities in the robot's joint order; finger joints are ignored
    gripper: dict[str, GripperCommand] = field(default_factory=dict)  # arm side -> open/close/hold/opening (m)
    normalized_qvel: np.ndarray | None = None  # [dof] in [-1, 1], robot joint order; overrides qvel and gripper


@dataclass(frozen=True)
class RobotModel:
    """What planners need to know of the robot: its description files and joint groups."""

    urdf_path: Path
    srdf_path: Path
    joint_names: tuple[str, ...]  # the robot's joint order (qpos, Command.qvel)
    joint_limits: np.ndarray  # [dof, 2]
    velocity_limits: np.ndarray  # [dof] largest |velocity| a command may ask for
    base_joint_names: tuple[str, ...]  # x, y, yaw, height
    arm_joint_names: dict[str, tuple[str, ...]]  # side -> 7 arm joints
    finger_joint_names: dict[str, tuple[str, ...]]  # side -> 2 finger joints
    tcp_link_names: dict[str, str]  # side -> tool-centre link
    base_link_name: str
    gripper_max_opening_m: float = 0.08
    control_dt_s: float = 0.01
    # Half extents (m, x forward and y left of the base frame) of the footprint of what the mobile base carries
    # down to the floor (the mobile Panda's torso column); None where unknown or there is no base.
    body_half_extents_m: tuple[float, float] | None = None
    # [dof] how fast each joint's velocity follows a velocity command, as a first-order lag (s): the drive's
    # inertia over its damping. None where unknown (taken as immediate). Latency compensation integrates it
    # (control/latency.py): a base at 0.8 m/s with a 34 ms lag still moves 2.7 cm after its command stops.
    drive_time_constants_s: np.ndarray | None = None
    # Arm sides with a camera on the hand, looking along the approach (its points in the fused cloud): a tree may
    # look into a container from there. Empty: the cameras are the base's (or the world's) only.
    hand_camera_sides: tuple[str, ...] = ()

    def index(self, names) -> np.ndarray:
        order = {n: i for i, n in enumerate(self.joint_names)}
        return np.array([order[n] for n in names], dtype=int)


@runtime_checkable
class RobotInterface(Protocol):
    """A robot the behavior trees can drive: simulated (SimRobot) or real (drivers)."""

    model: RobotModel

    def observe(self) -> Observation:
        """The latest observation (does not advance time)."""

    def act(self, command: Command) -> None:
        """Send one control step's command; returns after the step (simulation) or when it is sent."""


@dataclass(frozen=True)
class Grasp:
    """A parallel-jaw grasp: the tool-centre pose and the opening it needs.

    Gripper frame G (the Panda's tool centre): z is the approach direction (out of the palm, between the
    fingers), y is the closing direction (the fingers move along +-y), x = y cross z.
    """

    X_WG: np.ndarray  # 4x4
    width_m: float
    score: float  # larger is better
