"""Bundled SAPIEN environments, registered with Gymnasium.

>>> import gymnasium as gym, handleit.envs
>>> env = gym.make("handleit/OpenCabinetDrawer-v0", obs_mode="pointcloud", split="train")

Ids and default episode lengths are registered next to the tasks, below. ``max_episode_steps`` (default
200, the ManiSkill1 challenge's 2 s at 100 Hz) is set with ``gym.make(..., max_episode_steps=1000)``.

The long-horizon tasks (``LONG_HORIZON_TASKS``: TidyIntoDrawer, SetTable; ``envs/long_horizon.py``) chain
several skills and default to ``LONG_HORIZON_MAX_EPISODE_STEPS``; ``ALL_TASKS`` holds both kinds.
"""

from __future__ import annotations

import gymnasium as gym

from .articulated_object import URDFError
from .base_env import MASK_NAMES, OBS_MODES, MobileManipulationEnv
from .bucket_generator import bucket_ids
from .cabinet_generator import cabinet_ids
from .chair_generator import chair_ids
from .controllers import CONTROL_MODES, ControlConfig
from .long_horizon_models import layout_ids
from .object_generator import object_ids
from .pick_cube import cube_ids

DEFAULT_MAX_EPISODE_STEPS = 200

# task name -> (Gymnasium id, entry point)
TASKS = {
    "OpenCabinetDrawer": ("handleit/OpenCabinetDrawer-v0", "handleit.envs.open_cabinet:OpenCabinetDrawerEnv"),
    "OpenCabinetDoor": ("handleit/OpenCabinetDoor-v0", "handleit.envs.open_cabinet:OpenCabinetDoorEnv"),
    "PushChair": ("handleit/PushChair-v0", "handleit.envs.push_chair:PushChairEnv"),
    "MoveBucket": ("handleit/MoveBucket-v0", "handleit.envs.move_bucket:MoveBucketEnv"),
    "PickCube": ("handleit/PickCube-v0", "handleit.envs.pick_cube:PickCubeEnv"),
    "PickObject": ("handleit/PickObject-v0", "handleit.envs.pick_object:PickObjectEnv"),
}

# 30 s at 100 Hz for a chain of about seven skills (drive, open, drive, pick, drive, place, close), until a
# horizon is chosen from measured chains (issue 19).
LONG_HORIZON_MAX_EPISODE_STEPS = 3000
LONG_HORIZON_TASKS = {
    "TidyIntoDrawer": ("handleit/TidyIntoDrawer-v0", "handleit.envs.tidy_into_drawer:TidyIntoDrawerEnv"),
    "SetTable": ("handleit/SetTable-v0", "handleit.envs.set_table:SetTableEnv"),
}
ALL_TASKS = {**TASKS, **LONG_HORIZON_TASKS}

for _env_id, _entry_point in TASKS.values():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point=_entry_point, max_episode_steps=DEFAULT_MAX_EPISODE_STEPS)
for _env_id, _entry_point in LONG_HORIZON_TASKS.values():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point=_entry_point, max_episode_steps=LONG_HORIZON_MAX_EPISODE_STEPS)


def model_ids(task: str, split: str) -> list[str]:
    """The bundled object ids of a task's split (cabinets, chairs, buckets, the cube or the pick objects; for
    the long-horizon tasks, cabinet-object pairs such as ``"drawer-test-003+object-test-012"``), in a fixed
    order."""
    if task in ("OpenCabinetDrawer", "OpenCabinetDoor"):
        return cabinet_ids("drawer" if task == "OpenCabinetDrawer" else "door", split)
    if task == "PushChair":
        return chair_ids(split)
    if task == "MoveBucket":
        return bucket_ids(split)
    if task == "PickCube":
        return cube_ids(split)
    if task == "PickObject":
        return object_ids(split)
    if task in LONG_HORIZON_TASKS:
        return layout_ids(split)
    raise ValueError(f"unknown task {task!r}; choose one of {', '.join(ALL_TASKS)}")


def make(task: str, **kwargs) -> gym.Env:
    """``gym.make`` by task name (``"OpenCabinetDrawer"``) or id; ``ValueError`` for an unknown task."""
    env_id = ALL_TASKS[task][0] if task in ALL_TASKS else task
    if env_id not in {i for i, _ in ALL_TASKS.values()}:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(ALL_TASKS)}")
    return gym.make(env_id, **kwargs)


__all__ = [
    "ALL_TASKS",
    "CONTROL_MODES",
    "DEFAULT_MAX_EPISODE_STEPS",
    "LONG_HORIZON_MAX_EPISODE_STEPS",
    "LONG_HORIZON_TASKS",
    "MASK_NAMES",
    "OBS_MODES",
    "TASKS",
    "ControlConfig",
    "MobileManipulationEnv",
    "URDFError",
    "make",
    "model_ids",
]
