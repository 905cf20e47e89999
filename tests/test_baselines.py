"""Learned baselines: features, BC and TD3+BC training steps, checkpoints, the policy solver, the comparison table."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from handleit.baselines.bc import train_bc
from handleit.baselines.checkpoint import load_checkpoint
from handleit.baselines.dataset import load_demo_data
from handleit.baselines.features import FeatureSpec, arrays_of_demo_obs, batch_features
from handleit.baselines.networks import CONFIGS, NetworkConfig, PointNetTransformerEncoder
from handleit.baselines.td3bc import train_td3bc
from handleit.baselines.training import TrainLog
from handleit.harness.demos import DemoFileWriter, EpisodeData, write_part_file
from handleit.poses import pose7_to_matrix

DOF = 9
MASKS = ("robot", "target", "target_link")

# A network small enough that a few steps take a second on a shared CPU.
TINY = NetworkConfig(point_mlp=(16, 32), state_mlp=(16,), head_mlp=(32,), num_points=32, batch_size=16,
                     steps=100, lr=3e-3)


def write_synthetic_demos(out: Path, trajectories: int = 4, steps: int = 12, points: int = 64, seed: int = 0,
                          terminal_labels: bool = False) -> Path:
    """A tiny demonstration file written by the recorder's own writer (``harness/demos.py``). The
    demonstrated action is a smooth function of the joint positions, so that a policy can learn it;
    ``terminal_labels``: each episode stores the expert's action at its last observation too."""
    rng = np.random.default_rng(seed)
    env_info = {"env_id": "handleit/PickCube-v0", "task": "PickCube", "control_mode": "normalized_joint_vel",
                "max_episode_steps": steps, "points": points, "action_dim": DOF, "source": None,
                "obs_config": {"obs_mode": "pointcloud", "frame": "world", "points": points,
                               "mask_names": list(MASKS), "min_height_m": None}}
    with DemoFileWriter(out, "PickCube", env_info, resume=False) as writer:
        for i in range(trajectories):
            episode = EpisodeData({"index": i, "seed": i, "model_id": "cube", "split": "train",
                                   "control_mode": "normalized_joint_vel", "solver": "synthetic", "success": True})
            qpos = rng.uniform(-1, 1, (steps + 1, DOF)).astype(np.float32)
            episode.obs = [_synthetic_obs(qpos[0], points, rng)]
            for t in range(steps):
                last = t == steps - 1
                episode.add_step(0.8 * np.tanh(2 * qpos[t]), float(last), last, last, False,
                                 _synthetic_obs(qpos[t + 1], points, rng))
            if terminal_labels:
                episode.terminal_action = 0.8 * np.tanh(2 * qpos[steps])
            writer.append(write_part_file(writer.parts_dir / f"{i}.h5", episode))
    return writer.h5_path


def _synthetic_obs(qpos: np.ndarray, points: int, rng: np.random.Generator) -> dict:
    cloud = {"xyz": rng.uniform(-0.3, 0.3, (points, 3)).astype(np.float32),
             "rgb": rng.integers(0, 256, (points, 3), dtype=np.uint8)}
    cloud |= {name: np.arange(points) % 4 == k for k, name in enumerate(MASKS)}
    agent = {"qpos": qpos, "qvel": rng.normal(0, 0.1, DOF).astype(np.float32),
             "base_pose": np.array([-0.615, 0, 0, 1, 0, 0, 0], np.float32),
             "tcp_pose": np.array([0.0, 0, 0.2, 0, 1, 0, 0], np.float32)}
    return {"pointcloud": cloud, "agent": agent, "extra": {"goal_pos": rng.uniform(-0.1, 0.1, 3).astype(np.float32)}}


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    return write_synthetic_demos(tmp_path_factory.mktemp("demos"))


def test_demo_data_reads_the_recorder_layout(demos):
    data = load_demo_data(demos)
    assert data.trajectories == 4 and len(data) == 4 * 12 and data.xyz_W.shape == (4 * 13, 64, 3)
    assert data.mask_names == MASKS and data.task == "PickCube" and data.goal_W is not None
    # Transition t of trajectory 1 uses observation 13 + t; its next observation follows it.
    assert data.obs_index[12] == 13 and data.terminated.sum() == 4 and data.rewards.sum() == 4


