"""Small helpers shared by the env tests."""

from __future__ import annotations

import numpy as np

import handleit.envs

# Small cameras keep rendering tests fast; the default rig (3 x 400x160) is exercised by the benchmark.
SMALL_CAMERAS = dict(camera_width=160, camera_height=64)


def make_env(task: str = "OpenCabinetDrawer", **kwargs):
    kwargs.setdefault("obs_mode", "state")
    if kwargs["obs_mode"] != "state":
        for k, v in SMALL_CAMERAS.items():
            kwargs.setdefault(k, v)
    return handleit.envs.make(task, **kwargs)


def zero_action(env) -> np.ndarray:
    """An action that holds the robot still: zero velocities (normalized_joint_vel)."""
    return np.zeros(env.action_space.shape, dtype=np.float32)


def set_target_joint(env, fraction: float, velocity: float = 0.0) -> None:
    """Put the target drawer/door at ``fraction`` of its range (ground truth, for tests only)."""
    base = env.unwrapped
    lo, hi = base.target.q_range
    qpos = base.cabinet.get_qpos().copy()
    qvel = np.zeros_like(qpos)
    qpos[base.target.joint_index] = lo + fraction * (hi - lo)
    qvel[base.target.joint_index] = velocity
    base.cabinet.set_qpos(qpos)
    base.cabinet.set_qvel(qvel)
