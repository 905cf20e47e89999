"""Demonstrations: roll out a task's behavior tree on its train split and keep the successful episodes, in the
file layout of :mod:`handleit.baselines.demo_files` (ManiSkill's trajectory files: ``<out>/<task>.h5`` and
``<out>/<task>.json``).

Never corrupt on interruption: each episode is written by its worker to a part file, renamed when complete;
the recorder alone appends complete part files to the main file (with SIGINT/SIGTERM held off while it does),
marks the group complete, flushes, then replaces the JSON atomically (tmp + ``os.replace``). On restart a
group that is not marked complete or does not read back whole (a kill mid-append) is dropped, and the JSON
is rebuilt from the complete groups. ``resume=True`` skips episodes (split, seed, model) already recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import h5py
import numpy as np

import handleit.envs
from handleit.baselines.demo_files import (
    DEFAULT_MIN_HEIGHT_M,
    DEFAULT_POINTS,
    FORMAT,
    STEP_KEYS,
    TERMINAL_ACTION_KEY,
    demo_obs_of_env_obs,
)
from handleit.harness.evaluation import _sole_writer, episode_specs
from handleit.harness.executor import (
    Backend,
    InProcess,
    RayCluster,
    add_executor_arguments,
    backend_of_args,
    close_backend,
    make_backend,
)
from handleit.harness.sim_robot import SimRobot
from handleit.harness.solvers import make_solver

DEFAULT_SOLVER = "bt"
_COMPRESSION = {"compression": "gzip", "compression_opts": 4, "shuffle": True}


# ----------------------------------------------------------------------------------------------------
# One episode in memory, and its HDF5 group
# ----------------------------------------------------------------------------------------------------
@dataclass
class EpisodeData:
    """One episode: T+1 observations, T steps; ``meta`` is its JSON entry (without episode_id)."""

    meta: dict[str, Any]
    obs: list[dict] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    success: list[bool] = field(default_factory=list)
    terminated: list[bool] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)
    # The expert's action at the last observation (obs[T]), never executed (the episode ended there): its label
    # for the state it succeeded in, usually "hold still". None when not queried (a failed rollout).
    terminal_action: np.ndarray | None = None

    def add_step(self, action, reward, success, terminated, truncated, next_obs) -> None:
        self.actions.append(np.asarray(action, np.float32))
        self.rewards.append(float(reward))
        self.success.append(bool(success))
        self.terminated.append(bool(terminated))
        self.truncated.append(bool(truncated))
        self.obs.append(next_obs)

    def write_group(self, group) -> None:
        """Write the datasets into an (empty) h5py group; the metadata as its ``episode`` attribute."""
        if len(self.obs) != len(self.actions) + 1:
            raise ValueError(f"an episode needs T+1 observations for T actions, got {len(self.obs)} and "
                             f"{len(self.actions)}")
        for section in self.obs[0]:
            for key in self.obs[0][section]:
                data = np.stack([o[section][key] for o in self.obs])
                options = _COMPRESSION if data.ndim >= 2 and data.nbytes > 4096 else {}
                group.create_dataset(f"obs/{section}/{key}", data=data, **options)
        group.create_dataset("actions", data=np.stack(self.actions).reshape(len(self.actions), -1))
        group.create_dataset("rewards", data=np.asarray(self.rewards, np.float32))
        for key in ("success", "terminated", "truncated"):
            group.create_dataset(key, data=np.asarray(getattr(self, key), bool))
        if self.terminal_action is not None:
            group.create_dataset(TERMINAL_ACTION_KEY, data=np.asarray(self.terminal_action, np.float32).reshape(-1))
        group.attrs["episode"] = json.dumps(self.meta)


def write_part_file(path: Path, episode: EpisodeData) -> Path:
    """Write one episode to ``path`` (group ``traj``) through a temporary name: the file exists only whole."""
    return write_part(path, episode.write_group)


def write_part(path: Path, fill: Callable[[h5py.Group], None]) -> Path:
    """A part file for :meth:`DemoFileWriter.append`: ``fill`` writes one episode into group ``traj``, through a
    temporary name, so that the file exists only whole."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with h5py.File(tmp, "w") as f:
        fill(f.create_group("traj"))
    os.replace(tmp, path)
    return path


