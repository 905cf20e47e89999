"""Checks of the learned baselines' pipeline on one demonstration (issue 18): can a policy copy what it saw?

- :func:`replay_demo_actions`: the recorded actions, open loop, on the demonstration's seed: the env must
  retrace the recorded joint positions (deterministic env, action t paired with observation t) and succeed.
- :func:`policy_on_recorded_observations`: the policy solver (``baselines/policy.py``, what evaluation runs)
  fed the observations the env gives along the recorded actions: its actions against the recorded ones, step
  by step. With an overfit policy the error is the training loss's: evaluation builds the features as
  training did (frame, sampling, normalisation, masks, gripper channel).
- :func:`roll_out_policy`: the policy in closed loop on the demonstration's seed, as ``handleit eval`` runs it.

``benchmarks/bc_overfit.py`` runs the three on a demonstration file; ``tests/test_bc_overfit.py`` asserts them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import handleit.envs
from handleit.baselines.demo_files import load_demo_info, read_demo
from handleit.baselines.policy import PolicySolver
from handleit.harness.sim_robot import SimRobot
from handleit.types import Command


@dataclass
class Rollout:
    success: bool
    steps: int
    first_success_step: int | None = None  # control steps until success (the episode ends there)
    info: dict = field(default_factory=dict)  # the env's last info (ground truth)
    max_qpos_error: float | None = None  # against the recorded joint positions, over the recorded steps (rad, m)
    action_mse: list[float] = field(default_factory=list)  # per step, policy against recorded action


_ENVS: dict[tuple, object] = {}  # one env per (task, split, horizon, controller) in a process: building one takes seconds


def _robot_for(demo_path: Path, demo: dict, max_steps: int | None = None) -> tuple[SimRobot, dict]:
    info = load_demo_info(demo_path)["env_info"]
    key = (info["task"], demo["episode"].get("split", "train"), max_steps or info["max_episode_steps"],
           info["control_mode"])
    if key not in _ENVS:
        _ENVS[key] = handleit.envs.make(key[0], obs_mode="pointcloud", split=key[1], max_episode_steps=key[2],
                                        control_mode=key[3])
    return SimRobot(_ENVS[key]), info


def _reset(robot: SimRobot, demo: dict):
    episode = demo["episode"]
    return robot.reset(seed=int(episode["seed"]), options={"model_id": episode["model_id"]})


def replay_demo_actions(demo_path: str | Path, episode_id: int = 0) -> Rollout:
    """The recorded actions of one demonstration, open loop, on its seed."""
    demo = read_demo(demo_path, episode_id)
    robot, _ = _robot_for(Path(demo_path), demo)
    _reset(robot, demo)
    recorded_q = demo["obs"]["agent"]["qpos"]
    errors = [float(np.abs(robot.observe().qpos - recorded_q[0]).max())]
    first = None
    for t, action in enumerate(demo["actions"]):
        robot.act(Command(qvel=np.zeros(len(action)), normalized_qvel=np.asarray(action, np.float32)))
        errors.append(float(np.abs(robot.observe().qpos - recorded_q[t + 1]).max()))
        if first is None and robot.info.get("success"):
            first = t + 1
        if robot.done:
            break
    return Rollout(bool(first is not None), robot.steps, first, dict(robot.info), max(errors))


def policy_on_recorded_observations(checkpoint: str | Path, demo_path: str | Path, episode_id: int = 0) -> Rollout:
    """The policy solver's action at each observation of the recorded trajectory (the env driven by the
    recorded actions), against the recorded action; ``action_mse[t]`` per step."""
    demo = read_demo(demo_path, episode_id)
    robot, info = _robot_for(Path(demo_path), demo)
    observation = _reset(robot, demo)
    solver = PolicySolver(checkpoint, info["task"], robot.model)
    solver.reset(observation)
    mse = []
    for action in demo["actions"]:
        mse.append(float(np.mean((solver.action(observation) - action) ** 2)))
        robot.act(Command(qvel=np.zeros(len(action)), normalized_qvel=np.asarray(action, np.float32)))
        observation = robot.observe()
    return Rollout(bool(robot.info.get("success")), robot.steps, None, dict(robot.info), action_mse=mse)


def roll_out_policy(checkpoint: str | Path, demo_path: str | Path, episode_id: int = 0,
                    max_steps: int | None = None) -> Rollout:
    """The policy in closed loop on the demonstration's seed and object (the evaluation harness's loop)."""
    demo = read_demo(demo_path, episode_id)
    robot, info = _robot_for(Path(demo_path), demo, max_steps)
    observation = _reset(robot, demo)
    solver = PolicySolver(checkpoint, info["task"], robot.model)
    solver.reset(observation)
    recorded_q = demo["obs"]["agent"]["qpos"]
    errors, first = [], None
    while not robot.done:
        robot.act(solver.step(observation))
        observation = robot.observe()
        if robot.steps < len(recorded_q):
            errors.append(float(np.abs(observation.qpos - recorded_q[robot.steps]).max()))
        if first is None and robot.info.get("success"):
            first = robot.steps
    return Rollout(first is not None, robot.steps, first, dict(robot.info), max(errors) if errors else None)
