"""How far a camera sees the robot's own hand from where the robot's joints put it: a camera's offset at the hand.

A camera whose pose is off by a centimetre and a degree (a knocked mount, a calibration grown stale) sees
everything 2-4 cm from where it is at 1-2 m, the target included; the joints and the robot's model are not
off. Near the hand, what the camera sees of the hand and what it sees of a target a few centimetres away are
shifted alike, so the gap between the observed hand and the model's hand is the correction a grasp needs:
the classic look-then-move loop closed on the image, as in visual servoing, here with the robot's collision
model (perception.robot_self_filter) in place of markers on the gripper.

:func:`camera_offset_at_hand` finds the translation that best lays the observed hand points onto the model's
collision shapes at the measured joints (a robust least-squares fit of three numbers, scipy's
``least_squares`` with a soft-L1 loss), and says how well it fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from handleit.perception.point_cloud import as_points
from handleit.perception.robot_self_filter import RobotSelfFilter

MIN_HAND_POINTS = 40  # fewer observed hand points give no offset
LOSS_SCALE_M = 0.005  # residuals beyond this count less (soft L1): stray points, other links' edges
MAX_OFFSET_M = 0.08  # a fit further off than this is a wrong match, not a camera's error


@dataclass(frozen=True)
class HandOffset:
    """The observed hand's offset from the model's, in the world (m)."""

    t_W: np.ndarray  # [3] observed minus model: subtract it from what the camera saw near the hand
    rms_before_m: float  # RMS distance of the observed points to the model's surface, before and after
    rms_after_m: float
    n_points: int


def camera_offset_at_hand(points_W, self_filter: RobotSelfFilter, qpos: np.ndarray, X_WB: np.ndarray,
                          links: Sequence[str]) -> HandOffset | None:
    """The translation from the model's hand to the observed hand, or None with too few points or no fit.

    Args:
        points_W: ``[N, 3]`` observed points of the hand (the robot's points near it, one camera's), world, m.
        self_filter: the robot's collision model.
        qpos: measured joint positions (``self_filter.joint_names`` order); X_WB: the measured base pose.
        links: the links the points belong to (e.g. the hand, the fingers and the last arm links).
    Returns:
        :class:`HandOffset`; None when fewer than ``MIN_HAND_POINTS`` points are given, the fit does not
        improve the RMS, or the offset exceeds ``MAX_OFFSET_M``.
    """
    p = as_points(points_W, "points_W")
    if len(p) < MIN_HAND_POINTS:
        return None
    X_WL = self_filter.link_poses(qpos, X_WB)

    def residuals(t: np.ndarray) -> np.ndarray:
        return self_filter.signed_distance(p - t, X_WL, links)

    r0 = residuals(np.zeros(3))
    fit = least_squares(residuals, np.zeros(3), loss="soft_l1", f_scale=LOSS_SCALE_M, x_scale=0.01)
    rms_before = float(np.sqrt(np.mean(np.minimum(r0, 0.05) ** 2)))
    rms_after = float(np.sqrt(np.mean(np.minimum(fit.fun, 0.05) ** 2)))
    if not fit.success or rms_after > rms_before + 1e-4 or np.linalg.norm(fit.x) > MAX_OFFSET_M:
        return None
    return HandOffset(t_W=fit.x.copy(), rms_before_m=rms_before, rms_after_m=rms_after, n_points=len(p))
