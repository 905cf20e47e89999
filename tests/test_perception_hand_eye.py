"""A camera's offset at the hand: observed robot points laid onto the model's collision shapes.

Synthetic: points sampled on a planar robot's boxes and sphere (the URDF of the self filter's tests), shifted
as a miscalibrated camera would see them; the fit must find the shift. Then the bundled drawer scene with 1 cm
and 1 degree of extrinsics error: the fit must match what the camera did to the hand's pixels (the simulator's
clean cloud is the reference) and to the handle's next to it.
"""

from __future__ import annotations

import numpy as np
import pytest

from handleit.harness.sim_robot import SimRobot
from handleit.perception.hand_eye import MIN_HAND_POINTS, camera_offset_at_hand
from handleit.perception.robot_self_filter import RobotSelfFilter
from tests.helpers import make_env
from tests.test_perception_robot_self_filter import planar, planar_urdf  # noqa: F401 (fixtures)

Q = np.array([0.6, 0.25])


def surface_points(rng, self_filter: RobotSelfFilter, q: np.ndarray, n: int = 4000) -> np.ndarray:
    """Points on the surface of the robot's shapes: samples in a box about it whose signed distance is ~0."""
    X_WL = self_filter.link_poses(q, np.eye(4))
    candidates = rng.uniform([-0.7, -0.4, -0.2], [1.2, 1.2, 0.5], size=(400_000, 3))
    d = self_filter.signed_distance(candidates, X_WL, links=["arm", "slider"])
    return candidates[np.abs(d) < 0.002][:n]


def test_signed_distance_inside_on_and_outside(planar):  # noqa: F811
    X_WL = planar.link_poses(np.array([0.0, 0.2]), np.eye(4))
    points = np.array([[0.3, 0.0, 0.0], [0.3, 0.0, 0.05], [0.3, 0.0, 0.15], [0.5 + 0.2 + 0.1, 0.0, 0.0]])
    d = planar.signed_distance(points, X_WL, links=["arm", "slider"])
    assert d[0] == pytest.approx(-0.05, abs=1e-9)  # the arm box's middle: 5 cm inside its faces
    assert d[1] == pytest.approx(0.0, abs=1e-9)  # on its top face
    assert d[3] == pytest.approx(0.06, abs=1e-9)  # 10 cm from the sphere's centre, radius 4 cm
    with pytest.raises(ValueError, match="no collision shape"):
        planar.signed_distance(points, X_WL, links=["no such link"])
    with pytest.raises(ValueError, match="no pose"):
        planar.signed_distance(points, {}, links=["arm"])


@pytest.mark.parametrize("t_W", [(0.0, 0.0, 0.0), (0.012, -0.02, 0.006), (-0.03, 0.01, -0.01)])
def test_the_fit_finds_a_cameras_shift(planar, t_W):  # noqa: F811
    rng = np.random.default_rng(0)
    points = surface_points(rng, planar, Q) + np.asarray(t_W)
    points += rng.normal(scale=0.002, size=points.shape)
    fit = camera_offset_at_hand(points, planar, Q, np.eye(4), links=["arm", "slider"])
    assert fit is not None and fit.n_points == len(points)
    np.testing.assert_allclose(fit.t_W, t_W, atol=0.002)
    assert fit.rms_after_m <= fit.rms_before_m


def test_too_few_points_or_a_far_fit_give_none(planar):  # noqa: F811
    rng = np.random.default_rng(1)
    points = surface_points(rng, planar, Q)
    assert camera_offset_at_hand(points[: MIN_HAND_POINTS - 1], planar, Q, np.eye(4), ["arm"]) is None
    with pytest.raises(ValueError, match="NaN"):
        camera_offset_at_hand(np.full((50, 3), np.nan), planar, Q, np.eye(4), ["arm"])


def test_on_the_drawer_scene_the_fit_matches_the_cameras_error():
    """The drawer's robot at its rest posture in front of the cabinet, seen by cameras whose poses are off."""
    env = make_env(task="OpenCabinetDrawer", obs_mode="pointcloud", sensor_perturbation="extrinsics=0.01/1deg")
    robot = SimRobot(env)
    obs = robot.reset(seed=0)
    base = env.unwrapped
    perturbed = robot._obs["pointcloud"]  # noqa: SLF001 (the pixels behind the observation)
    sensor, base._sensor = base._sensor, None  # noqa: SLF001 (the same state seen by calibrated cameras)
    clean = base._get_obs()["pointcloud"]  # noqa: SLF001
    base._sensor = sensor  # noqa: SLF001
    self_filter = RobotSelfFilter.from_robot_model(robot.model)
    p_WT = obs.X_WT["right"][:3, 3]
    X_WL = self_filter.link_poses(obs.qpos, obs.X_WB)
    links = [name for name, X in X_WL.items() if np.linalg.norm(X[:3, 3] - p_WT) < 0.3]
    fits = 0
    for camera in range(len(base.camera_configs)):
        hand = (perturbed["valid"] & perturbed["robot"] & (perturbed["sensor_index"] == camera)
                & (np.linalg.norm(perturbed["xyz"] - p_WT, axis=1) < 0.3))
        if hand.sum() < MIN_HAND_POINTS:
            continue
        truth = (perturbed["xyz"][hand] - clean["xyz"][hand]).mean(axis=0)
        fit = camera_offset_at_hand(perturbed["xyz"][hand], self_filter, obs.qpos, obs.X_WB, links)
        assert fit is not None
        np.testing.assert_allclose(fit.t_W, truth, atol=0.003)
        fits += 1
    assert fits >= 1  # the hand is in view of at least one camera
