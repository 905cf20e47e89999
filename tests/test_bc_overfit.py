"""The learned baselines' pipeline, end to end on one PickCube demonstration (issue 18, item 3).

A behavior-cloning policy overfit on a single demonstration must succeed when replayed on that
demonstration's seed. On the way: the recorded actions replay open loop (deterministic env, action t paired
with observation t); the recorder stores the expert's label of the final observation; the policy solver that
evaluation runs, fed the recorded observations, gives the recorded actions (features built as in training).

The default run trains a small network (64 points) for 3000 steps (~30-60 s on 2 shared cores); the
``slow`` variant trains the ``cpu_small`` config used in docs/benchmarks.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from handleit.baselines.bc import train_bc
from handleit.baselines.dataset import load_demo_data
from handleit.baselines.demo_files import read_demo
from handleit.baselines.networks import get_config
from handleit.baselines.training import TrainLog
from handleit.harness.demos import record_demos
from handleit.harness.pipeline_check import policy_on_recorded_observations, replay_demo_actions, roll_out_policy

# Overfitting one demonstration: a higher learning rate than the config's 3e-4, and few points (the state
# carries most of one episode; the cube is ~1% of the points).
FAST = get_config("cpu_small").with_overrides({"steps": "3000", "lr": "1e-3", "num_points": "64",
                                               "point_mlp": "32,64"})


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demos")
    stats = record_demos("PickCube", episodes=1, out=out, max_steps=200, seed=0, min_height_m=0.005, log=None)
    assert stats["kept"] == 1
    return out / "PickCube.h5"


def test_recorded_actions_replay_open_loop_on_the_seed(demo):
    replay = replay_demo_actions(demo, 0)
    recorded = read_demo(demo, 0)
    assert replay.max_qpos_error == 0.0  # the env retraces the recording exactly
    assert replay.success and replay.first_success_step == len(recorded["actions"])


def test_the_recorder_stores_the_experts_label_of_the_last_observation(demo):
    recorded = read_demo(demo, 0)
    hold = recorded["terminal_action"]
    assert hold.shape == recorded["actions"].shape[1:]
    assert np.abs(hold[:7]).max() < 0.05  # the arm holds still at the goal
    assert np.all(hold[7:] < 0)  # and the gripper stays closed on the cube
    data = load_demo_data(demo)
    assert data.terminal_labels == 1 and len(data) == len(recorded["actions"]) + 1
    assert data.next_obs_index[-1] == data.obs_index[-1]  # absorbing: no next episode's observation after it
    assert load_demo_data(demo, terminal_labels=False).terminal_labels == 0


def _overfit_and_replay(demo, cfg, tmp_path):
    data = load_demo_data(demo)
    result = train_bc(data, cfg, seed=0, log=TrainLog(printer=None))
    ckpt = result.save(tmp_path / "overfit.pt", data, str(demo))
    loss = result.log.final()["action_mse"]
    assert loss < 2e-3, f"BC did not overfit one demonstration: action MSE {loss:.2e}"
    fed = policy_on_recorded_observations(ckpt, demo, 0)
    # Evaluation's features are training's: on the recorded observations the solver's error is the loss's.
    assert np.mean(fed.action_mse) < 3 * loss + 1e-4, (np.mean(fed.action_mse), loss)
    closed = roll_out_policy(ckpt, demo, 0, max_steps=200)
    assert closed.success, f"overfit policy failed on its own seed: {closed.info}"


def test_bc_overfit_on_one_demonstration_succeeds_on_its_seed(demo, tmp_path):
    _overfit_and_replay(demo, FAST, tmp_path)


@pytest.mark.slow
def test_bc_overfit_with_the_cpu_small_network_succeeds_on_its_seed(demo, tmp_path):
    _overfit_and_replay(demo, get_config("cpu_small").with_overrides({"steps": "4000", "lr": "1e-3"}), tmp_path)
