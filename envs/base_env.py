"""The Gymnasium environment core shared by the mobile-manipulation tasks.

A task subclasses :class:`MobileManipulationEnv` and fills four hooks, as in ManiSkill:
``_load_objects`` (build the task's objects in a fresh scene), ``_initialize_episode`` (sample the episode
from the generator), ``evaluate`` (success and its conditions, from simulator ground truth) and
``_task_state`` (privileged state for ``obs_mode="state"``). Segmentation labels for the point cloud come
from ``_labelled_shape_ids``; ``obs["extra"]`` from ``_extra_obs``. For the operator's prompt and the colour
marker a task names its target: ``_target_bounds_W`` (``envs/target_prompts.py``) and ``_marker_shapes``
(``envs/markers.py``).

Every reset builds a fresh SAPIEN scene: PhysX keeps contact caches between steps, so reusing a scene
would make an episode depend on the ones before it; a fresh scene makes the same seed give the same
episode bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import sapien
from gymnasium import spaces

from .cameras import (CameraConfig, MountedCameras, color_uint8, depth_image, extrinsic_cv, fuse_point_cloud,
                      hand_camera as hand_camera_config, mobile_base_cameras, sensor_origins)
from .collision_groups import ROBOT_BIT, add_ignore_bit
from .controllers import CONTROL_MODES, ControlConfig, make_controller
from .mobile_panda import MobilePanda
from .markers import check_marker_rgb, mark_scene
from .render_setup import new_scene, pointcloud_shader_dir
from .robot_description import mobile_panda
from .sensor_model import SensorPerturbation, SensorPerturber, as_perturbation
from .target_prompts import DEFAULT_PROMPT_NOISE_M, check_prompt_noise, noisy_prompt, prompt_rng

OBS_MODES = ("pointcloud", "rgbd", "state")
SPLITS = ("train", "test")  # the bundled objects' splits (ManiSkill2 (arXiv 2302.04659) Appendix C.6)
POINTCLOUD_FRAMES = ("world", "base")
# Point-cloud masks, in ManiSkill1's order: target handle, target link, robot.
MASK_NAMES = ("target_handle", "target_link", "robot")


def _pose7(pose: sapien.Pose) -> np.ndarray:
    """Pose as (x, y, z, qw, qx, qy, qz)."""
    return np.concatenate([pose.p, pose.q]).astype(np.float32)


class MobileManipulationEnv(gym.Env):
    """A mobile Panda in a SAPIEN scene, observed by three robot-mounted cameras."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}
    robot_arms = "single"
    task_state_dim = 0
    mask_names: tuple[str, ...] = MASK_NAMES  # the point-cloud masks of this task (at most 8)

    def __init__(
        self,
        obs_mode: str = "pointcloud",
        control_mode: str = "normalized_joint_vel",
        sim_freq: int = 500,
        control_freq: int = 100,
        camera_width: int = 400,
        camera_height: int = 160,
        cameras: tuple[CameraConfig, ...] | None = None,
        hand_camera: bool = False,
        pointcloud_frame: str = "world",
        control_config: ControlConfig | None = None,
        render_mode: str | None = None,
        sensor_perturbation: SensorPerturbation | str | None = None,
        target_marker_rgb: tuple[float, float, float] | None = None,
        prompt_noise_m: float = DEFAULT_PROMPT_NOISE_M,
    ):
        """``cameras``: the robot's cameras (default the three of ManiSkill1's mobile base, ``camera_width`` x
        ``camera_height``); ``hand_camera``: add ManiSkill2's hand camera on each arm's hand (128x128,
        ``envs/cameras.py``); ``target_marker_rgb``: paint a marker of this colour on the target
        (``envs/markers.py``; None: no marker, the scene unchanged); ``prompt_noise_m``: std (m) of the noise
        on the operator's prompt, ``obs["extra"]["target_prompt_point"]`` and ``["target_prompt_box"]``
        (``envs/target_prompts.py``)."""
        if obs_mode not in OBS_MODES:
            raise ValueError(f"unknown obs_mode {obs_mode!r}; choose one of {', '.join(OBS_MODES)}")
        if control_mode not in CONTROL_MODES:
            raise ValueError(f"unknown control mode {control_mode!r}; choose one of {', '.join(CONTROL_MODES)}")
        if pointcloud_frame not in POINTCLOUD_FRAMES:
            raise ValueError(f"unknown pointcloud_frame {pointcloud_frame!r}; choose one of {POINTCLOUD_FRAMES}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"unknown render_mode {render_mode!r}; choose None or 'rgb_array'")
        if sim_freq <= 0 or control_freq <= 0 or sim_freq % control_freq != 0:
            raise ValueError(
                f"sim_freq ({sim_freq} Hz) must be a positive multiple of control_freq ({control_freq} Hz)"
            )
        self.obs_mode, self.control_mode = obs_mode, control_mode
        self.sim_freq, self.control_freq = sim_freq, control_freq
        self.substeps = sim_freq // control_freq
        self.pointcloud_frame = pointcloud_frame
        self.render_mode = render_mode
        self.target_marker_rgb = check_marker_rgb(target_marker_rgb)
        self.prompt_noise_m = check_prompt_noise(prompt_noise_m)
        self._prompt_rng: np.random.Generator | None = None
        self._target_prompt: tuple[np.ndarray, np.ndarray] | None = None
        self._marker_ids: set[int] = set()
        self.camera_configs = cameras if cameras is not None else mobile_base_cameras(camera_width, camera_height)
        self.control_config = control_config or ControlConfig()
        self.description = self._robot_description()
        if hand_camera:
            self.camera_configs = tuple(self.camera_configs) + tuple(
                hand_camera_config(self.description.hand_link_name(side), name=f"{side}_hand_camera")
                for side in self.description.sides)
        # Sensor and odometry errors on what the env reports (envs/sensor_model.py); never on the physics.
        self.sensor_perturbation = as_perturbation(sensor_perturbation)
        self._sensor = SensorPerturber(self.sensor_perturbation) if self.sensor_perturbation.active else None

        self.scene: sapien.Scene | None = None
        self.robot: MobilePanda | None = None
        self._render_camera = None
        self.elapsed_steps = 0
        self._episode_started = False
        self._build_scene()  # the robot and cameras alone, so that the spaces can be read off them
        self.action_space = spaces.Box(self.controller.low, self.controller.high, dtype=np.float32)
        self.observation_space = self._observation_space()
        extra_space = {**self._extra_obs_space(), **self._prompt_obs_space()}
        if extra_space:
            self.observation_space.spaces["extra"] = spaces.Dict(extra_space)

    # ------------------------------------------------------------------------------------------------
    # Task hooks
    # ------------------------------------------------------------------------------------------------
    def _load_objects(self, rng: np.random.Generator, options: dict) -> None:
        """Build the task's objects into the fresh ``self.scene`` (on every reset, with reset's options)."""

    def _initialize_episode(self, rng: np.random.Generator, options: dict) -> None:
        """Sample the episode: object state, robot configuration, physical parameters."""

    def evaluate(self) -> dict[str, Any]:
        """Success and its conditions, from simulator ground truth (never used inside a solver)."""
        return {"success": False}

    def _task_state(self) -> np.ndarray:
        return np.zeros(0, dtype=np.float32)

    def _labelled_shape_ids(self) -> dict[str, np.ndarray]:
        """Render-shape ids of each point-cloud mask other than the robot."""
        return {}

    def _after_step(self) -> None:
        """Called after the physics of each control step, before ``evaluate``."""

    def _extra_obs(self) -> dict[str, np.ndarray]:
        """Task-specific observations every solver may use (not ground truth of objects), in
        ``obs["extra"]`` in every observation mode (e.g. the goal position)."""
        return {}

    def _extra_obs_space(self) -> dict[str, spaces.Space]:
        return {}

    def _marker_shapes(self) -> list:
        """The render shapes that carry the target's colour marker (a task may attach new visual-only shapes
        here); called after ``_load_objects`` when the env has ``target_marker_rgb``."""
        return []

    def _target_bounds_W(self) -> np.ndarray | None:
        """[2, 3] world bounding box (m) of the target's visual geometry, read once at reset for the operator's
        prompt; None: the task has no target to prompt."""
        return None

    # ------------------------------------------------------------------------------------------------
    # Scene
    # ------------------------------------------------------------------------------------------------
    def _robot_description(self):
        """The robot's description files and joint names (generated once, cached)."""
        return mobile_panda(self.robot_arms)

    def _lit_scene(self) -> sapien.Scene:
        """A new scene at the env's physics rate, with the lights every task uses."""
        scene = new_scene()
        scene.set_timestep(1.0 / self.sim_freq)
        scene.set_ambient_light([0.35, 0.35, 0.35])
        scene.add_directional_light([1.0, 0.5, -1.0], [0.9, 0.9, 0.9])
        scene.add_directional_light([-1.0, -0.5, -0.6], [0.3, 0.3, 0.3])
        return scene

    def _build_scene(self) -> None:
        scene = self._lit_scene()
        floor_material = sapien.render.RenderMaterial(base_color=[0.16, 0.18, 0.22, 1.0], roughness=0.9)
        ground = scene.add_ground(0.0, render_half_size=[25.0, 25.0], render_material=floor_material)
        ground_body = ground.find_component_by_type(sapien.physx.PhysxRigidStaticComponent)
        for shape in ground_body.collision_shapes:
            add_ignore_bit(shape, ROBOT_BIT)
        self.scene = scene
        self.robot = MobilePanda(scene, self.description)
        self.controller = make_controller(self.control_mode, self.robot, self.control_config)
        self.controller.configure()
        self.cameras = MountedCameras(self.camera_configs, self.robot.camera_mount.entity, self.robot.links)
        self._render_camera = None

    def _shape_label_lut(self) -> np.ndarray:
        """Lookup table: render-shape id -> bit mask over ``self.mask_names``."""
        labelled = dict(self._labelled_shape_ids(), robot=self.robot.render_shape_ids())
        max_id = max([int(ids.max()) for ids in labelled.values() if len(ids)] + [0])
        lut = np.zeros(max_id + 2, dtype=np.uint8)
        for bit, name in enumerate(self.mask_names):
            ids = labelled.get(name, np.zeros(0, dtype=np.int64))
            lut[ids] |= np.uint8(1 << bit)
        return lut

    # ------------------------------------------------------------------------------------------------
    # Gymnasium API
    # ------------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._episode_started = False  # until the new episode is fully built
        options = dict(options or {})
        self._build_scene()
        self._load_objects(self.np_random, options)
        self._marker_ids = set()
        if self.target_marker_rgb is not None:
            marker_shapes = self._marker_shapes()
            self._marker_ids = {shape.per_scene_id for shape in marker_shapes}
            mark_scene(self.scene, marker_shapes, self.target_marker_rgb)
        self._initialize_episode(self.np_random, options)
        # The operator's prompt: from a generator of its own, so that np_random's draws stay the same.
        if seed is not None or self._prompt_rng is None:
            self._prompt_rng = prompt_rng(seed)
        bounds_W = self._target_bounds_W()
        self._target_prompt = (None if bounds_W is None
                               else noisy_prompt(bounds_W, self.prompt_noise_m, self._prompt_rng))
        self.controller.reset()
        self._label_lut = self._shape_label_lut()
        if self._sensor is not None:  # its own generator: the episode's physics and sampling stay the same
            self._sensor.reset(seed, len(self.camera_configs), self.robot)
        self.elapsed_steps = 0
        self._episode_started = True
        info = self.evaluate()
        return self._get_obs(), info

    def step(self, action):
        if not self._episode_started:
            raise RuntimeError("call reset() before step()")
        action = self._check_action(action)
        self.controller.apply(action)
        for _ in range(self.substeps):
            self.scene.step()
        self.elapsed_steps += 1
        self._after_step()
        info = self.evaluate()
        info["elapsed_steps"] = self.elapsed_steps
        success = bool(info["success"])
        # Sparse reward, as in the ManiSkill1 challenge; the episode ends on success (ManiSkill's convention).
        return self._get_obs(), float(success), success, False, info

    def _check_action(self, action) -> np.ndarray:
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"action must be a numeric array, got {type(action).__name__}: {e}") from None
        if a.shape != self.action_space.shape:
            raise ValueError(
                f"action has shape {a.shape}, expected {self.action_space.shape} for control mode "
                f"{self.control_mode!r} ({', '.join(self.controller.labels)})"
            )
        finite = np.isfinite(a)
        if not finite.all():
            names = [f"{self.controller.labels[i]}={a[i]}" for i in np.flatnonzero(~finite)]
            raise ValueError(f"action contains NaN or inf: {', '.join(names)}")
        # Out-of-range values are clipped, as in ManiSkill.
        return np.minimum(np.maximum(a, self.controller.low), self.controller.high)

    # ------------------------------------------------------------------------------------------------
    # Observations
    # ------------------------------------------------------------------------------------------------
    def _proprioception(self) -> dict[str, np.ndarray]:
        agent = {
            "qpos": self.robot.qpos,
            "qvel": self.robot.qvel,
            "base_pose": _pose7(self.robot.X_WB),
            "tcp_pose": np.concatenate([_pose7(self.robot.X_WT(s)) for s in self.robot.sides]),
        }
        if self._sensor is not None:  # joint noise and odometry drift, as reported
            agent = self._sensor.perturb_proprioception(agent, self.elapsed_steps)
        return agent

    def _get_obs(self) -> dict[str, Any]:
        obs: dict[str, Any] = {"agent": self._proprioception()}
        extra = {**self._extra_obs(), **self._prompt_obs()}
        if extra:
            obs["extra"] = extra
        if self.obs_mode == "state":
            obs["state"] = np.concatenate([*obs["agent"].values(), self._task_state()]).astype(np.float32)
            return obs
        self.scene.update_render()
        images = self.cameras.capture()
        X_WB = self.robot.X_WB.to_transformation_matrix()
        if self._sensor is not None:  # depth noise, edge dropout, camera pose errors, odometry drift
            images = self._sensor.perturb_images(images, self.elapsed_steps, X_WB)
            X_WB = self._sensor.drift_transform(self.elapsed_steps, X_WB) @ X_WB  # the reported base pose
        if self.obs_mode == "pointcloud":
            X_FW = None
            if self.pointcloud_frame == "base":
                X_FW = np.linalg.inv(X_WB)
            xyz, rgb, shape_id, valid = fuse_point_cloud(images, X_FW)
            labels = self._label_lut[np.clip(shape_id, 0, len(self._label_lut) - 1)]
            pc = {"xyz": xyz, "rgb": rgb, "valid": valid, **sensor_origins(images, X_FW)}
            for bit, name in enumerate(self.mask_names):
                pc[name] = (labels & (1 << bit)) != 0
            pc["frame"] = self.pointcloud_frame
            obs["pointcloud"] = pc
        else:
            cams = {}
            for cfg, im in zip(self.camera_configs, images):
                labels = self._label_lut[np.clip(im["shape_id"], 0, len(self._label_lut) - 1)]
                cams[cfg.name] = {
                    "rgb": im["rgb"],
                    "depth": depth_image(im),
                    "intrinsic": im["K"],
                    "extrinsic_cv": extrinsic_cv(im),
                    **{name: (labels & (1 << bit)) != 0 for bit, name in enumerate(self.mask_names)},
                }
            obs["cameras"] = cams
        return obs

    def _prompt_obs(self) -> dict[str, np.ndarray]:
        if self._target_prompt is None:
            return {}
        point, box = self._target_prompt
        return {"target_prompt_point": point.copy(), "target_prompt_box": box.copy()}

    def _prompt_obs_space(self) -> dict[str, spaces.Space]:
        if type(self)._target_bounds_W is MobileManipulationEnv._target_bounds_W:
            return {}  # a task without a target to prompt
        return {"target_prompt_point": spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float32),
                "target_prompt_box": spaces.Box(-np.inf, np.inf, shape=(2, 3), dtype=np.float32)}

    def _observation_space(self) -> spaces.Dict:
        dof, arms = self.robot.dof, len(self.robot.sides)
        f32 = lambda *shape: spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float32)
        agent = spaces.Dict(
            {"qpos": f32(dof), "qvel": f32(dof), "base_pose": f32(7), "tcp_pose": f32(7 * arms)}
        )
        if self.obs_mode == "state":
            state_dim = 2 * dof + 7 + 7 * arms + self.task_state_dim
            return spaces.Dict({"agent": agent, "state": f32(state_dim)})
        if self.obs_mode == "pointcloud":
            n = self.cameras.num_points
            pc = {
                "xyz": f32(n, 3),
                "rgb": spaces.Box(0, 255, shape=(n, 3), dtype=np.uint8),
                "valid": spaces.MultiBinary(n),
                # Where each camera was (as the robot believes, in the cloud's frame) and which one saw each point.
                "sensor_origins": f32(len(self.camera_configs), 3),
                "sensor_index": spaces.Box(0, 255, shape=(n,), dtype=np.uint8),  # < len(camera_configs)
                **{name: spaces.MultiBinary(n) for name in self.mask_names},
                "frame": spaces.Text(max_length=16),
            }
            return spaces.Dict({"agent": agent, "pointcloud": spaces.Dict(pc)})
        cams = {}
        for cfg in self.camera_configs:
            h, w = cfg.height, cfg.width
            cams[cfg.name] = spaces.Dict(
                {
                    "rgb": spaces.Box(0, 255, shape=(h, w, 3), dtype=np.uint8),
                    "depth": spaces.Box(0, np.inf, shape=(h, w), dtype=np.float32),
                    "intrinsic": f32(3, 3),
                    "extrinsic_cv": f32(4, 4),
                    **{name: spaces.MultiBinary((h, w)) for name in self.mask_names},
                }
            )
        return spaces.Dict({"agent": agent, "cameras": spaces.Dict(cams)})

    # ------------------------------------------------------------------------------------------------
    # Rendering for people (videos, the demo image)
    # ------------------------------------------------------------------------------------------------
    def render(self):
        if self.render_mode != "rgb_array":
            return None
        if self._render_camera is None:
            cam = sapien.render.RenderCameraComponent(640, 480, pointcloud_shader_dir())
            cam.set_fovy(np.deg2rad(50), compute_x=True)
            entity = sapien.Entity()
            entity.add_component(cam)
            entity.set_pose(self._render_camera_pose())
            self.scene.add_entity(entity)
            self._render_camera = cam
        self.scene.update_render()
        self._render_camera.take_picture()
        return color_uint8(self._render_camera.get_picture("Color"))

    def _render_camera_pose(self) -> sapien.Pose:
        return look_at(eye=[-3.0, -1.6, 2.2], target=[-0.6, 0.0, 0.5])

    def close(self):
        self.scene = None
        self.robot = None
        self._episode_started = False


