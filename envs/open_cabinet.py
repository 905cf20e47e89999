"""OpenCabinetDrawer and OpenCabinetDoor (ManiSkill1 challenge; ManiSkill2 (arXiv 2302.04659) Appendix C.6).

A single-arm mobile Panda must open a target drawer (or door) of a cabinet to at least 90% of its range
and leave it static (slower than 0.1 m/s and 1 rad/s). The target is named only through the point-cloud
masks. Per episode: a cabinet of the split, a target part with a handle, joint friction U(0.05, 0.15) and
damping U(5, 20) on all the cabinet's joints, the robot 1.6-1.8 m from the cabinet centre on its front
(-x) side within +-0.1 pi, facing it within +-0.05 pi (ManiSkill1's public code).

Reset option ``initial_open_fraction`` (in [0, 1]): the target part starts opened to that fraction of its
range instead of closed (for the close skill; the episode's random draws stay the same).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import sapien

from .articulated_object import MovablePart, check_urdf, load_articulated_object, select_target
from .base_env import LinkSpeedMeter, MobileManipulationEnv, bundled_models, look_at, pick_model
from .cabinet_generator import cabinet_ids, cabinet_urdf
from .object_models import handle_link_names, model_urdfs
from .target_prompts import shape_points_S, visual_bounds_W

OPEN_FRACTION = 0.9  # success: opened to at least 90% of the range
STATIC_LIN_MPS, STATIC_ANG_RADPS = 0.1, 1.0
JOINT_FRICTION_RANGE = (0.05, 0.15)
JOINT_DAMPING_RANGE = (5.0, 20.0)
ROBOT_DISTANCE_RANGE_M = (1.6, 1.8)
ROBOT_BEARING_RANGE_RAD = (0.9 * np.pi, 1.1 * np.pi)
ROBOT_YAW_NOISE_RAD = 0.05 * np.pi


def handle_center_L(part: MovablePart) -> np.ndarray:
    """Centre of the handle's bounding box in the frame of its link (its handle links included)."""
    X_WL = part.link.entity_pose.to_transformation_matrix()
    points = []
    for entity in part.entities:
        body = entity.find_component_by_type(sapien.render.RenderBodyComponent)
        X_LE = np.linalg.solve(X_WL, entity.pose.to_transformation_matrix())
        for shape in [] if body is None else body.render_shapes:
            if shape.per_scene_id not in part.handle_shape_ids:
                continue
            X = X_LE @ shape.local_pose.to_transformation_matrix()
            points.append(shape_points_S(shape) @ X[:3, :3].T + X[:3, 3])
    points = np.concatenate(points)
    return (points.min(0) + points.max(0)) / 2


