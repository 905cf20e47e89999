"""Robot-mounted cameras and the fused, segmented point cloud they produce.

Default rig (ManiSkill1's mobile Panda): three cameras on the mobile base at 1.5 m, pitched 45 degrees
down, 120 degrees apart in yaw, each 400x160 pixels with a 60 degree vertical field of view. Optionally a
camera on the hand (:func:`hand_camera`, ManiSkill2's): the arm camera with which Habitat 2.0's Fetch looks
into receptacles ("Habitat 2.0: Training Home Assistants to Rearrange their Habitat", arXiv 2106.14405).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sapien

from .render_setup import pointcloud_shader_dir

# OpenGL camera frame (x right, y up, z backward) -> OpenCV frame (x right, y down, z forward).
_R_GL_CV = np.diag([1.0, -1.0, -1.0])


@dataclass(frozen=True)
class CameraConfig:
    name: str
    p_MC: tuple[float, float, float]  # position in the mount link's frame [m]
    q_MC: tuple[float, float, float, float]  # orientation (w, x, y, z); SAPIEN camera axes: x forward, z up
    width: int
    height: int
    fovy_rad: float = np.pi / 3
    near_m: float = 0.1
    far_m: float = 10.0
    # The link the camera rides on (e.g. "panda_hand"); None: the env's default mount (the mobile base, or
    # the world for the tabletop tasks' fixed cameras).
    mount: str | None = None


def mobile_base_cameras(width: int = 400, height: int = 160, height_m: float = 1.5) -> tuple[CameraConfig, ...]:
    """The three ManiSkill1 cameras: pitched 45 degrees down, at yaw 0 and +-120 degrees."""
    quats = (
        (0.9238795, 0.0, 0.3826834, 0.0),
        (0.46193977, 0.33141357, 0.19134172, -0.80010315),
        (-0.46193977, 0.33141357, -0.19134172, -0.80010315),
    )
    return tuple(
        CameraConfig(f"base_camera_{i}", (0.0, 0.0, height_m), q, width, height) for i, q in enumerate(quats)
    )


# ManiSkill2's Panda hand camera: in the hand frame, looking along the approach axis (hand +z), 90 degrees of view.
HAND_CAMERA_P_M = (0.0464982, -0.0200011, 0.0360011)
HAND_CAMERA_Q = (0.0, 0.70710678, 0.0, 0.70710678)


def hand_camera(mount: str, width: int = 128, height: int = 128, name: str = "hand_camera") -> CameraConfig:
    """ManiSkill2's ``hand_camera`` on the hand link ``mount`` (``panda_hand``, or a mobile robot's
    ``right_panda_hand``): it sees what lies ahead of the fingers, from 1 cm on."""
    return CameraConfig(name, HAND_CAMERA_P_M, HAND_CAMERA_Q, width, height, np.pi / 2, 0.01, 10.0, mount=mount)


class CameraRig:
    """Cameras mounted on one entity; renders them and fuses their pixels into one point cloud."""

    def __init__(self, mount: sapien.Entity, configs: tuple[CameraConfig, ...]):
        if not configs:
            raise ValueError("a camera rig needs at least one camera")
        shader = pointcloud_shader_dir()
        self.configs = configs
        self.cameras: list[sapien.render.RenderCameraComponent] = []
        for cfg in configs:
            if cfg.width <= 0 or cfg.height <= 0:
                raise ValueError(f"camera {cfg.name}: width and height must be positive, got {cfg.width}x{cfg.height}")
            cam = sapien.render.RenderCameraComponent(cfg.width, cfg.height, shader)
            cam.set_fovy(cfg.fovy_rad, compute_x=True)
            cam.near, cam.far = cfg.near_m, cfg.far_m
            cam.local_pose = sapien.Pose(cfg.p_MC, cfg.q_MC)
            cam.name = cfg.name
            mount.add_component(cam)
            self.cameras.append(cam)
        self.num_points = sum(c.width * c.height for c in configs)

    def capture(self) -> list[dict[str, np.ndarray]]:
        """Render every camera (call ``scene.update_render()`` first). Per camera: camera-frame (OpenGL)
        positions [m], render-shape ids, rgb (uint8), the camera-to-world matrix and the intrinsics."""
        for cam in self.cameras:
            cam.take_picture()
        images = []
        for cam in self.cameras:
            pos_seg = cam.get_picture("PositionSegmentation")
            color = cam.get_picture("Color")
            images.append(
                dict(
                    p_C=pos_seg[..., :3].astype(np.float32) * np.float32(1e-3),  # the shader writes millimetres
                    shape_id=pos_seg[..., 3],
                    rgb=color_uint8(color),
                    X_WC_gl=np.asarray(cam.get_model_matrix(), dtype=np.float32),
                    K=np.asarray(cam.get_intrinsic_matrix(), dtype=np.float32),
                    near_m=np.float32(cam.near),
                    far_m=np.float32(cam.far),
                )
            )
        return images


class MountedCameras:
    """Cameras on several mounts (the base or the world, a hand), captured in the order of their configs."""

    def __init__(self, configs: tuple[CameraConfig, ...], default_mount: sapien.Entity, links: dict):
        """``default_mount``: the entity of configs whose ``mount`` is None; ``links``: link name -> a link
        with an ``entity`` (the robot's), for the others. ValueError naming an unknown mount."""
        if not configs:
            raise ValueError("a camera rig needs at least one camera")
        self.configs = configs
        self.rigs = []
        for cfg in configs:
            if cfg.mount is None:
                mount = default_mount
            elif cfg.mount in links:
                mount = links[cfg.mount].entity
            else:
                raise ValueError(f"camera {cfg.name}: unknown mount {cfg.mount!r}; use None (the default mount) or "
                                 f"a robot link: {sorted(links)}")
            self.rigs.append(CameraRig(mount, (cfg,)))
        self.num_points = sum(rig.num_points for rig in self.rigs)

    def capture(self) -> list[dict[str, np.ndarray]]:
        return [image for rig in self.rigs for image in rig.capture()]


def color_uint8(picture: np.ndarray) -> np.ndarray:
    """A camera's ``Color`` picture as uint8 rgb. SAPIEN's picture format is a process-wide setting: floats by
    default, but ManiSkill3 sets ``r8g8b8a8unorm`` when it builds an env (its minimal shader pack), and every
    camera of the process then hands back uint8; clipping those to [0, 1] would leave 0 or 255 per channel."""
    rgb = picture[..., :3]
    if rgb.dtype == np.uint8:
        return np.ascontiguousarray(rgb)
    return (np.clip(rgb, 0, 1) * 255 + 0.5).astype(np.uint8)


def fuse_point_cloud(images: list[dict[str, np.ndarray]], X_FW: np.ndarray | None = None):
    """Concatenate the pixels of all cameras as points in frame F (world when ``X_FW`` is None).

    Returns ``xyz`` [N, 3] float32, ``rgb`` [N, 3] uint8, ``shape_id`` [N] int and ``valid`` [N] bool, where
    a pixel is valid when it saw geometry (not the empty background, not beyond the far plane).
    """
    xyz, rgb, ids, valid = [], [], [], []
    for im in images:
        p_C = im["p_C"].reshape(-1, 3)
        depth = -p_C[:, 2]  # OpenGL cameras look along -z
        X = im["X_WC_gl"] if X_FW is None else (X_FW.astype(np.float32) @ im["X_WC_gl"])
        xyz.append(p_C @ X[:3, :3].T + X[:3, 3])
        rgb.append(im["rgb"].reshape(-1, 3))
        ids.append(im["shape_id"].reshape(-1))
        valid.append((depth > 0) & (depth < im["far_m"]))
    return np.concatenate(xyz), np.concatenate(rgb), np.concatenate(ids), np.concatenate(valid)


def sensor_origins(images: list[dict[str, np.ndarray]], X_FW: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Each camera's centre in frame F (world when ``X_FW`` is None), ``sensor_origins`` [C, 3] float32, and
    which camera each fused point came from, ``sensor_index`` [N] uint8 (the order of :func:`fuse_point_cloud`):
    the rays along which depth noise lies (PCL's ``sensor_origin_``)."""
    origins, index = [], []
    for i, im in enumerate(images):
        X = im["X_WC_gl"] if X_FW is None else (X_FW.astype(np.float32) @ im["X_WC_gl"])
        origins.append(X[:3, 3])
        index.append(np.full(im["p_C"].shape[0] * im["p_C"].shape[1], i, dtype=np.uint8))
    return {"sensor_origins": np.asarray(origins, dtype=np.float32), "sensor_index": np.concatenate(index)}


def depth_image(image: dict[str, np.ndarray]) -> np.ndarray:
    """Depth along the optical axis [m], 0 where nothing was seen."""
    depth = -image["p_C"][..., 2]
    return np.where((depth > 0) & (depth < image["far_m"]), depth, 0).astype(np.float32)


def extrinsic_cv(image: dict[str, np.ndarray]) -> np.ndarray:
    """World-to-camera transform in the OpenCV convention (x right, y down, z forward)."""
    X_WC_cv = image["X_WC_gl"].astype(np.float64).copy()
    X_WC_cv[:3, :3] = X_WC_cv[:3, :3] @ _R_GL_CV
    return np.linalg.inv(X_WC_cv).astype(np.float32)
