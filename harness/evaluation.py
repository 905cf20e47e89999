"""The evaluation harness: run a solver on a task's split, in parallel workers, one record per episode.

- Episode i of a split uses object ``ids[i % len(ids)]`` (every cabinet, chair or bucket equally often, as
  ManiSkill1's protocol spreads its levels over objects) and seed ``seed + i`` (target part, robot pose, joint friction).
- Episodes run on the harness's executor (``handleit.harness.executor``): supervised local processes (a worker
  that crashes (segfault, out of memory) or exceeds the episode time limit costs that one episode, recorded as
  an error, and is replaced; the run goes on), or actors on a Ray cluster (the episodes of a lost worker or
  node run again on the others).
- Records are appended to ``records.jsonl`` by this process as they arrive, each episode once (nothing measured
  is lost if the run stops); ``resume=True`` skips episodes already recorded there.
- The summary has the shape of Let's Handle It (arXiv 2202.11792) Table 1 (train / test success per task and solver)
  plus a breakdown of the behavior-tree nodes that failed.
- A split ``"object:PATH"`` runs a cabinet task on models from disk in PartNet-Mobility's layout (a
  ``mobility.urdf`` or a folder of model folders; ``handleit.envs.object_models``): episode i uses model
  ``i mod n`` and that model's target links in turn (every openable part of the task's kind with a handle, or
  the one named).
- ManiSkill3 tasks (``"ms3:PickCube-v1"``, any ManiSkill3 env id) run through ``handleit.harness.ms3_adapter``:
  success is ManiSkill3's own ``info["success"]`` (its episodes end at the first success, so this is its
  ``success_once``); no object splits, "train" and "test" differ by their seeds (``ms3_adapter.episode_seeds``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import imageio.v2 as imageio
from tqdm import tqdm

import handleit.envs
from handleit.envs import model_ids
from handleit.envs.object_models import episode_target, model_urdfs, object_targets
from handleit.envs.sensor_model import parse_perturbation
from handleit.harness.executor import Backend, LocalProcesses, RayCluster
from handleit.harness.machine_info import cpu_description
from handleit.harness.ms3_adapter import ManiSkill3Robot, episode_seeds, make_env, ms3_env_id
from handleit.harness.realtime_sim import RealtimeEpisodes, split_perturbation
from handleit.harness.tree_phases import PhaseTracker
from handleit.harness.sim_robot import SimRobot
from handleit.harness.solvers import make_solver
from handleit.perception.segmenters import SIMULATOR
from handleit.types import DEFAULT_MARKER_RGB

try:
    import fcntl  # POSIX: the lock on an output folder's records
except ImportError:  # not POSIX: no lock
    fcntl = None

DEFAULT_EPISODE_TIMEOUT_S = 600.0
MS3_PREFIX = "ms3:"  # task names of ManiSkill3 envs (handleit.harness.ms3_adapter.TASK_PREFIX)
COLOR_MARKER = "color_marker"  # the segmenter whose episodes run in envs with the target painted
OBJECT_PREFIX = "object:"  # a split of models from disk: "object:PATH"
CABINET_PART_KINDS = {"OpenCabinetDrawer": "drawer", "OpenCabinetDoor": "door"}


def object_split(path: str | Path) -> str:
    """The split name of the models at ``path`` (``--object PATH``)."""
    return OBJECT_PREFIX + str(path)


def _target_key(split: str, target_link: str | None) -> str | None:
    # Only the episodes of models from disk choose their target up front; the bundled envs draw theirs.
    return target_link if split.startswith(OBJECT_PREFIX) else None


@dataclass(frozen=True)
class EpisodeSpec:
    task: str
    split: str
    index: int  # episode index within (task, split)
    seed: int
    model_id: str
    solver: str
    max_steps: int
    video_path: str | None = None
    segmenter: str = "simulator"  # the masks a tree reads (handleit.perception.segmenters)
    perturb: str = ""  # sensor perturbation (handleit.envs.sensor_model grammar); "" for none
    target_link: str | None = None  # models from disk (split "object:PATH"): the part to open

    @property
    def key(self) -> tuple:
        return (self.task, self.split, self.solver, self.max_steps, self.seed, self.model_id, self.segmenter,
                self.perturb, _target_key(self.split, self.target_link))


@dataclass
class EpisodeRecord:
    task: str
    split: str
    solver: str
    max_steps: int
    seed: int
    model_id: str
    index: int
    target_link: str | None = None
    success: bool = False
    steps: int = 0
    failed_node: str | None = None  # the last tree node whose failure triggered a recovery (or ended the run)
    failures: list[str] = field(default_factory=list)  # every failed check, in order
    open_fraction: float | None = None  # ground truth at the end (evaluation only)
    wall_time_s: float = 0.0
    error: str | None = None  # set when the episode could not run to its end (exception, crash, timeout)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    segmenter: str = "simulator"
    perturb: str = ""
    machine: str = ""  # the CPU that ran it (harness/machine_info.py): lockstep repeats on one machine, not across
    # The episode's video (mp4 bytes) on its way from the worker, wherever it ran, to the driver, which writes it
    # to the spec's video path; never written into the records file.
    video_mp4: bytes | None = field(default=None, repr=False)

    @property
    def key(self) -> tuple:
        return (self.task, self.split, self.solver, self.max_steps, self.seed, self.model_id, self.segmenter,
                self.perturb, _target_key(self.split, self.target_link))

    def to_json(self) -> str:
        """The record's line in the records file (without the video)."""
        return json.dumps({k: v for k, v in asdict(self).items() if k != "video_mp4"})


