"""Compact copies of demonstration files (harness/compact_demos.py), a policy exported without its training state,
the throughput probe, and benchmarks/train_budget.py (training for a wall-time budget off the simulators).

Synthetic demonstration files of a few dozen points (tests/test_baselines.py): seconds in all."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from handleit.baselines.bc import BCTrainer, train_bc
from handleit.baselines.checkpoint import export_policy, load_checkpoint, load_training_state
from handleit.baselines.dataset import load_demo_data
from handleit.baselines.demo_files import load_demo_info, load_demos
from handleit.baselines.training import TrainLog, measure_steps_per_s
from handleit.harness.compact_demos import compact_demos, compact_points
from tests.test_baselines import MASKS, TINY, write_synthetic_demos

ROOT = Path(__file__).resolve().parents[1]
POINTS = 64


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return write_synthetic_demos(tmp_path_factory.mktemp("src"), trajectories=3, steps=10, points=POINTS,
                                 terminal_labels=True)


def _rows(demo: dict, t: int) -> np.ndarray:
    """Step t's points as rows (x, y, z, r, g, b, masks...), sorted: the cloud as a set."""
    pc = demo["obs"]["pointcloud"]
    rows = np.concatenate([pc["xyz"][t].astype(np.float64), pc["rgb"][t].astype(np.float64),
                           np.stack([pc[m][t] for m in MASKS], -1).astype(np.float64)], -1)
    return rows[np.lexsort(rows.T[::-1])]


def test_compact_copy_with_every_point_exact_is_the_same_data(source, tmp_path):
    stats = compact_demos(source, tmp_path, points=POINTS, decimals=None, log=None)
    assert stats["compacted"] == 3 and stats["transitions"] == 30 and stats["points"] == POINTS
    original, compact = load_demos(source), load_demos(stats["h5"])
    for a, b in zip(original, compact, strict=True):
        for t in range(len(a["actions"]) + 1):  # the same points, in another order
            np.testing.assert_array_equal(_rows(a, t), _rows(b, t))
        for key in ("actions", "rewards", "success", "terminated", "truncated", "terminal_action"):
            np.testing.assert_array_equal(a[key], b[key])
        for section in ("agent", "extra"):
            for key, value in a["obs"][section].items():
                np.testing.assert_array_equal(value, b["obs"][section][key])
        assert a["episode"] == b["episode"]
    # Training reads it unchanged, and, the points being the same sets, trains the same (the networks pool over
    # the points; only the order of float sums differs).
    data_a, data_b = load_demo_data(source), load_demo_data(stats["h5"])
    assert (len(data_a), data_a.terminal_labels) == (len(data_b), data_b.terminal_labels) == (33, 3)
    cfg = TINY.with_overrides({"num_points": str(POINTS), "steps": "5"})
    losses = [train_bc(d, cfg, seed=0, log=TrainLog(printer=None)).log.history["loss"] for d in (data_a, data_b)]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)


def test_compact_copy_subsamples_rounds_and_says_so(source, tmp_path):
    stats = compact_demos(source, tmp_path, points=16, decimals=3, seed=5, log=None)
    info = load_demo_info(stats["h5"])["env_info"]
    assert info["points"] == info["obs_config"]["points"] == 16
    assert info["source"]["recorded_points"] == POINTS and info["source"]["position_decimals"] == 3
    # The policy solver reads the recorder's point count from the checkpoint's meta: it then draws 16 points from
    # the live cloud, as the copy holds.
    assert load_demo_data(stats["h5"]).recorder["points"] == 16
    for a, b in zip(load_demos(source), load_demos(stats["h5"]), strict=True):
        for t in range(len(a["actions"]) + 1):
            full, small = _rows(a, t), _rows(b, t)
            assert len(small) == 16 and len(np.unique(small, axis=0)) == 16  # without replacement
            # Each kept point is a recorded point (colour and masks exactly, position within the 1 mm of HDF5's
            # scale-offset filter at 3 decimals).
            distance = np.abs(small[:, None, :] - full[None, :, :])
            match = (distance[..., :3].max(-1) <= 1e-3 + 1e-6) & (distance[..., 3:].max(-1) == 0)
            assert match.any(1).all()
        np.testing.assert_array_equal(a["actions"], b["actions"])


def test_compact_points_sorts_by_mask_then_x_and_keeps_all_when_asked_for_more():
    rng = np.random.default_rng(0)
    cloud = {"xyz": rng.uniform(size=(2, 20, 3)).astype(np.float32), "rgb": rng.integers(0, 255, (2, 20, 3), np.uint8),
             "robot": rng.uniform(size=(2, 20)) < 0.5}
    out = compact_points(cloud, ("robot",), 50, rng)
    assert out["xyz"].shape == (2, 20, 3)
    for t in range(2):
        key = out["robot"][t].astype(int) * 10 + out["xyz"][t, :, 0]
        assert np.all(np.diff(key) >= 0)
    with pytest.raises(ValueError, match="points must be"):
        compact_points(cloud, ("robot",), 0, rng)


def test_compact_refuses_to_overwrite_and_resumes(source, tmp_path):
    compact_demos(source, tmp_path, points=8, log=None)
    with pytest.raises(FileExistsError):
        compact_demos(source, tmp_path, points=8, log=None)
    again = compact_demos(source, tmp_path, points=8, resume=True, log=None)
    assert again["compacted"] == 0 and again["skipped"] == 3 and again["demos"] == 3
    with pytest.raises(ValueError, match="points"):  # another point count is another file
        compact_demos(source, tmp_path, points=9, resume=True, log=None)
    with pytest.raises(ValueError, match="overwrite"):
        compact_demos(source, source.parent, points=8, log=None)


