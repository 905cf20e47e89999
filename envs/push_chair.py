"""PushChair (ManiSkill1 challenge; ManiSkill2 (arXiv 2302.04659) Appendix C.6).

A dual-arm mobile Panda must push a swivel chair on casters to a target, a red hemisphere on the floor at the
world origin, and leave it there standing and static: the chair's root link origin within 0.15 m of the
target (in the floor plane), its up axis within 0.05 pi of vertical, moving slower than 0.1 m/s and 0.2 rad/s.
The chair is named only through the point-cloud masks (``target_link``: every chair shape; there is no
handle).

Per episode, as ManiSkill2's PushChair-v1 (ManiSkill1's public code): the chair 0.8-1.2 m from the target at
a uniform bearing, its front toward the target within +-0.4 pi; the robot 0.8-1.2 m behind the chair within
+-0.2 pi, facing the chair within +-0.05 pi; seat swivel friction U(0.05, 0.15) and damping U(5, 15); caster
joint friction U(0, 0.1). One deliberate difference: caster damping is U(0, 0.005) N m s/rad instead of
U(0, 0.5). On casters of 2.5-3.5 cm radius ManiSkill2's values lock the wheels (c / r^2 is up to 500 N s/m of
linear damping per caster, and a caster turning into the direction of travel is as slow): measured here with
its mid-range values, a 10 N push at the backrest's top moves the chair less than 1 cm in 1 s, and 40 N tips
it over. At the top of U(0, 0.005), with joint friction 0.1, 25 N there moves it about 0.5 m in 1 s without
tilting it, and joint friction still gives the casters some resistance.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sapien

from handleit.poses import quaternion_of_yaw

from .articulated_object import URDFError, check_urdf
from .base_env import LinkSpeedMeter, MobileManipulationEnv, bundled_models, look_at, pick_model
from .chair_generator import (
    CASTER_DAMPING_RANGE,
    CASTER_FRICTION_RANGE,
    SEAT_DAMPING_RANGE,
    SEAT_FRICTION_RANGE,
    backrest_top_S,
    chair_ids,
    chair_urdf,
    sample_chair,
)
from .collision_groups import OBJECT_SELF_BIT, add_ignore_bit
from .markers import attach_visual
from .target_prompts import visual_bounds_W

START_TORSO_HEIGHT_M = 0.5
TARGET_XY_M = (0.0, 0.0)
TARGET_RADIUS_M = 0.15  # the marker's radius and the success distance (ManiSkill1's target_radius)
STANDING_TILT_RAD = 0.05 * np.pi
STATIC_LIN_MPS, STATIC_ANG_RADPS = 0.1, 0.2
CHAIR_DISTANCE_RANGE_M = (0.8, 1.2)
CHAIR_YAW_NOISE_RAD = 0.4 * np.pi
ROBOT_DISTANCE_RANGE_M = (0.8, 1.2)  # from the chair's root
ROBOT_BEARING_NOISE_RAD = 0.2 * np.pi
ROBOT_YAW_NOISE_RAD = 0.05 * np.pi
# The chair settles on its casters inside reset (contacts find their rest), so that step 0 starts at rest.
SETTLE_S = 0.2
# Surfaces, as ManiSkill2's PushChair: slippery chair body, rubber wheels.
CHAIR_FRICTION = 0.1
WHEEL_FRICTION = 1.0
# ManiSkill1 runs PushChair with 15 solver position iterations.
SOLVER_POSITION_ITERATIONS = 15
ROBOT_CLEARANCE_M = 0.05  # least horizontal gap between the robot at rest and the chair at the start
_MAX_ROBOT_PLACEMENT_TRIES = 100
# With a colour marker: a band of tape over the backrest's top edge, this tall along the panel, standing this
# far off its faces (visual only).
MARKER_BAND_M = 0.06
MARKER_GAP_M = 0.002


def load_chair(scene: sapien.Scene, urdf_path) -> sapien.physx.PhysxArticulation:
    """Load a free-standing chair: its links do not collide with each other (they overlap where they meet)
    but do collide with the floor and the robot; links with a visual named ``wheel`` get rubber."""
    urdf_path = check_urdf(urdf_path)
    loader = scene.create_urdf_loader()
    loader.fix_root_link = False
    chair = loader.load(str(urdf_path))
    if chair is None:
        raise URDFError(f"SAPIEN could not build an articulation from {urdf_path}")
    body = sapien.physx.PhysxMaterial(CHAIR_FRICTION, CHAIR_FRICTION, 0.0)
    wheel = sapien.physx.PhysxMaterial(WHEEL_FRICTION, WHEEL_FRICTION, 0.0)
    for link in chair.links:
        material = wheel if any("wheel" in s.name for s in _render_shapes(link)) else body
        for shape in link.collision_shapes:
            add_ignore_bit(shape, OBJECT_SELF_BIT)
            shape.set_physical_material(material)
    chair.set_solver_position_iterations(SOLVER_POSITION_ITERATIONS)
    return chair


def _render_shapes(link) -> list:
    body = link.entity.find_component_by_type(sapien.render.RenderBodyComponent)
    return [] if body is None else list(body.render_shapes)


def _footprint_radius_m(chair: sapien.physx.PhysxArticulation) -> float:
    """Largest horizontal distance of the chair's collision geometry from its root's z axis (the swivel axis),
    in its current configuration; boxes around cylinders and capsules make it slightly conservative."""
    X_RW = chair.root.entity_pose.inv()
    physx = sapien.physx
    radius_m = 0.0
    for link in chair.links:
        X_RL = X_RW * link.entity_pose
        for shape in link.collision_shapes:
            X_RS = (X_RL * shape.local_pose).to_transformation_matrix()
            if isinstance(shape, physx.PhysxCollisionShapeSphere):
                radius_m = max(radius_m, float(np.linalg.norm(X_RS[:2, 3])) + shape.radius)
                continue
            if isinstance(shape, physx.PhysxCollisionShapeBox):
                half = np.asarray(shape.half_size)
            elif isinstance(shape, physx.PhysxCollisionShapeCylinder):
                half = np.array([shape.half_length, shape.radius, shape.radius])  # SAPIEN: axis along x
            elif isinstance(shape, physx.PhysxCollisionShapeCapsule):
                half = np.array([shape.half_length + shape.radius, shape.radius, shape.radius])
            else:
                points_S = np.asarray(shape.vertices) * np.asarray(shape.scale)
                half = None
            if half is not None:
                points_S = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half
            points_R = points_S @ X_RS[:3, :3].T + X_RS[:3, 3]
            radius_m = max(radius_m, float(np.linalg.norm(points_R[:, :2], axis=1).max()))
    return radius_m


def _wrap_rad(angle: float) -> float:
    """The same angle in [-pi, pi): the robot's yaw joint is limited to +-2 pi."""
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


