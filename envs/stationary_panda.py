"""The Panda arm bolted to the edge of a table, as in ManiSkill's tabletop tasks (PickCube, StackCube).

The same Panda as the mobile robot's arm (mani-skill's ``panda_v2``, low-poly visuals), loaded with the same
physical set-up (:class:`~handleit.envs.mobile_panda.MobilePanda`: gravity-compensated links, rubber finger
pads, independent finger joints), with no base joints: its root link ``panda_link0`` is fixed at ``X_WB``.
Joint order (qpos, actions): ``panda_joint1..7``, ``panda_finger_joint1``, ``panda_finger_joint2``.
"""

from __future__ import annotations

import numpy as np
import sapien

from .mobile_panda import MobilePanda
from .robot_description import PandaArmDescription

# ManiSkill's table scene: the robot's base 0.615 m behind the table's centre (x = 0), on the table top (z = 0).
ROBOT_BASE_XYZ_M = (-0.615, 0.0, 0.0)
# ManiSkill's Panda "rest" keyframe (TableSceneBuilder): arm raised above the table, hand pointing down,
# gripper open (0.04 m per finger).
ARM_REST_QPOS = (0.0, np.pi / 8, 0.0, -np.pi * 5 / 8, 0.0, np.pi * 3 / 4, np.pi / 4)
FINGER_OPEN_QPOS = (0.04, 0.04)


class StationaryPanda(MobilePanda):
    """A Panda whose root link is fixed at ``X_WB`` (default: ManiSkill's PickCube placement)."""

    def __init__(self, scene: sapien.Scene, description: PandaArmDescription, X_WB: sapien.Pose | None = None):
        super().__init__(scene, description)
        self.articulation.set_root_pose(X_WB if X_WB is not None else sapien.Pose(ROBOT_BASE_XYZ_M))
        (self.side,) = description.sides

    def rest_qpos(self, arm_qpos=ARM_REST_QPOS, finger_qpos=FINGER_OPEN_QPOS) -> np.ndarray:
        """The start configuration: ManiSkill's rest keyframe, gripper open (rad and m)."""
        qpos = np.zeros(self.dof)
        qpos[self.arm_index[self.side]] = arm_qpos
        qpos[self.finger_index[self.side]] = finger_qpos
        return qpos
