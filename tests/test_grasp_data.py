"""Grasp data generated in simulation: the floating-hand trial labels grasps physically; a tiny generation run
writes a data set the scorer's loader reads; the ranking report compares a scorer with the analytic score."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

import handleit.envs
from handleit.envs.rigid_object import mesh_object_asset
from handleit.harness.grasp_data import (
    FloatingHandTrial,
    GenerationConfig,
    average_precision,
    generate_grasp_data,
    perturb_grasp_poses,
    ranking_report,
)
from handleit.perception.grasp_scorer import GraspDataset, load_grasp_dataset

BOX_M = (0.05, 0.04, 0.06)  # x, y, z extents


@pytest.fixture(scope="module")
def box_trial(tmp_path_factory):
    path = tmp_path_factory.mktemp("box") / "box.obj"
    trimesh.creation.box(BOX_M).export(path)
    asset = mesh_object_asset(path, collision="hull")
    trial = FloatingHandTrial(asset)
    X_WO = np.eye(4)
    X_WO[:3, 3] = [0.02, -0.03, BOX_M[2] / 2]  # resting on the table top (z = 0)
    return trial, X_WO, path


def top_down_grasp(X_WO, depth_m=0.02) -> np.ndarray:
    """A grasp from above, closing across the box's 5 cm side (x), the pads `depth_m` below its top."""
    X_WG = np.eye(4)
    X_WG[:3, :3] = [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]  # columns: G x, y (closing), z (approach)
    X_WG[:3, 3] = X_WO[:3, 3] + [0.0, 0.0, BOX_M[2] / 2 - depth_m]
    return X_WG


def test_floating_hand_holds_a_good_grasp_and_misses_in_the_air(box_trial):
    trial, X_WO, _ = box_trial
    good = trial.try_grasp(X_WO, top_down_grasp(X_WO), width_m=0.06)
    assert good.success and good.reason == "held"
    assert good.rise_m == pytest.approx(trial.config.lift_m, abs=0.01)  # lifted with the hand
    assert good.opening_m == pytest.approx(BOX_M[0], abs=0.004)  # the fingers rest on the box's sides

    beside = top_down_grasp(X_WO)
    beside[1, 3] += 0.12  # 12 cm to the side of the box: nothing between the fingers
    air = trial.try_grasp(X_WO, beside, width_m=0.06)
    assert not air.success and air.reason == "empty"
    assert abs(air.rise_m) < 0.005  # the box was not disturbed

    # The same scene is reused: the box is put back at rest for every trial, and the good grasp holds again.
    assert trial.try_grasp(X_WO, top_down_grasp(X_WO), width_m=0.06).success


def test_floating_hand_trial_uses_the_env_object_physics(box_trial):
    trial, _, path = box_trial
    env = handleit.envs.make("PickObject", obs_mode="state", model_path=path)
    try:
        env.reset(seed=0)
        body = env.unwrapped.obj_body
        assert trial.body.mass == pytest.approx(body.mass, rel=1e-6)
        env_friction = {s.physical_material.static_friction for s in body.collision_shapes}
        assert {s.physical_material.static_friction for s in trial.body.collision_shapes} == env_friction
        assert trial.body.solver_position_iterations == body.solver_position_iterations
    finally:
        env.close()


def test_floating_hand_rejects_bad_poses(box_trial):
    trial, X_WO, _ = box_trial
    with pytest.raises(ValueError, match="4x4"):
        trial.try_grasp(X_WO, np.eye(3), width_m=0.05)


def test_perturbed_grasps_are_near_misses():
    rng = np.random.default_rng(0)
    X = np.stack([np.eye(4), np.eye(4)])
    X[1, :3, 3] = [0.1, 0.0, 0.0]
    out, source = perturb_grasp_poses(X, 50, rng)
    moved = np.linalg.norm(out[:, :3, 3] - X[source, :3, 3], axis=1)
    assert np.all((moved >= 0.01 - 1e-9) & (moved <= 0.02 + 1e-9))
    cos = (np.einsum("nij,nij->n", out[:, :3, :3], X[source, :3, :3]) - 1) / 2
    angle = np.degrees(np.arccos(np.clip(cos, -1, 1)))
    assert np.all((angle >= 10 - 1e-6) & (angle <= 25 + 1e-6))
    assert np.allclose(np.einsum("nij,nkj->nik", out[:, :3, :3], out[:, :3, :3]), np.eye(3), atol=1e-9)


def test_tiny_generation_run_writes_a_loadable_data_set(tmp_path):
    config = GenerationConfig(split="train", objects=1, views=1, analytic_per_view=3, perturbed_per_view=2,
                              n_points=32)
    path = tmp_path / "grasps.npz"
    data = generate_grasp_data(config, path, command="test")
    loaded = load_grasp_dataset(path)
    n = len(loaded.labels)
    assert 1 <= n <= 5 and loaded.crops.shape == (n, 32, 3) and loaded.crops.dtype == np.float32
    assert set(np.unique(loaded.labels)) <= {0, 1}
    np.testing.assert_array_equal(loaded.labels, data["labels"])
    assert loaded.extras["perturbed"].sum() == 2  # the near misses are marked
    assert np.isnan(loaded.extras["analytic_score"][loaded.extras["perturbed"] == 1]).all()
    assert set(loaded.extras["reason"]) <= {"held", "empty", "dropped"}
    # Crops are in G: within the crop box, not at the object's world position.
    assert np.abs(loaded.crops).max() <= 0.06 + 1e-6
    assert loaded.meta["config"]["objects"] == 1 and loaded.meta["command"] == "test"
    assert loaded.meta["trials"] == n and loaded.meta["trials_per_s"] > 0


def test_average_precision():
    assert average_precision([0.9, 0.8, 0.1], [1, 1, 0]) == pytest.approx(1.0)
    assert average_precision([0.1, 0.8, 0.9], [1, 1, 0]) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert np.isnan(average_precision([0.3], [0]))


def test_ranking_report_compares_learned_and_analytic_top1():
    # Two views; the analytic score puts a failure first in both, the "learned" one puts the successes first.
    labels = np.array([0, 1, 1, 0, 1, 0], dtype=np.uint8)
    extras = {"analytic_score": np.array([0.9, 0.5, np.nan, 0.8, 0.2, np.nan]),
              "perturbed": np.array([0, 0, 1, 0, 0, 1], dtype=np.uint8), "view": np.array([0, 0, 0, 1, 1, 1])}
    data = GraspDataset(np.zeros((6, 4, 3), np.float32), labels, extras)
    report = ranking_report(np.array([0.2, 0.9, 0.7, 0.1, 0.6, 0.3]), data)
    assert report["top1_learned"] == 1.0 and report["top1_analytic"] == 0.0
    assert report["top1_oracle"] == 1.0 and report["top1_random"] == 0.5
    assert report["n_views"] == 2 and report["n_analytic"] == 4 and report["accuracy"] == 1.0
    with pytest.raises(ValueError, match="shape"):
        ranking_report(np.zeros(3), data)
