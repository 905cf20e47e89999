"""The ManiSkill1 mobile Panda loaded into a SAPIEN scene: joints, links, poses, physical set-up."""

from __future__ import annotations

import numpy as np
import sapien

from .collision_groups import ROBOT_BIT, add_ignore_bit
from .robot_description import MobilePandaDescription

# Rest configuration of ManiSkill1's cabinet tasks: torso at its lowest, arm folded beside the body.
ARM_REST_QPOS = (0.0, 0.0, 0.0, -1.5, 0.0, 3.0, 0.78)
FINGER_REST_QPOS = (0.02, 0.02)
# Rubber finger pads: ManiSkill's Panda configuration uses friction 2 on the fingers.
FINGER_FRICTION = 2.0


class MobilePanda:
    """A loaded mobile Panda articulation and the names and indices controllers need.

    Gravity is disabled on the robot's links: this is exact gravity compensation (what ManiSkill does by
    balancing passive forces every step), so a velocity- or position-driven arm does not sag.
    """

    def __init__(self, scene: sapien.Scene, description: MobilePandaDescription):
        self.description = description
        loader = scene.create_urdf_loader()
        loader.fix_root_link = True
        builder = loader.load_file_as_articulation_builder(str(description.urdf_path), str(description.srdf_path))
        # Independent fingers, as in ManiSkill1 (its SAPIEN ignored <mimic>): the challenge's action drives
        # each finger by its own velocity, and a mimic tendon fighting two velocity drives jitters. The
        # grippers of the other controllers give both fingers one target. Planners keep the <mimic> tag.
        self.articulation: sapien.physx.PhysxArticulation = builder.build(build_mimic_joints=False)
        self.articulation.set_name(description.urdf_path.stem)
        # qpos and action order = SAPIEN's joint order (breadth-first: the two arms of the dual robot
        # interleave), as in ManiSkill1. Planning code maps joints by name.
        self.joint_names = names = tuple(j.name for j in self.articulation.active_joints)
        self.joints = self.articulation.active_joints
        self.links = {link.name: link for link in self.articulation.links}

        finger_material = sapien.physx.PhysxMaterial(FINGER_FRICTION, FINGER_FRICTION, 0.0)
        for link in self.articulation.links:
            link.disable_gravity = True
            for shape in link.collision_shapes:
                add_ignore_bit(shape, ROBOT_BIT)  # the torso box reaches below the floor
                if "finger" in link.name:
                    shape.set_physical_material(finger_material)
                    shape.set_patch_radius(0.1)  # torsional friction on the pads, as in ManiSkill
                    shape.set_min_patch_radius(0.1)

        self.base_index = np.array([names.index(n) for n in description.base_joint_names], dtype=int)  # empty: no base
        self.arm_index: dict[str, np.ndarray] = {}
        self.finger_index: dict[str, np.ndarray] = {}
        for side in description.sides:
            self.arm_index[side] = np.array([names.index(n) for n in description.arm_joint_names(side)])
            self.finger_index[side] = np.array([names.index(n) for n in description.finger_joint_names(side)])
        self.tcp_links = {side: self.links[description.tcp_link_name(side)] for side in description.sides}
        self.camera_mount = self.links[description.camera_mount_link_name]
        self.base_link = self.links[description.base_link_name]
        self.qlimits = np.asarray(self.articulation.get_qlimits(), dtype=np.float64)  # [dof, 2], yaw is +-inf

    @property
    def dof(self) -> int:
        return len(self.joints)

    @property
    def sides(self) -> tuple[str, ...]:
        return self.description.sides

    def rest_qpos(self, base_xy_yaw=(0.0, 0.0, 0.0), height_m: float = 1e-4) -> np.ndarray:
        qpos = np.zeros(self.dof)
        qpos[self.base_index] = [*base_xy_yaw, height_m]
        for side in self.sides:
            qpos[self.arm_index[side]] = ARM_REST_QPOS
            qpos[self.finger_index[side]] = FINGER_REST_QPOS
        return qpos

    def reset(self, qpos: np.ndarray) -> None:
        self.articulation.set_qpos(np.asarray(qpos, dtype=np.float32))
        self.articulation.set_qvel(np.zeros(self.dof, dtype=np.float32))

    @property
    def qpos(self) -> np.ndarray:
        return np.asarray(self.articulation.get_qpos(), dtype=np.float32)

    @property
    def qvel(self) -> np.ndarray:
        return np.asarray(self.articulation.get_qvel(), dtype=np.float32)

    @property
    def X_WB(self) -> sapien.Pose:
        """Pose of the mobile base (ground level, x forward) in the world."""
        return self.base_link.entity_pose

    def X_WT(self, side: str) -> sapien.Pose:
        """Pose of a tool centre point (between the fingertips, z along the approach) in the world."""
        return self.tcp_links[side].entity_pose

    def render_shape_ids(self) -> np.ndarray:
        """Per-scene ids of every render shape of the robot (for point-cloud masks)."""
        ids = []
        for link in self.articulation.links:
            body = link.entity.find_component_by_type(sapien.render.RenderBodyComponent)
            if body is not None:
                ids += [shape.per_scene_id for shape in body.render_shapes]
        return np.array(ids, dtype=np.int64)
