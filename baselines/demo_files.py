"""Demonstration files: their layout, the observation layout they store, and reading them back (numpy, h5py).

They are written by the harness (``handleit demos``, ``handleit convert-demos``: ``handleit.harness.demos``);
training reads them (``handleit.baselines.dataset``), and the policy solver puts a robot's observation in the
same layout with :func:`demo_obs_of_observation`, so that training and acting agree.

File layout (ManiSkill's trajectory files, ``mani_skill.trajectory``): one HDF5 file and one JSON sidecar per
task, ``<out>/<task>.h5`` and ``<out>/<task>.json``.

HDF5, one group ``traj_<i>`` per kept episode (T control steps)::

    obs/pointcloud/xyz         [T+1, P, 3] float32   fused point cloud (frame: env_info.obs_config.frame), m
    obs/pointcloud/rgb         [T+1, P, 3] uint8
    obs/pointcloud/<mask>      [T+1, P]    bool      one per env mask (env_info.obs_config.mask_names)
    obs/agent/qpos, qvel       [T+1, dof]  float32   joint positions (m, rad) and velocities
    obs/agent/base_pose        [T+1, 7]    float32   X_WB as (x, y, z, qw, qx, qy, qz)
    obs/agent/tcp_pose         [T+1, 7*arms] float32 X_WT per arm, same layout
    obs/extra/<name>           [T+1, ...]  float32   task extras where the task has them (goal_pos, m)
    actions                    [T, A]      float32   the env action actually sent (env_info.control_mode)
    rewards                    [T]         float32   the env's sparse reward
    success, terminated, truncated [T]     bool
    terminal_action            [A]         float32   the expert's action at obs[T], not executed (optional)

Entry t of ``obs`` is the observation before ``actions[t]``; entry T the last one. The point cloud is the
env's fused cloud after dropping invalid pixels (and, with ``min_height_m``, points at or below that height in
the world, ManiSkill2 (arXiv 2302.04659) F.3's ground removal), resampled to a fixed P points (ManiSkill2 F.3: 1200):
without replacement when enough points remain, with replacement otherwise. A group's attributes hold its episode's
metadata (``episode``, JSON) and ``complete`` (set last, after every dataset is written).

JSON: ``env_info`` (env_id, task, control_mode, max_episode_steps, obs_config, points, action_dim, ...),
``episodes`` (one per group, in order: episode_id = i of ``traj_<i>``, seed, model_id, split, control_mode,
elapsed_steps, success, solver, reset_kwargs) and ``failed_episodes`` (rollouts that did not succeed: not in
the HDF5 file, listed so that a resumed run skips them), ``num_failed``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np

from handleit.poses import matrix_to_pose7
from handleit.types import Observation

DEFAULT_POINTS = 1200  # ManiSkill2 Appendix F.3
# The command line's ground removal (ManiSkill2 F.3): the floor and the table top are at z = 0, and without
# it they are ~89% (PickCube) to ~97% (OpenCabinetDrawer) of the recorded points, the object a few of 1200.
DEFAULT_MIN_HEIGHT_M = 0.005
FORMAT = "handleit-demos/1"
STEP_KEYS = ("actions", "rewards", "success", "terminated", "truncated")  # [T] datasets of every group
TERMINAL_ACTION_KEY = "terminal_action"  # [A]: the expert's label for the last observation (files since issue 18)


# ----------------------------------------------------------------------------------------------------
# Observations
# ----------------------------------------------------------------------------------------------------
def downsample_point_cloud(xyz: np.ndarray, rgb: np.ndarray, masks: dict[str, np.ndarray], points: int,
                           rng: np.random.Generator, min_height_m: float | None = None) -> dict[str, np.ndarray]:
    """A fixed-size sample of a point cloud whose invalid points are already dropped.

    Args:
        xyz: [N, 3] points (m), in the world frame when ``min_height_m`` is given.
        rgb: [N, 3] uint8 colours; masks: name -> [N] bool.
        points: the number of points returned; drawn without replacement when at least ``points`` remain,
            with replacement otherwise; all zeros (masks False) when none remain.
        min_height_m: drop points with z <= this (the floor or the table top at z = 0: ManiSkill2 F.3's
            ground removal); None keeps every point.

    Returns:
        {"xyz": [points, 3] float32, "rgb": [points, 3] uint8, <mask>: [points] bool}.
    """
    xyz = np.asarray(xyz)
    if xyz.ndim != 2 or xyz.shape[1] != 3:
        raise ValueError(f"xyz has shape {xyz.shape}, expected [N, 3]")
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    keep = np.ones(len(xyz), dtype=bool) if min_height_m is None else xyz[:, 2] > min_height_m
    candidates = np.flatnonzero(keep)
    if len(candidates) == 0:
        out = {"xyz": np.zeros((points, 3), np.float32), "rgb": np.zeros((points, 3), np.uint8)}
        return out | {name: np.zeros(points, bool) for name in masks}
    index = candidates[rng.choice(len(candidates), size=points, replace=len(candidates) < points)]
    out = {"xyz": xyz[index].astype(np.float32), "rgb": np.asarray(rgb)[index].astype(np.uint8)}
    return out | {name: np.asarray(m)[index].astype(bool) for name, m in masks.items()}


def demo_obs_of_env_obs(env_obs: dict, mask_names: tuple[str, ...], points: int, rng: np.random.Generator,
                        min_height_m: float | None = None) -> dict[str, dict[str, np.ndarray]]:
    """One step of ``obs`` as the demo files store it, from a handleit env's ``pointcloud`` observation."""
    pc = env_obs["pointcloud"]
    valid = np.asarray(pc["valid"], dtype=bool)
    cloud = downsample_point_cloud(pc["xyz"][valid], pc["rgb"][valid], {m: pc[m][valid] for m in mask_names},
                                   points, rng, min_height_m)
    agent = {k: np.asarray(env_obs["agent"][k], dtype=np.float32) for k in ("qpos", "qvel", "base_pose", "tcp_pose")}
    obs = {"pointcloud": cloud, "agent": agent}
    if "goal_pos" in env_obs.get("extra", {}):  # the operator's prompt (target_prompt_*) is not a policy input
        obs["extra"] = {"goal_pos": np.asarray(env_obs["extra"]["goal_pos"], dtype=np.float32)}
    return obs