# ----------------------------------------------------------------------------------------------------
# One episode (runs inside a worker)
# ----------------------------------------------------------------------------------------------------
class _EpisodeRunner:
    """Keeps one env per (task, split, max_steps, marker, perturbation) in a worker process, to avoid
    rebuilding it."""

    def __init__(self, env_options: dict | None = None):
        """``env_options``: more keywords for every env this runner makes (``handleit.envs.make``), e.g.
        ``{"hand_camera": True}``; lockstep episodes of the bundled tasks only."""
        self._envs: dict[tuple, Any] = {}
        self._realtime = RealtimeEpisodes()  # episodes with real-time keys in their perturbation
        self.env_options = dict(env_options or {})

    def env(self, spec: EpisodeSpec):
        marker = spec.segmenter == COLOR_MARKER
        key = (spec.task, spec.split, spec.max_steps, marker, spec.perturb)
        if key not in self._envs and spec.task.startswith(MS3_PREFIX):
            if marker or spec.perturb or self.env_options:
                raise ValueError(f"{spec.task}: ManiSkill3 tasks run with the simulator segmenter, no "
                                 "perturbation and no env options only")
            self._envs[key] = make_env(spec.task, max_episode_steps=spec.max_steps, render_mode="rgb_array")
        if key not in self._envs:
            options = {}
            if marker:  # the paper's tape: the target painted in the marker colour the segmenter looks for
                options["target_marker_rgb"] = DEFAULT_MARKER_RGB
            if spec.perturb:
                options["sensor_perturbation"] = dataclasses.replace(parse_perturbation(spec.perturb),
                                                                     horizon_steps=spec.max_steps)
            if spec.split.startswith(OBJECT_PREFIX):
                options["urdf"] = spec.split[len(OBJECT_PREFIX):]
            else:
                options["split"] = spec.split
            options.update(self.env_options)
            self._envs[key] = handleit.envs.make(
                spec.task, obs_mode="pointcloud", max_episode_steps=spec.max_steps, render_mode="rgb_array", **options,
            )
        return self._envs[key]

    def __call__(self, spec: EpisodeSpec) -> EpisodeRecord:
        return self.run(spec)

    def run(self, spec: EpisodeSpec) -> EpisodeRecord:
        record = EpisodeRecord(spec.task, spec.split, spec.solver, spec.max_steps, spec.seed, spec.model_id,
                               spec.index, segmenter=spec.segmenter, perturb=spec.perturb, machine=cpu_description())
        start = time.perf_counter()
        frames = []
        robot = solver = None
        try:
            realtime, sensor_text = split_perturbation(spec.perturb)
            if realtime is not None and self.env_options:
                raise ValueError(f"env options {sorted(self.env_options)} are for lockstep episodes; the real-time "
                                 f"simulator makes its own env ({spec.perturb!r})")
            if realtime is not None:  # the robot does not wait for the tree: handleit.harness.realtime_sim (no video)
                self._realtime.run(spec, record, realtime, sensor_text=sensor_text,
                                   sim_masks=spec.segmenter == SIMULATOR,
                                   target_marker_rgb=DEFAULT_MARKER_RGB if spec.segmenter == COLOR_MARKER else None)
                record.wall_time_s = time.perf_counter() - start
                return record
            env = self.env(spec)
            if spec.task.startswith(MS3_PREFIX):
                robot = ManiSkill3Robot(env)
            else:
                # The simulator's masks reach the solver only when it asked for them (segmenter "simulator").
                robot = SimRobot(env, sim_masks=spec.segmenter == SIMULATOR)
            reset_options = {"model_id": spec.model_id}
            if spec.target_link is not None:
                reset_options["target_link"] = spec.target_link
            observation = robot.reset(seed=spec.seed, options=reset_options)
            record.target_link = robot.info.get("target_link")
            solver = make_solver(spec.solver, spec.task, robot.model, segmenter=spec.segmenter)
            solver.reset(observation)
            # At each hand-off of a composed tree (a skill started or ended), the env's ground truth of the
            # predicates perception believed: for the records' predicate accuracy, never shown to the solver.
            truth_of = getattr(env.unwrapped, "evaluate_predicates", None)
            handoff_truth: list[dict[str, Any]] = []
            phases = PhaseTracker()  # where the steps go, as the real-time records keep it
            while not robot.done:
                command = solver.step(observation)
                phases.track(solver, observation.time_s)
                handoffs = getattr(getattr(solver, "tools", None), "handoffs", None) or []
                if truth_of is not None and len(handoffs) > len(handoff_truth):
                    for entry in handoffs[len(handoff_truth):]:
                        handoff_truth.append({"tick": entry["tick"], "skill": entry["skill"], "event": entry["event"],
                                              "truth": truth_of(list(entry["predicates"])) if entry["predicates"]
                                              else {}})
                robot.act(command)
                observation = robot.observe()
                if spec.video_path:
                    frames.append(env.render())
                node = getattr(solver, "failed_node", None)
                if node and (not record.failures or record.failures[-1] != node):
                    record.failures.append(node)
                if getattr(solver, "gave_up", False):  # a composed tree out of attempts: nothing more will act
                    break
            record.success = bool(robot.info.get("success", False))
            record.steps = robot.steps
            record.open_fraction = robot.info.get("open_fraction")
            record.failed_node = None if record.success else (getattr(solver, "failed_node", None) or "timeout")
            if hasattr(solver, "diagnostics"):
                record.diagnostics = solver.diagnostics()
            if handoff_truth:
                record.diagnostics["handoff_truth"] = handoff_truth
            kept = phases.phases()
            if kept:
                record.diagnostics["phases"] = kept
        except Exception:  # one bad episode must not end the run: record it and go on
            record.error = traceback.format_exc(limit=8)
            record.failed_node = record.failed_node or "error"
            _keep_what_was_measured(record, robot, solver)
        record.wall_time_s = time.perf_counter() - start
        if frames and robot is not None:
            record.video_mp4 = _encode_video(frames, fps=int(round(1.0 / (robot.model.control_dt_s * 2))))
        return record


