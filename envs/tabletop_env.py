"""The tabletop scene shared by the pick-and-place tasks: ManiSkill's table, a Panda at its edge, a fixed camera.

World frame W as in ManiSkill's ``TableSceneBuilder``: the table top is the plane z = 0, the table's centre
line is x = 0 with the robot's side toward -x; the floor is 0.92 m below. The robot (``StationaryPanda``) is
bolted to the table at x = -0.615 m, facing +x.

Cameras (:func:`tabletop_cameras`): ManiSkill3 PickCube-v1's ``base_camera`` (128x128, 90 degree field of
view, at (0.3, 0, 0.6) m looking at (-0.1, 0, 0.1) m), optionally ManiSkill2's ``hand_camera`` on the
Panda's hand. Both render with the point-cloud shader (SAPIEN's minimal shader) and the robot's low-poly
geometry, which keeps point-cloud observations cheap on a CPU (shared/SETUP-NOTES.md).
"""

from __future__ import annotations

import numpy as np
import sapien

from .base_env import MobileManipulationEnv, look_at
from .cameras import CameraConfig, MountedCameras, hand_camera as hand_camera_config
from .controllers import make_controller
from .robot_description import panda_arm
from .stationary_panda import StationaryPanda

# ManiSkill's table (TableSceneBuilder): a 1.209 x 2.418 m top at z = 0, centred at x = -0.12 m, 0.92 m high.
TABLE_HALF_SIZE_M = (1.209 / 2, 2.418 / 2, 0.9196429 / 2)
TABLE_CENTER_XY_M = (-0.12, 0.0)
TABLE_HEIGHT_M = 0.9196429
TABLE_RGBA = (0.72, 0.58, 0.42, 1.0)  # light wood
FLOOR_RGBA = (0.16, 0.18, 0.22, 1.0)
# ManiSkill's default surface (its DefaultMaterialsConfig): friction 0.3, no restitution.
SURFACE_FRICTION = 0.3

# ManiSkill3 PickCube-v1's sensor camera (pick_cube_cfgs.py, "panda"), and its human render camera.
BASE_CAMERA_EYE_M = (0.3, 0.0, 0.6)
BASE_CAMERA_TARGET_M = (-0.1, 0.0, 0.1)
RENDER_CAMERA_EYE_M = (0.6, 0.7, 0.6)
RENDER_CAMERA_TARGET_M = (0.0, 0.0, 0.35)


def tabletop_cameras(width: int = 128, height: int = 128, hand_camera: bool = False) -> tuple[CameraConfig, ...]:
    """ManiSkill3 PickCube-v1's fixed ``base_camera`` (world-mounted), and ManiSkill2's ``hand_camera`` when
    ``hand_camera``; both ``width`` x ``height`` pixels with a 90 degree field of view."""
    X_WC = look_at(BASE_CAMERA_EYE_M, BASE_CAMERA_TARGET_M)
    cameras = [CameraConfig("base_camera", tuple(X_WC.p), tuple(X_WC.q), width, height, np.pi / 2, 0.01, 100.0)]
    if hand_camera:
        cameras.append(hand_camera_config("panda_hand", width, height))
    return tuple(cameras)


class TabletopPandaEnv(MobileManipulationEnv):
    """A Panda fixed at the edge of ManiSkill's table, observed by a fixed camera (and optionally its hand's).

    Observations, actions, rates and determinism are those of :class:`MobileManipulationEnv`; the robot has
    no base joints (``obs["agent"]["base_pose"]`` is the fixed pose of ``panda_link0``), so the
    ``normalized_joint_vel`` action has 9 values (7 arm joints, 2 fingers).
    """

    def __init__(self, camera_width: int = 128, camera_height: int = 128, hand_camera: bool = False,
                 cameras: tuple[CameraConfig, ...] | None = None, **kwargs):
        """``camera_width`` x ``camera_height``: the cameras' resolution (default ManiSkill3's 128x128);
        ``hand_camera`` adds the hand camera; ``cameras`` replaces the rig (a ``mount`` of None is the world)."""
        if cameras is None:
            cameras = tabletop_cameras(camera_width, camera_height, hand_camera)
        super().__init__(cameras=cameras, **kwargs)

    def _robot_description(self):
        return panda_arm()

    def _build_scene(self) -> None:
        scene = self._lit_scene()
        self.surface_material = sapien.physx.PhysxMaterial(SURFACE_FRICTION, SURFACE_FRICTION, 0.0)
        floor_material = sapien.render.RenderMaterial(base_color=list(FLOOR_RGBA), roughness=0.9)
        scene.add_ground(-TABLE_HEIGHT_M, render_half_size=[10.0, 10.0], render_material=floor_material,
                         material=self.surface_material)
        builder = scene.create_actor_builder()
        builder.add_box_collision(half_size=TABLE_HALF_SIZE_M, material=self.surface_material)
        builder.add_box_visual(half_size=TABLE_HALF_SIZE_M,
                               material=sapien.render.RenderMaterial(base_color=list(TABLE_RGBA), roughness=0.8))
        builder.initial_pose = sapien.Pose([*TABLE_CENTER_XY_M, -TABLE_HALF_SIZE_M[2]])
        self.table = builder.build_static(name="table")
        self.scene = scene
        self.robot = StationaryPanda(scene, self.description)
        self.controller = make_controller(self.control_mode, self.robot, self.control_config)
        self.controller.configure()

        world_mount = sapien.Entity()
        world_mount.set_name("camera_mount")
        scene.add_entity(world_mount)
        self.cameras = MountedCameras(self.camera_configs, world_mount, self.robot.links)
        self._render_camera = None

    def _render_camera_pose(self) -> sapien.Pose:
        return look_at(RENDER_CAMERA_EYE_M, RENDER_CAMERA_TARGET_M)
