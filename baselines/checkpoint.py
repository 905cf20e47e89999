"""Checkpoints of the learned baselines: the networks with everything needed to act again.

A checkpoint is ``torch.save`` of a dict (loadable with ``weights_only=True``):

- ``format`` (:data:`CHECKPOINT_FORMAT`), ``version``, ``algo`` (``"bc"`` or ``"td3bc"``): the algorithm says
  how to read the rest, so one solver name (``policy:<checkpoint>``) runs any of them;
- ``config``: the :class:`~handleit.baselines.networks.NetworkConfig` (sizes and training settings);
- ``feature_spec``: the :class:`~handleit.baselines.features.FeatureSpec` (masks, frame, point count, dof);
- ``action_dim``, ``gaussian`` (the actor's head), ``actor`` (its ``state_dict``, with the state
  normalizer's mean and std as buffers), ``critic`` (TD3+BC only);
- ``meta``: task, data file, trajectories, steps, wall time, final losses;
- ``training`` (checkpoints of ``handleit train``, since issue 18): what a stopped run needs to go on exactly
  (:func:`~handleit.baselines.training.run_training`): every network, optimizer and schedule state, the step
  count, the random generators' states, the loss history and the evaluations. :func:`load_training_state`
  reads it; :func:`load_checkpoint` ignores it.

Checkpoints are written atomically: to a temporary file in the same folder, flushed to disk, then
``os.replace``-d over the old one, so that a stop at any moment leaves the previous checkpoint or the new one.
"""

from __future__ import annotations

import os
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
                    critic: TwinCritic | None = None, meta: dict | None = None, training: dict | None = None) -> Path:
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
    if training is not None:
        payload["training"] = training
    write_atomically(path, lambda f: torch.save(payload, f))
    return path


def write_atomically(path: Path, write) -> None:
    """``write(file)`` into a temporary file beside ``path``, flushed to disk, then renamed over ``path``
    (``os.replace`` is atomic within a file system): readers see the old file or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _read_payload(path: Path) -> dict:
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
    return payload


def load_training_state(path: str | Path) -> dict | None:
    """The training state of a checkpoint (``training``, with its ``config`` and ``meta``), or None when it
    has none (a checkpoint written before issue 18)."""
    payload = _read_payload(Path(path))
    if payload.get("training") is None:
        return None
    return {**payload["training"], "config": payload["config"], "meta": payload.get("meta", {})}


def load_checkpoint(path: str | Path) -> LoadedPolicy:
    """The actor of a checkpoint, in eval mode on the CPU; ``ValueError`` when the file is not one."""
    path = Path(path)
    payload = _read_payload(path)
    cfg = NetworkConfig.from_dict(payload["config"])
    spec_values = dict(payload["feature_spec"])
    spec_values["mask_names"] = tuple(spec_values["mask_names"])
    spec = FeatureSpec(**spec_values)
    actor = build_actor(spec, cfg, int(payload["action_dim"]), bool(payload["gaussian"]))
    actor.load_state_dict(payload["actor"])
    actor.eval()
    return LoadedPolicy(payload["algo"], cfg, spec, actor, dict(payload.get("meta", {})), path)


def export_policy(src: str | Path, dst: str | Path) -> Path:
    """Write ``dst``: the policy of checkpoint ``src`` alone (its actor, config, features and meta; no critic, no
    training state), e.g. a TD3+BC run's 34 MB training checkpoint (``gpu_large``) as a 3 MB one for
    ``handleit eval --solver td3bc:dst``. ``meta["exported_from"]`` names ``src``; the run cannot resume from
    ``dst``."""
    policy = load_checkpoint(src)
    meta = dict(policy.meta, exported_from=str(src))
    return save_checkpoint(dst, policy.algo, policy.config, policy.spec, policy.actor, None, meta)