def test_features_put_points_and_goal_in_the_chosen_frame():
    rng = np.random.default_rng(0)
    base = np.array([[1.0, 2.0, 0.0, np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)]])  # yaw 90 degrees
    spec = FeatureSpec(("robot",), dof=2, has_goal=True, num_points=3, goal_cue_points=5)
    xyz = np.array([[[1.0, 3.0, 0.5], [2.0, 2.0, 0.0], [1.0, 2.0, 1.0]]])
    points, state = batch_features(spec, xyz, np.zeros((1, 3, 3), np.uint8), np.array([[[1], [0], [0]]]),
                                   np.zeros((1, 2)), np.ones((1, 2)), base, base, np.array([[1.0, 2.0, 2.0]]), rng)
    assert points.shape == (1, 3 + 5, spec.point_dim) and state.shape == (1, spec.state_dim)
    # p_B = R_WB^T (p_W - p_WB): +y in the world is +x of a base turned 90 degrees.
    xyz_B = {tuple(np.round(p[:3], 6)) for p in points[0, :3]}
    assert xyz_B == {(1.0, 0.0, 0.5), (0.0, -1.0, 0.0), (0.0, 0.0, 1.0)}
    np.testing.assert_allclose(state[0, -3:], [0, 0, 2.0], atol=1e-6)
    cues = points[0, 3:]
    assert np.all(cues[:, -1] == 1) and np.all(np.linalg.norm(cues[:, :3] - [0, 0, 2.0], axis=1) <= 0.0251)
    X = pose7_to_matrix(base[0], normalize=True)
    np.testing.assert_allclose(X[:3, 0], [0, 1, 0], atol=1e-9)


