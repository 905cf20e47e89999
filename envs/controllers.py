"""Controllers of the mobile Panda, chosen by name: an action in, joint drive targets out.

A controller is a sequence of part controllers (the base, the arms, the grippers), each owning a slice of the
action vector. The modes (ManiSkill2 (arXiv 2302.04659) Appendix B, Let's Handle It (arXiv 2202.11792) footnote 2):

- ``normalized_joint_vel`` (default, the ManiSkill1 challenge): one value in [-1, 1] per joint, in the
  robot's joint order (``MobilePanda.joint_names``, the order of qpos; action i drives joint i, as in
  ManiSkill1): base x, y, yaw, height, then for the single arm its 7 arm joints and 2 fingers; the dual
  arm's joints interleave (right joint 1, left joint 1, ..., left joint 7, right fingers, left fingers).
  Mapped to a joint velocity by ``(upper - lower) / 2 * a + (upper + lower) / 2`` with the velocity limits
  below. The base x/y velocities are ego-centric (x forward, y left in the base frame), as in ManiSkill's
  mobile base.
- ``pd_joint_pos``: absolute position targets, unnormalized, for the base (world x, y, yaw, height) and the
  arm joints; gripper as below.
- ``pd_joint_delta_pos``: position targets offset from the current positions by up to +-0.1 (m or rad),
  normalized; as in ManiSkill the offset is a target, not the motion of one step (the PD drive covers about
  a tenth of it in one 10 ms step); gripper as below.
- ``pd_ee_delta_pose``: base by normalized ego-centric velocity; per arm a 6-dim delta of the tool pose,
  normalized to +-0.1 m (translation, in the base frame) and +-0.1 rad (axis-angle rotation about the tool
  centre, axes of the base frame), solved to arm joint targets by inverse kinematics; gripper as below.
- gripper (all modes but ``normalized_joint_vel``): one value per arm in [-1, 1] mapped to a common finger
  position target in [-0.01, 0.04] m (-1 closes past contact, so the fingers press on thin parts).

The modes other than ``normalized_joint_vel`` are laid out by part: the base (4 values), then per arm (left
before right) the arm's 7 values (6 in ``pd_ee_delta_pose``) and its gripper value: 12 values for the single
arm, 20 for the dual (11 and 18 in ``pd_ee_delta_pose``); ``normalized_joint_vel`` has 13 and 22.

A robot without base joints (the stationary Panda of the tabletop tasks, ``envs/stationary_panda.py``) has no
base part: ``normalized_joint_vel`` is its 7 arm joints and 2 fingers (9 values), the other modes its arm and
gripper (8 values, 7 in ``pd_ee_delta_pose``); "the base frame" is the frame of its fixed root link.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import sapien
from scipy.spatial.transform import Rotation

from .mobile_panda import MobilePanda

CONTROL_MODES = ("normalized_joint_vel", "pd_joint_pos", "pd_joint_delta_pos", "pd_ee_delta_pose")


@dataclass(frozen=True)
class Drive:
    """PhysX joint drive: force = stiffness * (q* - q) + damping * (v* - v), clipped to force_limit."""

    stiffness: float
    damping: float
    force_limit: float


@dataclass(frozen=True)
class ControlConfig:
    """Limits and gains of the mobile Panda's controllers."""

    # Velocity limits of normalized_joint_vel: base x, y [m/s] and yaw [rad/s], torso height [m/s]. The
    # base is faster than ManiSkill2's port (0.5 m/s): 200 steps (2 s) must cover ~1 m of approach.
    base_vel_limits: tuple[float, float, float, float] = (1.0, 1.0, 3.14, 0.5)
    arm_vel_limit_radps: float = 3.14  # ManiSkill2 arm_pd_joint_vel
    finger_vel_limit_mps: float = 0.2  # the Panda URDF's finger velocity limit
    base_vel_drive: Drive = Drive(0.0, 1000.0, 500.0)  # ManiSkill2 base_pd_joint_vel
    arm_vel_drive: Drive = Drive(0.0, 1000.0, 100.0)  # stiff velocity loop, torque-limited (ManiSkill2 uses 100: ~50 ms lag)
    finger_vel_drive: Drive = Drive(0.0, 1000.0, 100.0)  # closed on a part at -0.2 m/s: 100 N (the limit), not 20 N
    base_pos_drive: Drive = Drive(1e4, 1.5e3, 500.0)
    arm_pos_drive: Drive = Drive(1e3, 1e2, 100.0)  # ManiSkill2 Panda
    gripper_pos_drive: Drive = Drive(1e3, 1e2, 100.0)
    joint_delta: float = 0.1  # rad or m per control step, pd_joint_delta_pos
    ee_delta_pos_m: float = 0.1
    ee_delta_rot_rad: float = 0.1
    gripper_range_m: tuple[float, float] = (-0.01, 0.04)


