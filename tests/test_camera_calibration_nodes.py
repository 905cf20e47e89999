"""CalibrateCameras' per-tick camera identification: which of the cloud's cameras is which, from each camera's
centre and mean ray in the robot's base frame (a sample of the points), and its exact count of finite points."""

from types import SimpleNamespace

import numpy as np

from handleit.behaviors.camera_calibration_nodes import CalibrateCameras


def cloud_of_three_cameras(X_WB: np.ndarray, n: int = 30_000, seed: int = 0):
    """Three cameras on the base (centres and viewing directions fixed in its frame), points along their rays."""
    rng = np.random.default_rng(seed)
    origins_B = np.array([[0.0, 0.0, 1.2], [0.3, 0.0, 1.0], [0.0, 0.3, 1.0]])
    looks_B = np.array([[1.0, 0.0, -0.3], [0.0, -1.0, -0.3], [-1.0, 0.2, -0.3]])
    points, index = [], []
    for c, (o, d) in enumerate(zip(origins_B, looks_B)):
        rays = d / np.linalg.norm(d) + 0.15 * rng.normal(size=(n, 3))
        points.append(o + rng.uniform(0.5, 3.0, (n, 1)) * rays)
        index.append(np.full(n, c))
    p_B = np.concatenate(points)
    p_W = (p_B @ X_WB[:3, :3].T + X_WB[:3, 3]).astype(np.float32)
    return SimpleNamespace(points=p_W, sensor_index=np.concatenate(index), X_WB=X_WB, X_WT={},
                           sensor_origins=origins_B @ X_WB[:3, :3].T + X_WB[:3, 3])


def node() -> CalibrateCameras:
    n = CalibrateCameras.__new__(CalibrateCameras)  # the identification needs no tools or blackboard
    n.cameras_B = []
    return n


def test_cameras_keep_their_identity_as_the_base_moves_and_counts_are_exact():
    calibrate = node()
    first = cloud_of_three_cameras(np.eye(4))
    first.points[::11] = np.nan  # an organized cloud's invalid pixels
    ids, counts = calibrate._camera_ids(first)
    assert ids == [0, 1, 2] and len(calibrate.cameras_B) == 3
    expected = np.bincount(first.sensor_index[np.isfinite(first.points).all(axis=1)], minlength=3)
    assert np.array_equal(counts, expected)
    X_WB = np.eye(4)
    X_WB[:3, :3] = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]  # turned 90 degrees and moved
    X_WB[:3, 3] = [2.0, -1.0, 0.0]
    moved = cloud_of_three_cameras(X_WB, seed=1)
    order = np.array([2, 0, 1])  # the same cameras, listed in another order
    moved.sensor_origins = moved.sensor_origins[order]
    moved.sensor_index = np.argsort(order)[moved.sensor_index]
    ids, _ = calibrate._camera_ids(moved)
    assert ids == [2, 0, 1] and len(calibrate.cameras_B) == 3  # recognised, no new camera


def test_a_camera_with_no_finite_point_is_counted_zero():
    calibrate = node()
    cloud = cloud_of_three_cameras(np.eye(4))
    cloud.points[cloud.sensor_index == 1] = np.nan
    ids, counts = calibrate._camera_ids(cloud)
    assert counts[1] == 0 and counts[0] > 0 and counts[2] > 0 and len(ids) == 3


def test_a_late_cloud_keeps_its_cameras():
    """The cloud 100 ms older than the base pose it is read with, the base moving at 1 m/s: the cameras' centres
    seem 10 cm off in the base frame, and are still the same three cameras."""
    calibrate = node()
    calibrate._camera_ids(cloud_of_three_cameras(np.eye(4)))
    late = cloud_of_three_cameras(np.eye(4), seed=2)
    late.X_WB = np.eye(4)
    late.X_WB[:3, 3] = [0.10, 0.0, 0.0]  # the newest base pose: 10 cm on from where the cloud was taken
    ids, _ = calibrate._camera_ids(late)
    assert ids == [0, 1, 2] and len(calibrate.cameras_B) == 3
