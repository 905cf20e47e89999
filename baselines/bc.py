"""Behavior cloning on demonstrations: a point-cloud actor regressed onto the demonstrated actions.

The loss is the mean squared error between the actor's tanh action and the demonstrated normalized joint
velocities (``bc_loss="mse"``, ManiSkill-Learn's BC), or the negative log likelihood of the demonstrated
action under a tanh-Gaussian (``bc_loss="nll"``). Adam (lr 3e-4, ManiSkill2 (arXiv 2302.04659) F.8), a cosine
learning-rate schedule to zero over the run, gradient-norm clipping; the state normalizer's statistics come from the
demonstrations and are saved in the checkpoint.

:class:`BCTrainer` holds everything a run needs to go on after a stop (networks, optimizer, schedule, the
random generators that draw the batches); :func:`~handleit.baselines.training.run_training` drives it, with
checkpoints, resume and learning curves.
"""

from __future__ import annotations

import torch

from handleit.baselines.checkpoint import build_actor
from handleit.baselines.dataset import DemoData
from handleit.baselines.features import FeatureSpec
from handleit.baselines.networks import Actor, NetworkConfig
from handleit.baselines.training import (
    TrainerBase,
    TrainLog,
    TrainResult,
    pick_device,
    run_training,
    sample_batch,
)

__all__ = ["BCTrainer", "TrainResult", "bc_loss", "fit_state_normalizer", "train_bc"]


def fit_state_normalizer(module: torch.nn.Module, data: DemoData, spec: FeatureSpec) -> None:
    module.state_norm.fit(torch.from_numpy(data.all_states(spec)))


def bc_loss(actor: Actor, points: torch.Tensor, state: torch.Tensor, action: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "nll":
        return -actor.log_prob(points, state, action).mean()
    return torch.mean((actor(points, state) - action) ** 2)


class BCTrainer(TrainerBase):
    """One BC gradient step at a time (:meth:`step`); its state round-trips through :meth:`state_dict`."""

    algo = "bc"

    def __init__(self, data: DemoData, cfg: NetworkConfig, seed: int = 0, device: str | None = None):
        super().__init__(data, cfg, seed, pick_device(device))
        self.actor = build_actor(self.spec, cfg, data.action_dim, gaussian=cfg.bc_loss == "nll")
        fit_state_normalizer(self.actor, data, self.spec)
        self.actor.to(self.device).train()
        self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.schedule = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=max(cfg.steps, 1))

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor}

    def optimizers(self) -> dict:
        return {"optimizer": self.optimizer, "schedule": self.schedule}

    def step(self) -> dict[str, float]:
        cfg = self.cfg
        batch = sample_batch(self.data, self.spec, cfg.batch_size, self.rng, self.device)
        loss = bc_loss(self.actor, batch.points, batch.state, batch.action, cfg.bc_loss)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.actor.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.schedule.step()
        with torch.no_grad():  # the action error, comparable between the two losses
            mse = loss if cfg.bc_loss == "mse" else \
                torch.mean((self.actor(batch.points, batch.state) - batch.action) ** 2)
        self.steps_done += 1
        return {"loss": loss.item(), "action_mse": mse.item()}


def train_bc(data: DemoData, cfg: NetworkConfig, seed: int = 0, log: TrainLog | None = None,
             device: str | None = None, threads: int | None = 1, **run_options) -> TrainResult:
    """Train a BC actor for ``cfg.steps`` gradient steps on ``data``; returns it with the loss history.
    ``run_options`` go to :func:`~handleit.baselines.training.run_training` (checkpoints, resume, evaluation)."""
    return run_training(lambda: BCTrainer(data, cfg, seed, device), log=log, threads=threads, **run_options)