def demo_obs_of_observation(observation, points: int, rng: np.random.Generator,
                            min_height_m: float | None = None) -> dict[str, dict[str, np.ndarray]]:
    """The same dict from a robot-interface :class:`~handleit.types.Observation` (what a policy sees when it
    runs through the harness): same sampling, same layout, so that training and acting agree."""
    if not isinstance(observation, Observation):
        raise TypeError(f"expected a handleit.types.Observation, got {type(observation).__name__}")
    cloud = downsample_point_cloud(observation.points, observation.colors, observation.masks, points, rng,
                                   min_height_m)
    agent = {
        "qpos": np.asarray(observation.qpos, np.float32),
        "qvel": np.asarray(observation.qvel, np.float32),
        "base_pose": matrix_to_pose7(np.asarray(observation.X_WB, np.float64)).astype(np.float32),
        "tcp_pose": np.concatenate([matrix_to_pose7(np.asarray(X, np.float64)) for X in observation.X_WT.values()]
                                   ).astype(np.float32),
    }
    obs = {"pointcloud": cloud, "agent": agent}
    if observation.goal_W is not None:
        obs["extra"] = {"goal_pos": np.asarray(observation.goal_W, np.float32)}
    return obs


# ----------------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------------
def load_demo_info(path: Path | str) -> dict:
    """The JSON sidecar of a demo file (``<task>.h5`` -> ``<task>.json``)."""
    path = Path(path)
    sidecar = path.with_suffix(".json")
    if not sidecar.exists():
        raise FileNotFoundError(f"no JSON sidecar {sidecar} next to {path}")
    return json.loads(sidecar.read_text())


def iter_demos(path: Path | str, load_pointcloud: bool = True, max_episodes: int | None = None,
               episode_ids: list[int] | None = None) -> Iterator[dict]:
    """Yield the episodes of a demo file in order, as numpy arrays::

        {"episode": JSON entry, "obs": {"pointcloud": {...}, "agent": {...}, "extra": {...}},
         "actions": [T, A], "rewards": [T], "success": [T], "terminated": [T], "truncated": [T],
         "terminal_action": [A] or None (files recorded before issue 18)}

    ``load_pointcloud=False`` skips the point clouds (fast, for state-only uses). Only the episodes the JSON
    lists are read: a group a cut-off run left behind is never returned. ``episode_ids``: only these (in file
    order).
    """
    path = Path(path)
    info = load_demo_info(path)
    episodes = info["episodes"]
    if episode_ids is not None:
        missing = set(episode_ids) - {e["episode_id"] for e in episodes}
        if missing:
            raise KeyError(f"{path} has no episodes {sorted(missing)}")
        episodes = [e for e in episodes if e["episode_id"] in set(episode_ids)]
    episodes = episodes[:max_episodes] if max_episodes is not None else episodes
    with h5py.File(path, "r") as f:
        for entry in episodes:
            yield _read_group(f[f"traj_{entry['episode_id']}"], entry, load_pointcloud)


def read_demo(path: Path | str, episode_id: int, load_pointcloud: bool = True) -> dict:
    """One episode of a demo file by its ``episode_id`` (see :func:`iter_demos`)."""
    entries = {e["episode_id"]: e for e in load_demo_info(path)["episodes"]}
    if episode_id not in entries:
        raise KeyError(f"{path} has no episode {episode_id}; it has {len(entries)} episodes")
    with h5py.File(path, "r") as f:
        return _read_group(f[f"traj_{episode_id}"], entries[episode_id], load_pointcloud)


