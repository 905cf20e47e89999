"""Each camera's pose corrected from the robot's own body in its view: extrinsics calibrated by self-observation.

A camera whose mount is off by a centimetre and a degree (a knocked bracket, a calibration grown stale) sees
everything at 1-2 m 2-5 cm from where it is, and three such cameras fuse into a blurred cloud. The robot's
joints and its model are not off, and every one of the mobile robot's cameras sees parts of the robot. So the
rigid motion that lays a camera's robot points onto the model's collision shapes at the measured joints is
that camera's error, in every point it sees: the idea of calibrating a camera against the robot's own geometry
in place of a calibration target (as in DREAM, Lee et al., "Camera-to-Robot Pose Estimation from a Single
Image", arXiv 1911.09231, which does it with learned keypoints; here with the collision model and the depth).

:func:`fit_camera_correction` finds that motion for one camera: six numbers (a rotation about the camera's
centre and a translation), a robust least-squares fit (scipy's ``least_squares``, soft-L1 loss) of the signed
distances of the camera's points near the robot to the model's shapes (``RobotSelfFilter.signed_distance``).
Rotating about the camera's centre keeps the rotation and the translation apart: a degree of rotation moves
the far points, not the centre. The points are picked by distance to the model, not by a mask (a segmenter's
robot mask is computed on the miscalibrated cloud), and re-picked once nearer after the first fit.

Numpy in, numpy out: points ``[N, 3]`` in the world frame W (m).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

from handleit.perception.point_cloud import as_points
from handleit.perception.robot_self_filter import RobotSelfFilter

MIN_ROBOT_POINTS = 200  # fewer points near the robot than this give no correction
MAX_FIT_POINTS = 1500  # a random subset this large: enough for six numbers, ~0.3-0.6 s a camera on one core
# Points this near the model are candidates (m): a miscalibration of 1 cm and 1 degree moves the robot's points
# 1-3 cm at the 0.5-1.5 m the cameras see it from; then, after the first fit, this near.
CANDIDATE_DISTANCE_M = (0.08, 0.03)
LOSS_SCALES_M = (0.01, 0.004)  # soft-L1 scale of the two passes: beyond it a residual counts less
# A correction is applied only when it is large enough to matter and the model fits clearly better with it:
# on calibrated cameras (the simulator's, 5 mm depth noise at 1 m) the fit reads 0.05-0.1 degrees and under
# 1 mm, and improves the RMS by under 3 %; 1 cm and 1 degree of error read 0.95-1.0 degrees and improve it 2-3x.
MIN_ROTATION_DEG = 0.25
MIN_TRANSLATION_M = 0.004
MIN_RMS_GAIN = 0.15  # the RMS distance to the model must fall by at least this fraction
MAX_ROTATION_DEG = 10.0  # a larger fit is a wrong match (another object taken for the robot), not a camera
MAX_TRANSLATION_M = 0.10


@dataclass(frozen=True)
class CameraCorrection:
    """A rigid correction ``X_corrected_observed`` (4x4, world frame) for one camera's points at one moment."""

    X_WcWo: np.ndarray  # p_corrected = X_WcWo @ p_observed (homogeneous), both in W
    rotation_deg: float
    translation_m: float  # the camera centre's move
    rms_before_m: float  # RMS signed distance of the fitted points to the model, before and after
    rms_after_m: float
    n_points: int
    rotation_std_deg: float = 0.0  # the fit's uncertainty: the largest standard deviation of a rotation angle
    translation_std_m: float = 0.0  # and of a translation component

    @property
    def significant(self) -> bool:
        """Large enough to apply: a real miscalibration, not the fit's noise on a calibrated camera."""
        big = self.rotation_deg >= MIN_ROTATION_DEG or self.translation_m >= MIN_TRANSLATION_M
        return bool(big and self.rms_after_m <= (1.0 - MIN_RMS_GAIN) * self.rms_before_m)

    def apply(self, points_W: np.ndarray) -> np.ndarray:
        p = np.asarray(points_W)
        return (p @ self.X_WcWo[:3, :3].T + self.X_WcWo[:3, 3]).astype(p.dtype, copy=False)


def _transform_about(x: np.ndarray, center_W: np.ndarray) -> np.ndarray:
    """4x4: rotate by the rotation vector ``x[:3]`` about ``center_W``, then translate by ``x[3:]``."""
    X = np.eye(4)
    X[:3, :3] = Rotation.from_rotvec(x[:3]).as_matrix()
    X[:3, 3] = center_W - X[:3, :3] @ center_W + x[3:]
    return X


def _rms(r: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.minimum(np.abs(r), 0.05) ** 2)))


