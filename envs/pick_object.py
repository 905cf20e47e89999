"""PickObject: ManiSkill2's PickSingleYCB with procedurally generated objects (arXiv 2302.04659, Appendix C.2).

A Panda fixed at the table's edge must pick up an object and hold it at a goal position: success when the
object's centre of mass is within 2.5 cm of the goal and the robot is static (arm joints slower than
0.2 rad/s). The goal is ``obs["extra"]["goal_pos"]`` (world frame, m). Objects (``envs/object_generator.py``):
boxes, cylinders, spheres, capsules, random convex hulls, L-shapes and thin plates, 60 train / 20 test, all
graspable from above. Any mesh file can be the object instead:
``handleit.envs.make("PickObject", model_path="mug.obj", scale=0.001)`` (``envs/rigid_object.py``).

Per episode, as PickCube (``envs/pick_place.py``): the object resting on the table, its centre of mass at a
uniform xy in [-0.1, 0.1]^2 m, a uniform yaw; the goal at a uniform xy in [-0.1, 0.1]^2 m and a height
uniform in [0, 0.3] m above the object's resting centre of mass; the robot at ManiSkill's rest pose plus
N(0, 0.02) rad per arm joint. The object settles for 0.2 s inside reset (the robot held), as ManiSkill2's
PickSingleYCB lets its object settle, so that step 0 starts at rest.
"""

from __future__ import annotations

from pathlib import Path

from .base_env import bundled_models, pick_model
from .object_generator import object_asset, object_ids
from .pick_place import PickPlaceEnv
from .rigid_object import DEFAULT_DENSITY_KG_M3, CollisionMethod, load_rigid_object, mesh_object_asset


class PickObjectEnv(PickPlaceEnv):
    """Pick up a generated object (or one from a mesh file) and hold it at the goal."""

    settle_s = 0.2

    def __init__(
        self,
        split: str = "train",
        model_ids: list[str] | None = None,
        model_path: str | Path | None = None,
        scale=1.0,
        density_kg_m3: float = DEFAULT_DENSITY_KG_M3,
        collision: CollisionMethod = "auto",
        **kwargs,
    ):
        """``split`` picks the generated objects ("train" or "test"); ``model_ids`` restricts them.
        ``model_path`` replaces them with a mesh file (obj, stl, glb, ...), scaled by ``scale`` (a number or
        x, y, z), of density ``density_kg_m3``, its collision by ``collision`` ("auto": convex decomposition
        by CoACD when installed, else the convex hull; "coacd"; "hull")."""
        if model_path is not None:
            asset = mesh_object_asset(model_path, scale, density_kg_m3, collision)
            self.models = {asset.model_id: asset}
            self.split = "custom"
        else:
            self.models = bundled_models("pick object", split, object_ids, model_ids)
            self.split = split
        super().__init__(**kwargs)

    def _build_object(self, rng, options):
        self.model_id, asset = pick_model(self.models, rng, options, object_asset)
        return load_rigid_object(self.scene, asset, self.surface_material)