def test_points_in_the_frame_match_the_per_point_formula_for_random_poses():
    """The batched transform (a matmul) against p_F = R_WF^T (p_W - p_WF) point by point, both frames, and the
    base-frame points of a demonstration turned to the world and back."""
    rng = np.random.default_rng(3)
    B, N = 4, 50
    quat = rng.normal(size=(B, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    base = np.concatenate([rng.uniform(-1, 1, (B, 3)), quat], axis=1)
    tcp = np.concatenate([rng.uniform(-1, 1, (B, 3)), quat[::-1]], axis=1)
    xyz_W = rng.uniform(-2, 2, (B, N, 3))
    for frame, pose in (("base", base), ("tcp", tcp)):
        spec = FeatureSpec((), dof=1, has_goal=False, num_points=N, point_frame=frame)
        points, _ = batch_features(spec, xyz_W, np.zeros((B, N, 3), np.uint8), np.zeros((B, N, 0)), np.zeros((B, 1)),
                                   np.zeros((B, 1)), base, tcp, None, rng)
        for b in range(B):
            X = pose7_to_matrix(pose[b], normalize=True)
            expected = (xyz_W[b] - X[:3, 3]) @ X[:3, :3]  # rows: (R^T (p - t))^T
            np.testing.assert_allclose(points[b, :, :3], expected, atol=1e-5)
    X_WB = pose7_to_matrix(base, normalize=True)
    xyz_B = np.stack([(xyz_W[b] - X_WB[b, :3, 3]) @ X_WB[b, :3, :3] for b in range(B)])
    obs = {"pointcloud": {"xyz": xyz_B, "rgb": np.zeros((B, N, 3), np.uint8)},
           "agent": {"qpos": np.zeros((B, 1)), "qvel": np.zeros((B, 1)), "base_pose": base, "tcp_pose": tcp}}
    np.testing.assert_allclose(arrays_of_demo_obs(obs, (), frame="base")["xyz_W"], xyz_W, atol=1e-9)


def test_transformer_encoder_ignores_empty_groups():
    cfg = NetworkConfig(encoder="pointnet_transformer", point_mlp=(8, 16), state_mlp=(8,), transformer_heads=2)
    torch.manual_seed(0)
    enc = PointNetTransformerEncoder(point_dim=8, state_dim=4, cfg=cfg, group_channels=(6, 7)).eval()
    points = torch.rand(2, 10, 8)
    points[..., 6:] = 0  # no point in any mask: only the background and all-points groups are present
    out = enc(points, torch.rand(2, 4))
    assert out.shape == (2, 16) and torch.isfinite(out).all()


def test_bc_training_decreases_its_loss_and_round_trips(demos, tmp_path):
    data = load_demo_data(demos)
    result = train_bc(data, TINY, seed=0, log=TrainLog(printer=None))
    loss = result.log.history["loss"]
    assert np.mean(loss[-5:]) < 0.7 * loss[0]
    path = result.save(tmp_path / "bc.pt", data, str(demos))
    loaded = load_checkpoint(path)
    assert loaded.algo == "bc" and loaded.spec == result.spec and loaded.meta["recorder"]["points"] == 64
    points, state = data.observation_batch(result.spec, np.arange(3), np.random.default_rng(1))
    with torch.no_grad():
        expected = result.actor(torch.from_numpy(points), torch.from_numpy(state))
        got = loaded.actor(torch.from_numpy(points), torch.from_numpy(state))
    torch.testing.assert_close(got, expected)


def test_bc_nll_loss_decreases(demos):
    data = load_demo_data(demos)
    cfg = NetworkConfig(**{**TINY.to_dict(), "bc_loss": "nll", "steps": 30})
    result = train_bc(data, cfg, seed=0, log=TrainLog(printer=None))
    nll = result.log.history["loss"]
    assert np.mean(nll[-5:]) < nll[0]


def test_td3bc_training_decreases_critic_loss_and_raises_q(demos, tmp_path):
    data = load_demo_data(demos)
    result = train_td3bc(data, TINY, seed=0, log=TrainLog(printer=None))
    h = result.log.history
    assert np.mean(h["critic_loss"][-5:]) < 0.2 * h["critic_loss"][0]
    assert np.mean(h["q"][-5:]) > h["q"][0]  # the actor climbs its critic: Q(s, pi(s)) grows
    loaded = load_checkpoint(result.save(tmp_path / "td3bc.pt", data))
    assert loaded.algo == "td3bc" and loaded.config.alpha == 2.5


def test_td3bc_with_a_small_alpha_decreases_the_bc_term(demos):
    # With alpha = 2.5 the Q term outweighs the BC term on these sparse-reward demonstrations (the critic's
    # action gradient is extrapolation: every demonstrated action is the one in the data); a small alpha
    # weights the BC term, which must then fall.
    data = load_demo_data(demos)
    cfg = NetworkConfig(**{**TINY.to_dict(), "alpha": 0.1})
    h = train_td3bc(data, cfg, seed=0, log=TrainLog(printer=None)).log.history
    assert np.mean(h["bc_mse"][-5:]) < 0.9 * h["bc_mse"][0]
    assert np.mean(h["critic_loss"][-5:]) < h["critic_loss"][0]


def test_checkpoint_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
    torch.save({"something": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a handleit baseline checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    with pytest.raises(ValueError, match="unknown config key"):
        CONFIGS["cpu_small"].with_overrides({"nope": "1"})


# ----------------------------------------------------------------------------------------------------
# The policy through the solver protocol, on a real env
# ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bc_checkpoint(demos, tmp_path_factory) -> Path:
    data = load_demo_data(demos)
    cfg = NetworkConfig(**{**TINY.to_dict(), "steps": 5})
    result = train_bc(data, cfg, log=TrainLog(printer=None))
    return result.save(tmp_path_factory.mktemp("ckpt") / "PickCube-bc.pt", data)


@pytest.fixture(scope="module")
def pick_robot():
    from handleit.harness.sim_robot import SimRobot
    from tests.helpers import make_env

    env = make_env("PickCube", obs_mode="pointcloud")
    yield SimRobot(env)
    env.close()


def test_policy_solver_acts_on_a_pickcube_observation(bc_checkpoint, pick_robot):
    from handleit.harness.solvers import make_solver

    robot = pick_robot
    observation = robot.reset(seed=0)
    solver = make_solver(f"bc:{bc_checkpoint}", "PickCube", robot.model)
    solver.reset(observation)
    command = solver.step(observation)
    a = command.normalized_qvel
    assert a.shape == (DOF,) and a.dtype == np.float32 and np.all(np.abs(a) <= 1) and np.all(np.isfinite(a))
    # The action reaches the env unchanged; qvel holds the same velocities in rad/s and m/s.
    np.testing.assert_array_equal(robot.action_of(command), a)
    np.testing.assert_allclose(command.qvel, a * robot.model.velocity_limits, rtol=1e-6)
    robot.act(command)
    assert robot.steps == 1
    # The same seed gives the same action (the point subsets are drawn from the solver's seed).
    solver.reset(observation)
    np.testing.assert_array_equal(solver.step(observation).normalized_qvel, a)
    assert make_solver(f"policy:{bc_checkpoint}", "PickCube", robot.model).policy.algo == "bc"
    with pytest.raises(ValueError, match="holds a 'bc' policy"):
        make_solver(f"td3bc:{bc_checkpoint}", "PickCube", robot.model)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        make_solver("bc:/nonexistent/ckpt.pt", "PickCube", robot.model)


def test_sim_robot_rejects_a_bad_normalized_command(pick_robot):
    from handleit.types import Command

    robot = pick_robot
    robot.reset(seed=0)
    with pytest.raises(ValueError, match="normalized_qvel has shape"):
        robot.action_of(Command(qvel=np.zeros(DOF), normalized_qvel=np.zeros(3)))
    with pytest.raises(ValueError, match="NaN or inf"):
        robot.action_of(Command(qvel=np.zeros(DOF), normalized_qvel=np.full(DOF, np.nan)))


def test_train_command_writes_a_checkpoint(demos, tmp_path, capsys):
    from handleit.harness.cli import main

    out = tmp_path / "ckpt.pt"
    assert main(["train", "--algo", "td3bc", "--data", str(demos), "--out", str(out), "--config", "cpu_small",
                 "--steps", "3", "--set", "num_points=32", "--set", "point_mlp=8,16", "--log-every", "0"]) == 0
    loaded = load_checkpoint(out)
    assert loaded.algo == "td3bc" and loaded.config.point_mlp == (8, 16) and loaded.meta["steps"] == 3
    assert "saved" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------------
# The comparison table
# ----------------------------------------------------------------------------------------------------
def test_compare_writes_table_csv_and_chart_from_records(tmp_path):
    from dataclasses import asdict

    from handleit.harness.compare import comparison_specs, run_comparison
    from handleit.harness.evaluation import EpisodeRecord

    tasks, solvers = ["PickCube", "PickObject"], ["bt", "bc:ckpts/{task}-bc.pt"]
    specs = comparison_specs(tasks, solvers, ["train", "test"], episodes=4, max_steps=200)
    assert {s.solver for s in specs} == {"bt", "bc:ckpts/PickCube-bc.pt", "bc:ckpts/PickObject-bc.pt"}
    # Earlier evaluations hold every episode: the comparison reads them and runs nothing.
    records = tmp_path / "earlier.jsonl"
    with records.open("w") as f:
        for s in specs:
            success = s.solver == "bt" or (s.split == "train" and s.index < 1)
            f.write(json.dumps(asdict(EpisodeRecord(s.task, s.split, s.solver, s.max_steps, s.seed, s.model_id,
                                                    s.index, success=success))) + "\n")
    cells = run_comparison(tasks, solvers, ["train", "test"], 4, 200, tmp_path / "cmp", extra_records=[records],
                           progress=False)
    assert not (tmp_path / "cmp" / "records.jsonl").exists()
    rates = {(c.task, c.solver, c.split): c.rate for c in cells}
    assert rates[("PickCube", "bt", "test")] == 1.0 and rates[("PickObject", "bc", "train")] == 0.25
    assert rates[("PickObject", "bc", "test")] == 0.0
    md = (tmp_path / "cmp" / "comparison.md").read_text()
    assert "| task | bt train | bt test | bc train | bc test |" in md
    assert "| PickCube | 1.000 (4/4) | 1.000 (4/4) | 0.250 (1/4) | 0.000 (0/4) |" in md
    assert "bc = `bc:ckpts/{task}-bc.pt`" in md
    rows = list(csv.DictReader((tmp_path / "cmp" / "comparison.csv").open()))
    assert len(rows) == 8 and {r["solver_spec"] for r in rows if r["solver"] == "bc"} == {
        "bc:ckpts/PickCube-bc.pt", "bc:ckpts/PickObject-bc.pt"}
    png = (tmp_path / "cmp" / "comparison.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