def _check_group(group) -> int:
    """T of a complete, readable episode group; raises if it is incomplete or truncated."""
    if not group.attrs.get("complete", False):
        raise ValueError("not marked complete")
    json.loads(group.attrs["episode"])
    T = len(group["actions"])
    for key in STEP_KEYS:
        if len(group[key]) != T:
            raise ValueError(f"{key} has {len(group[key])} entries, actions {T}")
    for section in group["obs"].values():
        for key, data in section.items():
            if len(data) != T + 1:
                raise ValueError(f"obs {key} has {len(data)} entries, expected {T + 1}")
            _ = data[-1]  # read the last chunk: a cut-off write fails here
    return T


# ----------------------------------------------------------------------------------------------------
# The demonstration file pair (HDF5 + JSON), appended by one writer
# ----------------------------------------------------------------------------------------------------
class DemoFileWriter:
    """``<out>/<name>.h5`` and ``<out>/<name>.json``: opened (repaired if a previous run was cut off), then
    appended one complete episode at a time. One writer per file (``handleit.harness.evaluation.OutputInUse``)."""

    def __init__(self, out_dir: Path, name: str, env_info: dict, resume: bool):
        self.out_dir = Path(out_dir)
        self.h5_path = self.out_dir / f"{name}.h5"
        self.json_path = self.out_dir / f"{name}.json"
        self.parts_dir = self.out_dir / f".{name}.parts"
        self.env_info = env_info
        self.resume = resume
        self._stack = contextlib.ExitStack()
        self.repairs: list[str] = []  # what opening had to fix, for the log

    def __enter__(self) -> Self:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._stack.enter_context(_sole_writer(self.h5_path))
        exists = self.h5_path.exists() or self.json_path.exists()
        if exists and not self.resume:
            self._stack.close()
            raise FileExistsError(f"{self.h5_path} already exists: resume it (--resume) or choose another "
                                  f"output folder (--out)")
        old = json.loads(self.json_path.read_text()) if self.json_path.exists() else {}
        if old.get("env_info"):
            _check_same_env_info(old["env_info"], self.env_info, self.h5_path)
        self.failed_episodes: list[dict] = list(old.get("failed_episodes", []))
        try:
            self.file = h5py.File(self.h5_path, "a")
        except OSError as error:  # the HDF5 file itself is unreadable: keep it aside, start a new one
            aside = self.h5_path.with_name(f"{self.h5_path.name}.corrupt-{int(time.time())}")
            os.replace(self.h5_path, aside)
            self.repairs.append(f"{self.h5_path.name} could not be opened ({error}); moved to {aside.name}")
            self.file = h5py.File(self.h5_path, "a")
        self._stack.callback(self.file.close)
        self.episodes = self._complete_episodes()
        self.file.attrs["format"] = FORMAT
        self.file.flush()
        self._write_json()
        self.parts_dir.mkdir(exist_ok=True)
        self._adopt_parts()
        return self

    def _adopt_parts(self) -> None:
        """Append the complete part files a cut-off run left (episodes it finished but did not append);
        remove its half-written ones."""
        for tmp in self.parts_dir.glob("*.tmp"):
            tmp.unlink()
        done = self.done_keys()
        for part in sorted(self.parts_dir.glob("*.h5")):
            try:
                with h5py.File(part, "r") as f:
                    key = self.key(json.loads(f["traj"].attrs["episode"]))
            except (OSError, KeyError, ValueError) as error:
                part.unlink()
                self.repairs.append(f"removed unreadable part file {part.name} ({error})")
                continue
            if key in done:
                part.unlink()
                continue
            entry = self.append(part)
            done.add(key)
            self.repairs.append(f"appended traj_{entry['episode_id']} from a finished part file {part.name}")

    def __exit__(self, *exc) -> None:
        self._stack.close()
        with contextlib.suppress(OSError):
            self.parts_dir.rmdir()  # only if empty: parts of episodes not appended stay for inspection

    def _complete_episodes(self) -> list[dict]:
        """Drop groups that are not complete (a kill mid-append); renumber nothing: the JSON follows the file."""
        episodes = []
        names = sorted((k for k in self.file if k.startswith("traj_")), key=lambda k: int(k.split("_")[1]))
        for name in names:
            try:
                T = _check_group(self.file[name])
            except (OSError, KeyError, ValueError, RuntimeError) as error:  # not readable whole: cut off
                del self.file[name]
                self.repairs.append(f"dropped incomplete group {name} ({error})")
                continue
            meta = json.loads(self.file[name].attrs["episode"])
            episodes.append({"episode_id": int(name.split("_")[1]), **meta, "elapsed_steps": T})
        return episodes

    # The keys that make two rollouts the same episode.
    @staticmethod
    def key(meta: dict) -> tuple:
        return (meta["split"], int(meta["seed"]), str(meta["model_id"]))

    def done_keys(self) -> set[tuple]:
        return {self.key(e) for e in self.episodes} | {self.key(e) for e in self.failed_episodes}

    def append(self, part_path: Path) -> dict:
        """Append the episode of a part file as the next ``traj_<i>``; return its JSON entry."""
        i = max([e["episode_id"] for e in self.episodes], default=-1) + 1
        name = f"traj_{i}"
        with _signals_held():
            with h5py.File(part_path, "r") as part:
                meta = json.loads(part["traj"].attrs["episode"])
                part.copy(part["traj"], self.file, name=name)
            self.file[name].attrs["complete"] = True
            self.file.flush()
            entry = {"episode_id": i, **meta, "elapsed_steps": len(self.file[name]["actions"])}
            self.episodes.append(entry)
            self._write_json()
        Path(part_path).unlink()
        return entry

    def add_failure(self, meta: dict) -> None:
        self.failed_episodes.append(meta)
        with _signals_held():
            self._write_json()

    def _write_json(self) -> None:
        doc = {"format": FORMAT, "env_info": self.env_info, "episodes": self.episodes,
               "failed_episodes": self.failed_episodes, "num_failed": len(self.failed_episodes)}
        tmp = self.json_path.with_name(self.json_path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, self.json_path)