def _set_drives(robot: MobilePanda, index: np.ndarray, drive: Drive) -> None:
    for i in index:
        robot.joints[i].set_drive_properties(drive.stiffness, drive.damping, drive.force_limit, "force")


def _denormalize(a: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    return (high - low) / 2 * a + (high + low) / 2


class PartController(ABC):
    """Controls some joints of the robot from a slice of the action vector."""

    low: np.ndarray
    high: np.ndarray
    labels: tuple[str, ...]  # one name per action dimension, for error messages and docs

    def __init__(self, robot: MobilePanda):
        self.robot = robot

    @property
    def dim(self) -> int:
        return len(self.low)

    @abstractmethod
    def configure(self) -> None:
        """Set the drive properties of the controlled joints (once, after loading)."""

    @abstractmethod
    def reset(self) -> None:
        """Hold the current configuration (start of an episode)."""

    @abstractmethod
    def apply(self, action: np.ndarray) -> None:
        """Set drive targets from this part's (clipped) action."""


class JointVelocity(PartController):
    """Normalized joint velocities; for the base, x/y are ego-centric."""

    def __init__(self, robot, index, vel_limits, drive: Drive, labels, ego_base: bool = False):
        super().__init__(robot)
        self.index, self.drive, self.ego_base, self.labels = np.asarray(index), drive, ego_base, tuple(labels)
        self.vel_high = np.asarray(vel_limits, dtype=np.float64)
        self.vel_low = -self.vel_high
        self.low, self.high = -np.ones(len(self.index)), np.ones(len(self.index))
        # The mapping (upper - lower) / 2 * a + (upper + lower) / 2, precomputed: this runs every step.
        self._scale, self._offset = (self.vel_high - self.vel_low) / 2, (self.vel_high + self.vel_low) / 2
        self._joints = [robot.joints[i] for i in self.index]

    def configure(self):
        _set_drives(self.robot, self.index, self.drive)

    def reset(self):
        self.apply(np.zeros(self.dim))

    def apply(self, action):
        vel = (action * self._scale + self._offset).tolist()
        if self.ego_base:
            yaw = self.robot.articulation.get_qpos()[self.robot.base_index[2]]
            c, s = math.cos(yaw), math.sin(yaw)
            vel[0], vel[1] = c * vel[0] - s * vel[1], s * vel[0] + c * vel[1]
        for joint, v in zip(self._joints, vel):
            joint.set_drive_velocity_target(v)


class JointPosition(PartController):
    """Joint position targets: absolute (unnormalized, bounded by the joint limits) or delta (normalized)."""

    def __init__(self, robot, index, drive: Drive, labels, delta: float | None = None):
        super().__init__(robot)
        self.index, self.drive, self.delta, self.labels = np.asarray(index), drive, delta, tuple(labels)
        if delta is None:
            self.low, self.high = robot.qlimits[self.index, 0].copy(), robot.qlimits[self.index, 1].copy()
        else:
            self.low, self.high = -np.ones(len(self.index)), np.ones(len(self.index))
        self.target = np.zeros(len(self.index))

    def configure(self):
        _set_drives(self.robot, self.index, self.drive)

    def reset(self):
        self._set_target(self.robot.qpos[self.index].astype(np.float64))

    def apply(self, action):
        if self.delta is None:
            self._set_target(action)
        else:
            self._set_target(self.robot.qpos[self.index] + action * self.delta)

    def _set_target(self, target):
        lo, hi = self.robot.qlimits[self.index, 0], self.robot.qlimits[self.index, 1]
        self.target = np.clip(target, lo, hi)
        for i, q in zip(self.index, self.target):
            self.robot.joints[i].set_drive_target(float(q))
            self.robot.joints[i].set_drive_velocity_target(0.0)


class GripperPosition(PartController):
    """One normalized value per gripper: a common position target for both fingers."""

    def __init__(self, robot, index, drive: Drive, target_range_m, side: str):
        super().__init__(robot)
        self.index, self.drive = np.asarray(index), drive
        self.range = np.asarray(target_range_m, dtype=np.float64)
        self.low, self.high = -np.ones(1), np.ones(1)
        self.labels = (f"{side}_gripper",)

    def configure(self):
        _set_drives(self.robot, self.index, self.drive)

    def reset(self):
        # Hold the current opening.
        opening = float(np.mean(self.robot.qpos[self.index]))
        self._set(opening)

    def apply(self, action):
        self._set(float(_denormalize(action, self.range[:1], self.range[1:])[0]))

    def _set(self, finger_q):
        for i in self.index:
            self.robot.joints[i].set_drive_target(finger_q)
            self.robot.joints[i].set_drive_velocity_target(0.0)


class EEDeltaPose(JointPosition):
    """Delta of the tool pose (translation and axis-angle, both in the base frame), solved by IK."""

    def __init__(self, robot, side: str, drive: Drive, pos_delta_m: float, rot_delta_rad: float):
        super().__init__(robot, robot.arm_index[side], drive, labels=())
        self.labels = tuple(f"{side}_tcp_{k}" for k in ("dx", "dy", "dz", "drx", "dry", "drz"))
        self.low, self.high = -np.ones(6), np.ones(6)
        self.pos_delta_m, self.rot_delta_rad = pos_delta_m, rot_delta_rad
        self.side = side
        self.pinocchio = robot.articulation.create_pinocchio_model()
        self.tcp_index = robot.tcp_links[side].index
        self.qmask = np.zeros(robot.dof, dtype=np.int32)
        self.qmask[robot.arm_index[side]] = 1

    def apply(self, action):
        X_WB = self.robot.X_WB.to_transformation_matrix()
        X_WT = self.robot.X_WT(self.side).to_transformation_matrix()
        R_WB = X_WB[:3, :3]
        X_WTgoal = np.eye(4)
        X_WTgoal[:3, 3] = X_WT[:3, 3] + R_WB @ (action[:3] * self.pos_delta_m)
        R_delta_W = R_WB @ Rotation.from_rotvec(action[3:] * self.rot_delta_rad).as_matrix() @ R_WB.T
        X_WTgoal[:3, :3] = R_delta_W @ X_WT[:3, :3]
        # Pinocchio works in the frame R of the articulation's fixed root: the world origin for the mobile
        # robot, the table edge for the stationary one.
        X_RW = self.robot.articulation.root_pose.inv().to_transformation_matrix()
        qpos = self.robot.qpos.astype(np.float64)
        result, success, _ = self.pinocchio.compute_inverse_kinematics(
            self.tcp_index, sapien.Pose(X_RW @ X_WTgoal), initial_qpos=qpos, active_qmask=self.qmask,
            max_iterations=100
        )
        if success:  # otherwise keep the previous target rather than jump to a non-solution
            self._set_target(np.asarray(result)[self.index])


class Controller:
    """The whole-robot controller: part controllers over consecutive slices of the action."""

    def __init__(self, name: str, parts: list[PartController]):
        self.name, self.parts = name, parts
        self.low = np.concatenate([p.low for p in parts]).astype(np.float32)
        self.high = np.concatenate([p.high for p in parts]).astype(np.float32)
        self.labels = tuple(label for p in parts for label in p.labels)
        bounds = np.cumsum([0] + [p.dim for p in parts])
        self._slices = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    @property
    def dim(self) -> int:
        return len(self.low)

    def configure(self) -> None:
        for p in self.parts:
            p.configure()

    def reset(self) -> None:
        for p in self.parts:
            p.reset()

    def apply(self, action: np.ndarray) -> None:
        for p, s in zip(self.parts, self._slices):
            p.apply(np.asarray(action[s], dtype=np.float64))


def make_controller(name: str, robot: MobilePanda, config: ControlConfig = ControlConfig()) -> Controller:
    """Build the named controller for ``robot``; ``ValueError`` for an unknown name."""
    if name not in CONTROL_MODES:
        raise ValueError(f"unknown control mode {name!r}; choose one of {', '.join(CONTROL_MODES)}")
    d = robot.description
    base_labels = d.base_joint_names
    if name == "normalized_joint_vel":
        return Controller(name, _joint_order_velocity_parts(robot, config))

    parts: list[PartController] = []  # a stationary robot has no base part
    if len(robot.base_index) and name == "pd_ee_delta_pose":
        parts = [JointVelocity(robot, robot.base_index, config.base_vel_limits, config.base_vel_drive, base_labels, True)]
    elif len(robot.base_index):
        delta = config.joint_delta if name == "pd_joint_delta_pos" else None
        parts = [JointPosition(robot, robot.base_index, config.base_pos_drive, base_labels, delta)]
    for side in robot.sides:
        if name == "pd_ee_delta_pose":
            parts.append(EEDeltaPose(robot, side, config.arm_pos_drive, config.ee_delta_pos_m, config.ee_delta_rot_rad))
        else:
            delta = config.joint_delta if name == "pd_joint_delta_pos" else None
            parts.append(JointPosition(robot, robot.arm_index[side], config.arm_pos_drive, d.arm_joint_names(side), delta))
        parts.append(GripperPosition(robot, robot.finger_index[side], config.gripper_pos_drive,
                                     config.gripper_range_m, side))
    return Controller(name, parts)


def _joint_order_velocity_parts(robot: MobilePanda, config: ControlConfig) -> list[PartController]:
    """Velocity parts whose action slices follow the robot's joint order (action i drives joint i): the base
    (ego-centric; none for a stationary robot), then one part per run of consecutive arm or finger joints, as
    their limits and drives differ (the dual arm's interleaved joints make one run of 14 arm joints, then one
    of 4 fingers)."""
    n_base = len(robot.base_index)
    if not np.array_equal(robot.base_index, np.arange(n_base)):
        raise ValueError(f"the base joints must come first in the joint order, got indices {robot.base_index}")
    kind: dict[int, str] = {}
    for side in robot.sides:
        kind.update({int(i): "arm" for i in robot.arm_index[side]})
        kind.update({int(i): "finger" for i in robot.finger_index[side]})
    limit = {"arm": config.arm_vel_limit_radps, "finger": config.finger_vel_limit_mps}
    drive = {"arm": config.arm_vel_drive, "finger": config.finger_vel_drive}
    parts: list[PartController] = []
    if n_base:  # a stationary robot has no base part
        parts.append(JointVelocity(robot, robot.base_index, config.base_vel_limits, config.base_vel_drive,
                                   robot.description.base_joint_names, True))
    for k, run in itertools.groupby(range(n_base, robot.dof), key=kind.__getitem__):
        index = list(run)
        labels = [robot.joints[i].name for i in index]
        parts.append(JointVelocity(robot, index, [limit[k]] * len(index), drive[k], labels))
    return parts
