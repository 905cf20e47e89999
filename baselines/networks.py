"""Point-cloud encoders, actors and critics for the learned baselines (torch).

Two encoders, as in ManiSkill-Learn (the baselines of Let's Handle It (arXiv 2202.11792) Table 1):

- :class:`PointNetEncoder`: PointNet (Qi et al. 2017) over per-point features (``features.py``: xyz in the
  chosen frame, rgb, mask channels). ManiSkill-Learn's tricks: the points' mean xyz is subtracted from every
  point and appended as three more channels ("subtract mean coords"), and half of the pooled feature is a
  max, half a mean ("max-mean mix"). Layer normalization after each point layer (ManiSkill2 (arXiv 2302.04659) F.8; no
  spatial transformer). The state (proprioception and goal, normalized) goes through its own MLP and is
  concatenated to the pooled global feature.
- :class:`PointNetTransformerEncoder`: ManiSkill-Learn's ``PointNetWithInstanceInfo``: one PointNet per
  point group (the background: points in no mask; each mask; the whole cloud), each giving one token, plus
  a state token, mixed by a small transformer encoder in which empty groups are masked out, then mean-pooled
  over the present tokens.

Heads: :class:`Actor` (deterministic tanh, or a tanh-Gaussian for a likelihood loss) and
:class:`TwinCritic` (two Q heads on one shared encoder, TD3's clipped double Q). Configs by name in
:data:`CONFIGS`: ``cpu_*`` train in minutes on a 2-core CPU, ``gpu_*`` at ManiSkill's scale
(PointNet [64, 128, 512], ManiSkill2 F.8).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, fields, replace

import torch
from torch import nn

ENCODER_NAMES = ("pointnet", "pointnet_transformer")
LOG_STD_RANGE = (-5.0, 2.0)  # clamp of the Gaussian head's log standard deviation
ACTION_EPS = 1e-4  # keeps atanh finite on actions at +-1


@dataclass(frozen=True)
class NetworkConfig:
    """Sizes of a policy's networks and the training settings that go with them."""

    encoder: str = "pointnet"  # "pointnet" or "pointnet_transformer"
    point_mlp: tuple[int, ...] = (64, 128, 256)  # per-point layers before pooling
    state_mlp: tuple[int, ...] = (128,)
    head_mlp: tuple[int, ...] = (256, 256)  # after the encoder, to the action (or Q value)
    transformer_layers: int = 2
    transformer_heads: int = 4
    num_points: int = 1200  # points per step fed to the network (a random subset of the recorded ones)
    point_frame: str = "base"  # see features.py
    goal_cue_points: int = 0
    state_qvel: bool = True  # joint velocities in the state (features.FeatureSpec.qvel)
    # training
    batch_size: int = 64
    lr: float = 3e-4  # ManiSkill2 F.8 (Adam)
    weight_decay: float = 0.0
    steps: int = 2000
    grad_clip: float = 1.0
    bc_loss: str = "mse"  # "mse" or "nll" (tanh-Gaussian negative log likelihood)
    # TD3+BC (Fujimoto & Gu 2021, their defaults)
    alpha: float = 2.5
    gamma: float = 0.99
    tau: float = 0.005
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    policy_delay: int = 2

    def __post_init__(self):
        if self.encoder not in ENCODER_NAMES:
            raise ValueError(f"unknown encoder {self.encoder!r}; choose one of {ENCODER_NAMES}")
        if self.bc_loss not in ("mse", "nll"):
            raise ValueError(f"unknown bc_loss {self.bc_loss!r}; choose 'mse' or 'nll'")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> NetworkConfig:
        names = {f.name for f in fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown network config keys {sorted(unknown)}; known: {sorted(names)}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        return cls(**values)

    def with_overrides(self, overrides: dict[str, str]) -> NetworkConfig:
        """A copy with ``key=value`` strings applied (``point_mlp=32,64,128``, ``steps=500``)."""
        types = {f.name: f.type for f in fields(self)}
        values = {}
        for key, text in overrides.items():
            if key not in types:
                raise ValueError(f"unknown config key {key!r}; known: {sorted(types)}")
            current = getattr(self, key)
            if isinstance(current, tuple):
                values[key] = tuple(int(v) for v in text.split(",") if v)
            elif isinstance(current, bool):
                values[key] = text.lower() in ("1", "true", "yes")
            else:
                values[key] = type(current)(text)
        return replace(self, **values)


def parse_overrides(items: list[str]) -> dict[str, str]:
    """Command-line ``--set KEY=VALUE`` strings as the dict :meth:`NetworkConfig.with_overrides` takes; a string
    without ``=`` or a key ends the command (SystemExit) with a message naming it."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


CONFIGS: dict[str, NetworkConfig] = {
    # Minutes on 2 CPU cores: a narrow PointNet over 512 of the recorded points.
    "cpu_small": NetworkConfig(point_mlp=(32, 64, 128), state_mlp=(64,), head_mlp=(128, 128), num_points=512,
                               batch_size=32, steps=2000),
    "cpu_small_transformer": NetworkConfig(encoder="pointnet_transformer", point_mlp=(32, 64, 64),
                                           state_mlp=(64,), head_mlp=(128, 128), transformer_heads=2,
                                           num_points=512, batch_size=32, steps=2000),
    # ManiSkill's scale (ManiSkill2 F.8: PointNet [64, 128, 512]; Let's Handle It: 150k gradient steps).
    "gpu_large": NetworkConfig(point_mlp=(64, 128, 512), state_mlp=(256,), head_mlp=(512, 512), num_points=1200,
                               batch_size=256, steps=150_000, goal_cue_points=0),
    "gpu_large_transformer": NetworkConfig(encoder="pointnet_transformer", point_mlp=(64, 128, 256),
                                           state_mlp=(256,), head_mlp=(512, 512), transformer_layers=2,
                                           transformer_heads=8, num_points=1200, batch_size=256,
                                           steps=150_000),
}


def get_config(name: str) -> NetworkConfig:
    if name not in CONFIGS:
        raise ValueError(f"unknown config {name!r}; choose one of {', '.join(CONFIGS)}")
    return CONFIGS[name]


# ----------------------------------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------------------------------
def mlp(sizes: tuple[int, ...], layer_norm: bool = False, last_activation: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        last = i == len(sizes) - 2
        if not last or last_activation:
            if layer_norm:
                layers.append(nn.LayerNorm(b))
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Normalizer(nn.Module):
    """Fixed (x - mean) / std, with the statistics of the training data stored as buffers (in checkpoints)."""

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    def fit(self, x: torch.Tensor, min_std: float = 1e-3) -> None:
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0).clamp_min(min_std))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over points of x [B, N, C] where mask [B, N] is 1; zeros for an empty mask."""
    filled = x.masked_fill(~mask[..., None], float("-inf")).amax(1)
    return torch.where(mask.any(1, keepdim=True), filled, torch.zeros_like(filled))


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask[..., None].to(x.dtype)
    return (x * m).sum(1) / m.sum(1).clamp_min(1.0)


class PointNet(nn.Module):
    """Per-point MLP with layer norm, pooled (half max, half mean) over the points in ``mask``."""

    def __init__(self, point_dim: int, sizes: tuple[int, ...]):
        super().__init__()
        self.point_mlp = mlp((point_dim + 3, *sizes), layer_norm=True)  # +3: the mean xyz, appended
        self.out_dim = sizes[-1]

    def forward(self, points: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is None:
            mask = torch.ones(points.shape[:2], dtype=torch.bool, device=points.device)
        xyz = points[..., :3]
        mean_xyz = masked_mean(xyz, mask)[:, None, :]
        x = torch.cat([xyz - mean_xyz, mean_xyz.expand_as(xyz), points[..., 3:]], -1)
        f = self.point_mlp(x)
        half = f.shape[-1] // 2
        return torch.cat([masked_max(f[..., :half], mask), masked_mean(f[..., half:], mask)], -1)


class PointNetEncoder(nn.Module):
    """Points [B, P, C] and normalized state [B, S] -> feature [B, out_dim]: pooled PointNet ++ state MLP."""

    def __init__(self, point_dim: int, state_dim: int, cfg: NetworkConfig, group_channels: tuple[int, ...] = ()):
        super().__init__()
        self.pointnet = PointNet(point_dim, cfg.point_mlp)
        self.state_mlp = mlp((state_dim, *cfg.state_mlp))
        self.out_dim = self.pointnet.out_dim + cfg.state_mlp[-1]

    def forward(self, points: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.pointnet(points), self.state_mlp(state)], -1)


class PointNetTransformerEncoder(nn.Module):
    """ManiSkill-Learn's PointNet + transformer: one token per point group and one for the state.

    Groups: the background (points in none of the masks), each mask channel (``group_channels``: their
    indices in the point features), and all points. Tokens of empty groups are masked out of the attention
    and of the final mean.
    """

    def __init__(self, point_dim: int, state_dim: int, cfg: NetworkConfig, group_channels: tuple[int, ...] = ()):
        super().__init__()
        self.group_channels = tuple(group_channels)
        n_groups = len(self.group_channels) + 2
        width = cfg.point_mlp[-1]
        self.pointnets = nn.ModuleList(PointNet(point_dim, cfg.point_mlp) for _ in range(n_groups))
        self.state_mlp = mlp((state_dim, *cfg.state_mlp, width))
        self.group_embedding = nn.Parameter(torch.zeros(n_groups + 1, width))  # which token is which
        layer = nn.TransformerEncoderLayer(width, cfg.transformer_heads, dim_feedforward=2 * width, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, cfg.transformer_layers, enable_nested_tensor=False)
        self.out_dim = width

    def forward(self, points: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        B, N = points.shape[:2]
        if self.group_channels:
            in_mask = points[..., list(self.group_channels)] > 0.5  # [B, N, M]
            groups = [~in_mask.any(-1)] + [in_mask[..., i] for i in range(in_mask.shape[-1])]
        else:
            groups = [torch.ones(B, N, dtype=torch.bool, device=points.device)]
        groups.append(torch.ones(B, N, dtype=torch.bool, device=points.device))
        tokens = [self.state_mlp(state)] + [net(points, g) for net, g in zip(self.pointnets, groups)]
        tokens = torch.stack(tokens, 1) + self.group_embedding[: len(tokens)]
        present = torch.stack([torch.ones(B, dtype=torch.bool, device=points.device)] + [g.any(1) for g in groups], 1)
        mixed = self.transformer(tokens, src_key_padding_mask=~present)
        return masked_mean(mixed, present)


ENCODERS = {"pointnet": PointNetEncoder, "pointnet_transformer": PointNetTransformerEncoder}


def make_encoder(point_dim: int, state_dim: int, cfg: NetworkConfig, group_channels: tuple[int, ...]) -> nn.Module:
    return ENCODERS[cfg.encoder](point_dim, state_dim, cfg, group_channels)


# ----------------------------------------------------------------------------------------------------
# Heads
# ----------------------------------------------------------------------------------------------------
class Actor(nn.Module):
    """Observation -> normalized action in [-1, 1]^A (tanh). With ``gaussian``, also a state-dependent
    log standard deviation before the tanh, for the tanh-Gaussian likelihood loss; acting uses the mean."""

    def __init__(self, point_dim: int, state_dim: int, action_dim: int, cfg: NetworkConfig,
                 group_channels: tuple[int, ...] = (), gaussian: bool = False):
        super().__init__()
        self.state_norm = Normalizer(state_dim)
        self.encoder = make_encoder(point_dim, state_dim, cfg, group_channels)
        self.gaussian = gaussian
        self.head = mlp((self.encoder.out_dim, *cfg.head_mlp, action_dim * (2 if gaussian else 1)),
                        last_activation=False)
        # A zero last layer starts from the zero action (ManiSkill2 F.8 finds this stabilizes point-cloud policies).
        nn.init.zeros_(self.head[-1].weight)
        nn.init.zeros_(self.head[-1].bias)
        self.action_dim = action_dim

    def distribution(self, points: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The pre-tanh mean [B, A] and log std [B, A] (None for a deterministic actor)."""
        out = self.head(self.encoder(points, self.state_norm(state)))
        if not self.gaussian:
            return out, None
        mean, log_std = out.chunk(2, -1)
        return mean, log_std.clamp(*LOG_STD_RANGE)

    def forward(self, points: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.distribution(points, state)[0])

    def log_prob(self, points: torch.Tensor, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """log pi(action | obs) [B] of the tanh-Gaussian (change of variables through the tanh)."""
        mean, log_std = self.distribution(points, state)
        if log_std is None:
            raise ValueError("log_prob needs a Gaussian actor (gaussian=True)")
        a = action.clamp(-1 + ACTION_EPS, 1 - ACTION_EPS)
        u = torch.atanh(a)
        z = (u - mean) / log_std.exp()
        log_normal = -0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)
        return (log_normal - torch.log1p(-a**2)).sum(-1)


class TwinCritic(nn.Module):
    """Q1, Q2 (s, a): one point-cloud encoder shared by two MLP heads (clipped double Q, TD3)."""

    def __init__(self, point_dim: int, state_dim: int, action_dim: int, cfg: NetworkConfig,
                 group_channels: tuple[int, ...] = ()):
        super().__init__()
        self.state_norm = Normalizer(state_dim)
        self.encoder = make_encoder(point_dim, state_dim, cfg, group_channels)
        self.q1 = mlp((self.encoder.out_dim + action_dim, *cfg.head_mlp, 1), last_activation=False)
        self.q2 = mlp((self.encoder.out_dim + action_dim, *cfg.head_mlp, 1), last_activation=False)

    def features(self, points: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return self.encoder(points, self.state_norm(state))

    def heads(self, feature: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([feature, action], -1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)

    def forward(self, points, state, action):
        return self.heads(self.features(points, state), action)
