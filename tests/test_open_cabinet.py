"""Success checks of OpenCabinetDrawer / OpenCabinetDoor, and every bundled cabinet standing still."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.envs.cabinet_generator import SPLIT_COUNTS, cabinet_ids
from tests.helpers import make_env, set_target_joint, zero_action

TASK_OF_KIND = {"drawer": "OpenCabinetDrawer", "door": "OpenCabinetDoor"}


@pytest.mark.parametrize("task", ["OpenCabinetDrawer", "OpenCabinetDoor"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_opened_by_setting_its_joint_succeeds_and_closed_does_not(task, seed):
    env = make_env(task=task)
    _, info = env.reset(seed=seed)
    assert not info["success"] and info["open_fraction"] == pytest.approx(0.0, abs=1e-6)
    for _ in range(3):
        _, reward, terminated, _, info = env.step(zero_action(env))
    assert not info["success"] and not info["open_enough"] and reward == 0.0 and not terminated

    set_target_joint(env, 0.95)
    env.step(zero_action(env))  # the jump made by setting the joint counts as motion for one step
    _, reward, terminated, _, info = env.step(zero_action(env))
    assert info["open_fraction"] >= 0.9
    assert info["static"] and info["success"]
    assert reward == 1.0 and terminated

    env.reset(seed=seed)
    set_target_joint(env, 0.85)
    env.step(zero_action(env))
    _, _, _, _, info = env.step(zero_action(env))
    assert not info["open_enough"] and not info["success"]


@pytest.mark.parametrize("task", ["OpenCabinetDrawer", "OpenCabinetDoor"])
def test_the_target_part_can_start_open(task):
    """Reset option initial_open_fraction: the target starts open, the episode's draws unchanged."""
    env = make_env(task=task)
    _, closed = env.reset(seed=2)
    robot_q = env.unwrapped.robot.qpos.copy()
    _, info = env.reset(seed=2, options={"initial_open_fraction": 0.8})
    assert info["open_fraction"] == pytest.approx(0.8, abs=1e-4) and not info["success"]
    assert info["target_link"] == closed["target_link"] and info["model_id"] == closed["model_id"]
    np.testing.assert_allclose(env.unwrapped.robot.qpos, robot_q)
    for _ in range(3):
        _, _, _, _, info = env.step(zero_action(env))
    assert info["open_fraction"] > 0.75  # stays open (damped joint, nothing pushing it)
    with pytest.raises(ValueError, match="initial_open_fraction"):
        env.reset(seed=2, options={"initial_open_fraction": 1.5})


@pytest.mark.parametrize("task", ["OpenCabinetDrawer", "OpenCabinetDoor"])
def test_open_but_moving_is_not_success(task):
    """Static means slower than 0.1 m/s and 1 rad/s; a part closing at 3 (m or rad)/s is not static."""
    env = make_env(task=task)
    env.reset(seed=4)
    set_target_joint(env, 0.999, velocity=-3.0)
    _, _, _, _, info = env.step(zero_action(env))
    assert info["open_enough"]
    assert not info["static"] and not info["success"]


def test_success_uses_the_target_part_only():
    """Opening another drawer than the target does not count."""
    env = make_env(task="OpenCabinetDrawer")
    for seed in range(20):
        env.reset(seed=seed)
        base = env.unwrapped
        others = [j for j in base.cabinet.active_joints if j is not base.target.joint]
        if others:
            break
    qpos = base.cabinet.get_qpos().copy()
    for joint in others:
        i = list(base.cabinet.active_joints).index(joint)
        qpos[i] = joint.limit[0][1]
    base.cabinet.set_qpos(qpos)
    env.step(zero_action(env))
    _, _, _, _, info = env.step(zero_action(env))
    assert info["open_fraction"] == pytest.approx(0.0, abs=1e-3)
    assert not info["success"]


@pytest.mark.parametrize("kind, split", [(k, s) for k in SPLIT_COUNTS for s in SPLIT_COUNTS[k]])
def test_every_cabinet_stands_still_under_zero_action(kind, split):
    """Every generated cabinet of both splits loads in its task, and over 200 steps of zero action nothing
    moves, falls through the floor or explodes."""
    env = make_env(task=TASK_OF_KIND[kind], split=split)
    for model_id in cabinet_ids(kind, split):
        obs, _ = env.reset(seed=0, options={"model_id": model_id})
        base = env.unwrapped
        robot_q0 = obs["agent"]["qpos"].copy()
        cabinet_q0 = base.cabinet.get_qpos().copy()
        root0 = base.cabinet.root_pose
        for _ in range(200):
            obs, _, _, _, info = env.step(zero_action(env))
        q = obs["agent"]["qpos"]
        assert np.all(np.isfinite(obs["state"])), model_id
        assert np.abs(q - robot_q0).max() < 1e-3, f"{model_id}: robot drifted"
        assert np.abs(base.cabinet.get_qpos() - cabinet_q0).max() < 1e-3, f"{model_id}: a part moved"
        assert np.allclose(base.cabinet.root_pose.p, root0.p) and np.allclose(base.cabinet.root_pose.q, root0.q)
        for link in base.cabinet.links:
            assert np.linalg.norm(link.linear_velocity) < 1e-3, f"{model_id}: {link.name} moves"
            assert link.entity_pose.p[2] > -1e-3, f"{model_id}: {link.name} below the floor"
        assert not info["success"]
