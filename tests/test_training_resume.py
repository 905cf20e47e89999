"""Training that survives a stop (issue 18): checkpoints with the whole training state, written atomically;
``resume`` continues exactly; learning curves (CSV, PNG) with evaluations."""

from __future__ import annotations

import csv
import dataclasses

import pytest
import torch

from handleit.baselines.bc import train_bc
from handleit.baselines.checkpoint import load_checkpoint, load_training_state
from handleit.baselines.curves import curve_paths
from handleit.baselines.dataset import load_demo_data
from handleit.baselines.td3bc import train_td3bc
from handleit.baselines.training import TrainingInterrupted, TrainLog
from tests.test_baselines import TINY, write_synthetic_demos

STEPS = 24


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return load_demo_data(write_synthetic_demos(tmp_path_factory.mktemp("demos")))


def _weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("train", [train_bc, train_td3bc], ids=["bc", "td3bc"])
def test_half_then_resume_gives_the_same_weights_and_losses_as_one_go(data, tmp_path, train):
    cfg = dataclasses.replace(TINY, steps=STEPS)
    whole = train(data, cfg, seed=3, log=TrainLog(printer=None), out=tmp_path / "whole.pt")
    with pytest.raises(TrainingInterrupted) as stop:
        train(data, cfg, seed=3, log=TrainLog(printer=None), out=tmp_path / "halves.pt", stop_after=STEPS // 2)
    assert stop.value.step == STEPS // 2
    state = load_training_state(tmp_path / "halves.pt")
    assert state["trainer"]["steps_done"] == STEPS // 2
    resumed = train(data, cfg, seed=3, log=TrainLog(printer=None), out=tmp_path / "halves.pt", resume=True)

    for a, b in [(whole.actor, resumed.actor)] + ([(whole.critic, resumed.critic)] if whole.critic else []):
        wa, wb = _weights(a), _weights(b)
        assert wa.keys() == wb.keys()
        for k in wa:
            assert torch.equal(wa[k], wb[k]), k
    assert dict(whole.log.history) == dict(resumed.log.history)  # the same batches, in the same order
    # The checkpoints load as policies, with the same actor.
    for k, v in load_checkpoint(tmp_path / "halves.pt").actor.state_dict().items():
        assert torch.equal(v, whole.actor.state_dict()[k])


def test_checkpoints_every_n_steps_are_atomic_and_resume_refuses_another_config(data, tmp_path, monkeypatch):
    out = tmp_path / "run.pt"
    cfg = dataclasses.replace(TINY, steps=10)
    seen = []
    real_replace = __import__("os").replace

    def spy(src, dst):  # every write goes through a temporary file in the same folder
        seen.append((str(src), str(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr("handleit.baselines.checkpoint.os.replace", spy)
    train_bc(data, cfg, log=TrainLog(printer=None, every=5), out=out, checkpoint_every=4)
    written = [(s, d) for s, d in seen if d == str(out)]
    assert len(written) == 3  # steps 4, 8 and 10
    assert all(s.startswith(str(tmp_path)) and s.endswith(".tmp") for s, _ in written)
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))
    monkeypatch.undo()
    with pytest.raises(ValueError, match="config differs"):
        train_bc(data, dataclasses.replace(cfg, lr=1e-2), log=TrainLog(printer=None), out=out, resume=True)
    # A finished run resumed does nothing more.
    again = train_bc(data, cfg, log=TrainLog(printer=None), out=out, resume=True)
    assert len(again.log.history["loss"]) == 10


def test_curves_hold_losses_and_evaluations_and_survive_a_resume(data, tmp_path):
    out = tmp_path / "run.pt"
    cfg = dataclasses.replace(TINY, steps=12)
    calls = []

    def evaluate(checkpoint, step):
        assert load_checkpoint(checkpoint).meta["steps_done"] == step  # the policy of that step
        calls.append(step)
        return {"success": step / 12, "episodes": 2, "seeds": "train 1000-1001"}

    with pytest.raises(TrainingInterrupted):
        train_bc(data, cfg, log=TrainLog(printer=None, every=3), out=out, evaluate=evaluate, eval_every=4,
                 stop_after=5)
    result = train_bc(data, cfg, log=TrainLog(printer=None, every=3), out=out, evaluate=evaluate, eval_every=4,
                      resume=True)
    assert calls == [4, 8, 12] and [e["step"] for e in result.evaluations] == [4, 8, 12]
    csv_path, png_path = curve_paths(out)
    assert png_path.stat().st_size > 1000
    rows = list(csv.DictReader(csv_path.open()))
    assert [int(r["step"]) for r in rows] == [3, 4, 6, 8, 9, 12]
    assert [r["eval_success"] for r in rows if r["eval_success"]] == [str(4 / 12), str(8 / 12), "1.0"]
    assert all(float(r["loss"]) > 0 for r in rows)


def test_the_train_command_resumes_and_evaluates_on_seeds_apart_from_the_demonstrations(tmp_path, capsys):
    from handleit.harness.cli import main

    demos = write_synthetic_demos(tmp_path / "demos")  # PickCube layout; demonstration seeds 0-3, train split
    out = tmp_path / "bc.pt"
    common = ["train", "--algo", "bc", "--data", str(demos), "--out", str(out), "--config", "cpu_small",
              "--set", "num_points=32", "--set", "point_mlp=16,32", "--set", "batch_size=8", "--steps", "6",
              "--log-every", "2", "--eval-every", "3", "--eval-episodes", "1", "--eval-max-steps", "5"]
    assert main([*common, "--eval-seed", "2"]) == 2  # seed 2 is a demonstration's
    assert "demonstration seeds on the train split" in capsys.readouterr().out
    assert main([*common, "--resume"]) == 0  # no checkpoint yet: starts afresh
    rows = list(csv.DictReader(curve_paths(out)[0].open()))
    evaluated = [r for r in rows if r["eval_success"]]
    assert [int(r["step"]) for r in evaluated] == [3, 6]
    assert all(r["eval_episodes"] == "1" and r["eval_seeds"] == "train 1000-1000" for r in evaluated)
    assert main([*common, "--resume"]) == 0  # finished: nothing more to do
    assert load_training_state(out)["trainer"]["steps_done"] == 6


def test_a_policy_without_joint_velocities_in_its_state_trains_and_loads(data, tmp_path):
    cfg = dataclasses.replace(TINY, steps=3, state_qvel=False)
    result = train_bc(data, cfg, log=TrainLog(printer=None))
    assert result.spec.state_dim == data.dof + 3  # qpos and the goal
    loaded = load_checkpoint(result.save(tmp_path / "noqvel.pt", data))
    assert loaded.spec.qvel is False and loaded.actor.state_norm.mean.shape == (data.dof + 3,)
