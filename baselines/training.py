"""What BC and TD3+BC training share: seeding, thread count, batches of transitions, a loss log."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from handleit.baselines.dataset import DemoData
from handleit.baselines.features import FeatureSpec


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
        next_points, next_state = data.observation_batch(spec, obs + 1, rng)
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

    def add(self, step: int, total: int, **losses: float) -> None:
        for k, v in losses.items():
            self.history[k].append(float(v))
        if self.printer and self.every and ((step + 1) % self.every == 0 or step + 1 == total):
            window = {k: np.mean(v[-self.every:]) for k, v in self.history.items()}
            text = ", ".join(f"{k} {v:.4g}" for k, v in window.items())
            self.printer(f"step {step + 1}/{total} ({time.perf_counter() - self.start:.0f} s): {text}")

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self.start

    def final(self, window: int = 50) -> dict[str, float]:
        return {k: float(np.mean(v[-window:])) for k, v in self.history.items() if v}


def pick_device(name: str | None = None) -> torch.device:
    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
