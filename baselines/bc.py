"""Behavior cloning on demonstrations: a point-cloud actor regressed onto the demonstrated actions.

The loss is the mean squared error between the actor's tanh action and the demonstrated normalized joint
velocities (``bc_loss="mse"``, ManiSkill-Learn's BC), or the negative log likelihood of the demonstrated
action under a tanh-Gaussian (``bc_loss="nll"``). Adam (lr 3e-4, ManiSkill2 (arXiv 2302.04659) F.8), a cosine
learning-rate schedule to zero over the run, gradient-norm clipping; the state normalizer's statistics come from the
demonstrations and are saved in the checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from handleit.baselines.checkpoint import build_actor, save_checkpoint
from handleit.baselines.dataset import DemoData
from handleit.baselines.features import FeatureSpec
from handleit.baselines.networks import Actor, NetworkConfig
from handleit.baselines.training import TrainLog, pick_device, sample_batch, seed_everything
from handleit.torch_threads import torch_threads


@dataclass
class TrainResult:
    algo: str
    config: NetworkConfig
    spec: FeatureSpec
    actor: Actor
    log: TrainLog
    critic: torch.nn.Module | None = None

    def save(self, path, data: DemoData, data_path: str = "", seed: int = 0):
        meta = {"task": data.task, "data": str(data_path), "trajectories": data.trajectories,
                "transitions": len(data), "recorder": data.recorder, "steps": self.config.steps, "seed": seed,
                "wall_time_s": round(self.log.wall_s, 1), "final_losses": self.log.final()}
        return save_checkpoint(path, self.algo, self.config, self.spec, self.actor, self.critic, meta)


def fit_state_normalizer(module: torch.nn.Module, data: DemoData, spec: FeatureSpec) -> None:
    module.state_norm.fit(torch.from_numpy(data.all_states(spec)))


def bc_loss(actor: Actor, points: torch.Tensor, state: torch.Tensor, action: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "nll":
        return -actor.log_prob(points, state, action).mean()
    return torch.mean((actor(points, state) - action) ** 2)


def train_bc(data: DemoData, cfg: NetworkConfig, seed: int = 0, log: TrainLog | None = None,
             device: str | None = None, threads: int | None = 1) -> TrainResult:
    """Train a BC actor for ``cfg.steps`` gradient steps on ``data``; returns it with the loss history."""
    rng = seed_everything(seed)
    dev = pick_device(device)
    spec = data.feature_spec(cfg.num_points, cfg.point_frame, cfg.goal_cue_points)
    log = log or TrainLog()
    with torch_threads(threads):
        actor = build_actor(spec, cfg, data.action_dim, gaussian=cfg.bc_loss == "nll")
        fit_state_normalizer(actor, data, spec)
        actor.to(dev).train()
        optimizer = torch.optim.Adam(actor.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(cfg.steps, 1))
        for step in range(cfg.steps):
            batch = sample_batch(data, spec, cfg.batch_size, rng, dev)
            loss = bc_loss(actor, batch.points, batch.state, batch.action, cfg.bc_loss)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(actor.parameters(), cfg.grad_clip)
            optimizer.step()
            schedule.step()
            with torch.no_grad():  # the action error, comparable between the two losses
                mse = loss if cfg.bc_loss == "mse" else \
                    torch.mean((actor(batch.points, batch.state) - batch.action) ** 2)
            log.add(step, cfg.steps, loss=loss.item(), action_mse=mse.item())
        actor.cpu().eval()
    return TrainResult("bc", cfg, spec, actor, log)
