"""A trained policy as a solver of the evaluation harness: ``handleit eval --solver bc:checkpoint.pt``.

:class:`PolicySolver` follows the solver protocol (``reset(observation)``, ``step(observation) ->
Command``) of ``handleit.harness.solvers``. Each step it builds the network inputs from the observation
exactly as training built them from the demonstrations: the observation is put in the demonstration layout by
the recorder's own function (``baselines.demo_files.demo_obs_of_observation``: the valid points, its ground removal
if it used one, sampled uniformly to its point count, e.g. 1200), then
:func:`~handleit.baselines.features.batch_features` takes the network's subset (``FeatureSpec.num_points``)
and the frame, as the training batches do.

The actor's output is the env's action (normalized joint velocities, Let's Handle It (arXiv 2202.11792) footnote 2). It
is sent as ``Command.normalized_qvel``, which :class:`~handleit.harness.sim_robot.SimRobot` passes to the env unchanged;
the command's ``qvel`` holds the same velocities in m/s and rad/s (base x/y turned to the world frame) for logs
and for robots that read only ``qvel``.
"""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from handleit.baselines.checkpoint import ALGORITHMS, LoadedPolicy, load_checkpoint
from handleit.baselines.dataset import POLICY_CONTROL_MODE
from handleit.baselines.demo_files import demo_obs_of_observation
from handleit.baselines.features import arrays_of_demo_obs, batch_features
from handleit.control.actions import base_to_world_velocity, denormalize_velocity
from handleit.torch_threads import torch_threads
from handleit.types import Command, Observation, RobotModel

RECORDED_POINTS = 1200  # the recorder's point count when a checkpoint does not say (ManiSkill2 (arXiv 2302.04659) F.3)


@lru_cache(maxsize=8)
def _cached_checkpoint(path: str, mtime_ns: int) -> LoadedPolicy:
    return load_checkpoint(path)


def load_policy(path: str | Path) -> LoadedPolicy:
    """A checkpoint's actor, loaded once per process (the harness makes a solver per episode)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint {path}")
    return _cached_checkpoint(str(path.resolve()), path.stat().st_mtime_ns)


class PolicySolver:
    """Acts with a trained actor; ``failed_node`` is always None (a policy has no nodes to blame)."""

    failed_node = None

    def __init__(self, checkpoint: str | Path, task: str, model: RobotModel, expected_algo: str | None = None,
                 seed: int = 0, threads: int | None = 1):
        """``expected_algo`` ("bc", "td3bc") makes a checkpoint of another algorithm an error; ``seed`` draws
        the point subsets; ``threads``: torch's intra-op threads while acting (one is fastest for a network this
        small on a shared CPU)."""
        self.policy = load_policy(checkpoint)
        if expected_algo is not None and self.policy.algo != expected_algo:
            raise ValueError(f"{checkpoint} holds a {self.policy.algo!r} policy, not {expected_algo!r}; "
                             f"use --solver {self.policy.algo}:{checkpoint} or policy:{checkpoint}")
        spec = self.policy.spec
        if len(model.joint_names) != spec.dof or self.policy.actor.action_dim != spec.dof:
            raise ValueError(f"{checkpoint} was trained for {spec.dof} joints (task "
                             f"{self.policy.meta.get('task', '?')}); {task}'s robot has {len(model.joint_names)}")
        self.name = f"{self.policy.algo}:{checkpoint}"
        self.task, self.model = task, model
        self.seed, self.threads = seed, threads
        recorder = self.policy.meta.get("recorder") or {}
        if recorder.get("control_mode", POLICY_CONTROL_MODE) != POLICY_CONTROL_MODE:
            raise ValueError(f"{checkpoint} was trained on {recorder['control_mode']!r} actions; the policy solver "
                             f"sends {POLICY_CONTROL_MODE!r} actions")
        self.recorded_points = int(recorder.get("points") or RECORDED_POINTS)
        self.min_height_m = recorder.get("min_height_m")
        self._rng = np.random.default_rng(seed)
        self._step_times: list[float] = []
        self._yaw = (int(model.index(model.base_joint_names[2:3])[0]) if len(model.base_joint_names) >= 3 else None)
        self._base_xy = model.index(model.base_joint_names[:2]) if len(model.base_joint_names) >= 2 else None

    def reset(self, observation: Observation) -> None:
        self._rng = np.random.default_rng(self.seed)
        self._step_times = []

    def action(self, observation: Observation) -> np.ndarray:
        """The actor's normalized action [dof] in [-1, 1] for one observation."""
        spec = self.policy.spec
        # The recorder's sampling (and ground removal) first, then the network's subset (batch_features).
        obs = demo_obs_of_observation(observation, self.recorded_points, self._rng, self.min_height_m)
        batch = {section: {k: np.asarray(v)[None] for k, v in values.items()} for section, values in obs.items()}
        raw = arrays_of_demo_obs(batch, spec.mask_names, observation.frame)
        points, state = batch_features(spec, rng=self._rng, **raw)
        with torch_threads(self.threads), torch.no_grad():
            action = self.policy.actor(torch.from_numpy(points), torch.from_numpy(state))[0].numpy()
        return action.astype(np.float32)

    def step(self, observation: Observation) -> Command:
        start = time.perf_counter()
        a = self.action(observation)
        limits = self.model.velocity_limits
        qvel = denormalize_velocity(a, -limits, limits)
        if self._yaw is not None:  # the action's base x/y are ego-centric; Command.qvel is in the world
            qvel[self._base_xy] = base_to_world_velocity(qvel[self._base_xy], float(observation.qpos[self._yaw]))
        self._step_times.append(time.perf_counter() - start)
        return Command(qvel=qvel, normalized_qvel=a)

    def diagnostics(self) -> dict[str, Any]:
        times = np.asarray(self._step_times)
        return {"policy": self.policy.algo, "checkpoint": str(self.policy.path),
                "trained_on": self.policy.meta.get("task"),
                "step_ms_median": round(float(np.median(times)) * 1e3, 2) if len(times) else None}


def make_policy_solver(spec: str, task: str, model: RobotModel) -> PolicySolver:
    """``bc:<checkpoint>``, ``td3bc:<checkpoint>`` (the checkpoint must hold that algorithm) or
    ``policy:<checkpoint>`` (any). A ``{task}`` in the path is replaced by the task's name."""
    prefix, _, path = spec.partition(":")
    if prefix not in (*ALGORITHMS, "policy"):
        raise ValueError(f"solver {spec!r}: expected bc:<checkpoint>, td3bc:<checkpoint> or policy:<checkpoint>")
    if not path:
        raise ValueError(f"solver {spec!r} names no checkpoint (e.g. {prefix}:outputs/baselines/PickCube-{prefix}.pt)")
    path = path.replace("{task}", task)
    return PolicySolver(path, task, model, expected_algo=None if prefix == "policy" else prefix)
