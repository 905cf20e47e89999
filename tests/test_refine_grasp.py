"""Grasps corrected where the cameras are noisy or off: the cabinet trees' "refine grasp (close views)" at the
pregrasp in a drawer episode, and the pick trees' "correct grasp (hand seen)" in a PickCube episode.

Clean cameras: the planned grasp is kept (the trees plan as they did before the node existed). Noisy depth and
cameras whose poses are off: the node measures the range noise and the hand's offset, moves the grasp, and
the new grasp is one the arm reaches (IK solved); the episode goes on to close the gripper.
"""

from __future__ import annotations

import numpy as np
import pytest
from py_trees.common import Status

from handleit.behaviors import make_tree_solver
from handleit.harness.sim_robot import SimRobot
from tests.helpers import make_env

REFINE = "refine grasp (close views)"


def run_until_corrected(task: str, node_name: str, perturbation: str | None, seed: int, max_steps: int,
                        calibrate_cameras: bool = True):
    """Run ``task``'s tree until the node ``node_name`` succeeds: (node, the grasp planned before that tick, solver)."""
    env = make_env(task=task, obs_mode="pointcloud", sensor_perturbation=perturbation)
    robot = SimRobot(env)
    obs = robot.reset(seed=seed)
    solver = make_tree_solver(task, robot.model, calibrate_cameras=calibrate_cameras)
    solver.reset(obs)
    node = next(n for n in solver.root.iterate() if n.name == node_name)
    while robot.steps < max_steps:
        planned = None if solver.bb.X_WG_grasp is None else np.array(solver.bb.X_WG_grasp)
        robot.act(solver.step(obs))
        obs = robot.observe()
        if node.status == Status.SUCCESS:
            return node, planned, solver
    pytest.fail(f"{node_name} did not run within {max_steps} steps (failed: {solver.tools.failure_reasons})")


def run_until_refined(perturbation: str | None, seed: int = 1, max_steps: int = 160):
    return run_until_corrected("OpenCabinetDrawer", REFINE, perturbation, seed, max_steps)


def test_clean_cameras_keep_the_planned_grasp():
    node, planned, solver = run_until_refined(None)
    assert node.feedback_message.startswith("kept the planned grasp")
    np.testing.assert_array_equal(solver.bb.X_WG_grasp, planned)


def test_noisy_and_miscalibrated_cameras_move_the_grasp():
    node, planned, solver = run_until_refined("depth_noise=0.005,extrinsics=0.01/1deg")
    message = node.feedback_message
    assert message.startswith("refined:"), message
    assert "range noise" in message and "hand seen" in message
    shift = np.linalg.norm(solver.bb.X_WG_grasp[:3, 3] - planned[:3, 3])
    assert 0.002 < shift < 0.06
    # The new grasp is the one the arm's new joint target reaches.
    X = solver.tools.ik.tcp_pose(solver.bb.q_grasp, solver.tools.side)
    np.testing.assert_allclose(X[:3, 3], solver.bb.X_WG_grasp[:3, 3], atol=0.006)


def run_pick_until_corrected(perturbation: str | None, seed: int = 4, max_steps: int = 200, calibrate_cameras=True):
    return run_until_corrected("PickCube", "correct grasp (hand seen)", perturbation, seed, max_steps,
                               calibrate_cameras)


def test_pick_grasp_kept_on_calibrated_cameras_and_moved_on_miscalibrated_ones():
    node, planned, solver = run_pick_until_corrected(None)
    assert node.feedback_message.startswith("kept the plan"), node.feedback_message
    np.testing.assert_array_equal(solver.bb.X_WG_grasp, planned)
    # The camera calibrated against the robot at the first tick: the hand is then seen where it is.
    node, planned, solver = run_pick_until_corrected("extrinsics=0.01/1deg")
    assert node.feedback_message.startswith("kept the plan"), node.feedback_message
    # Without that calibration, the hand is seen off by the camera's error and the grasp moves by it.
    node, planned, solver = run_pick_until_corrected("extrinsics=0.01/1deg", calibrate_cameras=False)
    assert node.feedback_message.startswith("moved the hold"), node.feedback_message
    shift = np.linalg.norm(solver.bb.X_WG_grasp[:3, 3] - planned[:3, 3])
    assert 0.003 < shift < 0.06
