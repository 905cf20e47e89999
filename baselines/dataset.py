"""Demonstrations as training data: every step of every trajectory of a demonstration file, in memory.

The files are those of ``baselines/demo_files.py`` (ManiSkill's trajectory layout, read with its
:class:`~handleit.baselines.demo_files.DemoDataset`): per observation the recorder's fixed-size point cloud
(xyz, rgb, one boolean per mask), ``agent`` (qpos, qvel, base_pose, tcp_pose) and ``extra`` (goal_pos where
the task has one); per step the env's action (normalized joint velocities), sparse reward and flags. Only
what a policy may see is read.

:class:`DemoData` keeps the raw arrays (observations ``[N_obs, ...]`` with points in the world frame,
transitions ``[N, ...]`` with the index of their observation and of the next one) and
builds network inputs for a batch with :func:`~handleit.baselines.features.batch_features`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from handleit.baselines.demo_files import DemoDataset
from handleit.baselines.features import FeatureSpec, arrays_of_demo_obs, batch_features, state_features

POLICY_CONTROL_MODE = "normalized_joint_vel"  # what the policy solver sends (SimRobot drives this controller)


@dataclass
class DemoData:
    """Steps of demonstrations, flattened over trajectories."""

    task: str
    mask_names: tuple[str, ...]
    # observations [N_obs, ...]
    xyz_W: np.ndarray  # [N_obs, P, 3] world frame (m)
    rgb: np.ndarray  # [N_obs, P, 3] uint8
    masks: np.ndarray  # [N_obs, P, M] uint8
    qpos: np.ndarray  # [N_obs, dof]
    qvel: np.ndarray
    base_pose: np.ndarray  # [N_obs, 7]
    tcp_pose: np.ndarray  # [N_obs, 7 * arms]
    goal_W: np.ndarray | None  # [N_obs, 3] or None
    # transitions [N, ...]
    obs_index: np.ndarray  # [N] index of s_t in the observation arrays
    actions: np.ndarray  # [N, A] float32 in [-1, 1]
    rewards: np.ndarray  # [N] float32
    terminated: np.ndarray  # [N] bool: no bootstrapping past this step
    trajectories: int
    recorder: dict = field(default_factory=dict)  # how the points were recorded: points, min_height_m, frame
    # [N] index of s_{t+1}: obs_index + 1, except for the expert's labels of final observations (absorbing: itself)
    next_obs_index: np.ndarray | None = None
    terminal_labels: int = 0  # how many of the N transitions are such labels (the last ones)
    episode_keys: list = field(default_factory=list)  # (split, seed) of every demonstration read

    def __post_init__(self):
        if self.next_obs_index is None:
            self.next_obs_index = self.obs_index + 1

    @property
    def dof(self) -> int:
        return self.qpos.shape[1]

    @property
    def action_dim(self) -> int:
        return self.actions.shape[1]

    def __len__(self) -> int:
        return len(self.actions)

    def feature_spec(self, num_points: int, point_frame: str = "base", goal_cue_points: int = 0,
                     qvel: bool = True) -> FeatureSpec:
        return FeatureSpec(self.mask_names, self.dof, self.goal_W is not None, num_points, point_frame,
                           goal_cue_points if self.goal_W is not None else 0, qvel)

    def observation_batch(self, spec: FeatureSpec, obs: np.ndarray, rng: np.random.Generator):
        """Network inputs (points, state) for the observations at indices ``obs``."""
        return batch_features(spec, self.xyz_W[obs], self.rgb[obs], self.masks[obs], self.qpos[obs],
                              self.qvel[obs], self.base_pose[obs], self.tcp_pose[obs],
                              None if self.goal_W is None else self.goal_W[obs], rng)

    def all_states(self, spec: FeatureSpec) -> np.ndarray:
        """[N_obs, state_dim]: the state vector of every observation (for the normalizer's statistics)."""
        return state_features(spec, self.qpos, self.qvel, self.base_pose, self.tcp_pose, self.goal_W)


def load_demo_data(paths: str | Path | list, max_trajectories: int | None = None,
                   terminal_labels: bool = True, episode_ids: list[int] | None = None) -> DemoData:
    """Read demonstration files of one task (``<task>.h5`` with its ``<task>.json``); trajectories that never
    succeed are skipped. ``ValueError`` for another controller than ``normalized_joint_vel`` (the policy
    solver's), a file without episodes, or missing entries.

    ``terminal_labels``: where the file stores the expert's action at an episode's last observation (the
    state it succeeded in; recorders since issue 18), add it as one more transition: that observation, that
    action, reward 1, terminated, and itself as the next observation (absorbing). Without it no
    demonstration shows what to do once the task is done, and a policy that reaches the goal a step late has
    never seen its state (docs/benchmarks.md, "Pipeline check (issue 18)"). ``episode_ids``: only these
    demonstrations (``traj_<id>``; with several files, the ids of each)."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    for p in paths:
        if not Path(p).exists():
            raise FileNotFoundError(f"no demonstration file {p}")
    ds = DemoDataset(paths, max_episodes=max_trajectories, episode_ids=episode_ids)
    info = ds.env_info
    if info.get("control_mode", POLICY_CONTROL_MODE) != POLICY_CONTROL_MODE:
        raise ValueError(f"{paths[0]} holds {info['control_mode']!r} actions; the policies act through "
                         f"{POLICY_CONTROL_MODE!r} (record or convert demos with that controller)")
    obs_config = info.get("obs_config", {})
    try:
        raw = arrays_of_demo_obs(ds.obs, ds.mask_names, obs_config.get("frame", "world"))
    except KeyError as e:
        raise ValueError(f"{paths[0]}: missing observation entry {e}") from None
    succeeded = np.zeros(len(ds.episodes), dtype=bool)
    np.logical_or.at(succeeded, ds.episode_of, ds.success)
    keep = succeeded[ds.episode_of]
    if not keep.any():
        raise ValueError(f"{', '.join(map(str, paths))}: no successful trajectories")
    obs_index, next_obs_index = ds.obs_index[keep], ds.next_obs_index[keep]
    actions, rewards, terminated = ds.actions[keep], ds.rewards[keep], ds.dones[keep]
    labels = 0
    if terminal_labels and len(ds.terminal_obs_index):
        labels = len(ds.terminal_obs_index)  # only successful episodes store one
        obs_index = np.concatenate([obs_index, ds.terminal_obs_index])
        next_obs_index = np.concatenate([next_obs_index, ds.terminal_obs_index])
        actions = np.concatenate([actions, ds.terminal_actions.astype(np.float32)])
        rewards = np.concatenate([rewards, np.ones(labels, np.float32)])
        terminated = np.concatenate([terminated, np.ones(labels, bool)])
    return DemoData(
        task=info.get("task") or Path(paths[0]).stem,
        mask_names=ds.mask_names,
        xyz_W=raw["xyz_W"].astype(np.float32),
        rgb=raw["rgb"],
        masks=raw["masks"],
        qpos=raw["qpos"].astype(np.float32),
        qvel=raw["qvel"].astype(np.float32),
        base_pose=raw["base_pose"].astype(np.float32),
        tcp_pose=raw["tcp_pose"].astype(np.float32),
        goal_W=None if raw["goal_W"] is None else raw["goal_W"].astype(np.float32),
        obs_index=obs_index,
        actions=actions,
        rewards=rewards,
        terminated=terminated,
        trajectories=int(succeeded.sum()),
        recorder={"points": int(ds.obs["pointcloud"]["xyz"].shape[1]), "min_height_m": obs_config.get("min_height_m"),
                  "frame": obs_config.get("frame", "world"), "control_mode": info.get("control_mode"),
                  "files": [str(p) for p in paths]},
        next_obs_index=next_obs_index,
        terminal_labels=labels,
        episode_keys=[(e.get("split", "train"), int(e["seed"])) for e in ds.episodes if "seed" in e],
    )
