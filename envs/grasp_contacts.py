"""Ground truth of grasping from finger contact forces, as ManiSkill's ``Panda.is_grasping`` (ManiSkill2, arXiv
2302.04659): an entity is grasped when each finger is pressed by it with at least 0.5 N, within 85 degrees of the
finger's opening direction (the force pushes the finger open: the object is squeezed between the pads).

For success checks and evaluation only (PickCube, PickObject, the long-horizon tasks' ``Grasped`` and
``HandEmpty``); never read by a solver.
"""

from __future__ import annotations

import math

import numpy as np
import sapien

GRASP_MIN_FORCE_N = 0.5  # ManiSkill's is_grasping min_force
GRASP_MAX_ANGLE_RAD = math.radians(85)  # ManiSkill's is_grasping max_angle


def finger_contact_forces(scene: sapien.Scene, finger_joints) -> list[dict[int, np.ndarray]]:
    """Per finger (the child link of each joint of ``finger_joints``): the net contact force (N, world) that
    each other entity exerted on it during the last physics step, keyed by that entity's ``per_scene_id``."""
    fingers = [joint.child_link.entity.per_scene_id for joint in finger_joints]
    impulses: list[dict[int, np.ndarray]] = [{} for _ in fingers]
    for contact in scene.get_contacts():
        e0, e1 = contact.bodies[0].entity.per_scene_id, contact.bodies[1].entity.per_scene_id
        for i, finger in enumerate(fingers):
            if finger in (e0, e1):
                other = e1 if e0 == finger else e0
                impulse = np.sum([point.impulse for point in contact.points], axis=0)
                # The impulse acts on bodies[0]: on the finger as it is, or as its reaction.
                impulses[i][other] = impulses[i].get(other, np.zeros(3)) + (impulse if e0 == finger else -impulse)
    dt = scene.get_timestep()
    return [{entity: impulse / dt for entity, impulse in per_finger.items()} for per_finger in impulses]


def _pressed(force_W: np.ndarray, joint) -> bool:
    magnitude = float(np.linalg.norm(force_W))
    if magnitude < GRASP_MIN_FORCE_N:
        return False
    # A finger's joint axis (x of the joint frame) points the way q grows: the opening direction.
    opening_W = joint.get_global_pose().to_transformation_matrix()[:3, 0]
    return math.acos(float(np.clip(opening_W @ force_W / magnitude, -1.0, 1.0))) <= GRASP_MAX_ANGLE_RAD


def grasped_entity_ids(scene: sapien.Scene, finger_joints, ignore_ids=()) -> list[int]:
    """``per_scene_id`` of every entity that each finger of ``finger_joints`` is pressed by (ManiSkill's rule,
    module docstring), in increasing order, leaving out ``ignore_ids`` (e.g. the robot's own links)."""
    forces = finger_contact_forces(scene, finger_joints)
    candidates = set(forces[0]) if forces else set()
    for per_finger in forces[1:]:
        candidates &= set(per_finger)
    candidates -= set(ignore_ids)
    return sorted(e for e in candidates
                  if all(_pressed(per_finger[e], joint) for per_finger, joint in zip(forces, finger_joints)))


def is_grasping(scene: sapien.Scene, finger_joints, entity: sapien.Entity) -> bool:
    """Whether ``entity`` is held by the gripper whose fingers are ``finger_joints`` (ManiSkill's rule)."""
    forces = finger_contact_forces(scene, finger_joints)
    key = entity.per_scene_id
    return all(key in per_finger and _pressed(per_finger[key], joint)
               for per_finger, joint in zip(forces, finger_joints))
