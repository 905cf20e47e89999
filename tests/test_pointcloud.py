"""The fused point cloud: masks cover the parts they name, frames and depth images agree.

Ground truth is computed here, in the test, from the simulator's geometry: each render shape's oriented box
in the world. A masked point must lie on a shape of the part it names (precision), and the visible points
on a part must carry its mask (recall).
"""

from __future__ import annotations

import numpy as np
import pytest
import sapien

from handleit.harness.sim_robot import SimRobot
from tests.helpers import make_env, zero_action

ON_SURFACE_M = 0.004  # precision: rendered positions are truncated to whole mm; boxes bound cylinders loosely
NEAR_SURFACE_M = 0.0025  # recall: a point this close to a part's shapes is a point of that part (mm truncation)
CLEAR_OF_M = 0.006  # a point this far from every other part's shapes belongs to this part alone


def _half_extents(shape) -> np.ndarray:
    r = sapien.render
    if isinstance(shape, r.RenderShapeBox):
        return np.asarray(shape.half_size, dtype=np.float64)
    if isinstance(shape, r.RenderShapeCylinder):  # SAPIEN's primitives lie along x
        return np.array([shape.half_length, shape.radius, shape.radius])
    if isinstance(shape, r.RenderShapeCapsule):
        return np.array([shape.half_length + shape.radius, shape.radius, shape.radius])
    if isinstance(shape, r.RenderShapeSphere):
        return np.full(3, shape.radius)
    v = np.concatenate([np.asarray(p.vertices) for p in shape.parts]) * np.asarray(shape.scale)
    return np.abs(v).max(0)  # meshes: a box around the mesh, centred on its frame


def _shape_boxes(link) -> list[tuple[np.ndarray, np.ndarray]]:
    """(X_WS, half extents) of every render shape of a link."""
    body = link.entity.find_component_by_type(sapien.render.RenderBodyComponent)
    if body is None:
        return []
    X_WL = link.entity_pose.to_transformation_matrix()
    return [(X_WL @ s.local_pose.to_transformation_matrix(), _half_extents(s)) for s in body.render_shapes]


def _distance_to_boxes(p_W: np.ndarray, boxes) -> np.ndarray:
    """Distance from each point to the nearest box (0 inside)."""
    best = np.full(len(p_W), np.inf)
    for X_WS, half in boxes:
        p_S = (p_W - X_WS[:3, 3]) @ X_WS[:3, :3]
        outside = np.maximum(np.abs(p_S) - half, 0.0)
        best = np.minimum(best, np.linalg.norm(outside, axis=1))
    return best


def _shapes_split(link, handle_ids):
    body = link.entity.find_component_by_type(sapien.render.RenderBodyComponent)
    boxes = _shape_boxes(link)
    handle = [b for b, s in zip(boxes, body.render_shapes) if s.per_scene_id in handle_ids]
    rest = [b for b, s in zip(boxes, body.render_shapes) if s.per_scene_id not in handle_ids]
    return handle, rest


def _observe_target_up_close(task: str, seed: int, frame: str = "world"):
    """Reset, then stand the robot in front of the target handle so the cameras see it."""
    env = make_env(task=task, obs_mode="pointcloud", camera_width=400, camera_height=160, pointcloud_frame=frame)
    env.reset(seed=seed)
    base = env.unwrapped
    p_WH = base.handle_center_W()
    distance = 0.9  # close enough for thin handles to span pixels; inside the cameras' 15-75 degree band
    base.robot.reset(base.robot.rest_qpos((p_WH[0] - distance, p_WH[1], 0.0)))
    obs, *_ = env.step(zero_action(env))
    return env, obs


@pytest.mark.parametrize("task, seed", [("OpenCabinetDrawer", 0), ("OpenCabinetDrawer", 5), ("OpenCabinetDoor", 2),
                                        ("OpenCabinetDoor", 9)])
def test_masks_cover_the_parts_they_name(task, seed):
    env, obs = _observe_target_up_close(task, seed)
    base = env.unwrapped
    pc = obs["pointcloud"]
    assert pc["frame"] == "world"
    valid = pc["valid"]
    xyz = pc["xyz"].astype(np.float64)
    handle_mask, link_mask, robot_mask = pc["target_handle"], pc["target_link"], pc["robot"]
    assert handle_mask.sum() > 15, "the handle should be in view from this pose"
    assert not (handle_mask & ~link_mask).any(), "the handle is part of the target link"
    assert not (robot_mask & link_mask).any()

    target = base.target.link
    handle_boxes, panel_boxes = _shapes_split(target, set(base.target.handle_shape_ids))
    other_boxes = [b for link in base.cabinet.links if link is not target for b in _shape_boxes(link)]

    # Precision: masked points lie on the shapes of the part they name.
    assert np.quantile(_distance_to_boxes(xyz[handle_mask], handle_boxes), 0.99) < ON_SURFACE_M
    assert np.quantile(_distance_to_boxes(xyz[link_mask], handle_boxes + panel_boxes), 0.99) < ON_SURFACE_M

    # Recall: visible points on the part, clear of everything else, carry the mask.
    d_handle = _distance_to_boxes(xyz, handle_boxes)
    d_panel = _distance_to_boxes(xyz, panel_boxes)
    d_other = _distance_to_boxes(xyz, other_boxes)
    on_handle_only = valid & (d_handle < NEAR_SURFACE_M) & (d_panel > CLEAR_OF_M) & (d_other > CLEAR_OF_M)
    assert on_handle_only.sum() > 10
    assert handle_mask[on_handle_only].mean() > 0.97
    on_link_only = valid & (np.minimum(d_handle, d_panel) < NEAR_SURFACE_M) & (d_other > CLEAR_OF_M)
    assert link_mask[on_link_only].mean() > 0.97


