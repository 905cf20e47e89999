"""A robot's URDF as a Drake MultibodyPlant for kinematics, shared by the layers that need one (whole-body IK
in planning, the robot self filter in perception): the root link welded to the plant's world, and the map
from a caller's joint order to Drake's position order. Depends on Drake and numpy only."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from pydrake.multibody.parsing import Parser
from pydrake.multibody.plant import MultibodyPlant
from pydrake.multibody.tree import JointIndex


@contextmanager
def quiet_drake(level: int = logging.ERROR) -> Iterator[None]:
    """Drake's parser warns once per URDF tag it ignores (e.g. a joint's <dynamics friction>, which does not
    matter for kinematics): the robot files are known, so only errors are logged while parsing them."""
    logger = logging.getLogger("drake")
    previous = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(previous)


def welded_plant(urdf_path: str | Path, root_link: str, joint_names: Sequence[str]
                 ) -> tuple[MultibodyPlant, object, np.ndarray]:
    """``(plant, context, plant_index)``: the URDF's robot with ``root_link`` welded to the plant's world, a
    default context, and ``plant_index[i]``, Drake's position index of ``joint_names[i]``.

    Raises ValueError for duplicate joint names, a joint with more than one position, or names that do not
    match the URDF's movable joints (naming the missing and the unknown ones).
    """
    joint_names = tuple(joint_names)
    if len(set(joint_names)) != len(joint_names):
        raise ValueError("joint_names has duplicates")
    plant = MultibodyPlant(time_step=0.0)
    with quiet_drake():
        Parser(plant).AddModels(str(urdf_path))
    plant.WeldFrames(plant.world_frame(), plant.GetFrameByName(root_link))
    plant.Finalize()
    plant_joints = {}
    for i in range(plant.num_joints()):
        joint = plant.get_joint(JointIndex(i))
        if joint.num_positions() == 1:
            plant_joints[joint.name()] = joint.position_start()
        elif joint.num_positions() > 1:
            raise ValueError(f"joint {joint.name()} has {joint.num_positions()} positions; only one-dof joints are "
                             "supported")
    missing = sorted(set(plant_joints) - set(joint_names))
    unknown = sorted(set(joint_names) - set(plant_joints))
    if missing or unknown:
        raise ValueError(f"joint_names must name the URDF's joints: missing {missing}, unknown {unknown}")
    return plant, plant.CreateDefaultContext(), np.array([plant_joints[n] for n in joint_names], dtype=int)
