"""MoveBucket (ManiSkill1 challenge; ManiSkill2 (arXiv 2302.04659) Appendix C.6), episode as ManiSkill2's MoveBucket-v1.

A dual-arm mobile Panda must lift a bucket holding a ball onto a platform: success when the ball is still
in the bucket, the bucket's origin is above the platform (within 0.3 m in xy of its centre), the bucket
stands (tilted less than 0.1 pi) and is static (slower than 0.1 m/s and 0.2 rad/s). The bucket is named
only through the point-cloud masks (target_link: all of the bucket; target_handle: its bail handle).

Per episode (ManiSkill2's ranges): a bucket of the split, upright on the floor 0.8-1.2 m from the platform
at a random bearing theta and yaw, its handle lying down at the lower joint limit, a ball dropped in and
settled; the robot 0.6-0.8 m from the bucket at bearing theta +- 0.4 pi (on the far side from the
platform), facing it within +-0.05 pi, arms at rest, torso at 0.5 m. The handle joint's friction and
damping are drawn per episode (DESIGN: object joint dynamics are randomized): friction U(0.05, 0.15) as
the cabinets', damping U(0.05, 0.5) N m s/rad, one to two orders of magnitude below a cabinet door's
(5-20), since a bail handle is light and swings freely (ManiSkill2 keeps the PartNet-Mobility URDF's value).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import sapien

from .articulated_object import URDFError, check_urdf
from .base_env import LinkSpeedMeter, MobileManipulationEnv, bundled_models, look_at, pick_model
from .bucket_generator import BALL_RADIUS_M, bucket_ids, bucket_urdf, sample_bucket
from .collision_groups import OBJECT_SELF_BIT, add_ignore_bit
from .markers import attach_visual, quads_shape
from .target_prompts import visual_bounds_W

PLATFORM_HALF_SIZE_M = (0.3, 0.3, 0.1)  # centred on the world origin: its top is at z = 0.1
PLATFORM_RGBA = (0.8, 0.8, 0.8, 1.0)
# Bucket and platform as ManiSkill2's MoveBucket (friction 0.5, no restitution); the ball too, where
# ManiSkill2 leaves the engine default.
OBJECT_FRICTION = 0.5
BALL_DENSITY_KG_M3 = 1000.0
BALL_RGBA = (0.0, 1.0, 1.0, 1.0)
# PhysX has no rolling resistance: without damping a ball set rolling inside the bucket circles forever.
BALL_ANGULAR_DAMPING = 2.0  # 1/s
BALL_DROP_GAP_M = 0.005  # the ball starts this far above the bucket's floor
SETTLE_TIME_S = 0.25  # physics run inside reset, so that step 0 starts at rest

BUCKET_DISTANCE_RANGE_M = (0.8, 1.2)  # bucket origin to the platform centre
ROBOT_DISTANCE_RANGE_M = (0.6, 0.8)  # robot base to the bucket origin
ROBOT_BEARING_NOISE_RAD = 0.4 * np.pi  # around the platform-to-bucket bearing
ROBOT_YAW_NOISE_RAD = 0.05 * np.pi
START_TORSO_HEIGHT_M = 0.5
# Below its arms (which start at z >= 0.79 m with the torso at 0.5 m, above any bucket) the robot is the
# torso box, 0.3 x 0.2 m: half its diagonal is 0.18 m.
ROBOT_BODY_RADIUS_M = 0.2
ROBOT_CLEARANCE_M = 0.05
HANDLE_FRICTION_RANGE = (0.05, 0.15)
HANDLE_DAMPING_RANGE = (0.05, 0.5)  # N m s/rad

PLATFORM_RADIUS_M = 0.3  # success: bucket origin within this xy distance of the platform centre
STANDING_TILT_RAD = 0.1 * np.pi
STATIC_LIN_MPS, STATIC_ANG_RADPS = 0.1, 0.2
# With a colour marker: tape around the rim, this tall down the outer and inner wall and over the rim's top,
# standing this far off the surfaces (visual only).
MARKER_BAND_M = 0.03
MARKER_GAP_M = 0.001


def _render_shapes(link) -> list:
    body = link.entity.find_component_by_type(sapien.render.RenderBodyComponent)
    return [] if body is None else list(body.render_shapes)


def _rim_band_quads(spec, band_m: float, gap_m: float) -> tuple[list, list]:
    """Quads and their normals of a band around the bucket's rim (bucket frame): the outer and inner wall
    faces from ``band_m`` below the rim up to it, and the rim's top, each ``gap_m`` off the surface. The wall
    is a regular n-gon (radii are apothems, a face centred on angle 0), as ``envs/bucket_generator.py`` builds it."""
    n, h, t = spec.num_segments, spec.height_m, spec.wall_thickness_m
    z0, z1 = max(h - band_m, spec.bottom_thickness_m), h + gap_m

    def corner(apothem_m: float, z_m: float, i: int) -> np.ndarray:
        circum = apothem_m / math.cos(math.pi / n)
        angle = (2 * i + 1) * math.pi / n
        return np.array([circum * math.cos(angle), circum * math.sin(angle), z_m])

    def outer(z_m: float) -> float:
        return spec.outer_radius_at(min(z_m, h)) + gap_m

    def inner(z_m: float) -> float:
        return spec.outer_radius_at(min(z_m, h)) - t - gap_m

    quads, normals = [], []
    for i in range(n):
        j = (i - 1) % n  # face i lies between corners i-1 and i, centred on angle 2 pi i / n
        radial = np.array([math.cos(2 * math.pi * i / n), math.sin(2 * math.pi * i / n), 0.0])
        quads.append([corner(outer(z0), z0, j), corner(outer(z0), z0, i), corner(outer(z1), z1, i),
                      corner(outer(z1), z1, j)])
        normals.append(radial)
        quads.append([corner(inner(z0), z0, j), corner(inner(z0), z0, i), corner(inner(z1), z1, i),
                      corner(inner(z1), z1, j)])
        normals.append(-radial)
        quads.append([corner(inner(z1), z1, j), corner(inner(z1), z1, i), corner(outer(z1), z1, i),
                      corner(outer(z1), z1, j)])
        normals.append(np.array([0.0, 0.0, 1.0]))
    return quads, normals


class MoveBucketEnv(MobileManipulationEnv):
    """Lift a bucket with a ball in it onto the platform at the world origin."""

    robot_arms = "dual"
    # bucket root pose (7), linear and angular velocity (6), handle angle (1), ball position (3), target xy
    # (2), all in the world frame
    task_state_dim = 19

    def __init__(self, split: str = "train", model_ids: list[str] | None = None, **kwargs):
        """``split`` picks bundled buckets; ``model_ids`` restricts them."""
        self.models: dict[str, Path | None] = bundled_models("bucket", split, bucket_ids, model_ids)
        self.split = split
        self.target_xy = np.zeros(2)
        super().__init__(**kwargs)

    # ------------------------------------------------------------------------------------------------
    def _load_objects(self, rng, options):
        model_id, urdf = pick_model(self.models, rng, options, bucket_urdf)
        self.model_id = model_id
        self.bucket_spec = sample_bucket(model_id)
        material = sapien.physx.PhysxMaterial(OBJECT_FRICTION, OBJECT_FRICTION, 0.0)

        builder = self.scene.create_actor_builder()
        builder.add_box_collision(half_size=PLATFORM_HALF_SIZE_M, material=material)
        render_material = sapien.render.RenderMaterial(base_color=PLATFORM_RGBA, roughness=0.9)
        builder.add_box_visual(half_size=PLATFORM_HALF_SIZE_M, material=render_material)
        self.platform = builder.build_static(name="target_platform")
        self.platform.set_pose(sapien.Pose([*self.target_xy, 0.0]))

        self.bucket = self._load_bucket(urdf, material)
        self.bucket_link = self.bucket.root
        self.handle_joint = next(j for j in self.bucket.active_joints if j.name == "handle_joint")
        self.handle_link = self.handle_joint.child_link

        builder = self.scene.create_actor_builder()
        builder.add_sphere_collision(radius=BALL_RADIUS_M, material=material, density=BALL_DENSITY_KG_M3)
        builder.add_sphere_visual(radius=BALL_RADIUS_M, material=sapien.render.RenderMaterial(base_color=BALL_RGBA))
        self.ball = builder.build(name="ball")
        self.ball_body = self.ball.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
        self.ball_body.angular_damping = BALL_ANGULAR_DAMPING

        # The bucket body's bounding box in its own frame (ManiSkill2's "ball in bucket" region), and the
        # radius of the bucket's footprint (handle lying down), both read with the bucket at the origin.
        self.bucket.set_root_pose(sapien.Pose())
        self.bucket.set_qpos(np.array([self.handle_joint.limit[0][0]], dtype=np.float32))
        self.bucket_aabb_B = self.bucket_link.compute_global_aabb_tight()
        boxes = [link.compute_global_aabb_tight() for link in self.bucket.links]
        self.footprint_radius_m = float(np.abs(np.concatenate([b[:, :2] for b in boxes])).max())

    def _load_bucket(self, urdf: Path, material) -> sapien.physx.PhysxArticulation:
        loader = self.scene.create_urdf_loader()
        loader.fix_root_link = False  # a free body: the robot lifts it
        bucket = loader.load(str(check_urdf(urdf)))
        if bucket is None:
            raise URDFError(f"SAPIEN could not build an articulation from {urdf}")
        bucket.set_name(self.model_id)
        for link in bucket.links:
            for shape in link.collision_shapes:
                add_ignore_bit(shape, OBJECT_SELF_BIT)  # handle vs body: the joint limit holds the handle
                shape.set_physical_material(material)
        return bucket

    def _initialize_episode(self, rng, options):
        self.handle_joint.set_friction(float(rng.uniform(*HANDLE_FRICTION_RANGE)))
        self.handle_joint.set_drive_properties(0.0, float(rng.uniform(*HANDLE_DAMPING_RANGE)))

        # Bucket: upright on the floor around the platform, handle lying down.
        dist = rng.uniform(*BUCKET_DISTANCE_RANGE_M)
        theta = rng.uniform(-np.pi, np.pi)
        bucket_xy = self.target_xy + dist * np.array([np.cos(theta), np.sin(theta)])
        bucket_yaw = rng.uniform(-np.pi, np.pi)
        X_WB = sapien.Pose([bucket_xy[0], bucket_xy[1], 0.0], [np.cos(bucket_yaw / 2), 0.0, 0.0, np.sin(bucket_yaw / 2)])
        self.bucket.set_root_pose(X_WB)
        self.bucket.set_root_linear_velocity(np.zeros(3))
        self.bucket.set_root_angular_velocity(np.zeros(3))
        self.bucket.set_qpos(np.array([self.handle_joint.limit[0][0]], dtype=np.float32))
        self.bucket.set_qvel(np.zeros(1, dtype=np.float32))

        # Ball: on the axis, just above the bucket's floor.
        p_B_ball = np.array([0.0, 0.0, self.bucket_spec.bottom_thickness_m + BALL_RADIUS_M + BALL_DROP_GAP_M])
        self.ball.set_pose(sapien.Pose(X_WB.to_transformation_matrix()[:3, :3] @ p_B_ball + X_WB.p))

        # Robot: on the far side of the bucket from the platform, facing the bucket. ManiSkill2's 0.6 m
        # minimum clears every bundled bucket (footprint <= 0.26 m + body 0.2 m); a larger footprint (a
        # bucket from elsewhere) pushes the robot back by what is missing.
        min_dist = ROBOT_BODY_RADIUS_M + self.footprint_radius_m + ROBOT_CLEARANCE_M
        dist = rng.uniform(*ROBOT_DISTANCE_RANGE_M) + max(0.0, min_dist - ROBOT_DISTANCE_RANGE_M[0])
        bearing = theta + rng.uniform(-ROBOT_BEARING_NOISE_RAD, ROBOT_BEARING_NOISE_RAD)
        robot_xy = bucket_xy + dist * np.array([np.cos(bearing), np.sin(bearing)])
        yaw = bearing - np.pi + rng.uniform(-ROBOT_YAW_NOISE_RAD, ROBOT_YAW_NOISE_RAD)
        # Wrapped into [-pi, pi): PhysX wraps an unlimited revolute joint there, and a yaw set outside that
        # range makes the base spin on the first step.
        yaw = (yaw + np.pi) % (2 * np.pi) - np.pi
        qpos = self.robot.rest_qpos((robot_xy[0], robot_xy[1], yaw), START_TORSO_HEIGHT_M)
        self.robot.reset(qpos)

        # Let the ball drop and everything settle, holding the robot; then put the robot back exactly.
        self.controller.reset()
        for _ in range(round(SETTLE_TIME_S * self.sim_freq)):
            self.scene.step()
        self.robot.reset(qpos)
        self._speed_meter = LinkSpeedMeter(self.bucket_link, self.control_freq)
        self._speed_meter.start()

    # ------------------------------------------------------------------------------------------------
    def _after_step(self):
        self._speed_meter.update()

    def handle_angle(self) -> float:
        """Handle joint angle [rad]: 0 upright, positive tipped toward the bucket's +x."""
        return float(self.bucket.get_qpos()[0])

    def evaluate(self) -> dict[str, Any]:
        X_WB = self.bucket_link.entity_pose
        p_B_ball = X_WB.inv() * self.ball.pose
        lo, hi = self.bucket_aabb_B
        in_bucket = bool(np.all((p_B_ball.p > lo) & (p_B_ball.p < hi)))
        axis_W = X_WB.to_transformation_matrix()[:3, 2]
        tilt = math.acos(float(np.clip(axis_W[2], -1.0, 1.0)))
        dist = float(np.linalg.norm(X_WB.p[:2] - self.target_xy))
        lin, ang = self._speed_meter.speeds()
        flags = {
            "balls_in_bucket": in_bucket,
            "bucket_above_platform": dist < PLATFORM_RADIUS_M,
            "bucket_standing": tilt < STANDING_TILT_RAD,
            "bucket_static": lin < STATIC_LIN_MPS and ang < STATIC_ANG_RADPS,
        }
        return {
            "success": all(flags.values()),
            **flags,
            "dist_bucket_to_target": dist,
            "bucket_tilt": tilt,
            "bucket_height_m": float(X_WB.p[2]),  # world z of the bucket's origin (underside centre)
            "bucket_speed_mps": lin,
            "bucket_angular_speed_radps": ang,
            "handle_angle_rad": self.handle_angle(),
            "model_id": self.model_id,
        }

    # ------------------------------------------------------------------------------------------------
    def _labelled_shape_ids(self):
        bucket = [s.per_scene_id for link in self.bucket.links for s in _render_shapes(link)]
        handle = [s.per_scene_id for s in _render_shapes(self.handle_link) if "handle" in s.name]
        return {"target_handle": np.array(handle, dtype=np.int64), "target_link": np.array(bucket, dtype=np.int64)}

    def _marker_shapes(self):
        shape = quads_shape(*_rim_band_quads(self.bucket_spec, MARKER_BAND_M, MARKER_GAP_M))
        shape.name = "rim_marker"
        attach_visual(self.bucket_link.entity, shape)
        return [shape]

    def _target_bounds_W(self):
        # The bucket with its handle, not the ball (the marker's shell left out as well).
        return visual_bounds_W([link.entity for link in self.bucket.links], exclude_ids=self._marker_ids)

    def bucket_geometry(self) -> dict[str, Any]:
        """Ground truth rim and ball in the world (for benchmarks and tests only, never inside a solver).

        The rim is the flat top of the wall, ``rim_thickness_m`` thick horizontally, ``rim_outer_radius_m``
        from the bucket's axis; ``rim_center_W`` is where the axis meets the rim plane.
        """
        X_WB = self.bucket_link.entity_pose.to_transformation_matrix()
        rim_center_W = X_WB[:3, :3] @ np.array([0.0, 0.0, self.bucket_spec.height_m]) + X_WB[:3, 3]
        return {
            "rim_height_W_m": float(rim_center_W[2]),
            "rim_thickness_m": self.bucket_spec.wall_thickness_m,
            "rim_is_thin": self.bucket_spec.rim_is_thin,
            "rim_outer_radius_m": self.bucket_spec.top_radius_m,
            "rim_inner_radius_m": self.bucket_spec.top_radius_m - self.bucket_spec.wall_thickness_m,
            "rim_center_W": rim_center_W,
            "axis_W": X_WB[:3, 2].copy(),
            "ball_W": np.asarray(self.ball.pose.p, dtype=np.float64),
        }

    def _task_state(self):
        pose = self.bucket_link.entity_pose
        return np.concatenate(
            [pose.p, pose.q, self.bucket_link.linear_velocity, self.bucket_link.angular_velocity,
             [self.handle_angle()], self.ball.pose.p, self.target_xy]
        ).astype(np.float32)

    def _render_camera_pose(self):
        # Nearly top-down, as ManiSkill2's: the platform at the origin, the bucket up to 1.2 m from it and the
        # robot up to 0.8 m beyond, on any side, all stay in view.
        return look_at(eye=[0.0, -1.0, 5.5], target=[0.0, 0.0, 0.0])
