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
copies of both.
"""

from __future__ import annotations

import copy

import torch

from handleit.baselines.bc import TrainResult, fit_state_normalizer
from handleit.baselines.checkpoint import build_actor, build_critic
from handleit.baselines.dataset import DemoData
from handleit.baselines.networks import NetworkConfig
from handleit.baselines.training import TrainLog, pick_device, sample_batch, seed_everything
from handleit.torch_threads import torch_threads


@torch.no_grad()
def soft_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    for t, s in zip(target.parameters(), source.parameters()):
        t.lerp_(s, tau)


def train_td3bc(data: DemoData, cfg: NetworkConfig, seed: int = 0, log: TrainLog | None = None,
                device: str | None = None, threads: int | None = 1) -> TrainResult:
    """Train TD3+BC for ``cfg.steps`` critic steps on ``data``; returns the actor (and critic) with the losses."""
    rng = seed_everything(seed)
    dev = pick_device(device)
    spec = data.feature_spec(cfg.num_points, cfg.point_frame, cfg.goal_cue_points)
    log = log or TrainLog()
    with torch_threads(threads):
        actor = build_actor(spec, cfg, data.action_dim)
        critic = build_critic(spec, cfg, data.action_dim)
        fit_state_normalizer(actor, data, spec)
        fit_state_normalizer(critic, data, spec)
        actor.to(dev).train()
        critic.to(dev).train()
        actor_target, critic_target = copy.deepcopy(actor), copy.deepcopy(critic)
        actor_opt = torch.optim.Adam(actor.parameters(), lr=cfg.lr)
        critic_opt = torch.optim.Adam(critic.parameters(), lr=cfg.lr)
        actor_loss = bc_mse = q_mean = torch.tensor(float("nan"))
        for step in range(cfg.steps):
            b = sample_batch(data, spec, cfg.batch_size, rng, dev, with_next=True)
            with torch.no_grad():
                noise = (torch.randn_like(b.action) * cfg.policy_noise).clamp(-cfg.noise_clip, cfg.noise_clip)
                next_action = (actor_target(b.next_points, b.next_state) + noise).clamp(-1.0, 1.0)
                q1_next, q2_next = critic_target(b.next_points, b.next_state, next_action)
                target_q = b.reward + cfg.gamma * b.not_done * torch.min(q1_next, q2_next)
            features = critic.features(b.points, b.state)
            q1, q2 = critic.heads(features, b.action)
            critic_loss = torch.mean((q1 - target_q) ** 2) + torch.mean((q2 - target_q) ** 2)
            critic_opt.zero_grad(set_to_none=True)
            critic_loss.backward()
            torch.nn.utils.clip_grad_norm_(critic.parameters(), cfg.grad_clip)
            critic_opt.step()

            if step % cfg.policy_delay == 0:
                pi = actor(b.points, b.state)
                # The critic's features of these states, without a gradient into the critic.
                q = critic.heads(features.detach(), pi)[0]
                lam = cfg.alpha / q.abs().mean().detach().clamp_min(1e-6)
                bc_mse = torch.mean((pi - b.action) ** 2)
                actor_loss = -lam * q.mean() + bc_mse
                actor_opt.zero_grad(set_to_none=True)
                actor_loss.backward()
                torch.nn.utils.clip_grad_norm_(actor.parameters(), cfg.grad_clip)
                actor_opt.step()
                critic.zero_grad(set_to_none=True)  # the actor's backward left gradients in the Q heads
                soft_update(actor_target, actor, cfg.tau)
                soft_update(critic_target, critic, cfg.tau)
                q_mean = q.mean().detach()
            log.add(step, cfg.steps, critic_loss=critic_loss.item(), actor_loss=actor_loss.item(),
                    bc_mse=bc_mse.item(), q=q_mean.item())
        actor.cpu().eval()
        critic.cpu().eval()
    return TrainResult("td3bc", cfg, spec, actor, log, critic)
