"""Bad input gets a clear error that names the problem; out-of-range actions are clipped."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import handleit.envs
from handleit.envs import URDFError
from handleit.envs.object_model_errors import ObjectFileNotFoundError
from handleit.envs.cabinet_generator import cabinet_urdf
from tests.helpers import make_env, zero_action


def test_unknown_task_names_the_choices():
    with pytest.raises(ValueError, match="unknown task 'OpenFridge'.*OpenCabinetDrawer"):
        handleit.envs.make("OpenFridge")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(control_mode="joint_torque"), "unknown control mode 'joint_torque'.*pd_joint_pos"),
        (dict(obs_mode="depth"), "unknown obs_mode 'depth'.*pointcloud"),
        (dict(split="validation"), "unknown split 'validation'.*train, test"),
        (dict(model_ids=["drawer-train-999"]), "unknown drawer cabinet ids.*drawer-train-999"),
        (dict(sim_freq=500, control_freq=120), "sim_freq .*multiple of control_freq"),
        (dict(pointcloud_frame="camera"), "unknown pointcloud_frame 'camera'"),
    ],
)
def test_bad_env_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_env(**kwargs)


@pytest.fixture()
def user_cabinet(tmp_path):
    """A PartNet-Mobility-style model from elsewhere: a copy of a generated cabinet in a user folder."""
    folder = tmp_path / "my_cabinet"
    shutil.copytree(cabinet_urdf("door-test-001").parent, folder)
    return folder / "mobility.urdf"


def test_missing_urdf(tmp_path):
    with pytest.raises(FileNotFoundError, match="URDF not found: .*nothing_here.urdf"):
        make_env(urdf=tmp_path / "nothing_here.urdf")


def test_malformed_urdf(tmp_path):
    path = tmp_path / "broken.urdf"
    path.write_text("<robot name='x'><link name='a'></robot")
    with pytest.raises(URDFError, match="malformed URDF .*broken.urdf"):
        make_env(urdf=path)


def test_urdf_with_missing_mesh(user_cabinet):
    text = user_cabinet.read_text().replace("<box size=", "<mesh filename='meshes/gone.obj'/><box size=", 1)
    user_cabinet.write_text(text)
    with pytest.raises(ObjectFileNotFoundError, match="mesh that does not exist: .*gone.obj"):
        make_env(urdf=user_cabinet)


def test_a_urdf_from_elsewhere_with_its_target_link(user_cabinet):
    env = make_env(task="OpenCabinetDoor", urdf=user_cabinet)
    env.reset(seed=0)
    parts = [p for p in handleit.envs.articulated_object.movable_parts(env.unwrapped.cabinet) if p.kind == "door"]
    assert parts, "the copied cabinet has doors"
    env = make_env(task="OpenCabinetDoor", urdf=user_cabinet, target_link=parts[0].name)
    _, info = env.reset(seed=0)
    assert info["model_id"] == "my_cabinet"
    assert info["target_link"] == parts[0].name


@pytest.mark.parametrize(
    "task, link, message",
    [
        ("OpenCabinetDoor", "base", "not a door: its joint is fixed, a door needs a revolute joint"),
        ("OpenCabinetDoor", "no_such_link", "has no link 'no_such_link'"),
    ],
)
def test_target_link_that_is_not_a_part_of_the_task_kind(user_cabinet, task, link, message):
    env = make_env(task=task, urdf=user_cabinet, target_link=link)
    with pytest.raises(ValueError, match=message):
        env.reset(seed=0)


def test_target_link_of_the_wrong_kind(user_cabinet):
    env = make_env(task="OpenCabinetDoor", urdf=user_cabinet)
    env.reset(seed=0)
    parts = handleit.envs.articulated_object.movable_parts(env.unwrapped.cabinet)
    body = max(env.unwrapped.cabinet.links, key=lambda l: int(l.name.split("_")[1]) if l.name != "base" else -1)
    env = make_env(task="OpenCabinetDoor", urdf=user_cabinet, target_link=body.name)
    with pytest.raises(ValueError, match=f"'{body.name}' .* is not a door: its joint is fixed"):
        env.reset(seed=0)
    drawers = [p for p in parts if p.kind == "drawer"]
    if drawers:
        env = make_env(task="OpenCabinetDoor", urdf=user_cabinet, target_link=drawers[0].name)
        with pytest.raises(ValueError, match="is not a door: its joint is prismatic"):
            env.reset(seed=0)


def test_action_of_the_wrong_shape():
    env = make_env()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action has shape \(5,\), expected \(13,\).*normalized_joint_vel"):
        env.step(np.zeros(5))
    with pytest.raises(ValueError, match="numeric array"):
        env.step("forward")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_action_with_nan_or_inf_names_the_joint(bad):
    env = make_env()
    env.reset(seed=0)
    action = zero_action(env)
    action[7] = bad
    with pytest.raises(ValueError, match=r"NaN or inf: right_panda_joint4="):
        env.step(action)


def test_step_before_reset_is_refused():
    env = make_env()
    with pytest.raises(RuntimeError, match="reset"):
        env.unwrapped.step(np.zeros(13))


def test_out_of_range_actions_are_clipped():
    """An action of 5 behaves exactly as an action of 1 (ManiSkill clips too)."""

    def run(value):
        env = make_env()
        env.reset(seed=3)
        action = zero_action(env)
        action[[0, 4]] = value
        for _ in range(5):
            obs, *_ = env.step(action)
        return obs["agent"]["qpos"]

    clipped, edge = run(5.0), run(1.0)
    assert np.array_equal(clipped, edge)
    assert not np.array_equal(edge, run(0.5))
