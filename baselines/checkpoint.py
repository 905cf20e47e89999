"""Checkpoints of the learned baselines: the networks with everything needed to act again.

A checkpoint is ``torch.save`` of a dict (loadable with ``weights_only=True``):

- ``format`` (:data:`CHECKPOINT_FORMAT`), ``version``, ``algo`` (``"bc"`` or ``"td3bc"``): the algorithm says
  how to read the rest, so one solver name (``policy:<checkpoint>``) runs any of them;
- ``config``: the :class:`~handleit.baselines.networks.NetworkConfig` (sizes and training settings);
- ``feature_spec``: the :class:`~handleit.baselines.features.FeatureSpec` (masks, frame, point count, dof);
- ``action_dim``, ``gaussian`` (the actor's head), ``actor`` (its ``state_dict``, with the state
  normalizer's mean and std as buffers), ``critic`` (TD3+BC only);
- ``meta``: task, data file, trajectories, steps, wall time, final losses.
"""

from __future__ import annotations

import pickle
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from handleit.baselines.features import FeatureSpec
from handleit.baselines.networks import Actor, NetworkConfig, TwinCritic

CHECKPOINT_FORMAT = "handleit.baseline_policy"
CHECKPOINT_VERSION = 1
ALGORITHMS = ("bc", "td3bc")


def group_channels(spec: FeatureSpec) -> tuple[int, ...]:
    """Indices of the mask channels (and the goal cue's) in the per-point features: after xyz and rgb."""
    return tuple(range(6, 6 + len(spec.group_masks)))


def build_actor(spec: FeatureSpec, cfg: NetworkConfig, action_dim: int, gaussian: bool = False) -> Actor:
    return Actor(spec.point_dim, spec.state_dim, action_dim, cfg, group_channels(spec), gaussian)


def build_critic(spec: FeatureSpec, cfg: NetworkConfig, action_dim: int) -> TwinCritic:
    return TwinCritic(spec.point_dim, spec.state_dim, action_dim, cfg, group_channels(spec))


@dataclass
class LoadedPolicy:
    algo: str
    config: NetworkConfig
    spec: FeatureSpec
    actor: Actor
    meta: dict[str, Any]
    path: Path


def save_checkpoint(path: str | Path, algo: str, cfg: NetworkConfig, spec: FeatureSpec, actor: Actor,
                    critic: TwinCritic | None = None, meta: dict | None = None) -> Path:
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algo!r}; choose one of {ALGORITHMS}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "algo": algo,
        "config": cfg.to_dict(),
        "feature_spec": asdict(spec),
        "action_dim": actor.action_dim,
        "gaussian": actor.gaussian,
        "actor": actor.state_dict(),
        "critic": None if critic is None else critic.state_dict(),
        "meta": dict(meta or {}),
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)  # never a half-written checkpoint
    return path


def load_checkpoint(path: str | Path) -> LoadedPolicy:
    """The actor of a checkpoint, in eval mode on the CPU; ``ValueError`` when the file is not one."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as e:  # not torch's, truncated
        raise ValueError(f"{path} is not a readable checkpoint: {e}") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a handleit baseline checkpoint (format {CHECKPOINT_FORMAT!r})")
    if payload.get("version", 0) > CHECKPOINT_VERSION:
        raise ValueError(f"{path}: checkpoint version {payload['version']} is newer than this code's "
                         f"{CHECKPOINT_VERSION}")
    cfg = NetworkConfig.from_dict(payload["config"])
    spec_values = dict(payload["feature_spec"])
    spec_values["mask_names"] = tuple(spec_values["mask_names"])
    spec = FeatureSpec(**spec_values)
    actor = build_actor(spec, cfg, int(payload["action_dim"]), bool(payload["gaussian"]))
    actor.load_state_dict(payload["actor"])
    actor.eval()
    return LoadedPolicy(payload["algo"], cfg, spec, actor, dict(payload.get("meta", {})), path)
