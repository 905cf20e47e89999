"""What BC and TD3+BC training share: seeding, batches of transitions, a loss log, and the run itself.

A run (:func:`run_training`) can go on for hours and survive a stop. Every ``checkpoint_every`` steps it writes
its checkpoint (``checkpoint.py``; atomically: a temporary file in the same folder, then ``os.replace``), which
holds, beside the policy, the whole training state: the networks, the optimizers and learning-rate schedule, the
step count, the random generators that draw the batches (numpy's for the data order, torch's and Python's), the
loss history and the evaluations so far. ``resume=True`` loads it and goes on: N steps in one go and N/2, stop,
resume, N/2 give the same weights bit for bit (tests/test_training_resume.py). SIGINT and SIGTERM, when
``handle_signals``, finish the current step, write the checkpoint and raise :class:`TrainingInterrupted`.

Every ``eval_every`` steps an ``evaluate(checkpoint_path, step)`` callback (the harness's: episodes on the
task's env, seeds disjoint from the demonstrations) measures the policy; learning curves (CSV and PNG,
``curves.py``) are rewritten at each checkpoint.
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from handleit.baselines.checkpoint import load_training_state, save_checkpoint
from handleit.baselines.curves import curve_paths, write_curves
from handleit.baselines.dataset import DemoData
from handleit.baselines.features import FeatureSpec
from handleit.baselines.networks import Actor, NetworkConfig
from handleit.torch_threads import torch_threads

TRAINING_STATE_VERSION = 1


def seed_everything(seed: int) -> np.random.Generator:
    random.seed(seed)
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


@dataclass
class Batch:
    points: torch.Tensor  # [B, P, C]
    state: torch.Tensor  # [B, S] (raw: the networks normalize)
    action: torch.Tensor  # [B, A]
    reward: torch.Tensor | None = None  # [B]
    not_done: torch.Tensor | None = None  # [B] 0 where the episode terminated at this step
    next_points: torch.Tensor | None = None
    next_state: torch.Tensor | None = None


def sample_batch(data: DemoData, spec: FeatureSpec, size: int, rng: np.random.Generator, device: torch.device,
                 with_next: bool = False) -> Batch:
    """``size`` transitions drawn uniformly (with replacement) from the demonstrations."""
    t = rng.integers(len(data), size=size)
    obs = data.obs_index[t]
    points, state = data.observation_batch(spec, obs, rng)
    batch = Batch(torch.from_numpy(points).to(device), torch.from_numpy(state).to(device),
                  torch.from_numpy(data.actions[t]).to(device))
    if with_next:
        next_points, next_state = data.observation_batch(spec, data.next_obs_index[t], rng)
        batch.next_points = torch.from_numpy(next_points).to(device)
        batch.next_state = torch.from_numpy(next_state).to(device)
        batch.reward = torch.from_numpy(data.rewards[t]).to(device)
        batch.not_done = torch.from_numpy(1.0 - data.terminated[t].astype(np.float32)).to(device)
    return batch


@dataclass
class TrainLog:
    """Losses per step, and a line printed every ``every`` steps."""

    every: int = 100
    printer: Callable[[str], None] | None = print
    history: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    start: float = field(default_factory=time.perf_counter)
    wall_before_s: float = 0.0  # wall time of the run's earlier sittings (a resumed run)
    wall_at_step: list[float] = field(default_factory=list)  # wall time (s) when each step ended

    def add(self, step: int, total: int, **losses: float) -> None:
        for k, v in losses.items():
            self.history[k].append(float(v))
        self.wall_at_step.append(self.wall_s)
        if self.printer and self.every and ((step + 1) % self.every == 0 or step + 1 == total):
            window = {k: np.mean(v[-self.every:]) for k, v in self.history.items()}
            text = ", ".join(f"{k} {v:.4g}" for k, v in window.items())
            self.printer(f"step {step + 1}/{total} ({self.wall_s:.0f} s): {text}")

    @property
    def wall_s(self) -> float:
        return self.wall_before_s + time.perf_counter() - self.start

    def final(self, window: int = 50) -> dict[str, float]:
        return {k: float(np.mean(v[-window:])) for k, v in self.history.items() if v}

    def state_dict(self) -> dict:
        # Tensors, not lists: a 150k-step history is a few MB and loads with weights_only.
        return {"history": {k: torch.tensor(v, dtype=torch.float64) for k, v in self.history.items()},
                "wall_at_step": torch.tensor(self.wall_at_step, dtype=torch.float64), "wall_s": self.wall_s}

    def load_state_dict(self, state: dict) -> None:
        self.history = defaultdict(list, {k: v.tolist() for k, v in state["history"].items()})
        self.wall_at_step = state["wall_at_step"].tolist()
        self.wall_before_s, self.start = float(state["wall_s"]), time.perf_counter()


def pick_device(name: str | None = None) -> torch.device:
    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass
class TrainResult:
    algo: str
    config: NetworkConfig
    spec: FeatureSpec
    actor: Actor
    log: TrainLog
    critic: torch.nn.Module | None = None
    evaluations: list[dict] = field(default_factory=list)  # {"step", "success", "episodes", ...} per evaluation
    data: DemoData | None = None

    def save(self, path, data: DemoData | None = None, data_path: str = "", seed: int = 0):
        data = data if data is not None else self.data
        meta = checkpoint_meta(data, data_path, seed, self.config, self.log, self.config.steps)
        return save_checkpoint(path, self.algo, self.config, self.spec, self.actor, self.critic, meta)


def checkpoint_meta(data: DemoData, data_path: str, seed: int, cfg: NetworkConfig, log: TrainLog,
                    steps_done: int) -> dict:
    return {"task": data.task, "data": str(data_path), "trajectories": data.trajectories, "transitions": len(data),
            "terminal_labels": data.terminal_labels, "recorder": data.recorder, "steps": cfg.steps,
            "steps_done": steps_done, "seed": seed, "wall_time_s": round(log.wall_s, 1),
            "final_losses": log.final()}


# ----------------------------------------------------------------------------------------------------
# Trainers: everything a run needs to go on after a stop
# ----------------------------------------------------------------------------------------------------
class TrainerBase:
    """The state of a run: ``modules()``, ``optimizers()`` (optimizers and schedules: anything with
    ``state_dict``), the batch generator ``rng``, ``steps_done``; ``step()`` makes one gradient step and returns
    its losses. Subclasses: :class:`~handleit.baselines.bc.BCTrainer`, :class:`~handleit.baselines.td3bc.TD3BCTrainer`."""

    algo = ""

    def __init__(self, data: DemoData, cfg: NetworkConfig, seed: int, device: torch.device):
        self.data, self.cfg, self.seed, self.device = data, cfg, seed, device
        self.rng = seed_everything(seed)  # before the networks are built: their initial weights depend on it
        self.spec = data.feature_spec(cfg.num_points, cfg.point_frame, cfg.goal_cue_points, cfg.state_qvel)
        self.steps_done = 0

    def modules(self) -> dict[str, torch.nn.Module]:
        raise NotImplementedError

    def optimizers(self) -> dict[str, Any]:
        raise NotImplementedError

    def step(self) -> dict[str, float]:
        raise NotImplementedError

    def extra_state(self) -> dict:
        return {}

    def load_extra_state(self, state: dict) -> None:
        pass

    def state_dict(self) -> dict:
        return {"steps_done": self.steps_done,
                "modules": {k: m.state_dict() for k, m in self.modules().items()},
                "optimizers": {k: o.state_dict() for k, o in self.optimizers().items()},
                "rng": rng_state(self.rng), "extra": self.extra_state()}

    def load_state_dict(self, state: dict) -> None:
        for k, m in self.modules().items():
            m.load_state_dict(state["modules"][k])
        for k, o in self.optimizers().items():
            o.load_state_dict(state["optimizers"][k])
        set_rng_state(self.rng, state["rng"])
        self.load_extra_state(state["extra"])
        self.steps_done = int(state["steps_done"])

    def result(self, log: TrainLog, evaluations: list[dict]) -> TrainResult:
        modules = self.modules()
        actor, critic = modules["actor"], modules.get("critic")
        actor.cpu().eval()
        if critic is not None:
            critic.cpu().eval()
        return TrainResult(self.algo, self.cfg, self.spec, actor, log, critic, list(evaluations), self.data)


def rng_state(rng: np.random.Generator) -> dict:
    """The state of every random generator a training step draws from (loadable with ``weights_only``)."""
    state = {"numpy": rng.bit_generator.state, "torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(rng: np.random.Generator, state: dict) -> None:
    rng.bit_generator.state = state["numpy"]
    torch.set_rng_state(state["torch"])
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextlib.contextmanager
def global_rng_kept():
    """Put torch's and Python's global generators back as they were (an evaluation must not move them)."""
    torch_state, python_state = torch.get_rng_state(), random.getstate()
    try:
        yield
    finally:
        torch.set_rng_state(torch_state)
        random.setstate(python_state)


# ----------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------
class TrainingInterrupted(RuntimeError):
    """SIGINT or SIGTERM stopped the run; its checkpoint is written (``step``), ``resume=True`` goes on."""

    def __init__(self, step: int, path: Path | None, signum: int):
        self.step, self.path, self.signum = step, path, signum
        where = f"; checkpoint {path}" if path else " (no checkpoint: no output path)"
        super().__init__(f"stopped by signal {signum} after step {step}{where}")


Evaluate = Callable[[Path, int], dict]  # (checkpoint, step) -> {"success": rate, "episodes": n, ...}


def run_training(make_trainer: Callable[[], TrainerBase], log: TrainLog | None = None, threads: int | None = 1,
                 out: str | Path | None = None, data_path: str = "", checkpoint_every: int = 0,
                 resume: bool = False, evaluate: Evaluate | None = None, eval_every: int = 0,
                 handle_signals: bool = False, stop_after: int | None = None) -> TrainResult:
    """Run a trainer to ``cfg.steps`` gradient steps.

    Args:
        make_trainer: builds the trainer (called under ``threads`` torch threads: it seeds and builds networks).
        out: the checkpoint path; None writes nothing (and cannot resume or evaluate).
        data_path: the demonstration files, recorded in the checkpoint's meta.
        checkpoint_every: write the checkpoint every this many steps (0: only at the end and on a signal).
        resume: continue from ``out`` when it holds a training state (the same algorithm, config and data, else
            ``ValueError``); start afresh when there is no checkpoint yet.
        evaluate: ``evaluate(checkpoint, step) -> {"success": ..., "episodes": ...}``, called every
            ``eval_every`` steps (and at the last step) on the checkpoint written just before.
        handle_signals: SIGINT/SIGTERM write the checkpoint after the current step and raise
            :class:`TrainingInterrupted` (main thread only).
        stop_after: stop (checkpoint written) once this many steps are done, as a signal would; for tests.
    """
    log = log or TrainLog()
    out = Path(out) if out is not None else None
    if evaluate is not None and eval_every and out is None:
        raise ValueError("evaluation during training needs a checkpoint path (out)")
    with torch_threads(threads):
        trainer = make_trainer()
        cfg, data = trainer.cfg, trainer.data
        evaluations: list[dict] = []
        if resume and out is not None and out.exists():
            state = load_training_state(out)
            _check_resumable(out, state, trainer, data_path)
            trainer.load_state_dict(state["trainer"])
            log.load_state_dict(state["log"])
            evaluations = list(state["evaluations"])
            if log.printer:
                log.printer(f"resumed {out} at step {trainer.steps_done}/{cfg.steps}")

        def save() -> Path | None:
            if out is None:
                return None
            meta = checkpoint_meta(data, data_path, trainer.seed, cfg, log, trainer.steps_done)
            modules = trainer.modules()
            training = {"version": TRAINING_STATE_VERSION, "algo": trainer.algo, "trainer": trainer.state_dict(),
                        "log": log.state_dict(), "evaluations": evaluations}
            path = save_checkpoint(out, trainer.algo, cfg, trainer.spec, modules["actor"], modules.get("critic"),
                                   meta, training=training)
            write_curves(*curve_paths(out), log, evaluations, every=log.every or 100)
            return path

        def evaluate_now() -> None:
            with global_rng_kept():
                result = dict(evaluate(out, trainer.steps_done))
            result["step"] = trainer.steps_done
            evaluations.append(result)
            if log.printer:
                log.printer(f"step {trainer.steps_done}: evaluation success {result.get('success', float('nan')):.3f} "
                            f"({result.get('episodes', '?')} episodes)")

        def due_evaluation() -> bool:
            done = trainer.steps_done
            return (evaluate is not None and eval_every > 0 and done > 0
                    and (done % eval_every == 0 or done == cfg.steps)
                    and not any(e["step"] == done for e in evaluations))

        if due_evaluation():  # a stop came between the checkpoint and its evaluation
            evaluate_now()
            save()
        stop = _StopFlag(handle_signals)
        with stop:
            while trainer.steps_done < cfg.steps:
                losses = trainer.step()
                log.add(trainer.steps_done - 1, cfg.steps, **losses)
                done = trainer.steps_done
                evaluating = due_evaluation()
                if evaluating or done == cfg.steps or (checkpoint_every and done % checkpoint_every == 0):
                    save()  # the evaluation reads the policy from this checkpoint
                if evaluating:
                    evaluate_now()
                    save()
                if stop.signum is not None or (stop_after is not None and done >= stop_after):
                    path = save()
                    raise TrainingInterrupted(done, path, stop.signum or 0)
        if trainer.steps_done == cfg.steps and out is not None and not out.exists():
            save()
        return trainer.result(log, evaluations)


def measure_steps_per_s(trainer: TrainerBase, seconds: float, warmup_steps: int = 5,
                        clock: Callable[[], float] = time.perf_counter) -> tuple[int, float]:
    """The gradient steps per second of ``trainer``: ``warmup_steps`` untimed steps first (the first steps on a GPU
    load its kernels and fill its allocator), then steps until ``seconds`` have passed (at least one). Returns
    (timed steps, steps per second). The steps are spent on ``trainer``: train with a fresh one, built with the step
    count that this rate gives for a budget of wall time (``benchmarks/train_budget.py``)."""
    for _ in range(warmup_steps):
        trainer.step()
    start = clock()
    steps = 0
    while steps == 0 or clock() - start < seconds:
        trainer.step()
        steps += 1
    elapsed = clock() - start
    return steps, steps / elapsed if elapsed > 0 else float("inf")


def _check_resumable(out: Path, state: dict | None, trainer: TrainerBase, data_path: str) -> None:
    if state is None:
        raise ValueError(f"{out} holds no training state (a checkpoint written before issue 18, or not by "
                         "`handleit train`): cannot resume it; train into another --out")
    if state.get("version", 0) > TRAINING_STATE_VERSION:
        raise ValueError(f"{out}: training state version {state['version']} is newer than this code's")
    if state["algo"] != trainer.algo:
        raise ValueError(f"{out} holds a {state['algo']!r} run, not {trainer.algo!r}")
    saved_cfg, saved_meta = NetworkConfig.from_dict(state["config"]).to_dict(), state["meta"]
    if saved_cfg != trainer.cfg.to_dict():
        diff = sorted(k for k in saved_cfg if saved_cfg[k] != trainer.cfg.to_dict().get(k))
        raise ValueError(f"cannot resume {out}: its config differs in {diff}; resume with the same --config, "
                         "--steps and --set, or train into another --out")
    data = trainer.data
    now = {"transitions": len(data), "trajectories": data.trajectories, "terminal_labels": data.terminal_labels,
           "seed": trainer.seed}
    then = {k: saved_meta.get(k) for k in now}
    if now != then:
        raise ValueError(f"cannot resume {out}: it was trained on other data or seed ({then}, now {now}); the "
                         "data order would not continue")


class _StopFlag:
    """Turns SIGINT and SIGTERM into a flag that the loop reads after each step (main thread only)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.signum: int | None = None
        self._old: dict = {}

    def _handler(self, signum, frame) -> None:
        self.signum = signum

    def __enter__(self):
        if self.enabled:
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)