class PushChairEnv(MobileManipulationEnv):
    """Push a swivel chair to the red target at the origin, and leave it standing still there."""

    robot_arms = "dual"
    # root link pose (7), its linear and angular velocity (6), seat swivel angle (1), target xy (2), world frame
    task_state_dim = 16

    def __init__(self, split: str = "train", model_ids: list[str] | None = None, **kwargs):
        """``split`` picks the bundled chairs ("train" or "test"); ``model_ids`` restricts them."""
        self.models = bundled_models("chair", split, chair_ids, model_ids)
        self.split = split
        self._robot_boxes_B: np.ndarray | None = None
        super().__init__(**kwargs)

    # ------------------------------------------------------------------------------------------------
    def _load_objects(self, rng, options):
        model_id, urdf = pick_model(self.models, rng, options, chair_urdf)
        self.model_id = model_id
        self.chair_spec = sample_chair(model_id)
        self.chair = load_chair(self.scene, urdf)
        self.chair.set_name(model_id)
        self.root_link = self.chair.root
        self.seat_link = next(link for link in self.chair.links if link.name == "seat")
        self.seat_joint_index = [j.name for j in self.chair.active_joints].index(self.seat_link.joint.name)

        # Measured at the identity pose with every joint at 0, where the root frame is the world frame.
        self.chair.set_qpos(np.zeros(self.chair.dof, dtype=np.float32))
        self.chair.set_root_pose(sapien.Pose())
        self.footprint_radius_m = _footprint_radius_m(self.chair)
        self._floor_offset_m = -min(link.compute_global_aabb_tight()[0][2] for link in self.chair.links
                                    if link.collision_shapes)

        # The target: a red hemisphere on the floor (a sphere half below it), seen but never touched.
        builder = self.scene.create_actor_builder()
        builder.add_sphere_visual(radius=TARGET_RADIUS_M, material=sapien.render.RenderMaterial(
            base_color=[1.0, 0.0, 0.0, 1.0]))
        self.target_indicator = builder.build_static(name="target_indicator")
        self.target_indicator.set_pose(sapien.Pose([*TARGET_XY_M, 0.0]))

    def _initialize_episode(self, rng, options):
        # The chair around the target, its front toward it (ManiSkill2 PushChair-v1).
        r = rng.uniform(*CHAIR_DISTANCE_RANGE_M)
        theta = rng.uniform(-np.pi, np.pi)
        self.chair_start_yaw_rad = _wrap_rad(theta - np.pi + rng.uniform(-CHAIR_YAW_NOISE_RAD, CHAIR_YAW_NOISE_RAD))
        chair_xy = np.asarray(TARGET_XY_M) + r * np.array([math.cos(theta), math.sin(theta)])
        # Root origin at floor level on the casters; the offset is 0 for generated chairs, up to rounding.
        q_start = quaternion_of_yaw(self.chair_start_yaw_rad)
        self.chair.set_root_pose(sapien.Pose([*chair_xy, self._floor_offset_m], q_start))
        self.chair.set_qpos(np.zeros(self.chair.dof, dtype=np.float32))
        self.chair.set_qvel(np.zeros(self.chair.dof, dtype=np.float32))

        qpos = self.robot.rest_qpos(self._sample_robot_pose(rng, chair_xy), START_TORSO_HEIGHT_M)

        for i, joint in enumerate(self.chair.active_joints):
            if i == self.seat_joint_index:
                joint.set_friction(float(rng.uniform(*SEAT_FRICTION_RANGE)))
                joint.set_drive_properties(0.0, float(rng.uniform(*SEAT_DAMPING_RANGE)))
            else:
                joint.set_friction(float(rng.uniform(*CASTER_FRICTION_RANGE)))
                joint.set_drive_properties(0.0, float(rng.uniform(*CASTER_DAMPING_RANGE)))

        # Let the chair settle with the robot held in place, then restore the robot's exact start.
        self.robot.reset(qpos)
        self.controller.reset()
        for _ in range(round(SETTLE_S * self.sim_freq)):
            self.scene.step()
        self.robot.reset(qpos)
        self.chair.set_qvel(np.zeros(self.chair.dof, dtype=np.float32))
        self.chair.set_root_linear_velocity(np.zeros(3, dtype=np.float32))
        self.chair.set_root_angular_velocity(np.zeros(3, dtype=np.float32))
        self._speed_meter = LinkSpeedMeter(self.root_link, self.control_freq)
        self._speed_meter.start()

    def _sample_robot_pose(self, rng: np.random.Generator, chair_xy: np.ndarray) -> tuple[float, float, float]:
        """Base x, y, yaw behind the chair, facing it (ManiSkill2 PushChair-v1), clear of the chair."""
        for _ in range(_MAX_ROBOT_PLACEMENT_TRIES):
            d = rng.uniform(*ROBOT_DISTANCE_RANGE_M)
            bearing = self.chair_start_yaw_rad + np.pi + rng.uniform(-ROBOT_BEARING_NOISE_RAD, ROBOT_BEARING_NOISE_RAD)
            xy = chair_xy + d * np.array([math.cos(bearing), math.sin(bearing)])
            yaw = _wrap_rad(bearing - np.pi + rng.uniform(-ROBOT_YAW_NOISE_RAD, ROBOT_YAW_NOISE_RAD))
            if self._robot_clear_of_chair(xy, yaw, chair_xy):
                return float(xy[0]), float(xy[1]), float(yaw)
        raise RuntimeError(
            f"no robot start pose clear of chair {self.model_id!r} (footprint radius "
            f"{self.footprint_radius_m:.2f} m) in {_MAX_ROBOT_PLACEMENT_TRIES} draws"
        )

    def _robot_clear_of_chair(self, robot_xy: np.ndarray, robot_yaw: float, chair_xy: np.ndarray) -> bool:
        """Whether the chair's footprint disk keeps ROBOT_CLEARANCE_M from every robot link's box (base frame,
        rest arms, start torso height), ignoring heights: conservative, and cheap."""
        boxes_B = self._robot_link_boxes_B()
        c, s = math.cos(robot_yaw), math.sin(robot_yaw)
        d = chair_xy - robot_xy
        p_B = np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])  # chair axis in the robot's base frame
        nearest = np.clip(p_B, boxes_B[:, 0], boxes_B[:, 1])
        gaps = np.linalg.norm(nearest - p_B, axis=1)
        return bool(gaps.min() > self.footprint_radius_m + ROBOT_CLEARANCE_M)

    def _robot_link_boxes_B(self) -> np.ndarray:
        """xy boxes [n, 2 (min, max), 2 (x, y)] of the robot's links at rest, in its base frame (cached)."""
        if self._robot_boxes_B is None:
            self.robot.reset(self.robot.rest_qpos((0.0, 0.0, 0.0), START_TORSO_HEIGHT_M))
            X_BW = np.linalg.inv(self.robot.X_WB.to_transformation_matrix())
            boxes = []
            for link in self.robot.articulation.links:
                if not link.collision_shapes:
                    continue
                lo, hi = link.compute_global_aabb_tight()
                corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
                xy_B = (corners @ X_BW[:3, :3].T + X_BW[:3, 3])[:, :2]
                boxes.append([xy_B.min(0), xy_B.max(0)])
            self._robot_boxes_B = np.array(boxes)
        return self._robot_boxes_B

    # ------------------------------------------------------------------------------------------------
    def _after_step(self):
        self._speed_meter.update()

    def chair_tilt_rad(self) -> float:
        """Angle between the chair's root z axis and the world's up (ground truth)."""
        X_WR = self.root_link.entity_pose.to_transformation_matrix()
        return math.acos(float(np.clip(X_WR[2, 2], -1.0, 1.0)))

    def evaluate(self) -> dict[str, Any]:
        dist = float(np.linalg.norm(self.chair_center_W()[:2] - np.asarray(TARGET_XY_M)))
        tilt = self.chair_tilt_rad()
        lin, ang = self._speed_meter.speeds()
        close = dist < TARGET_RADIUS_M
        standing = tilt < STANDING_TILT_RAD
        static = lin < STATIC_LIN_MPS and ang < STATIC_ANG_RADPS
        return {
            "success": bool(close and standing and static),
            "chair_close_to_target": bool(close),
            "chair_standing": bool(standing),
            "chair_static": bool(static),
            "dist_chair_to_target": dist,
            "chair_tilt": tilt,
            "chair_speed_mps": lin,
            "chair_angular_speed_radps": ang,
            "model_id": self.model_id,
        }

    # ------------------------------------------------------------------------------------------------
    def _labelled_shape_ids(self):
        ids = [s.per_scene_id for link in self.chair.links for s in _render_shapes(link)]
        return {"target_handle": np.zeros(0, dtype=np.int64), "target_link": np.array(ids, dtype=np.int64)}

    def _marker_shapes(self):
        # A band over the top edge of the backrest panel (the generator makes the backrest one box), on its
        # front, back, sides and top: visible from any side the robot stands on.
        body = self.seat_link.entity.find_component_by_type(sapien.render.RenderBodyComponent)
        panel = next((s for s in body.render_shapes if s.name == "backrest_panel"), None)
        if panel is None or not isinstance(panel, sapien.render.RenderShapeBox):
            raise ValueError(f"chair {self.model_id!r} has no backrest_panel box to put the colour marker on")
        half = np.asarray(panel.half_size, dtype=np.float64)
        band = min(MARKER_BAND_M, half[2])
        band_half = np.array([half[0] + MARKER_GAP_M, half[1] + MARKER_GAP_M, band / 2 + MARKER_GAP_M / 2])
        shape = sapien.render.RenderShapeBox(band_half.astype(np.float32), sapien.render.RenderMaterial())
        # In the panel's frame its top edge is at z = half[2]; the band ends MARKER_GAP_M above it.
        shape.local_pose = panel.local_pose * sapien.Pose([0.0, 0.0, half[2] - band / 2 + MARKER_GAP_M / 2])
        shape.name = "backrest_marker"
        attach_visual(self.seat_link.entity, shape)
        return [shape]

    def _target_bounds_W(self):
        return visual_bounds_W([link.entity for link in self.chair.links], exclude_ids=self._marker_ids)

    def chair_center_W(self) -> np.ndarray:
        """Ground truth: origin of the chair's root link, on the swivel axis at floor level (m, world frame).
        Success measures this point's distance to the target. For evaluation and tests only."""
        return np.asarray(self.root_link.entity_pose.p, dtype=np.float64)

    def chair_yaw_rad(self) -> float:
        """Ground truth: yaw of the seat's forward (x) axis in the world, in (-pi, pi]."""
        X_WS = self.seat_link.entity_pose.to_transformation_matrix()
        return math.atan2(X_WS[1, 0], X_WS[0, 0])

    def backrest_top_W(self) -> np.ndarray:
        """Ground truth: center of the backrest's top edge in the world (m)."""
        X_WS = self.seat_link.entity_pose.to_transformation_matrix()
        return X_WS[:3, :3] @ backrest_top_S(self.chair_spec) + X_WS[:3, 3]

    def _task_state(self):
        pose = self.root_link.entity_pose
        swivel = float(self.chair.get_qpos()[self.seat_joint_index])
        return np.concatenate(
            [pose.p, pose.q, self.root_link.linear_velocity, self.root_link.angular_velocity, [swivel], TARGET_XY_M]
        ).astype(np.float32)

    def _render_camera_pose(self):
        # Above and behind the robot, looking past it at the chair and the target.
        robot_xy = self.robot.X_WB.p[:2]
        away = robot_xy - np.asarray(TARGET_XY_M)
        away = away / max(float(np.linalg.norm(away)), 1e-6)
        eye = [*(robot_xy + 0.8 * away), 3.4]
        target = [*((self.chair_center_W()[:2] + np.asarray(TARGET_XY_M)) / 2), 0.3]
        return look_at(eye=eye, target=target)