def test_robot_mask_covers_the_robot():
    env, obs = _observe_target_up_close("OpenCabinetDrawer", 1)
    base = env.unwrapped
    pc = obs["pointcloud"]
    xyz, valid, robot_mask = pc["xyz"].astype(np.float64), pc["valid"], pc["robot"]
    assert robot_mask.sum() > 200

    def in_robot_aabbs(p, margin):
        inside = np.zeros(len(p), dtype=bool)
        for link in base.robot.articulation.links:
            if link.collision_shapes:
                lo, hi = link.compute_global_aabb_tight()
                inside |= np.all((p >= lo - margin) & (p <= hi + margin), axis=1)
        return inside

    assert in_robot_aabbs(xyz[robot_mask], 0.005).mean() > 0.99
    cabinet_boxes = [b for link in base.cabinet.links for b in _shape_boxes(link)]
    candidates = valid & in_robot_aabbs(xyz, 0.0) & (xyz[:, 2] > 0.01) & (_distance_to_boxes(xyz, cabinet_boxes) > CLEAR_OF_M)
    assert robot_mask[candidates].mean() > 0.97


def test_base_frame_point_cloud_is_the_world_cloud_moved():
    _, world = _observe_target_up_close("OpenCabinetDrawer", 4, frame="world")
    env, local = _observe_target_up_close("OpenCabinetDrawer", 4, frame="base")
    assert local["pointcloud"]["frame"] == "base"
    X_WB = env.unwrapped.robot.X_WB.to_transformation_matrix()
    moved = local["pointcloud"]["xyz"] @ X_WB[:3, :3].T + X_WB[:3, 3]
    np.testing.assert_allclose(moved, world["pointcloud"]["xyz"], atol=2e-5)
    for key in ("rgb", "valid", "target_handle", "target_link", "robot"):
        assert np.array_equal(local["pointcloud"][key], world["pointcloud"][key])


def test_depth_images_reproject_onto_the_point_cloud():
    """rgbd mode: depth + intrinsics + extrinsics give back the pointcloud mode's points, pixel by pixel."""
    _, pc_obs = _observe_target_up_close("OpenCabinetDoor", 3)
    env = make_env(task="OpenCabinetDoor", obs_mode="rgbd", camera_width=400, camera_height=160)
    env.reset(seed=3)
    base = env.unwrapped
    p_WH = base.handle_center_W()
    base.robot.reset(base.robot.rest_qpos((p_WH[0] - 0.9, p_WH[1], 0.0)))
    obs, *_ = env.step(zero_action(env))
    points, handles = [], []
    for cam in obs["cameras"].values():
        h, w = cam["depth"].shape
        u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
        z = cam["depth"].astype(np.float64)
        p_C = np.stack([(u - cam["intrinsic"][0, 2]) / cam["intrinsic"][0, 0] * z,
                        (v - cam["intrinsic"][1, 2]) / cam["intrinsic"][1, 1] * z, z], -1).reshape(-1, 3)
        X_WC = np.linalg.inv(cam["extrinsic_cv"].astype(np.float64))
        points.append(p_C @ X_WC[:3, :3].T + X_WC[:3, 3])
        handles.append(cam["target_handle"].ravel())
    points = np.concatenate(points)
    cloud = pc_obs["pointcloud"]
    valid = cloud["valid"]
    # Pixel centres vs rasterized positions: within a millimetre-quantization and sub-pixel offset.
    error = np.linalg.norm(points[valid] - cloud["xyz"][valid], axis=1)
    assert np.median(error) < 0.01
    assert np.array_equal(np.concatenate(handles), cloud["target_handle"])
    assert np.array_equal(np.concatenate([c["rgb"].reshape(-1, 3) for c in obs["cameras"].values()]), cloud["rgb"])


def test_sensor_origins_are_the_cameras_centres_in_the_clouds_frame():
    """Each point knows its camera (PCL's sensor_origin_): origins in the cloud's frame, one index per point,
    and every point of a camera lies along a ray from that camera's centre (in front of it, at its depth)."""
    _, world = _observe_target_up_close("OpenCabinetDrawer", 4, frame="world")
    env, local = _observe_target_up_close("OpenCabinetDrawer", 4, frame="base")
    X_WB = env.unwrapped.robot.X_WB.to_transformation_matrix()
    pc_W, pc_B = world["pointcloud"], local["pointcloud"]
    n_cameras = len(env.unwrapped.camera_configs)
    assert pc_W["sensor_origins"].shape == (n_cameras, 3) and pc_W["sensor_index"].shape == (len(pc_W["xyz"]),)
    assert set(np.unique(pc_W["sensor_index"])) == set(range(n_cameras))
    moved = pc_B["sensor_origins"] @ X_WB[:3, :3].T + X_WB[:3, 3]
    np.testing.assert_allclose(moved, pc_W["sensor_origins"], atol=2e-5)
    for i, cfg in enumerate(env.unwrapped.camera_configs):  # mounted on the base at p_MC
        np.testing.assert_allclose(pc_B["sensor_origins"][i], cfg.p_MC, atol=1e-5)
    # The Observation the trees get carries them, filtered like the points.
    obs = SimRobot(env).reset(seed=4)
    origins = obs.point_origins()
    assert origins.shape == obs.points.shape and len(obs.sensor_index) == len(obs.points)
    np.testing.assert_allclose(np.unique(origins, axis=0), np.unique(obs.sensor_origins, axis=0))
    handle = obs.masks["target_handle"]
    assert obs.point_origins(handle).shape == (int(handle.sum()), 3)