def bundled_models(kind: str, split: str, available_of, model_ids) -> dict:
    """The bundled object ids an env may use: those of ``split`` (from ``available_of(split)``), restricted
    to ``model_ids`` when given, each mapped to None (its URDF is generated when first used). ``kind`` names
    the objects in errors ("drawer cabinet", "chair")."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    available = available_of(split)
    ids = list(model_ids) if model_ids is not None else available
    unknown = [m for m in ids if m not in available]
    if unknown or not ids:
        raise ValueError(f"unknown {kind} ids {unknown} for split {split!r}; choose from {available}")
    return {m: None for m in ids}


def pick_model(models: dict, rng: np.random.Generator, options: dict, urdf_of) -> tuple[str, object]:
    """The episode's object: ``options["model_id"]`` or a random one of ``models``; its URDF path, generated
    by ``urdf_of(model_id)`` on first use and kept in ``models``."""
    model_id = options.get("model_id")
    if model_id is None:
        model_id = sorted(models)[int(rng.integers(len(models)))]
    elif model_id not in models:
        raise ValueError(f"unknown model_id {model_id!r}; this env has {sorted(models)}")
    if models[model_id] is None:
        models[model_id] = urdf_of(model_id)
    return model_id, models[model_id]


class LinkSpeedMeter:
    """Linear [m/s] and angular [rad/s] speed of a link over the last control step, from finite differences
    of its pose (as ManiSkill: robust to solver jitter), and its instantaneous velocity before the first
    step. ``start()`` after the episode is set up, ``update()`` after each control step."""

    def __init__(self, link, control_freq: float):
        self.link, self.control_freq = link, control_freq
        self.steps = 0

    def _read(self) -> tuple[np.ndarray, np.ndarray]:
        pose = self.link.entity_pose
        return pose.p, pose.q

    def start(self) -> None:
        self._now = self._before = self._read()
        self.steps = 0

    def update(self) -> None:
        self._before, self._now = self._now, self._read()
        self.steps += 1

    def speeds(self) -> tuple[float, float]:
        if self.steps == 0:
            v, w = self.link.linear_velocity, self.link.angular_velocity
            return math.sqrt(v @ v), math.sqrt(w @ w)
        (p0, q0), (p1, q1) = self._before, self._now
        dp = p1 - p0
        # The rotation between two unit quaternions q0, q1 has angle 2 acos(|<q0, q1>|).
        angle = 2.0 * math.acos(min(1.0, abs(float(q0 @ q1))))
        return math.sqrt(dp @ dp) * self.control_freq, angle * self.control_freq


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> sapien.Pose:
    """Pose of a SAPIEN camera (x forward, y left, z up) at ``eye`` looking at ``target``."""
    eye, target, up = (np.asarray(v, dtype=np.float64) for v in (eye, target, up))
    forward = (target - eye) / np.linalg.norm(target - eye)
    left = np.cross(up, forward)
    left /= np.linalg.norm(left)
    R = np.stack([forward, left, np.cross(forward, left)], axis=1)
    X = np.eye(4)
    X[:3, :3], X[:3, 3] = R, eye
    return sapien.Pose(X)
