"""Each camera's pose corrected from its view of the robot (perception/camera_calibration.py).

The bundled MoveBucket scene at reset (the dual-arm robot in view of all three cameras): with 1 cm and 1 degree
of extrinsics error per camera, the fit must bring each camera's points back onto the simulator's clean cloud
of the same state (scene points far from the robot included); on calibrated cameras it must find nothing to
correct. Then the node in a tree: the corrected cloud is what the segmenter sees.
"""

from __future__ import annotations

import numpy as np
import pytest

from handleit.behaviors import make_tree_solver
from handleit.harness.sim_robot import SimRobot
from handleit.perception.camera_calibration import (
    MIN_ROBOT_POINTS,
    correct_cloud,
    correction_in_base,
    fit_camera_correction,
)
from handleit.perception.robot_self_filter import RobotSelfFilter
from tests.helpers import make_env


def _scene(perturbation: str):
    env = make_env(task="MoveBucket", obs_mode="pointcloud", sensor_perturbation=perturbation)
    robot = SimRobot(env)
    obs = robot.reset(seed=1)
    base = env.unwrapped
    seen = robot._obs["pointcloud"]  # noqa: SLF001 (the pixels behind the observation)
    sensor, base._sensor = base._sensor, None  # noqa: SLF001 (the same state seen by calibrated cameras)
    clean = base._get_obs()["pointcloud"]  # noqa: SLF001
    base._sensor = sensor  # noqa: SLF001
    both = seen["valid"] & clean["valid"]
    return robot, obs, seen["xyz"][both].astype(np.float64), clean["xyz"][both].astype(np.float64), \
        seen["sensor_index"][both]


@pytest.fixture(scope="module")
def miscalibrated():
    return _scene("extrinsics=0.01/1deg")


def test_the_fit_undoes_each_cameras_error(miscalibrated):
    robot, obs, seen, clean, index = miscalibrated
    self_filter = RobotSelfFilter.from_robot_model(robot.model)
    corrections = {}
    for camera in range(len(obs.sensor_origins)):
        fit = fit_camera_correction(obs.points[obs.sensor_index == camera], obs.sensor_origins[camera],
                                    self_filter, obs.qpos, obs.X_WB)
        assert fit is not None and fit.significant
        assert 0.8 < fit.rotation_deg < 1.2  # 1 degree of error, about an axis of the camera's frame
        assert fit.rms_after_m < 0.5 * fit.rms_before_m
        mine = index == camera
        before = np.median(np.linalg.norm(seen[mine] - clean[mine], axis=1))
        after = np.median(np.linalg.norm(fit.apply(seen[mine]) - clean[mine], axis=1))
        assert before > 0.02 and after < 0.004, (camera, before, after)
        corrections[camera] = correction_in_base(fit, obs.X_WB)
    # The corrections held in the base frame give the same cloud back at the same base pose.
    fixed = correct_cloud(seen, index, corrections, obs.X_WB)
    assert np.median(np.linalg.norm(fixed - clean, axis=1)) < 0.004


def test_calibrated_cameras_get_no_correction():
    robot, obs, *_ = _scene("depth_noise=0.005")
    self_filter = RobotSelfFilter.from_robot_model(robot.model)
    for camera in (0, 2):
        fit = fit_camera_correction(obs.points[obs.sensor_index == camera], obs.sensor_origins[camera],
                                    self_filter, obs.qpos, obs.X_WB)
        assert fit is not None and not fit.significant, fit


def test_bad_input_is_named(miscalibrated):
    robot, obs, *_ = miscalibrated
    self_filter = RobotSelfFilter.from_robot_model(robot.model)
    with pytest.raises(ValueError, match="NaN"):
        fit_camera_correction(np.full((300, 3), np.nan), obs.sensor_origins[0], self_filter, obs.qpos, obs.X_WB)
    with pytest.raises(ValueError, match="camera_center_W"):
        fit_camera_correction(obs.points, [0.0, 1.0], self_filter, obs.qpos, obs.X_WB)
    far = obs.points[np.linalg.norm(obs.points[:, :2] - obs.X_WB[:2, 3], axis=1) > 1.5][:5000]
    assert fit_camera_correction(far[: MIN_ROBOT_POINTS - 1], obs.sensor_origins[0], self_filter, obs.qpos,
                                 obs.X_WB) is None  # nothing of the robot in view
    with pytest.raises(ValueError, match="sensor_index"):
        correct_cloud(obs.points, obs.sensor_index[:-1], {}, obs.X_WB)


def test_the_tree_segments_the_corrected_cloud(miscalibrated):
    """In a tree, "calibrate cameras (robot seen)" runs first and what the task's nodes read is corrected."""
    robot, obs, seen, clean, index = miscalibrated
    solver = make_tree_solver("MoveBucket", robot.model)
    solver.reset(obs)
    solver.step(obs)
    node = next(n for n in solver.root.iterate() if n.name == "calibrate cameras (robot seen)")
    assert "corrected" in node.feedback_message
    assert len([c for c, X in node.corrections_B.items() if X is not None]) == 3
    fixed = solver.bb.observation  # after the segment node: the corrected points, invalid ones dropped
    ours = fixed.points[fixed.sensor_index == 0]
    theirs = clean[index == 0]
    # Same pixels in the same order: the corrected cloud of camera 0 lies on the clean one.
    assert len(ours) == len(theirs)
    assert np.median(np.linalg.norm(ours - theirs, axis=1)) < 0.004


def test_cameras_are_known_by_where_they_sit_not_by_their_index(miscalibrated):
    """A driver that lists the cameras in another order in the next cloud (over ROS the index follows the order
    in which viewpoints first appear): each camera keeps its own correction."""
    import dataclasses

    robot, obs, seen, clean, index = miscalibrated
    solver = make_tree_solver("MoveBucket", robot.model)
    solver.reset(obs)
    solver.step(obs)
    order = np.array([2, 0, 1])  # new index of old camera i: order[i]
    swapped = dataclasses.replace(obs, points=obs.points.copy(), sensor_index=order[obs.sensor_index],
                                  sensor_origins=obs.sensor_origins[np.argsort(order)])
    solver.step(swapped)
    fixed = solver.bb.observation
    ours = fixed.points[fixed.sensor_index == order[0]]  # old camera 0, now index 2
    assert np.median(np.linalg.norm(ours - clean[index == 0], axis=1)) < 0.004


@pytest.mark.parametrize("planning", ["process", "thread"])
def test_in_real_time_the_fit_runs_off_the_tick(miscalibrated, planning):
    """Real time: the first ticks pass the cloud as it is while the fit runs (in the planning worker process, or
    on a thread); once it is back, the clouds are corrected."""
    import dataclasses
    import time

    robot, obs, seen, clean, index = miscalibrated
    solver = make_tree_solver("MoveBucket", robot.model, realtime=True, planning=planning)
    solver.reset(obs)
    node = next(n for n in solver.root.iterate() if n.name == "calibrate cameras (robot seen)")
    solver.step(obs)
    assert node._job is not None  # noqa: SLF001 (sent off the tick, not solved in it)
    deadline = time.monotonic() + 300
    while node._job is not None and time.monotonic() < deadline:  # noqa: SLF001
        time.sleep(0.5)
        solver.step(dataclasses.replace(obs, points=obs.points.copy()))
    assert "corrected" in node.feedback_message, node.feedback_message
    fixed = solver.bb.observation
    assert np.median(np.linalg.norm(fixed.points[fixed.sensor_index == 0] - clean[index == 0], axis=1)) < 0.004