class OpenCabinetEnv(MobileManipulationEnv):
    """Open the target part of a cabinet; ``part_kind`` is "drawer" or "door"."""

    part_kind = "drawer"
    # open fraction, joint position, joint velocity, link pose (7), handle centre (3), joint axis (3) and
    # joint origin (3), all in the world frame
    task_state_dim = 19

    def __init__(
        self,
        split: str = "train",
        model_ids: list[str] | None = None,
        urdf: str | Path | None = None,
        target_link: str | None = None,
        **kwargs,
    ):
        """``split`` picks bundled cabinets; ``model_ids`` restricts them; ``urdf`` replaces them with models in
        PartNet-Mobility's layout: a ``mobility.urdf``, a model folder or a folder of model folders
        (``object_models.model_urdfs``); their ``target_link`` may be named (here for every episode, or per
        episode in the reset options), else a random one of the parts of this task's kind that have a handle
        is chosen per episode."""
        if urdf is not None:
            self.models = model_urdfs(urdf)
            for path in self.models.values():  # a broken file is named now, not at the first reset
                check_urdf(path)
        else:
            self.models = bundled_models(f"{self.part_kind} cabinet", split,
                                         lambda s: cabinet_ids(self.part_kind, s), model_ids)
        self.split = split if urdf is None else "custom"
        self.target_link_name = target_link
        super().__init__(**kwargs)

    # ------------------------------------------------------------------------------------------------
    def _load_objects(self, rng, options):
        self.model_id, urdf = pick_model(self.models, rng, options, cabinet_urdf)
        self.cabinet = load_articulated_object(self.scene, urdf)
        self.cabinet.set_name(self.model_id)
        handle_links = handle_link_names(urdf)

        # Closed, standing on the floor, centred on the origin with its front toward -x.
        lower = np.ascontiguousarray(self.cabinet.get_qlimits()[:, 0], dtype=np.float32)
        self.cabinet.set_qpos(np.where(np.isfinite(lower), lower, 0.0).astype(np.float32))
        lo, hi = self._aabb()
        self.cabinet.set_root_pose(sapien.Pose([-(lo[0] + hi[0]) / 2, -(lo[1] + hi[1]) / 2, -lo[2]]))
        self.target = select_target(self.cabinet, self.part_kind, options.get("target_link", self.target_link_name), rng,
                                    handle_links, source=urdf)
        self.handle_center_L = handle_center_L(self.target)

    def _aabb(self):
        boxes = [link.compute_global_aabb_tight() for link in self.cabinet.links if link.collision_shapes]
        return np.min([b[0] for b in boxes], axis=0), np.max([b[1] for b in boxes], axis=0)

    def _initialize_episode(self, rng, options):
        for joint in self.cabinet.active_joints:
            joint.set_friction(float(rng.uniform(*JOINT_FRICTION_RANGE)))
            joint.set_drive_properties(0.0, float(rng.uniform(*JOINT_DAMPING_RANGE)))
        dist = rng.uniform(*ROBOT_DISTANCE_RANGE_M)
        bearing = rng.uniform(*ROBOT_BEARING_RANGE_RAD)
        xy = dist * np.array([np.cos(bearing), np.sin(bearing)])
        yaw = bearing - np.pi + rng.uniform(-ROBOT_YAW_NOISE_RAD, ROBOT_YAW_NOISE_RAD)
        self.robot.reset(self.robot.rest_qpos((xy[0], xy[1], yaw)))
        fraction = options.get("initial_open_fraction")
        if fraction is not None:
            if not 0.0 <= float(fraction) <= 1.0:
                raise ValueError(f"initial_open_fraction must be in [0, 1], got {fraction}")
            lo, hi = self.target.q_range
            qpos = self.cabinet.get_qpos().copy()
            qpos[self.target.joint_index] = lo + float(fraction) * (hi - lo)
            self.cabinet.set_qpos(qpos.astype(np.float32))
        self._speed_meter = LinkSpeedMeter(self.target.link, self.control_freq)
        self._speed_meter.start()

    # ------------------------------------------------------------------------------------------------
    def _after_step(self):
        self._speed_meter.update()

    def open_fraction(self) -> float:
        q = float(self.cabinet.get_qpos()[self.target.joint_index])
        lo, hi = self.target.q_range
        return (q - lo) / (hi - lo)

    def evaluate(self) -> dict[str, Any]:
        fraction = self.open_fraction()
        lin, ang = self._speed_meter.speeds()
        open_enough = fraction >= OPEN_FRACTION
        static = lin <= STATIC_LIN_MPS and ang <= STATIC_ANG_RADPS
        return {
            "success": bool(open_enough and static),
            "open_enough": bool(open_enough),
            "static": bool(static),
            "open_fraction": fraction,
            "link_speed_mps": lin,
            "link_angular_speed_radps": ang,
            "model_id": self.model_id,
            "target_link": self.target.name,
        }

    # ------------------------------------------------------------------------------------------------
    def _labelled_shape_ids(self):
        return {"target_handle": self.target.handle_shape_ids, "target_link": self.target.link_shape_ids}

    def _marker_shapes(self):
        # The target part's handle visuals only: the other parts' handles keep their colours.
        handle_ids = set(self.target.handle_shape_ids.tolist())
        bodies = [e.find_component_by_type(sapien.render.RenderBodyComponent) for e in self.target.entities]
        return [shape for body in bodies if body is not None for shape in body.render_shapes
                if shape.per_scene_id in handle_ids]

    def _target_bounds_W(self):
        # The target link's visuals (a drawer's box reaches back into the cabinet; a door is its leaf).
        return visual_bounds_W(self.target.entities)

    def handle_center_W(self) -> np.ndarray:
        """Ground truth handle centre in the world (for success checks, evaluation and tests only)."""
        X_WL = self.target.link.entity_pose.to_transformation_matrix()
        return X_WL[:3, :3] @ self.handle_center_L + X_WL[:3, 3]

    def _task_state(self):
        i = self.target.joint_index
        q, qd = float(self.cabinet.get_qpos()[i]), float(self.cabinet.get_qvel()[i])
        lo, hi = self.target.q_range
        link_pose = self.target.link.entity_pose
        X_WL = link_pose.to_transformation_matrix()
        X_WJ = self.target.joint.get_global_pose().to_transformation_matrix()  # the joint axis is its x axis
        return np.concatenate(
            [[(q - lo) / (hi - lo), q, qd], link_pose.p, link_pose.q, X_WL[:3, :3] @ self.handle_center_L + X_WL[:3, 3],
             X_WJ[:3, 0], X_WJ[:3, 3]]
        ).astype(np.float32)

    def _render_camera_pose(self):
        return look_at(eye=[-2.9, -1.7, 2.1], target=[-0.7, 0.0, 0.5])


class OpenCabinetDrawerEnv(OpenCabinetEnv):
    part_kind = "drawer"


class OpenCabinetDoorEnv(OpenCabinetEnv):
    part_kind = "door"
