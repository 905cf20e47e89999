"""Pick-and-place on the table, as ManiSkill2 defines PickCube and PickSingleYCB (arXiv 2302.04659, Appendix C.2).

Pick the object up and move it to a goal position. Success: the object's centre of mass within 2.5 cm of the
goal, and the robot static (every arm joint slower than 0.2 rad/s: ManiSkill's ``is_robot_static``). The goal
is given to solvers as a 3D position in the world frame, ``obs["extra"]["goal_pos"]``, in every observation
mode. A green sphere of the success radius marks it for the render camera (videos) only: it is hidden from
the observation cameras, so it is not in the point cloud (ManiSkill hides its ``goal_site`` the same way).

Per episode (ManiSkill3 PickCube-v1): the robot at ManiSkill's rest configuration plus N(0, 0.02) rad on
every arm joint, gripper open; the object resting on the table with its centre of mass at a uniform xy in
[-0.1, 0.1]^2 m and a uniform yaw; the goal at a uniform xy in [-0.1, 0.1]^2 m and a height uniform in
[0, 0.3] m above the object's resting centre-of-mass height (for the cube: its half size).

Point-cloud masks: ``target`` (the object to pick; ``target_link`` is the same mask, under the name the
other tasks use) and ``robot``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sapien
from gymnasium import spaces

from handleit.poses import quaternion_of_yaw

from .grasp_contacts import GRASP_MAX_ANGLE_RAD, GRASP_MIN_FORCE_N, is_grasping  # noqa: F401  (re-exported)
from .tabletop_env import TabletopPandaEnv
from .target_prompts import visual_bounds_W

GOAL_THRESH_M = 0.025  # ManiSkill's goal_thresh: success radius and the marker's radius
STATIC_ARM_QVEL_RADPS = 0.2  # ManiSkill's is_robot_static threshold
SPAWN_HALF_SIZE_M = 0.1  # object and goal xy in [-0.1, 0.1]^2
MAX_GOAL_HEIGHT_M = 0.3  # goal z in [0, 0.3] m above the resting centre of mass
ROBOT_INIT_QPOS_NOISE_RAD = 0.02  # ManiSkill3 PickCube-v1's robot_init_qpos_noise (std)
GOAL_RGBA = (0.0, 1.0, 0.0, 1.0)
# PhysX solver iterations for the object (ManiSkill3's scene default 15; SAPIEN's is 10): steadier grasps.
SOLVER_POSITION_ITERATIONS = 15


class PickPlaceEnv(TabletopPandaEnv):
    """Move a rigid object to a goal position; a task subclass builds the object (``_build_object``)."""

    mask_names = ("target", "target_link", "robot")
    # goal (3), object pose (centre of mass, quaternion: 7), tcp -> object (3), object -> goal (3), object
    # linear and angular velocity (6); world frame
    task_state_dim = 22
    settle_s = 0.0  # physics run inside reset with the robot held, so that step 0 starts at rest

    def __init__(self, robot_init_qpos_noise: float = ROBOT_INIT_QPOS_NOISE_RAD, **kwargs):
        """``robot_init_qpos_noise``: std of the Gaussian noise on the start arm joints (rad)."""
        if not (math.isfinite(robot_init_qpos_noise) and robot_init_qpos_noise >= 0):
            raise ValueError(f"robot_init_qpos_noise must be a finite std >= 0 rad, got {robot_init_qpos_noise!r}")
        self.robot_init_qpos_noise = float(robot_init_qpos_noise)
        self.goal_W = np.zeros(3)
        super().__init__(**kwargs)

    # ------------------------------------------------------------------------------------------------
    # Task hooks
    # ------------------------------------------------------------------------------------------------
    def _build_object(self, rng: np.random.Generator, options: dict) -> sapien.Entity:
        """Build the episode's object into ``self.scene`` (a dynamic rigid body) and set ``self.model_id``."""
        raise NotImplementedError

    def _load_objects(self, rng, options):
        self.obj = self._build_object(rng, options)
        self.obj_body = self.obj.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
        self.obj_body.set_solver_position_iterations(SOLVER_POSITION_ITERATIONS)
        builder = self.scene.create_actor_builder()
        builder.add_sphere_visual(radius=GOAL_THRESH_M, material=sapien.render.RenderMaterial(base_color=GOAL_RGBA))
        self.goal_marker = builder.build_static(name="goal_site")
        self._goal_marker_render = self.goal_marker.find_component_by_type(sapien.render.RenderBodyComponent)
        self._goal_marker_render.visibility = 0.0  # shown only while render() takes its picture
        joints = self.robot.joints
        self._fingers = [joints[i] for i in self.robot.finger_index[self.robot.side]]

    def _initialize_episode(self, rng, options):
        qpos = self.robot.rest_qpos()
        arm = self.robot.arm_index[self.robot.side]
        qpos[arm] += rng.normal(0.0, self.robot_init_qpos_noise, len(arm))
        self.robot.reset(qpos)

        xy = rng.uniform(-SPAWN_HALF_SIZE_M, SPAWN_HALF_SIZE_M, 2)
        yaw = rng.uniform(-np.pi, np.pi)
        self._place_object(xy, yaw)
        self.rest_com_height_m = float(self.object_com_W()[2])
        goal_xy = rng.uniform(-SPAWN_HALF_SIZE_M, SPAWN_HALF_SIZE_M, 2)
        goal_z = rng.uniform(0.0, MAX_GOAL_HEIGHT_M) + self.rest_com_height_m
        self.goal_W = np.array([*goal_xy, goal_z])
        self.goal_marker.set_pose(sapien.Pose(self.goal_W))

        if self.settle_s > 0:  # let the object find its rest on the table, the robot held at its start
            self.controller.reset()
            for _ in range(round(self.settle_s * self.sim_freq)):
                self.scene.step()
            self.robot.reset(qpos)
            self.obj_body.set_linear_velocity(np.zeros(3))
            self.obj_body.set_angular_velocity(np.zeros(3))

    def _place_object(self, xy_W: np.ndarray, yaw_rad: float) -> None:
        """The object in its resting orientation turned by ``yaw_rad``, its centre of mass above ``xy_W``,
        its lowest point on the table top (z = 0)."""
        q = quaternion_of_yaw(yaw_rad)
        self.obj.set_pose(sapien.Pose([0.0, 0.0, 0.0], q))
        lower, _ = self.obj_body.compute_global_aabb_tight()
        com_W = self.object_com_W()
        self.obj.set_pose(sapien.Pose([xy_W[0] - com_W[0], xy_W[1] - com_W[1], -float(lower[2])], q))

    # ------------------------------------------------------------------------------------------------
    # Success (ground truth: evaluation only)
    # ------------------------------------------------------------------------------------------------
    def object_com_W(self) -> np.ndarray:
        """Ground truth: the object's centre of mass in the world (m). For evaluation and tests only."""
        X_WO = self.obj.pose
        return np.asarray((X_WO * self.obj_body.cmass_local_pose).p, dtype=np.float64)

    def evaluate(self) -> dict[str, Any]:
        dist = float(np.linalg.norm(self.goal_W - self.object_com_W()))
        arm_qvel = self.robot.qvel[self.robot.arm_index[self.robot.side]]
        max_arm_qvel = float(np.max(np.abs(arm_qvel)))
        placed = dist <= GOAL_THRESH_M
        static = max_arm_qvel <= STATIC_ARM_QVEL_RADPS
        return {
            "success": bool(placed and static),
            "is_obj_placed": bool(placed),
            "is_robot_static": bool(static),
            "is_grasped": self.is_grasping(),
            "obj_to_goal_dist": dist,
            "max_arm_qvel": max_arm_qvel,
            "model_id": self.model_id,
        }

    def is_grasping(self) -> bool:
        """Ground truth, as ManiSkill's ``Panda.is_grasping`` (``envs/grasp_contacts.py``): both fingers pressed
        by the object (contact force >= 0.5 N, within 85 degrees of the finger's opening direction) in the last
        physics step."""
        return is_grasping(self.scene, self._fingers, self.obj)

    # ------------------------------------------------------------------------------------------------
    # Observations
    # ------------------------------------------------------------------------------------------------
    def _labelled_shape_ids(self):
        body = self.obj.find_component_by_type(sapien.render.RenderBodyComponent)
        ids = np.array([shape.per_scene_id for shape in body.render_shapes], dtype=np.int64)
        return {"target": ids, "target_link": ids}

    def _extra_obs(self):
        return {"goal_pos": self.goal_W.astype(np.float32)}

    def _marker_shapes(self):
        # The whole object: small enough that a face or band could be out of view at some poses.
        return list(self.obj.find_component_by_type(sapien.render.RenderBodyComponent).render_shapes)

    def _target_bounds_W(self):
        return visual_bounds_W([self.obj])

    def _extra_obs_space(self):
        return {"goal_pos": spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float32)}

    def _task_state(self):
        com = self.object_com_W()
        tcp = np.asarray(self.robot.X_WT(self.robot.side).p, dtype=np.float64)
        return np.concatenate([
            self.goal_W, com, self.obj.pose.q, com - tcp, self.goal_W - com,
            self.obj_body.linear_velocity, self.obj_body.angular_velocity,
        ]).astype(np.float32)

    def render(self):
        if self.render_mode != "rgb_array" or not self._episode_started:
            return super().render()
        self._goal_marker_render.visibility = 1.0
        try:
            return super().render()
        finally:
            self._goal_marker_render.visibility = 0.0
