"""Point-cloud utilities on small arrays: frames, masks, crops, ground removal, voxels, normals, planes."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.perception.point_cloud import (
    as_points,
    crop_box,
    estimate_front_normal,
    estimate_normals,
    fit_ground_plane,
    fit_plane,
    fit_vertical_plane,
    invert_pose,
    remove_ground,
    select,
    transform_points,
    voxel_downsample,
)


def _yaw_pose(yaw_rad, t):
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    X = np.eye(4)
    X[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    X[:3, 3] = t
    return X


def test_transform_points_between_frames():
    X_WB = _yaw_pose(np.pi / 2, [1.0, 2.0, 0.5])  # base turned left, 1 m forward, 2 m left
    p_B = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    p_W = transform_points(X_WB, p_B)
    assert p_W.shape == (2, 3)
    assert np.allclose(p_W, [[1.0, 3.0, 0.5], [1.0, 2.0, 1.5]])
    assert np.allclose(transform_points(invert_pose(X_WB), p_W), p_B)
    assert transform_points(X_WB, np.array([0.0, 0.0, 0.0])).shape == (3,)  # one point in, one out
    assert transform_points(X_WB, np.zeros((0, 3))).shape == (0, 3)


def test_select_and_crop_box():
    points = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.5], [2.0, 0.0, 0.0]])
    mask = crop_box(points, [-0.1, -0.1, -0.1], [1.0, 1.0, 1.0])
    assert mask.dtype == bool and mask.tolist() == [True, True, False]
    assert np.allclose(select(points, mask), points[:2])
    with pytest.raises(ValueError, match="boolean"):
        select(points, np.array([0, 1, 0]))
    with pytest.raises(ValueError, match=r"shape \[3\]"):
        select(points, np.array([True, False]))
    with pytest.raises(ValueError, match="exceeds upper"):
        crop_box(points, [1, 0, 0], [0, 1, 1])


def test_remove_ground_flat_and_fitted_floor():
    rng = np.random.default_rng(0)
    floor = np.column_stack([rng.uniform(-2, 2, 3000), rng.uniform(-2, 2, 3000), rng.normal(0, 0.002, 3000)])
    cabinet = np.column_stack([rng.uniform(-0.3, 0.1, 500), rng.uniform(-0.4, 0.4, 500), rng.uniform(0.05, 1.0, 500)])
    points = np.concatenate([floor, cabinet])
    keep = remove_ground(points)
    assert keep.sum() == len(cabinet) and keep[len(floor):].all()
    # A floor 5 cm up and tilted by 2 degrees: fit it once, then remove it cheaply every step.
    tilt = np.radians(2.0)
    lifted = points.copy()
    lifted[:, 2] += 0.05 + np.tan(tilt) * lifted[:, 0]
    plane = fit_ground_plane(lifted)
    assert plane[2] > 0.99 and np.degrees(np.arccos(plane[2])) == pytest.approx(2.0, abs=0.3)
    keep = remove_ground(lifted, 0.01, plane=plane)
    assert keep[len(floor):].all() and keep[: len(floor)].sum() == 0
    plane, inliers = fit_plane(floor)
    assert inliers.sum() > 0.99 * len(floor) and abs(plane[2]) > 0.999


def test_voxel_downsample_counts_and_means():
    points = np.array([
        [0.001, 0.001, 0.001], [0.003, 0.003, 0.003],  # one 1 cm voxel: their mean
        [0.015, 0.0, 0.0],
        [-0.001, 0.0, 0.0],  # negative side: a voxel of its own
    ])
    out = voxel_downsample(points, 0.01)
    assert out.shape == (3, 3)
    assert any(np.allclose(row, [0.002, 0.002, 0.002]) for row in out)
    grid = np.stack(np.meshgrid(*[np.arange(10) * 0.01 + 0.005] * 3), axis=-1).reshape(-1, 3)  # 1000 points
    assert len(voxel_downsample(grid, 0.02)) == 125
    assert voxel_downsample(np.zeros((0, 3)), 0.01).shape == (0, 3)
    with pytest.raises(ValueError, match="positive"):
        voxel_downsample(grid, 0.0)


def test_normals_face_the_viewer():
    rng = np.random.default_rng(1)
    wall = np.column_stack([rng.normal(0, 0.0005, 400), rng.uniform(0, 0.2, 400), rng.uniform(0, 0.2, 400)])
    normals = estimate_normals(wall, radius_m=0.03, toward=[-1.0, 0.1, 0.1])
    assert normals.shape == (400, 3)
    assert np.all(normals[:, 0] < -0.95)


def test_vertical_plane_and_front_normal_of_a_yawed_front():
    rng = np.random.default_rng(2)
    X_WC = _yaw_pose(np.radians(20), [-0.3, 0.0, 0.0])
    front_C = np.column_stack([rng.normal(0, 0.001, 1500), rng.uniform(-0.2, 0.2, 1500), rng.uniform(0.3, 0.9, 1500)])
    top_C = np.column_stack([rng.uniform(0, 0.4, 800), rng.uniform(-0.2, 0.2, 800), np.full(800, 0.9)])  # horizontal
    points_W = transform_points(X_WC, np.concatenate([front_C, top_C]))
    expected_W = X_WC[:3, :3] @ [-1.0, 0.0, 0.0]
    plane = fit_vertical_plane(points_W)
    assert abs(plane.normal_W @ expected_W) > 0.9995
    assert plane.inliers[:1500].mean() > 0.95
    normal_W = estimate_front_normal(points_W, toward_W=[-2.0, 0.0, 1.5])
    assert normal_W @ expected_W > 0.9995 and normal_W[2] == 0.0
    assert estimate_front_normal(points_W, toward_W=[2.0, 0.0, 1.5]) @ expected_W < -0.9995
    assert fit_vertical_plane(points_W[:3]) is None  # too few points for a plane


def test_bad_points_name_the_problem():
    with pytest.raises(ValueError, match=r"shape \[N, 3\]"):
        as_points(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="1 of 2 points contain NaN"):
        as_points([[0, 0, 0], [0, np.nan, 0]])
    with pytest.raises(ValueError, match="link_points_W: the point cloud is empty"):
        estimate_front_normal(np.zeros((0, 3)), toward_W=[0, 0, 0])
    with pytest.raises(ValueError, match="4x4"):
        transform_points(np.eye(3), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="last row"):
        transform_points(np.ones((4, 4)), np.zeros((1, 3)))