def test_a_copy_in_parts_reads_back_as_the_whole_copy(source, tmp_path):
    whole = load_demo_data(compact_demos(source, tmp_path / "whole", points=POINTS, decimals=None, log=None)["h5"])
    first = compact_demos(source, tmp_path / "a", points=POINTS, decimals=None, episodes=2, log=None)
    rest = compact_demos(source, tmp_path / "b", points=POINTS, decimals=None, first=2, log=None)
    assert (first["demos"], rest["demos"]) == (2, 1)
    parts = load_demo_data([first["h5"], rest["h5"]])
    assert parts.trajectories == whole.trajectories == 3 and len(parts) == len(whole)
    np.testing.assert_array_equal(parts.actions, whole.actions)
    with pytest.raises(ValueError, match="none from the 3-th on"):
        compact_demos(source, tmp_path / "c", points=POINTS, first=3, log=None)
    with pytest.raises(ValueError, match="first must be >= 0"):
        compact_demos(source, tmp_path / "d", points=POINTS, first=-1, log=None)


def test_compact_demos_command(source, tmp_path, capsys):
    from handleit.harness.cli import main

    assert main(["compact-demos", "--in", str(source), "--out", str(tmp_path), "--points", "12"]) == 0
    assert "3 demos compacted" in capsys.readouterr().out
    assert load_demo_data(tmp_path / source.name).xyz_W.shape[1] == 12


# ----------------------------------------------------------------------------------------------------
# Training off the simulators: the throughput probe, exported policies, benchmarks/train_budget.py
# ----------------------------------------------------------------------------------------------------
def test_measure_steps_per_s_counts_steps_after_the_warmup():
    class Counter:
        steps = 0

        def step(self):
            self.steps += 1

    now = [0.0]

    def clock():  # every call: a quarter second later
        now[0] += 0.25
        return now[0]

    trainer = Counter()
    timed, rate = measure_steps_per_s(trainer, seconds=1.0, warmup_steps=3, clock=clock)
    assert trainer.steps == 3 + timed and timed == 4 and rate == pytest.approx(4 / 1.25)


def test_export_policy_keeps_the_actor_alone(source, tmp_path):
    data = load_demo_data(source)
    cfg = TINY.with_overrides({"steps": "3"})
    from handleit.baselines.td3bc import train_td3bc

    train_td3bc(data, cfg, log=TrainLog(printer=None), out=tmp_path / "run.pt")
    path = export_policy(tmp_path / "run.pt", tmp_path / "policy.pt")
    full, small = load_checkpoint(tmp_path / "run.pt"), load_checkpoint(path)
    assert load_training_state(path) is None and path.stat().st_size < (tmp_path / "run.pt").stat().st_size
    assert small.algo == "td3bc" and small.meta["steps_done"] == 3 and small.meta["exported_from"].endswith("run.pt")
    points, state = torch.zeros(2, 32, full.spec.point_dim), torch.ones(2, full.spec.state_dim)
    with torch.no_grad():
        torch.testing.assert_close(full.actor(points, state), small.actor(points, state))


def test_train_budget_script_trains_stops_for_snapshots_and_exports(source, tmp_path):
    out, export = tmp_path / "run" / "bc.pt", tmp_path / "export"
    command = [sys.executable, str(ROOT / "benchmarks" / "train_budget.py"), "--algo", "bc", "--data", str(source),
               "--out", str(out), "--export", str(export), "--config", "cpu_small", "--set", "num_points=32",
               "--set", "point_mlp=8,16", "--set", "batch_size=8", "--steps", "9", "--snapshots", "2",
               "--checkpoints", "3", "--device", "cpu"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in export.iterdir()) == ["bc-extras.tar", "bc.curve.csv", "bc.pt"]
    policy = load_checkpoint(export / "bc.pt")
    assert policy.meta["steps_done"] == 9 and load_training_state(export / "bc.pt") is None
    with tarfile.open(export / "bc-extras.tar") as tar:
        names = sorted(tar.getnames())
        summary = json.load(tar.extractfile("bc-summary.json"))
    assert names == ["bc-step3.pt", "bc-step6.pt", "bc-summary.json", "bc.curve.png"]
    assert summary["steps"] == summary["steps_done"] == 9 and summary["transitions"] == 33
    # The run stopped twice for snapshots and resumed exactly: the same weights as one run straight through.
    straight = train_bc(load_demo_data(source), load_checkpoint(out).config, log=TrainLog(printer=None), device="cpu")
    for key, value in straight.actor.state_dict().items():
        torch.testing.assert_close(policy.actor.state_dict()[key], value)
    # Budget mode: a probe sets the step count (no assertion on the count: it depends on the machine).
    budget = subprocess.run([*command[:command.index("--steps")], "--budget-s", "0.5", "--probe-s", "0.2",
                             "--out", str(tmp_path / "budget" / "bc.pt"), "--device", "cpu"],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert budget.returncode == 0, budget.stdout + budget.stderr
    assert "probe:" in budget.stdout and (tmp_path / "budget" / "bc.pt").exists()


def test_bc_trainer_probe_leaves_the_run_unchanged(source):
    """The probe's steps are spent on a throw-away trainer: the run that follows starts from the seed again."""
    data = load_demo_data(source)
    cfg = TINY.with_overrides({"steps": "3"})
    measure_steps_per_s(BCTrainer(data, cfg.with_overrides({"steps": "1000"}), 0, "cpu"), 0.0, warmup_steps=2)
    after = train_bc(data, cfg, log=TrainLog(printer=None)).log.history["loss"]
    alone = train_bc(data, cfg, log=TrainLog(printer=None)).log.history["loss"]
    assert after == alone
