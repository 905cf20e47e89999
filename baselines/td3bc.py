"""TD3+BC (Fujimoto & Gu, "A Minimalist Approach to Offline Reinforcement Learning", 2021) on demonstrations.

TD3 with a behavior-cloning term in the actor's loss:
``L_actor = -lambda * mean Q1(s, pi(s)) + mean (pi(s) - a)^2`` with ``lambda = alpha / mean |Q1(s, pi(s))|``
(alpha = 2.5, the paper's); twin critics regressed on the clipped double-Q target
``r + gamma * (1 - terminated) * min(Q1', Q2')(s', clip(pi'(s') + clip(noise, -c, c), -1, 1))`` (target
policy smoothing, noise 0.2 clipped at 0.5); the actor and the target networks updated every second critic
step (policy delay 2, Polyak tau 0.005). States are normalized with the demonstrations' statistics (the
paper normalizes states too).

The reward is the demonstrations' own: the envs' sparse 1 at the step that succeeds (the episode
terminates there, so there is no bootstrapping past it). The two critics share one point-cloud encoder
(trained by the critic loss); the actor has its own (trained by the actor loss), and the targets are
copies of both. :class:`TD3BCTrainer` keeps all of it (the four networks, two optimizers, the random
generators) so that a run resumes exactly (:func:`~handleit.baselines.training.run_training`).
"""

from __future__ import annotations

import copy

import torch

from handleit.baselines.bc import fit_state_normalizer
from handleit.baselines.checkpoint import build_actor, build_critic
from handleit.baselines.dataset import DemoData
from handleit.baselines.networks import NetworkConfig
from handleit.baselines.training import TrainerBase, TrainLog, TrainResult, pick_device, run_training, sample_batch


@torch.no_grad()
def soft_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    for t, s in zip(target.parameters(), source.parameters()):
        t.lerp_(s, tau)


class TD3BCTrainer(TrainerBase):
    """One TD3+BC critic step (and, every ``policy_delay`` steps, an actor step) at a time."""

    algo = "td3bc"

    def __init__(self, data: DemoData, cfg: NetworkConfig, seed: int = 0, device: str | None = None):
        super().__init__(data, cfg, seed, pick_device(device))
        self.actor = build_actor(self.spec, cfg, data.action_dim)
        self.critic = build_critic(self.spec, cfg, data.action_dim)
        fit_state_normalizer(self.actor, data, self.spec)
        fit_state_normalizer(self.critic, data, self.spec)
        self.actor.to(self.device).train()
        self.critic.to(self.device).train()
        self.actor_target, self.critic_target = copy.deepcopy(self.actor), copy.deepcopy(self.critic)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.lr)
        # The actor's last losses, logged on the critic-only steps too.
        self.last = {"actor_loss": float("nan"), "bc_mse": float("nan"), "q": float("nan")}

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "actor_target": self.actor_target,
                "critic_target": self.critic_target}

    def optimizers(self) -> dict:
        return {"actor_opt": self.actor_opt, "critic_opt": self.critic_opt}

    def extra_state(self) -> dict:
        return {"last": dict(self.last)}

    def load_extra_state(self, state: dict) -> None:
        self.last = dict(state["last"])

    def step(self) -> dict[str, float]:
        cfg, actor, critic = self.cfg, self.actor, self.critic
        b = sample_batch(self.data, self.spec, cfg.batch_size, self.rng, self.device, with_next=True)
        with torch.no_grad():
            noise = (torch.randn_like(b.action) * cfg.policy_noise).clamp(-cfg.noise_clip, cfg.noise_clip)
            next_action = (self.actor_target(b.next_points, b.next_state) + noise).clamp(-1.0, 1.0)
            q1_next, q2_next = self.critic_target(b.next_points, b.next_state, next_action)
            target_q = b.reward + cfg.gamma * b.not_done * torch.min(q1_next, q2_next)
        features = critic.features(b.points, b.state)
        q1, q2 = critic.heads(features, b.action)
        critic_loss = torch.mean((q1 - target_q) ** 2) + torch.mean((q2 - target_q) ** 2)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        torch.nn.utils.clip_grad_norm_(critic.parameters(), cfg.grad_clip)
        self.critic_opt.step()

        if self.steps_done % cfg.policy_delay == 0:
            pi = actor(b.points, b.state)
            # The critic's features of these states, without a gradient into the critic.
            q = critic.heads(features.detach(), pi)[0]
            lam = cfg.alpha / q.abs().mean().detach().clamp_min(1e-6)
            bc_mse = torch.mean((pi - b.action) ** 2)
            actor_loss = -lam * q.mean() + bc_mse
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            torch.nn.utils.clip_grad_norm_(actor.parameters(), cfg.grad_clip)
            self.actor_opt.step()
            critic.zero_grad(set_to_none=True)  # the actor's backward left gradients in the Q heads
            soft_update(self.actor_target, actor, cfg.tau)
            soft_update(self.critic_target, critic, cfg.tau)
            self.last = {"actor_loss": actor_loss.item(), "bc_mse": bc_mse.item(), "q": q.mean().item()}
        self.steps_done += 1
        return {"critic_loss": critic_loss.item(), **self.last}


def train_td3bc(data: DemoData, cfg: NetworkConfig, seed: int = 0, log: TrainLog | None = None,
                device: str | None = None, threads: int | None = 1, **run_options) -> TrainResult:
    """Train TD3+BC for ``cfg.steps`` critic steps on ``data``; returns the actor (and critic) with the losses.
    ``run_options`` go to :func:`~handleit.baselines.training.run_training`."""
    return run_training(lambda: TD3BCTrainer(data, cfg, seed, device), log=log, threads=threads, **run_options)
