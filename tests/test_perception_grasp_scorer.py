"""The learned grasp scorer: crops, training on a tiny generated data set, checkpoints, the registered predictor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from handleit.perception import grasp_scorer
from handleit.perception.antipodal_grasps import PANDA_HAND, sample_antipodal_grasps
from handleit.perception.grasp_predictors import get_grasp_predictor
from handleit.perception.grasp_scorer import (
    GraspScorerNet,
    grasp_crops,
    load_grasp_dataset,
    load_grasp_scorer,
    predict_grasp_success,
    save_grasp_dataset,
    save_grasp_scorer,
    train_grasp_scorer,
)
from tests.synthetic_objects import make_tabletop_object

TINY = {"point_layers": [32, 64], "head_layers": [32], "n_points": 64}


def pads_hold_the_object(points_W, X_WG) -> bool:
    """The labelling rule: at least 3 object points between the finger pads (the object is in the grip)."""
    p_G = (points_W - X_WG[:3, 3]) @ X_WG[:3, :3]
    between = ((np.abs(p_G[:, 0]) <= PANDA_HAND.pad_half_x_m) & (np.abs(p_G[:, 1]) <= 0.04)
               & (p_G[:, 2] >= PANDA_HAND.pad_z_m[0]) & (p_G[:, 2] <= PANDA_HAND.pad_z_m[1]))
    return int(between.sum()) >= 3


def tiny_dataset(seed: int, n_scenes: int = 6):
    """Sampled grasps on random boxes, and the same grasps pulled back or sideways: some miss the object."""
    rng = np.random.default_rng(seed)
    crops, labels = [], []
    for k in range(n_scenes):
        scene = make_tabletop_object(rng, "box", rng.uniform(0.03, 0.06, 3), pixel_rad=0.006, spacing_m=0.002)
        obj = scene.points_W[scene.is_object]
        grasps = sample_antipodal_grasps(obj, table_z=0.0, viewpoint_W=scene.camera_W[0], max_grasps=15, seed=k)
        poses = []
        for g in grasps:
            poses.append(g.X_WG)
            for _ in range(3):
                X = g.X_WG.copy()
                X[:3, 3] += rng.uniform(-0.05, 0.01) * X[:3, 2] + rng.uniform(-0.03, 0.03) * X[:3, 0]
                poses.append(X)
        crops.append(grasp_crops(obj, np.stack(poses), n_points=TINY["n_points"], seed=k))
        labels += [pads_hold_the_object(obj, X) for X in poses]
    return np.concatenate(crops), np.array(labels, dtype=np.uint8)


@pytest.fixture(scope="module")
def trained():
    crops, labels = tiny_dataset(seed=0, n_scenes=8)
    model, history = train_grasp_scorer(crops, labels, epochs=25, batch_size=32, lr=1e-2, seed=0, config=TINY)
    return model, history, crops, labels


def balanced_accuracy(probability, labels) -> float:
    predicted = probability > 0.5
    return float(np.mean([np.mean(predicted[labels == k] == k) for k in (0, 1)]))


def test_crops_are_in_the_gripper_frame():
    points = np.array([[0.0, 0.0, 0.1], [0.01, 0.02, 0.11], [1.0, 1.0, 1.0]])
    X_WG = np.eye(4)
    X_WG[:3, :3] = np.diag([1.0, -1.0, -1.0])  # approach down
    X_WG[:3, 3] = [0.0, 0.0, 0.1]
    X_turned = X_WG @ np.diag([-1.0, -1.0, 1.0, 1.0])  # the same grasp turned about its approach
    crops = grasp_crops(points, [X_WG, X_turned], n_points=50, voxel_m=None)
    assert crops.shape == (2, 50, 3) and crops.dtype == np.float32
    # Both near points, in G (the far one is outside the crop box), drawn with replacement.
    assert np.allclose(np.unique(crops[0], axis=0), [[0.0, 0.0, 0.0], [0.01, -0.02, -0.01]], atol=1e-7)
    assert np.allclose(np.unique(crops[1], axis=0), [[-0.01, 0.02, -0.01], [0.0, 0.0, 0.0]], atol=1e-7)
    empty = grasp_crops(points + 5.0, X_WG, n_points=8)
    assert empty.shape == (1, 8, 3) and not empty.any()
    with pytest.raises(ValueError, match="grasps"):
        grasp_crops(points, np.eye(3))


def test_training_decreases_the_loss_and_beats_chance_on_held_out_grasps(trained):
    model, history, _, labels = trained
    assert 0.2 < labels.mean() < 0.8  # both outcomes are well represented
    assert history["n_train"] + history["n_val"] == len(labels)
    assert history["train_loss"][-1] < 0.7 * history["train_loss"][0]
    assert history["val_balanced_accuracy"][history["best_epoch"]] > 0.75
    held_out_crops, held_out_labels = tiny_dataset(seed=1, n_scenes=3)
    assert balanced_accuracy(predict_grasp_success(model, held_out_crops), held_out_labels) > 0.75


def test_training_is_seeded_and_checks_its_input():
    crops, labels = tiny_dataset(seed=2, n_scenes=1)
    a = train_grasp_scorer(crops, labels, epochs=2, seed=5, config=TINY)[1]
    b = train_grasp_scorer(crops, labels, epochs=2, seed=5, config=TINY)[1]
    assert a["train_loss"] == b["train_loss"]
    with pytest.raises(ValueError, match="both classes"):
        train_grasp_scorer(crops, np.ones(len(crops), np.uint8), epochs=1)
    with pytest.raises(ValueError, match="labels: expected 0 or 1"):
        train_grasp_scorer(crops, np.full(len(crops), 2), epochs=1)
    with pytest.raises(ValueError, match=r"crops: expected shape \[M, n, 3\]"):
        train_grasp_scorer(crops[..., :2], labels, epochs=1)


def test_checkpoint_round_trip_and_clear_errors(trained, tmp_path):
    model, history, crops, _ = trained
    path = save_grasp_scorer(model, tmp_path / "scorer.pt", meta={"history": history})
    loaded = load_grasp_scorer(path)
    assert loaded.config == model.config and loaded.meta["history"]["best_epoch"] == history["best_epoch"]
    assert np.array_equal(predict_grasp_success(loaded, crops[:20]), predict_grasp_success(model, crops[:20]))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_grasp_scorer(tmp_path / "missing.pt")
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read"):
        load_grasp_scorer(tmp_path / "garbage.pt")
    torch.save({"weights": torch.zeros(3)}, tmp_path / "foreign.pt")
    with pytest.raises(ValueError, match="not a grasp scorer checkpoint"):
        load_grasp_scorer(tmp_path / "foreign.pt")
    wrong = torch.load(path, weights_only=True)
    wrong["config"]["point_layers"] = [16, 16]
    torch.save(wrong, tmp_path / "wrong.pt")
    with pytest.raises(ValueError, match="do not fit"):
        load_grasp_scorer(tmp_path / "wrong.pt")


def test_dataset_file_round_trip(tmp_path):
    crops = np.random.default_rng(0).normal(scale=0.02, size=(10, 16, 3)).astype(np.float32)
    labels = np.array([0, 1] * 5, dtype=np.uint8)
    path = save_grasp_dataset(tmp_path / "grasps.npz", crops, labels, meta={"task": "synthetic"},
                              width_m=np.full(10, 0.05, np.float32))
    data = load_grasp_dataset(path)
    assert np.array_equal(data.crops, crops) and np.array_equal(data.labels, labels)
    assert data.meta == {"task": "synthetic"} and np.allclose(data.extras["width_m"], 0.05)
    np.savez(tmp_path / "no_labels.npz", crops=crops)
    with pytest.raises(ValueError, match="missing \\['labels'\\]"):
        load_grasp_dataset(tmp_path / "no_labels.npz")
    with pytest.raises(FileNotFoundError):
        load_grasp_dataset(tmp_path / "none.npz")
    with pytest.raises(ValueError, match="extra 'width_m'"):
        save_grasp_dataset(tmp_path / "bad.npz", crops, labels, width_m=np.zeros(3))


def test_learned_scorer_predictor_end_to_end(trained, tmp_path, monkeypatch):
    model = trained[0]
    path = save_grasp_scorer(model, tmp_path / "scorer.pt")
    scene = make_tabletop_object(np.random.default_rng(11), "box", (0.04, 0.05, 0.05))
    masks = {"target": scene.is_object, "robot": np.zeros(len(scene.points_W), bool)}
    context = {"table_z": 0.0, "viewpoint_W": scene.camera_W[0]}
    predictor = get_grasp_predictor("learned_scorer", checkpoint=path, blend=0.2, max_grasps=10)
    grasps = predictor.predict(scene.points_W, masks, **context)
    assert 0 < len(grasps) <= 10
    scores = [g.score for g in grasps]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    # The poses are the analytic sampler's, re-ranked.
    candidates = get_grasp_predictor("antipodal_6dof", max_grasps=100).predict(scene.points_W, masks, **context)
    assert all(any(np.array_equal(g.X_WG, c.X_WG) for c in candidates) for g in grasps)
    assert predictor.predict(scene.points_W, {"target": np.zeros(len(scene.points_W), bool)}) == []
    monkeypatch.setattr(grasp_scorer, "DEFAULT_CHECKPOINT", tmp_path / "not_shipped.pt")
    with pytest.raises(FileNotFoundError, match="no shipped checkpoint"):
        get_grasp_predictor("learned_scorer")
    with pytest.raises(ValueError, match="blend"):
        get_grasp_predictor("learned_scorer", checkpoint=path, blend=2.0)


def test_network_is_order_invariant():
    net = GraspScorerNet(TINY).eval()
    crops = torch.randn(4, 64, 3) * 0.02
    with torch.no_grad():
        assert torch.allclose(net(crops), net(crops[:, torch.randperm(64)]), atol=1e-6)