def _keep_what_was_measured(record: EpisodeRecord, robot, solver) -> None:
    """An episode that raised keeps how far it got: the steps it ran and the solver's diagnostics (its tree and
    hand-offs at the error), so that a failed episode is read as the others are. A solver whose diagnostics
    raise in turn leaves them out, with the reason, rather than losing the record."""
    if robot is not None:
        record.steps = int(getattr(robot, "steps", 0))
    if solver is not None and hasattr(solver, "diagnostics"):
        try:
            record.diagnostics = solver.diagnostics()
        except Exception as err:  # the record must survive a solver broken past reporting
            record.diagnostics = {"diagnostics_error": f"{type(err).__name__}: {err}"}


def _encode_video(frames, fps: int) -> bytes:
    """Every other frame as mp4 bytes (encoded where the episode ran; the driver writes the file)."""
    with tempfile.TemporaryDirectory(prefix="handleit-video-") as tmp:
        path = Path(tmp) / "episode.mp4"
        imageio.mimwrite(path, frames[::2], fps=max(fps, 1), macro_block_size=1)
        return path.read_bytes()


def _write_video(spec: EpisodeSpec, record: EpisodeRecord) -> None:
    """The driver's side: the video that came back with the record, written to the spec's path."""
    if record.video_mp4 is None or not spec.video_path:
        return
    path = Path(spec.video_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(record.video_mp4)
    os.replace(tmp, path)
    record.video_mp4 = None


# ----------------------------------------------------------------------------------------------------
# Episodes and their records
# ----------------------------------------------------------------------------------------------------
def episode_specs(task: str, split: str, episodes: int, solver: str, max_steps: int, seed: int = 0,
                  video_episodes: tuple[int, ...] = (), video_dir: Path | None = None, segmenter: str = SIMULATOR,
                  perturb: str = "", target_link: str | None = None) -> list[EpisodeSpec]:
    """The episodes of one task and split. ``perturb`` is put in canonical form (so that the same
    perturbation written two ways is one key); the same seeds for every segmenter and perturbation. A split
    ``"object:PATH"`` takes the cabinets at PATH (module docstring), ``target_link`` naming the part to open
    (else each part of the task's kind with a handle in turn); errors in the models
    (``handleit.envs.object_model_errors``) are raised here, before any episode runs."""
    targets = [None] * episodes
    if task.startswith(MS3_PREFIX):  # one env, no objects to cycle; the split picks the seeds
        ids, seeds = [ms3_env_id(task)], episode_seeds(split, episodes, seed)
    elif split.startswith(OBJECT_PREFIX):
        if task not in CABINET_PART_KINDS:
            raise ValueError(f"models from disk (--object) are for {' and '.join(CABINET_PART_KINDS)}, not {task}")
        if split_perturbation(canonical_perturbation(perturb))[0] is not None:
            raise ValueError("models from disk (--object) run in lockstep only, not with real-time perturbations")
        links = object_targets(model_urdfs(split[len(OBJECT_PREFIX):]), CABINET_PART_KINDS[task], target_link)
        chosen = [episode_target(links, i) for i in range(episodes)]
        ids, targets = [m for m, _ in chosen], [link for _, link in chosen]
        seeds = [seed + i for i in range(episodes)]
    else:
        ids, seeds = model_ids(task, split), [seed + i for i in range(episodes)]
    perturb = canonical_perturbation(perturb)
    specs = []
    for i in range(episodes):
        video = None
        if i in video_episodes and video_dir is not None:
            # A solver name may hold a checkpoint's path (bc:outputs/x.pt): no folders in the file name.
            name = solver.replace(":", "_").replace("/", "_")
            if segmenter != SIMULATOR:
                name += f"-{segmenter}"
            if perturb:
                name += "-" + "".join(c if c.isalnum() or c in "._" else "_" for c in perturb)
            split_name = "object" if split.startswith(OBJECT_PREFIX) else split
            video = str(Path(video_dir) / f"{task.replace(':', '_')}-{split_name}-{name}-{max_steps}-ep{i:03d}.mp4")
        specs.append(EpisodeSpec(task, split, i, seeds[i], ids[i % len(ids)], solver, max_steps, video,
                                 segmenter=segmenter, perturb=perturb, target_link=targets[i]))
    return specs


class OutputInUse(RuntimeError):
    """Another evaluation is writing the same records file."""


@contextmanager
def _sole_writer(records_path: Path):
    """Hold an exclusive lock on ``records_path`` + ``.lock`` while an evaluation appends to it: two runs into
    one output folder would interleave their records. Raises :class:`OutputInUse` when another run holds it."""
    if fcntl is None:  # not POSIX: no lock
        yield
        return
    with records_path.with_name(records_path.name + ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputInUse(f"another evaluation is writing {records_path}; wait for it or choose another "
                              "output folder (--out)") from None
        yield  # closing the file releases the lock


def run_episodes(specs: list[EpisodeSpec], records_path: Path, workers: int | None = 2, resume: bool = False,
                 episode_timeout_s: float = DEFAULT_EPISODE_TIMEOUT_S, progress: bool = True,
                 backend: Backend | None = None, env_options: dict | None = None) -> list[EpisodeRecord]:
    """Run the episodes on ``backend`` (default: ``workers`` supervised local processes; a
    :class:`~handleit.harness.executor.RayCluster` for a cluster); return every record (old ones too on resume).
    ``env_options``: more keywords for every env (``{"hand_camera": True}``); they are not part of an episode's
    record or resume key, so give such a run a records file of its own.
    The records file is written here, by this process alone, one line per episode as it finishes; one
    evaluation at a time per records file (:class:`OutputInUse` otherwise)."""
    records_path = Path(records_path)
    records_path.parent.mkdir(parents=True, exist_ok=True)
    with _sole_writer(records_path):
        done = read_records_file(records_path) if resume else {}
        pending = [s for s in specs if s.key not in done]
        results = [done[s.key] for s in specs if s.key in done]
        if not pending:
            return results
        backend = backend or LocalProcesses(2 if workers is None else workers)
        bar = _progress(len(pending)) if progress else None
        with records_path.open("a") as out:

            def record(spec: EpisodeSpec, rec: EpisodeRecord) -> None:
                _write_video(spec, rec)
                out.write(rec.to_json() + "\n")
                out.flush()
                results.append(rec)
                if bar is not None:
                    bar.set_postfix(success=f"{sum(r.success for r in results)}/{len(results)}")
                    bar.update(1)

            backend.run(pending, _EpisodeRunner(env_options), record, key=lambda s: s.key, lost=_lost_episode,
                        job_timeout_s=episode_timeout_s, max_retries=backend_retries(backend))
        if bar is not None:
            bar.close()
        return results


def backend_retries(backend: Backend) -> int:
    """How often an episode whose worker was lost runs again: never locally (today's rule: a crash is the
    episode's), up to 3 times on a cluster (a lost node is not the episode's doing)."""
    return 3 if isinstance(backend, RayCluster) else 0


def _lost_episode(spec: EpisodeSpec, reason: str) -> EpisodeRecord:
    return EpisodeRecord(spec.task, spec.split, spec.solver, spec.max_steps, spec.seed, spec.model_id, spec.index,
                         target_link=spec.target_link, error=reason, failed_node="error", segmenter=spec.segmenter,
                         perturb=spec.perturb)


def read_records_file(records_path: Path) -> dict[tuple, EpisodeRecord]:
    """The records of a records file by episode key: the source of truth on resume. A last line cut off by a
    killed writer (no newline at its end) is dropped from the file, so that the next record starts a line."""
    records_path = Path(records_path)
    if not records_path.exists():
        return {}
    data = records_path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        with records_path.open("r+b") as f:
            f.truncate(len(data))
    done = {}
    for line in data.decode().splitlines():
        if line.strip():
            rec = EpisodeRecord(**json.loads(line))
            done[rec.key] = rec
    return done


def _progress(total: int):
    """A progress bar on a terminal; in a log (CI, nohup) a plain line every 10% instead of a redrawn bar."""
    if sys.stderr.isatty():
        return tqdm(total=total, unit="episode", dynamic_ncols=True)
    return _LogProgress(total)


class _LogProgress:
    """tqdm's ``update``/``set_postfix``/``close`` as whole lines, for logs where a redrawn bar is noise."""

    def __init__(self, total: int):
        self.total, self.n, self.postfix = total, 0, ""
        self.every = max(1, total // 10)
        self.start = time.monotonic()

    def set_postfix(self, **values) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.n % self.every == 0 or self.n == self.total:
            elapsed = time.monotonic() - self.start
            print(f"{self.n}/{self.total} episodes, {elapsed:.0f} s, {self.postfix}", flush=True)

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------------------------------
# Summary
# ----------------------------------------------------------------------------------------------------
def canonical_perturbation(text: str) -> str:
    """The canonical text of a perturbation ("" for none), so that records of one perturbation share a key: the
    env's sensor keys (``envs/sensor_model``), then the real-time keys (``handleit.harness.realtime_sim``), if any."""
    if not text or text.strip().lower() == "none":
        return ""
    realtime, sensor_text = split_perturbation(text)
    if realtime is None:
        return str(parse_perturbation(sensor_text))
    sensor = str(parse_perturbation(sensor_text)) if sensor_text else "none"
    return ",".join(([] if sensor == "none" else [sensor]) + [str(realtime)])


def _condition(r) -> str:
    """What an episode ran under besides the solver: its segmenter and perturbation, in words."""
    parts = [] if r.segmenter == SIMULATOR else [f"segmenter {r.segmenter}"]
    return ", ".join(parts + ([r.perturb] if r.perturb else []))


def summarize(records: list[EpisodeRecord]) -> str:
    """Markdown: success per task and solver, train / test (Let's Handle It Table 1), and failure nodes. Runs with
    another segmenter or a perturbation are columns of their own."""
    groups: dict[tuple, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        groups[(r.task, r.solver, _condition(r), r.max_steps, r.split)].append(r)
    columns = sorted({(r.solver, _condition(r), r.max_steps) for r in records})

    def label(solver, condition, m):
        return f"{solver}{f' [{condition}]' if condition else ''} ({m} steps)"

    tasks = sorted({r.task for r in records})
    # Models from disk (split "object:PATH") are a column each, after train and test.
    splits = ["train", "test"] + sorted({r.split for r in records} - {"train", "test"})
    header = "| task | " + " | ".join(f"{label(*c)} {split}" for c in columns for split in splits) + " |"
    lines = [header, "|" + " --- |" * (1 + len(splits) * len(columns))]
    for task in tasks:
        cells = []
        for solver, condition, max_steps in columns:
            for split in splits:
                rs = groups.get((task, solver, condition, max_steps, split), [])
                cells.append(_rate(rs))
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Rates are successes / episodes; episodes that raised or crashed count as failures (errors in brackets).")
    failures = Counter((r.task, label(r.solver, _condition(r), r.max_steps), r.failed_node)
                       for r in records if not r.success)
    if failures:
        lines += ["", "| task | run | failed node | episodes |", "| --- | --- | --- | ---: |"]
        for (task, run, node), n in sorted(failures.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[1])):
            lines.append(f"| {task} | {run} | {node} | {n} |")
    return "\n".join(lines)


def robustness_table(records: list[EpisodeRecord]) -> str:
    """Markdown, in the spirit of SIMPLER (arXiv 2405.05941): per task, solver and segmenter, the success under
    each perturbation beside the unperturbed run on the same seeds, the ratio of the two, and the nodes
    that failed under the perturbation. Only seeds run both ways count, so the ratio compares like with
    like."""
    by_run: dict[tuple, dict[str, dict[tuple, EpisodeRecord]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        by_run[(r.task, r.solver, r.segmenter, r.max_steps)][r.perturb][(r.split, r.seed, r.model_id)] = r
    lines = ["| task | solver | segmenter | steps | perturbation | unperturbed | perturbed | ratio | failed nodes "
             "(perturbed) |", "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |"]
    for (task, solver, segmenter, steps), runs in sorted(by_run.items()):
        base = runs.get("", {})
        for perturb, recs in sorted(runs.items()):
            if not perturb:
                continue
            shared = sorted(set(base) & set(recs))
            if not shared:
                continue
            b = sum(base[k].success for k in shared)
            p = sum(recs[k].success for k in shared)
            ratio = f"{p / b:.2f}" if b else "-"
            nodes = Counter(recs[k].failed_node for k in shared if not recs[k].success)
            failed = ", ".join(f"{node} {n}" for node, n in nodes.most_common())
            lines.append(f"| {task} | {solver} | {segmenter} | {steps} | {perturb} | {b}/{len(shared)} | "
                         f"{p}/{len(shared)} | {ratio} | {failed} |")
    return "\n".join(lines)


def _rate(records: list[EpisodeRecord]) -> str:
    if not records:
        return "-"
    n = len(records)
    wins = sum(r.success for r in records)
    errors = sum(r.error is not None for r in records)
    text = f"{wins / n:.3f} ({wins}/{n})"
    return text + (f" [{errors} errors]" if errors else "")
