"""PickCube (ManiSkill2, arXiv 2302.04659, Appendix C.2), placed as ManiSkill3's PickCube-v1.

A Panda fixed at the table's edge must pick up a 4 cm red cube and hold it at a goal position: success when
the cube's centre is within 2.5 cm of the goal and the robot is static (arm joints slower than 0.2 rad/s).
The goal is ``obs["extra"]["goal_pos"]`` (world frame, m). Per episode: the cube flat on the table at a
uniform xy in [-0.1, 0.1]^2 m with a uniform yaw; the goal at a uniform xy in [-0.1, 0.1]^2 m and z in
[0.02, 0.32] m (the cube's half size plus U(0, 0.3)); the robot at ManiSkill's rest pose plus N(0, 0.02) rad
per arm joint. Episode logic, observations and the success check: ``envs/pick_place.py``.
"""

from __future__ import annotations

import sapien

from .base_env import SPLITS, bundled_models, pick_model
from .pick_place import PickPlaceEnv

CUBE_HALF_SIZE_M = 0.02  # ManiSkill's PickCube cube: 4 cm
CUBE_DENSITY_KG_M3 = 1000.0  # SAPIEN's and ManiSkill's default density: 0.064 kg
CUBE_RGBA = (1.0, 0.0, 0.0, 1.0)
CUBE_IDS = ("cube",)  # one object, in both splits: the harness names it like the other tasks' objects


def cube_ids(split: str) -> list[str]:
    """The object ids of a split ("train" or "test"): the one cube."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return list(CUBE_IDS)


class PickCubeEnv(PickPlaceEnv):
    """Pick up the red cube and hold it at the goal."""

    def __init__(self, split: str = "train", model_ids: list[str] | None = None, **kwargs):
        """``split`` ("train" or "test") and ``model_ids`` exist for the evaluation harness; both splits hold
        the one cube, episodes differ by their seeds."""
        self.models = bundled_models("cube", split, cube_ids, model_ids)
        self.split = split
        super().__init__(**kwargs)

    def _build_object(self, rng, options):
        self.model_id, _ = pick_model(self.models, rng, options, lambda model_id: model_id)
        builder = self.scene.create_actor_builder()
        half = [CUBE_HALF_SIZE_M] * 3
        builder.add_box_collision(half_size=half, material=self.surface_material, density=CUBE_DENSITY_KG_M3)
        builder.add_box_visual(half_size=half, material=sapien.render.RenderMaterial(base_color=CUBE_RGBA))
        return builder.build(name="cube")
