"""Pose conversions shared by every layer (the bottom layer, beside the shared types; numpy only): a unit
quaternion (w, x, y, z) to a rotation matrix and back, and the envs' 7-number poses (x, y, z, qw, qx, qy, qz,
SAPIEN's and ManiSkill's layout, one or a batch) to 4x4 homogeneous transforms and back, and the quaternion
of a turn about z."""

from __future__ import annotations

import math

import numpy as np


def rotation_of_quaternion(q_wxyz) -> np.ndarray:
    """3x3 rotation of a unit quaternion (w, x, y, z)."""
    w, x, y, z = (float(v) for v in q_wxyz)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def quaternion_of_rotation(R: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of a 3x3 rotation (Shepperd's method: divide by the largest component), unit, w >= 0."""
    t = np.trace(R)
    if t > 0:
        s = 2.0 * math.sqrt(1.0 + t)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    elif R[0, 0] > R[1, 1] and R[0, 0] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        q = [(R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s]
    elif R[1, 1] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        q = [(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        q = [(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s]
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q)
    return -q if q[0] < 0 else q


def pose7_to_matrix(pose7, normalize: bool = False) -> np.ndarray:
    """(x, y, z, qw, qx, qy, qz) -> 4x4, or [..., 7] poses -> [..., 4, 4]. The quaternion is taken as unit, as
    the envs report it; ``normalize=True`` divides it by its norm first (a float32 pose's is not quite unit)."""
    pose7 = np.asarray(pose7, dtype=np.float64)
    if pose7.shape[-1] != 7:
        raise ValueError(f"a pose has 7 numbers (x, y, z, qw, qx, qy, qz), got shape {pose7.shape}")
    w, x, y, z = (pose7[..., i] for i in range(3, 7))
    if normalize:
        n = np.sqrt(w * w + x * x + y * y + z * z)
        w, x, y, z = w / n, x / n, y / n, z / n
    X = np.zeros(pose7.shape[:-1] + (4, 4))
    # rotation_of_quaternion's terms, elementwise over the batch
    X[..., 0, 0] = 1 - 2 * (y * y + z * z)
    X[..., 0, 1] = 2 * (x * y - w * z)
    X[..., 0, 2] = 2 * (x * z + w * y)
    X[..., 1, 0] = 2 * (x * y + w * z)
    X[..., 1, 1] = 1 - 2 * (x * x + z * z)
    X[..., 1, 2] = 2 * (y * z - w * x)
    X[..., 2, 0] = 2 * (x * z - w * y)
    X[..., 2, 1] = 2 * (y * z + w * x)
    X[..., 2, 2] = 1 - 2 * (x * x + y * y)
    X[..., :3, 3] = pose7[..., :3]
    X[..., 3, 3] = 1.0
    return X


def matrix_to_pose7(X: np.ndarray) -> np.ndarray:
    """4x4 rigid transform -> (x, y, z, qw, qx, qy, qz), the quaternion unit with qw >= 0."""
    return np.concatenate([X[:3, 3], quaternion_of_rotation(X[:3, :3])])


def rotation_of_yaw(yaw_rad: float) -> np.ndarray:
    """3x3 rotation by ``yaw_rad`` about the z axis."""
    c, s = math.cos(yaw_rad), math.sin(yaw_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def quaternion_of_yaw(yaw_rad: float) -> np.ndarray:
    """(w, x, y, z) of a turn by ``yaw_rad`` about the z axis."""
    return np.array([math.cos(yaw_rad / 2), 0.0, 0.0, math.sin(yaw_rad / 2)])