def _check_same_env_info(old: dict, new: dict, path: Path) -> None:
    """A resumed file must hold episodes of the same env, controller, horizon and observation layout."""
    for key in ("env_id", "control_mode", "max_episode_steps", "points", "obs_config", "source"):
        if old.get(key) != new.get(key):
            raise ValueError(f"cannot resume {path}: its {key} is {old.get(key)!r}, this run's is "
                             f"{new.get(key)!r}; choose another output folder (--out)")


@contextlib.contextmanager
def _signals_held():
    """Hold SIGINT and SIGTERM off while the files change (delivered after): a Ctrl-C or a polite kill cannot
    cut an append in half. Only SIGKILL or a power cut can, and opening the file drops what they leave."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except (AttributeError, ValueError):  # not POSIX, or not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# ----------------------------------------------------------------------------------------------------
# Recording (runs in the recorder's process or in worker processes)
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecordOptions:
    points: int = DEFAULT_POINTS
    min_height_m: float | None = None
    parts_dir: str = ""
    inline_parts: bool = False  # return the part file's bytes (a worker on another machine) instead of its path


class RecordingWrapper:
    """Wraps an env: passes reset and step through and keeps what went in and out, in demo layout."""

    def __init__(self, env, episode: EpisodeData, points: int, rng: np.random.Generator,
                 min_height_m: float | None):
        self.env, self.episode = env, episode
        self._obs_of = lambda o: demo_obs_of_env_obs(o, tuple(env.unwrapped.mask_names), points, rng, min_height_m)

    @property
    def unwrapped(self):
        return self.env.unwrapped

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.episode.obs = [self._obs_of(obs)]
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.episode.add_step(action, reward, info.get("success", False), terminated, truncated, self._obs_of(obs))
        return obs, reward, terminated, truncated, info


_ENVS: dict[tuple, Any] = {}  # one env per (task, split, max_steps) in a process, as the evaluation harness


def _env(task: str, split: str, max_steps: int, control_mode: str = "normalized_joint_vel"):
    key = (task, split, max_steps, control_mode)
    if key not in _ENVS:
        _ENVS[key] = handleit.envs.make(task, obs_mode="pointcloud", split=split, max_episode_steps=max_steps,
                                        control_mode=control_mode)
    return _ENVS[key]


def record_episode(spec, options: RecordOptions) -> dict:
    """Roll out ``spec`` (a :class:`handleit.harness.evaluation.EpisodeSpec`) with its solver through
    :class:`~handleit.harness.sim_robot.SimRobot`; write the episode to a part file when it succeeds.

    Returns {"meta": JSON entry, "part": path or None, "wall_time_s", "error": traceback or None}; with
    ``options.inline_parts`` the part file is written to a temporary folder and comes back as ``"part_bytes"``
    (its name as ``"part"``), for the driver to write into its own parts folder.
    """
    start = time.perf_counter()
    meta = {"index": spec.index, "seed": spec.seed, "model_id": spec.model_id, "split": spec.split,
            "control_mode": "normalized_joint_vel", "solver": spec.solver,
            "reset_kwargs": {"seed": spec.seed, "options": {"model_id": spec.model_id}}}
    result = {"meta": meta, "part": None, "error": None}
    try:
        episode = EpisodeData(meta)
        env = RecordingWrapper(_env(spec.task, spec.split, spec.max_steps), episode, options.points,
                               np.random.default_rng(spec.seed), options.min_height_m)
        robot = SimRobot(env)
        observation = robot.reset(seed=spec.seed, options={"model_id": spec.model_id})
        solver = make_solver(spec.solver, spec.task, robot.model)
        solver.reset(observation)
        while not robot.done:
            robot.act(solver.step(observation))
            observation = robot.observe()
        meta.update(success=bool(robot.info.get("success", False)), elapsed_steps=robot.steps,
                    target_link=robot.info.get("target_link"))
        if not meta["success"]:
            meta["failed_node"] = getattr(solver, "failed_node", None) or "timeout"
        meta["wall_time_s"] = round(time.perf_counter() - start, 3)
        if meta["success"]:
            # One more tick of the expert on the final observation: its action there (a hold), for the policies to
            # learn what to do once the task is done; without it a policy that reaches the goal a step late, or
            # moving, has never seen that state labelled (issue 18's one-demonstration check).
            episode.terminal_action = robot.action_of(solver.step(observation))
            name = f"{spec.split}-{spec.seed}-{spec.model_id}.h5"
            if options.inline_parts:
                with tempfile.TemporaryDirectory() as tmp:
                    result["part_bytes"] = write_part_file(Path(tmp) / name, episode).read_bytes()
                result["part"] = name
            else:
                result["part"] = str(write_part_file(Path(options.parts_dir) / name, episode))
    except Exception:  # noqa: BLE001  one bad episode must not end the run: report it, retry it on resume
        result["error"] = traceback.format_exc(limit=8)
    result["wall_time_s"] = time.perf_counter() - start
    return result


def run_jobs(jobs: list, work: Callable, workers: int, on_result: Callable[[Any, dict], None],
             max_retries: int = 3, backend: Backend | None = None) -> None:
    """Run ``work(job)`` for every job on the harness's executor: ``backend``, else this process (``workers <= 1``)
    or ``workers`` supervised local processes; ``on_result(job, result)`` runs here, in completion order, once
    per job. A job whose worker died (segfault, out of memory, a lost node) runs again, at most ``max_retries``
    times, then is reported as an error."""
    backend = backend or make_backend(max(1, workers), in_process_when_one=True)
    backend.run(jobs, work, on_result, lost=_lost_job, max_retries=max_retries)


def _lost_job(job, reason: str) -> dict:
    return {"error": reason, "part": None, "meta": {}}


def record_demos(task: str, split: str = "train", episodes: int = 100, out: Path | str = "demos",
                 max_steps: int = 1000, seed: int = 0, points: int = DEFAULT_POINTS, workers: int = 1,
                 resume: bool = False, solver: str = DEFAULT_SOLVER, min_height_m: float | None = None,
                 log: Callable[[str], None] | None = print, backend: Backend | None = None) -> dict:
    """Roll out ``solver`` (the task's behavior tree) on ``episodes`` episodes of ``split`` (episode i: seed
    ``seed + i``, object ``i mod n``, as the evaluation harness) and append the successful ones to
    ``<out>/<task>.h5`` (+ ``.json``). ``resume`` continues an existing file, skipping the episodes it holds
    or lists as failed. Episodes run on ``backend`` (default: this process for one worker, else ``workers``
    local processes); on a Ray cluster the episodes come back as bytes and this process writes them.
    Returns counts: kept, failed, errors, skipped, and the mean wall time per episode.
    """
    if task.startswith("ms3:"):
        raise ValueError("demonstrations are recorded on the bundled tasks; ManiSkill3 has its own demos")
    if episodes < 0 or max_steps < 1 or points < 1:
        raise ValueError(f"episodes ({episodes}) must be >= 0, max_steps ({max_steps}) and points ({points}) >= 1")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    specs = episode_specs(task, split, episodes, solver, max_steps, seed)  # ValueError for an unknown task
    in_process = isinstance(backend, InProcess) or (backend is None and workers <= 1)
    env = _env(task, split, max_steps) if in_process else handleit.envs.make(
        task, obs_mode="pointcloud", split=split, max_episode_steps=max_steps)
    base = env.unwrapped
    if min_height_m is not None and base.pointcloud_frame != "world":
        raise ValueError("min_height_m clips heights in the world frame; the env's point cloud is in "
                         f"{base.pointcloud_frame!r}")
    env_info = {
        "env_id": env.spec.id, "task": task, "control_mode": base.control_mode, "max_episode_steps": max_steps,
        "points": points, "action_dim": int(env.action_space.shape[0]), "action_labels": list(base.controller.labels),
        "joint_names": list(base.robot.joint_names), "control_freq_hz": base.control_freq,
        "obs_config": {"obs_mode": "pointcloud", "frame": base.pointcloud_frame, "points": points,
                       "mask_names": list(base.mask_names), "min_height_m": min_height_m,
                       "sampling": "uniform over valid points, without replacement when enough remain"},
        "env_kwargs": {"obs_mode": "pointcloud", "control_mode": base.control_mode, "max_episode_steps": max_steps},
        "source": None,
    }
    stats = {"kept": 0, "failed": 0, "errors": 0, "skipped": 0, "wall_time_s": []}
    with DemoFileWriter(Path(out), task, env_info, resume) as writer:
        for line in writer.repairs:
            _log(log, f"repaired {writer.h5_path}: {line}")
        done = writer.done_keys()
        pending = [s for s in specs if (s.split, s.seed, s.model_id) not in done]
        stats["skipped"] = len(specs) - len(pending)
        options = RecordOptions(points=points, min_height_m=min_height_m, parts_dir=str(writer.parts_dir),
                                inline_parts=isinstance(backend, RayCluster))
        where = backend.describe() if backend is not None else f"{workers} worker(s)"
        _log(log, f"{task} {split}: {len(pending)} episodes to roll out ({stats['skipped']} already recorded), "
                  f"{where} -> {writer.h5_path}")

        def on_result(spec, result) -> None:
            meta = result["meta"]
            if result["error"]:
                stats["errors"] += 1
                _log(log, f"  error in seed {spec.seed} ({spec.model_id}), retried on resume:\n{result['error']}")
                return
            stats["wall_time_s"].append(result["wall_time_s"])
            if result.get("part_bytes") is not None:  # from another machine: written here, then appended
                part = writer.parts_dir / result["part"]
                tmp = part.with_name(part.name + ".tmp")
                tmp.write_bytes(result["part_bytes"])
                os.replace(tmp, part)
                result["part"] = str(part)
            if result["part"]:
                writer.append(Path(result["part"]))
                stats["kept"] += 1
            else:
                writer.add_failure(meta)
                stats["failed"] += 1
            _log(log, f"  [{stats['kept'] + stats['failed'] + stats['errors']}/{len(pending)}] seed {spec.seed} "
                      f"{spec.model_id}: {'success' if meta['success'] else 'failed (' + meta['failed_node'] + ')'}"
                      f", {meta['elapsed_steps']} steps, {result['wall_time_s']:.1f} s")

        run_jobs(pending, _RecordJob(options), workers, on_result, backend=backend)
        stats["total_kept"], stats["total_failed"] = len(writer.episodes), len(writer.failed_episodes)
    times = stats.pop("wall_time_s")
    stats["mean_wall_time_s"] = float(np.mean(times)) if times else 0.0
    stats["h5"], stats["json"] = str(writer.h5_path), str(writer.json_path)
    return stats


class _RecordJob:
    """``record_episode`` with its options, picklable for worker processes."""

    def __init__(self, options: RecordOptions):
        self.options = options

    def __call__(self, spec) -> dict:
        return record_episode(spec, self.options)


def _log(log, text: str) -> None:
    if log is not None:
        log(text)


# ----------------------------------------------------------------------------------------------------
# Command line: `handleit demos`
# ----------------------------------------------------------------------------------------------------
def add_commands(subparsers) -> None:
    """Add ``demos`` to the ``handleit`` command line."""
    rec = subparsers.add_parser("demos", help="roll out the task's behavior tree and record its successful "
                                "episodes to <out>/<task>.h5 (+ .json)")
    rec.add_argument("--task", required=True, help="a bundled task, e.g. PickCube, PushChair")
    rec.add_argument("--split", default="train", choices=["train", "test"])
    rec.add_argument("--episodes", type=int, default=100, help="rollouts (episode i: seed + i, object i mod n)")
    rec.add_argument("--out", default="demos")
    rec.add_argument("--max-steps", type=int, default=1000, help="episode length in control steps (100 Hz)")
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--points", type=int, default=DEFAULT_POINTS,
                     help="points per observation (ManiSkill2, arXiv 2302.04659, F.3)")
    rec.add_argument("--min-height", type=float, default=DEFAULT_MIN_HEIGHT_M,
                     help="drop points at or below this height in the world (m): the floor and table top "
                          f"(default {DEFAULT_MIN_HEIGHT_M})")
    rec.add_argument("--keep-ground", action="store_const", const=None, dest="min_height",
                     help="keep every point (no ground removal)")
    add_executor_arguments(rec, default_workers=1)
    rec.add_argument("--solver", default=DEFAULT_SOLVER)
    rec.add_argument("--resume", action="store_true", help="continue an existing file, skipping its episodes")
    rec.set_defaults(func=_demos_command)


def _demos_command(args) -> int:
    backend = backend_of_args(args, in_process_when_one=True)
    try:
        stats = record_demos(args.task, args.split, args.episodes, args.out, args.max_steps, args.seed,
                             args.points, backend.workers, args.resume, args.solver, args.min_height,
                             backend=backend)
    except (FileExistsError, ValueError) as error:
        print(f"handleit demos: {error}", file=sys.stderr)
        return 2
    finally:
        close_backend(backend)
    rollouts = stats["kept"] + stats["failed"]
    share = f"{stats['kept'] / rollouts:.3f}" if rollouts else "-"
    print(f"{args.task}: kept {stats['kept']} of {rollouts} rollouts (success share {share}), {stats['errors']} "
          f"errors, {stats['skipped']} skipped; {stats['mean_wall_time_s']:.1f} s per episode; file now holds "
          f"{stats['total_kept']} demos ({stats['total_failed']} failures listed): {stats['h5']}")
    return 1 if stats["errors"] else 0
