"""Collision filtering bits shared by the scene's parts.

SAPIEN 3 (PhysX) rule, checked in tests/test_envs_physics.py: two shapes never collide when their group-2
masks share a bit and their group-3 values are equal. Each bit below marks a family of shapes that must not
collide with each other or with the floor.
"""

from __future__ import annotations

import sapien

ROBOT_BIT = 1 << 30  # robot links vs floor: the torso box reaches below the floor, the base slides on joints
# An articulated object's links vs each other: parts of real-world models overlap where they meet (ManiSkill
# ignores these collisions too). The floor does not carry this bit: objects still stand on it.
OBJECT_SELF_BIT = 1 << 31


def add_ignore_bit(shape: sapien.physx.PhysxCollisionShape, bit: int) -> None:
    groups = shape.get_collision_groups()
    groups[2] |= bit
    shape.set_collision_groups(groups)
