"""Demonstrations: their files (baselines/demo_files.py), their recording (harness/demos.py) and their controller
conversion (harness/convert_demos.py).

Short PickCube episodes (about 1 s each once the env is built) and a tiny point count keep this file fast.
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from handleit.baselines.demo_files import (
    DEFAULT_MIN_HEIGHT_M,
    DemoDataset,
    demo_obs_of_observation,
    downsample_point_cloud,
    load_demo_info,
    load_demos,
    read_demo,
)
from handleit.harness import demos as demos_module
from handleit.harness.convert_demos import convert_demos, convert_episode, drive_target, first_order_target
from handleit.harness.demos import DemoFileWriter, record_demos

TASK, MAX_STEPS, POINTS = "PickCube", 150, 32


def _record(out, episodes, **kwargs):
    return record_demos(TASK, "train", episodes, out, max_steps=MAX_STEPS, points=POINTS, log=None, **kwargs)


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("demos")
    stats = _record(out, 2)
    assert stats["kept"] == 2, stats  # the tree solves these PickCube seeds
    return out / f"{TASK}.h5"


# ----------------------------------------------------------------------------------------------------
# Point-cloud sampling (numpy only)
# ----------------------------------------------------------------------------------------------------
def test_downsample_without_replacement_when_enough_points():
    rng = np.random.default_rng(0)
    xyz = np.arange(300, dtype=np.float64).reshape(100, 3)
    masks = {"robot": np.arange(100) < 10}
    out = downsample_point_cloud(xyz, np.zeros((100, 3), np.uint8), masks, 50, rng)
    assert out["xyz"].shape == (50, 3) and out["xyz"].dtype == np.float32
    assert out["rgb"].dtype == np.uint8 and out["robot"].dtype == bool
    assert len(np.unique(out["xyz"][:, 0])) == 50  # no point twice
    # Masks travel with their points.
    np.testing.assert_array_equal(out["robot"], out["xyz"][:, 0] < 30)


def test_downsample_with_replacement_height_clip_and_empty_cloud():
    rng = np.random.default_rng(0)
    xyz = np.array([[0, 0, -0.1], [0, 0, 0.0], [0, 0, 0.2], [0, 0, 0.3]], dtype=np.float64)
    out = downsample_point_cloud(xyz, np.zeros((4, 3), np.uint8), {}, 10, rng, min_height_m=0.005)
    assert out["xyz"].shape == (10, 3)
    assert set(out["xyz"][:, 2].astype(np.float64).round(3)) == {0.2, 0.3}  # the floor and below are gone, the rest repeats
    empty = downsample_point_cloud(xyz, np.zeros((4, 3), np.uint8), {"robot": np.ones(4, bool)}, 5, rng, 1.0)
    assert not empty["xyz"].any() and not empty["robot"].any()
    with pytest.raises(ValueError, match="xyz has shape"):
        downsample_point_cloud(np.zeros((4, 2)), np.zeros((4, 3)), {}, 5, rng)


def test_first_order_target_reaches_the_next_state_in_one_step():
    tau, dt = 0.1, 0.01
    q_star = first_order_target(np.array([0.0]), np.array([0.01]), tau, dt)
    q_after = q_star + (0.0 - q_star) * np.exp(-dt / tau)  # the drive's first-order response
    np.testing.assert_allclose(q_after, [0.01])
    # With the full error correction the led target is that deadbeat target; with none, only the source's
    # step is led (an arm already on the source's path gets the same target either way).
    q_now, q_src_now, q_src_next = np.array([0.02]), np.array([0.0]), np.array([0.01])
    np.testing.assert_allclose(drive_target(q_now, q_src_now, q_src_next, tau, dt, 1.0),
                               first_order_target(q_now, q_src_next, tau, dt))
    np.testing.assert_allclose(drive_target(q_src_now, q_src_now, q_src_next, tau, dt, 0.0), q_star)


# ----------------------------------------------------------------------------------------------------
# HDF5 + JSON round trip
# ----------------------------------------------------------------------------------------------------
def test_round_trip_shapes_dtypes_and_json(demo_file):
    info = load_demo_info(demo_file)
    env_info = info["env_info"]
    assert env_info["env_id"] == "handleit/PickCube-v0" and env_info["control_mode"] == "normalized_joint_vel"
    assert env_info["max_episode_steps"] == MAX_STEPS and env_info["points"] == POINTS
    masks = env_info["obs_config"]["mask_names"]
    demos = load_demos(demo_file)
    assert [d["episode"]["episode_id"] for d in demos] == [0, 1]
    assert [d["episode"]["seed"] for d in demos] == [0, 1] and info["num_failed"] == 0
    with h5py.File(demo_file) as f:
        assert sorted(f) == ["traj_0", "traj_1"]
    for d in demos:
        T = len(d["actions"])
        ep = d["episode"]
        assert ep["elapsed_steps"] == T and ep["success"] and ep["control_mode"] == "normalized_joint_vel"
        assert ep["solver"] == "bt" and ep["split"] == "train" and ep["model_id"] == "cube"
        assert d["actions"].shape == (T, env_info["action_dim"]) and d["actions"].dtype == np.float32
        assert np.all(np.abs(d["actions"]) <= 1.0)
        for key in ("rewards", "success", "terminated", "truncated"):
            assert d[key].shape == (T,)
        assert d["rewards"].dtype == np.float32 and d["success"].dtype == bool
        # The episode ends at its first success (sparse reward 1, terminated), and only there.
        assert d["success"][-1] and d["terminated"][-1] and d["rewards"][-1] == 1.0
        assert not d["terminated"][:-1].any() and not d["truncated"].any()
        pc, agent = d["obs"]["pointcloud"], d["obs"]["agent"]
        assert pc["xyz"].shape == (T + 1, POINTS, 3) and pc["xyz"].dtype == np.float32
        assert pc["rgb"].shape == (T + 1, POINTS, 3) and pc["rgb"].dtype == np.uint8
        for name in masks:
            assert pc[name].shape == (T + 1, POINTS) and pc[name].dtype == bool
        assert pc["robot"].any()  # the robot is in view
        assert agent["qpos"].shape == (T + 1, 9) and agent["qvel"].shape == (T + 1, 9)
        assert agent["base_pose"].shape == (T + 1, 7) and agent["tcp_pose"].shape == (T + 1, 7)
        assert d["obs"]["extra"]["goal_pos"].shape == (T + 1, 3)
        # Proprioception follows the actions: the gripper closed during the episode.
        assert agent["qpos"][:, 7].min() < agent["qpos"][0, 7] - 0.005


def test_dataset_transitions(demo_file):
    data = DemoDataset(demo_file)
    lengths = [e["elapsed_steps"] for e in data.episodes]
    assert len(data) == sum(lengths) and data.actions.shape == (len(data), 9)
    assert len(data.obs["agent"]["qpos"]) == sum(lengths) + len(lengths)  # T+1 per episode
    assert data.dones.sum() == 2 and data.dones[lengths[0] - 1] and data.dones[-1]
    demo = read_demo(demo_file, 1)
    batch = data[lengths[0] + np.array([0, 5])]  # steps 0 and 5 of the second episode
    np.testing.assert_array_equal(batch["obs"]["agent"]["qpos"], demo["obs"]["agent"]["qpos"][[0, 5]])
    np.testing.assert_array_equal(batch["next_obs"]["agent"]["qpos"], demo["obs"]["agent"]["qpos"][[1, 6]])
    np.testing.assert_array_equal(batch["obs"]["pointcloud"]["xyz"], demo["obs"]["pointcloud"]["xyz"][[0, 5]])
    sample = data.sample(4, np.random.default_rng(0))
    assert sample["actions"].shape == (4, 9) and sample["next_obs"]["pointcloud"]["xyz"].shape == (4, POINTS, 3)
    assert "pointcloud" not in DemoDataset(demo_file, load_pointcloud=False).obs


# ----------------------------------------------------------------------------------------------------
# Interruption and resume
# ----------------------------------------------------------------------------------------------------
def test_resume_after_interruption_keeps_exactly_the_expected_episodes(tmp_path, monkeypatch):
    appended = []
    real_append = DemoFileWriter.append

    def append_then_die(self, part):
        if len(appended) == 1:
            raise KeyboardInterrupt("killed")  # the recorder stops before appending the second episode
        appended.append(part)
        return real_append(self, part)

    monkeypatch.setattr(DemoFileWriter, "append", append_then_die)
    with pytest.raises(KeyboardInterrupt):
        _record(tmp_path, 3)
    monkeypatch.undo()
    h5 = tmp_path / f"{TASK}.h5"
    assert [e["seed"] for e in load_demo_info(h5)["episodes"]] == [0]
    # A kill in the middle of an append leaves a group that is not marked complete: fake one.
    with h5py.File(h5, "a") as f:
        f.create_dataset("traj_1/actions", data=np.zeros((5, 9), np.float32))
    with pytest.raises(FileExistsError, match="--resume"):
        _record(tmp_path, 3)
    with pytest.raises(ValueError, match="points"):
        record_demos(TASK, "train", 3, tmp_path, max_steps=MAX_STEPS, points=POINTS + 1, resume=True, log=None)

    stats = _record(tmp_path, 3, resume=True)
    info = load_demo_info(h5)
    # Seed 1 had finished (its part file is adopted), seed 2 is rolled out; seed 0 is not rolled out again.
    assert sorted(e["seed"] for e in info["episodes"]) == [0, 1, 2] and stats["kept"] == 1
    assert stats["skipped"] == 2
    with h5py.File(h5) as f:
        assert sorted(f, key=lambda k: int(k[5:])) == [f"traj_{e['episode_id']}" for e in info["episodes"]]
        for name in f:
            assert f[name].attrs["complete"]
            assert len(f[name]["obs/agent/qpos"]) == len(f[name]["actions"]) + 1
    assert len(load_demos(h5)) == 3
    assert not (tmp_path / f".{TASK}.parts").exists()  # nothing left half-done

    # Resuming a complete file rolls out nothing.
    again = _record(tmp_path, 3, resume=True)
    assert again["skipped"] == 3 and again["kept"] == again["failed"] == 0


def test_unknown_task_and_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown task"):
        record_demos("NoSuchTask", episodes=1, out=tmp_path, log=None)
    with pytest.raises(ValueError, match="workers"):
        record_demos(TASK, episodes=1, out=tmp_path, workers=0, log=None)
    with pytest.raises(ValueError, match="ManiSkill3"):
        record_demos("ms3:PickCube-v1", episodes=1, out=tmp_path, log=None)


def test_demos_command_removes_the_ground_unless_told_to_keep_it():
    import argparse

    from handleit.harness.demos import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    assert parser.parse_args(["demos", "--task", TASK]).min_height == DEFAULT_MIN_HEIGHT_M > 0
    assert parser.parse_args(["demos", "--task", TASK, "--keep-ground"]).min_height is None
    assert parser.parse_args(["demos", "--task", TASK, "--min-height", "0.02"]).min_height == 0.02


# ----------------------------------------------------------------------------------------------------
# Controller conversion
# ----------------------------------------------------------------------------------------------------
def test_pd_joint_pos_conversion_tracks_the_source_and_succeeds(demo_file, tmp_path):
    stats = convert_demos(demo_file, "pd_joint_pos", tmp_path, episodes=1, log=None)
    assert stats["converted"] == 1 and stats["share"] == 1.0
    info = load_demo_info(tmp_path / f"{TASK}.h5")
    assert info["env_info"]["control_mode"] == "pd_joint_pos" and info["env_info"]["action_dim"] == 8
    assert info["env_info"]["source"]["control_mode"] == "normalized_joint_vel"
    (converted,) = load_demos(tmp_path / f"{TASK}.h5")
    source = read_demo(demo_file, 0)
    ep = converted["episode"]
    assert ep["control_mode"] == "pd_joint_pos" and ep["success"] and converted["success"][-1]
    # Closed loop: every reached arm state within 0.02 rad of the source's (the drive lags ~0.1 s, so an
    # open-loop replay of the joint positions would trail by several centiradians).
    T = len(source["actions"])
    assert ep["max_qpos_error"] < 0.02
    q_conv, q_src = converted["obs"]["agent"]["qpos"], source["obs"]["agent"]["qpos"]
    assert len(q_conv) >= T + 1
    np.testing.assert_allclose(q_conv[: T + 1, :7], q_src[:, :7], atol=0.02)
    # The absolute targets lie within the Panda's joint limits; the gripper value is normalized.
    assert np.all(np.abs(converted["actions"][:, 7]) <= 1.0)
    assert converted["obs"]["pointcloud"]["xyz"].shape[1:] == (POINTS, 3)


def test_ee_delta_pose_conversion_succeeds_closed_loop(demo_file):
    info = load_demo_info(demo_file)["env_info"]
    source = read_demo(demo_file, 1, load_pointcloud=False)
    episode, stats = convert_episode(source, info, "pd_ee_delta_pose", record=False)
    assert episode is None and stats["success"]
    assert stats["max_tcp_error_m"] < 0.02 and stats["start_qpos_error"] < 1e-6


def test_convert_command_prints_the_share(demo_file, tmp_path, capsys):
    from handleit.harness.cli import main

    assert main(["convert-demos", "--in", str(demo_file), "--to", "pd_joint_delta_pos", "--out", str(tmp_path),
                 "--episodes", "1"]) == 0
    assert "1 of 1 converted demos still succeed (share 1.000)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="overwrite the source"):
        convert_demos(demo_file, "pd_joint_pos", demo_file.parent, log=None)
    assert json.loads((tmp_path / f"{TASK}.json").read_text())["env_info"]["control_mode"] == "pd_joint_delta_pos"
    # Recording into a folder that holds a file, without --resume, is refused with a clear message.
    assert main(["demos", "--task", TASK, "--episodes", "1", "--max-steps", str(MAX_STEPS), "--points",
                 str(POINTS), "--out", str(demo_file.parent)]) == 2
    assert "--resume" in capsys.readouterr().err


def test_demo_obs_of_observation_matches_the_recorded_layout(demo_file):
    """A policy acting through the robot interface builds the same observation dict as the files hold."""
    from handleit.harness.sim_robot import SimRobot

    robot = SimRobot(demos_module._env(TASK, "train", MAX_STEPS))
    observation = robot.reset(seed=0, options={"model_id": "cube"})
    live = demo_obs_of_observation(observation, POINTS, np.random.default_rng(0))
    stored = read_demo(demo_file, 0)["obs"]
    assert live.keys() == stored.keys()
    for section in live:
        assert live[section].keys() == stored[section].keys()
        for key, value in live[section].items():
            assert value.shape == stored[section][key].shape[1:] and value.dtype == stored[section][key].dtype
    # The same episode seed draws the same points.
    np.testing.assert_array_equal(live["pointcloud"]["xyz"], stored["pointcloud"]["xyz"][0])
    np.testing.assert_allclose(live["agent"]["qpos"], stored["agent"]["qpos"][0])
    np.testing.assert_allclose(live["agent"]["tcp_pose"][:3], stored["agent"]["tcp_pose"][0, :3], atol=1e-5)
    # Quaternions: the same rotation (q and -q are one).
    assert abs(live["agent"]["tcp_pose"][3:] @ stored["agent"]["tcp_pose"][0, 3:]) > 1 - 1e-5