def _read_group(group, entry: dict, load_pointcloud: bool) -> dict:
    obs = {section: {k: v[()] for k, v in group["obs"][section].items()}
           for section in group["obs"] if load_pointcloud or section != "pointcloud"}
    terminal = group[TERMINAL_ACTION_KEY][()] if TERMINAL_ACTION_KEY in group else None
    return {"episode": entry, "obs": obs, **{k: group[k][()] for k in STEP_KEYS}, TERMINAL_ACTION_KEY: terminal}


def load_demos(path: Path | str, load_pointcloud: bool = True, max_episodes: int | None = None) -> list[dict]:
    """All episodes of a demo file (see :func:`iter_demos`)."""
    return list(iter_demos(path, load_pointcloud, max_episodes))


class DemoDataset:
    """Transitions of one or more demo files as flat numpy arrays (no torch), for BC and offline RL.

    ``obs``: nested dict of arrays over every stored observation (T+1 per episode, concatenated);
    transition n goes from ``obs[...][obs_index[n]]`` to ``obs[...][next_obs_index[n]]`` with
    ``actions[n]``, ``rewards[n]``, ``dones[n]`` (the env terminated: success; a time-limit end is in
    ``truncated``, not a done) and ``episode_of[n]`` (index into ``episodes``). ``terminal_obs_index`` and
    ``terminal_actions``: the expert's action at the last observation of each episode whose file stores one.
    """

    def __init__(self, paths: Path | str | list, load_pointcloud: bool = True, max_episodes: int | None = None,
                 episode_ids: list[int] | None = None):
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if not paths:
            raise ValueError("DemoDataset needs at least one demo file")
        self.env_info = load_demo_info(paths[0])["env_info"]
        obs_parts, steps = [], {k: [] for k in (*STEP_KEYS, "obs_index", "episode_of")}
        terminal_index, terminal_actions = [], []
        self.episodes: list[dict] = []
        offset = 0
        for path in paths:
            info = load_demo_info(path)["env_info"]
            if info.get("action_dim") != self.env_info.get("action_dim") or \
                    info.get("control_mode") != self.env_info.get("control_mode"):
                raise ValueError(f"{path}: control mode {info.get('control_mode')} / action dim "
                                 f"{info.get('action_dim')} differ from {paths[0]}'s")
            left = None if max_episodes is None else max_episodes - len(self.episodes)
            if left is not None and left <= 0:
                break
            for demo in iter_demos(path, load_pointcloud, left, episode_ids):
                T = len(demo["actions"])
                obs_parts.append(demo["obs"])
                for k in STEP_KEYS:
                    steps[k].append(demo[k])
                steps["obs_index"].append(offset + np.arange(T))
                steps["episode_of"].append(np.full(T, len(self.episodes)))
                if demo[TERMINAL_ACTION_KEY] is not None:
                    terminal_index.append(offset + T)
                    terminal_actions.append(np.asarray(demo[TERMINAL_ACTION_KEY], np.float32).reshape(-1))
                self.episodes.append(demo["episode"])
                offset += T + 1
        if not self.episodes:
            raise ValueError(f"no episodes in {', '.join(map(str, paths))}")
        self.obs = {s: {k: np.concatenate([o[s][k] for o in obs_parts]) for k in obs_parts[0][s]}
                    for s in obs_parts[0]}
        self.actions = np.concatenate(steps["actions"]).astype(np.float32)
        self.rewards = np.concatenate(steps["rewards"]).astype(np.float32)
        self.dones = np.concatenate(steps["terminated"]).astype(bool)
        self.truncated = np.concatenate(steps["truncated"]).astype(bool)
        self.success = np.concatenate(steps["success"]).astype(bool)
        self.obs_index = np.concatenate(steps["obs_index"])
        self.next_obs_index = self.obs_index + 1
        self.episode_of = np.concatenate(steps["episode_of"])
        # The expert's labels of the last observations (files that have them): obs index [K], actions [K, A].
        self.terminal_obs_index = np.asarray(terminal_index, dtype=np.int64)
        self.terminal_actions = (np.stack(terminal_actions) if terminal_actions
                                 else np.zeros((0, self.actions.shape[1]), np.float32))

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def mask_names(self) -> tuple[str, ...]:
        return tuple(self.env_info["obs_config"]["mask_names"])

    def obs_at(self, index) -> dict:
        """Observations at positions ``index`` of ``obs`` (nested dict, arrays with a leading batch axis)."""
        return {s: {k: v[index] for k, v in section.items()} for s, section in self.obs.items()}

    def __getitem__(self, n) -> dict:
        """Transition(s) n: {"obs", "actions", "rewards", "dones", "next_obs"}."""
        return {"obs": self.obs_at(self.obs_index[n]), "actions": self.actions[n], "rewards": self.rewards[n],
                "dones": self.dones[n], "next_obs": self.obs_at(self.next_obs_index[n])}

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict:
        """A batch of transitions drawn uniformly with replacement."""
        return self[rng.integers(len(self), size=batch_size)]