def fit_camera_correction(points_W, camera_center_W, self_filter: RobotSelfFilter, qpos: np.ndarray,
                          X_WB: np.ndarray, rng: np.random.Generator | None = None) -> CameraCorrection | None:
    """The rigid motion that lays one camera's view of the robot onto the robot's model.

    Args:
        points_W: ``[N, 3]`` every point that camera saw (the robot's and the scene's), world, m.
        camera_center_W: ``[3]`` where that camera is (``Observation.sensor_origins``), world, m.
        self_filter: the robot's collision model; qpos (its joint order) and X_WB (4x4): the measured state.
        rng: picks the subset of points fitted (default: a fixed seed, so a fit repeats).
    Returns:
        :class:`CameraCorrection` (check ``significant`` before applying it), or None when fewer than
        ``MIN_ROBOT_POINTS`` points lie near the robot or the fit is out of bounds (a wrong match).
    Raises:
        ValueError: points that are not ``[N, 3]`` finite, or a camera centre that is not a finite ``[3]``.
    """
    p = as_points(points_W, "points_W")
    c = np.asarray(camera_center_W, dtype=np.float64)
    if c.shape != (3,) or not np.all(np.isfinite(c)):
        raise ValueError(f"camera_center_W must be a finite [3] point, got {np.asarray(camera_center_W)!r}")
    rng = np.random.default_rng(0) if rng is None else rng
    X_WL = self_filter.link_poses(qpos, X_WB)
    links = list(X_WL)

    def candidates(X: np.ndarray, within_m: float) -> np.ndarray:
        q = p @ X[:3, :3].T + X[:3, 3]
        near = p[np.abs(self_filter.signed_distance(q, X_WL, links)) < within_m]
        if len(near) > MAX_FIT_POINTS:
            near = near[rng.choice(len(near), MAX_FIT_POINTS, replace=False)]
        return near

    x = np.zeros(6)
    near = p[:0]
    rms_before = rms_after = 0.0
    for within_m, scale_m in zip(CANDIDATE_DISTANCE_M, LOSS_SCALES_M):
        near = candidates(_transform_about(x, c), within_m)
        if len(near) < MIN_ROBOT_POINTS:
            return None

        def residuals(v: np.ndarray, near=near) -> np.ndarray:
            X = _transform_about(v, c)
            return np.clip(self_filter.signed_distance(near @ X[:3, :3].T + X[:3, 3], X_WL, links), -0.05, 0.05)

        if rms_before == 0.0:
            rms_before = _rms(residuals(np.zeros(6)))
        fit = least_squares(residuals, x, loss="soft_l1", f_scale=scale_m, x_scale=0.01)
        x = fit.x
    # How well the six numbers are pinned down: a camera that sees only a flat patch of the robot (the base's
    # top) cannot tell some rotations from translations. Gauss-Newton covariance at the solution.
    JtJ = fit.jac.T @ fit.jac
    dof = max(len(fit.fun) - 6, 1)
    sigma2 = float(np.sum(fit.fun ** 2) / dof)
    try:
        std = np.sqrt(np.maximum(np.diag(np.linalg.inv(JtJ)) * sigma2, 0.0))
    except np.linalg.LinAlgError:
        std = np.full(6, np.inf)
    # Before and after on the same (final) points.
    X = _transform_about(x, c)
    r0 = self_filter.signed_distance(near, X_WL, links)
    r1 = self_filter.signed_distance(near @ X[:3, :3].T + X[:3, 3], X_WL, links)
    rms_before, rms_after = _rms(r0), _rms(r1)
    rotation_deg = float(np.degrees(np.linalg.norm(x[:3])))
    translation_m = float(np.linalg.norm(x[3:]))
    if rotation_deg > MAX_ROTATION_DEG or translation_m > MAX_TRANSLATION_M:
        return None
    return CameraCorrection(X_WcWo=X, rotation_deg=rotation_deg, translation_m=translation_m,
                            rms_before_m=rms_before, rms_after_m=rms_after, n_points=len(near),
                            rotation_std_deg=float(np.degrees(np.max(std[:3]))), translation_std_m=float(np.max(std[3:])))


def correction_in_base(correction: CameraCorrection, X_WB: np.ndarray) -> np.ndarray:
    """The correction in the frame of the body the camera rides on (``X_WB`` at the fit): constant while the
    body moves, for a camera fixed to it (the mobile robot's cameras ride on its base)."""
    X_BW = np.linalg.inv(np.asarray(X_WB, dtype=np.float64))
    return X_BW @ correction.X_WcWo @ np.asarray(X_WB, dtype=np.float64)


def correct_cloud(points_W: np.ndarray, sensor_index: np.ndarray, corrections_B: dict[int, np.ndarray],
                  X_WB: np.ndarray) -> np.ndarray:
    """``[N, 3]`` the points with each camera's correction (``corrections_B``: camera index -> 4x4 in the body
    frame, from :func:`correction_in_base`) applied at the body pose ``X_WB``; cameras without one unchanged."""
    p = np.array(points_W, copy=True)
    index = np.asarray(sensor_index)
    if index.shape != (len(p),):
        raise ValueError(f"sensor_index must be [N] = [{len(p)}], got shape {index.shape}")
    X_WB = np.asarray(X_WB, dtype=np.float64)
    X_BW = np.linalg.inv(X_WB)
    for camera, X_B in corrections_B.items():
        mine = index == camera
        if mine.any():
            X_W = X_WB @ X_B @ X_BW
            p[mine] = (p[mine] @ X_W[:3, :3].T + X_W[:3, 3]).astype(p.dtype, copy=False)
    return p
