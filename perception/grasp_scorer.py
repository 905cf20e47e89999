"""A learned grasp scorer: a small PointNet over the object points near a grasp, seen from the gripper.

For each candidate grasp (from the analytic sampler, :mod:`~handleit.perception.antipodal_grasps`), the
object's observed points inside a box around the gripper's closing region are expressed in the gripper
frame G (z approach, y closing, x = y cross z; origin at the tool centre) and resampled to a fixed count
(:func:`grasp_crops`). :class:`GraspScorerNet` maps such a crop to a success logit (a shared per-point MLP,
a max-pool, an MLP head: PointNet, Qi et al. 2017, at GPD's scale of input). The predictor registered as
``"learned_scorer"`` re-ranks the analytic candidates by the network.

Data set format (an ``.npz``; :func:`save_grasp_dataset`, :func:`load_grasp_dataset`):

- ``crops``: ``[M, n, 3]`` float32, from :func:`grasp_crops` on the object's observed points (target
  mask only, world frame in), in G, metres (not normalized: the network normalizes);
- ``labels``: ``[M]`` uint8, 1 when the grasp held the object through the lift, else 0;
- optional ``[M]`` arrays (any name, e.g. ``width_m``, ``analytic_score``, ``object_id``, ``seed``);
- optional ``meta``: a JSON string describing how the data was made (task, split, crop settings, ...).

Checkpoints (:func:`save_grasp_scorer`, :func:`load_grasp_scorer`) are ``torch.save`` of a dict with the
network's ``state_dict``, its ``config`` (layer sizes, normalization scale, crop settings) and ``meta``.
Train from a data set with ``python -m handleit.perception.grasp_scorer --data grasps.npz --out scorer.pt``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from handleit.perception.antipodal_grasps import AntipodalGraspPredictor6DoF
from handleit.perception.point_cloud import as_points, voxel_downsample
from handleit.torch_threads import torch_threads
from handleit.types import Grasp

CHECKPOINT_FORMAT = "handleit.grasp_scorer"
CHECKPOINT_VERSION = 1
DEFAULT_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "grasp_scorer.pt"
# The crop around the closing region, in G (m): wider than the open Panda fingers (+-55 mm with their
# thickness) along y, the pads' width and some context along x, from the palm to past the fingertips along z.
CROP_LOWER_G = (-0.03, -0.06, -0.05)
CROP_UPPER_G = (0.03, 0.06, 0.03)
CROP_VOXEL_M = 0.003  # object points are voxel-downsampled first, so crops do not depend on camera distance


def _as_poses(grasps) -> np.ndarray:
    if isinstance(grasps, (list, tuple)):
        if not grasps:
            return np.zeros((0, 4, 4))
        X = np.stack([np.asarray(g.X_WG if isinstance(g, Grasp) else g, dtype=np.float64) for g in grasps])
    else:
        X = np.asarray(grasps, dtype=np.float64)
        if X.ndim == 2:
            X = X[None]
    if X.ndim != 3 or X.shape[1:] != (4, 4) or not np.isfinite(X).all():
        raise ValueError(f"grasps: expected a list of Grasp or finite [M, 4, 4] poses, got shape {list(X.shape)}")
    return X


def grasp_crops(points_W, grasps, n_points: int = 256, *, seed: int = 0, lower_G=CROP_LOWER_G,
                upper_G=CROP_UPPER_G, voxel_m: float | None = CROP_VOXEL_M) -> np.ndarray:
    """The object's points near each grasp, in the grasp's gripper frame: the scorer's input.

    Args:
        points_W: ``[N, 3]`` the object's observed points, world, m (its mask only: the scene is the
            analytic sampler's business).
        grasps: a list of :class:`~handleit.types.Grasp` or ``[M, 4, 4]`` poses ``X_WG``.
        n_points: points per crop, drawn with replacement from those inside the crop box (seeded).
        lower_G, upper_G: the crop box in G (m).
        voxel_m: the points are first voxel-downsampled to this (m); None keeps them as given.
    Returns:
        ``[M, n_points, 3]`` float32 in G, m. A crop with no point inside is all zeros.
    """
    p = as_points(points_W, "points_W")
    X = _as_poses(grasps)
    if n_points < 1:
        raise ValueError(f"n_points must be at least 1, got {n_points}")
    lo = np.asarray(lower_G, dtype=np.float64)
    hi = np.asarray(upper_G, dtype=np.float64)
    if voxel_m and len(p):
        p = voxel_downsample(p, voxel_m)
    rng = np.random.default_rng(seed)
    crops = np.zeros((len(X), n_points, 3), dtype=np.float32)
    for m in range(len(X)):
        p_G = (p - X[m, :3, 3]) @ X[m, :3, :3]
        inside = np.flatnonzero(np.all((p_G >= lo) & (p_G <= hi), axis=1))
        if len(inside):
            crops[m] = p_G[inside[rng.integers(0, len(inside), n_points)]]
    return crops


# ---------------------------------------------------------------------------------------------- network


def default_config() -> dict:
    """The network's configuration: layer widths, the normalization scale (m), crop settings."""
    return {"point_layers": [64, 128, 256], "head_layers": [128, 64], "scale_m": 0.06, "n_points": 256,
            "crop_lower_G": list(CROP_LOWER_G), "crop_upper_G": list(CROP_UPPER_G), "crop_voxel_m": CROP_VOXEL_M}


class GraspScorerNet(nn.Module):
    """PointNet over a grasp crop: ``[B, n, 3]`` points in G (m) -> ``[B]`` success logits.

    A shared per-point MLP (ReLU), max-pooled over the points (order-invariant), then an MLP head. Points
    are divided by ``config["scale_m"]`` first, so the crop box maps to about [-1, 1].
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        self.config = {**default_config(), **(config or {})}
        layers, width = [], 3
        for w in self.config["point_layers"]:
            layers += [nn.Linear(width, w), nn.ReLU()]
            width = w
        self.point_mlp = nn.Sequential(*layers)
        head = []
        for w in self.config["head_layers"]:
            head += [nn.Linear(width, w), nn.ReLU()]
            width = w
        head.append(nn.Linear(width, 1))
        self.head = nn.Sequential(*head)

    def forward(self, crops: torch.Tensor) -> torch.Tensor:
        features = self.point_mlp(crops / self.config["scale_m"])  # [B, n, F]
        return self.head(features.max(dim=1).values).squeeze(-1)


def _check_dataset(crops, labels) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(crops)
    y = np.asarray(labels)
    if c.ndim != 3 or c.shape[2] != 3:
        raise ValueError(f"crops: expected shape [M, n, 3], got {list(c.shape)}")
    if y.shape != (len(c),):
        raise ValueError(f"labels: expected shape [{len(c)}] to match the crops, got {list(y.shape)}")
    if not np.isfinite(c).all():
        raise ValueError("crops: contain NaN or inf")
    if len(y) and not np.isin(y, (0, 1)).all():
        raise ValueError(f"labels: expected 0 or 1, got values {np.unique(y)[:10].tolist()}")
    return c.astype(np.float32), y.astype(np.uint8)


def predict_grasp_success(model: GraspScorerNet, crops, batch_size: int = 512, num_threads: int | None = 1) -> np.ndarray:
    """Success probabilities ``[M]`` in [0, 1] for ``[M, n, 3]`` crops (G, m), on ``num_threads`` CPU
    threads (None: torch's setting)."""
    c = np.asarray(crops, dtype=np.float32)
    if c.ndim != 3 or c.shape[2] != 3:
        raise ValueError(f"crops: expected shape [M, n, 3], got {list(c.shape)}")
    model.eval()
    out = []
    with torch.no_grad(), torch_threads(num_threads):
        for start in range(0, len(c), batch_size):
            out.append(torch.sigmoid(model(torch.from_numpy(c[start:start + batch_size]))).numpy())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def _augment(batch: torch.Tensor, generator: torch.Generator, jitter_m: float) -> torch.Tensor:
    # The Panda hand is symmetric about G's xz- and yz-planes: a mirrored crop has the mirrored outcome.
    signs = torch.ones(len(batch), 1, 3)
    signs[:, 0, :2] = torch.where(torch.rand(len(batch), 2, generator=generator) < 0.5, -1.0, 1.0)
    return batch * signs + jitter_m * torch.randn(batch.shape, generator=generator)


def train_grasp_scorer(crops, labels, epochs: int = 30, *, batch_size: int = 64, lr: float = 1e-3,
                       weight_decay: float = 1e-4, val_fraction: float = 0.2, seed: int = 0, augment: bool = True,
                       jitter_m: float = 0.001, config: dict | None = None, num_threads: int | None = 1,
                       verbose: bool = False):
    """Train a :class:`GraspScorerNet` on labelled crops (binary cross-entropy, classes balanced).

    Args:
        crops: ``[M, n, 3]`` float, from :func:`grasp_crops` (G, m).
        labels: ``[M]`` 0/1 outcomes.
        epochs: passes over the training split.
        batch_size, lr, weight_decay: Adam's settings.
        val_fraction: share of each class held out (stratified, seeded) for validation; the returned model
            is the epoch with the lowest validation loss (the last epoch when nothing is held out).
        seed: seeds the split, the initialization, the batches and the augmentation (the global torch
            random state is left as it was).
        augment: mirror crops about G's xz- and yz-planes at random and add ``jitter_m`` (m) noise.
        config: network configuration overrides (see :func:`default_config`); ``n_points`` defaults to
            the crops' point count.
        num_threads: CPU threads for torch while training (restored afterwards); None keeps torch's.
    Returns:
        ``(model, history)``: the model in eval mode; ``history`` with per-epoch ``train_loss``,
        ``val_loss``, ``val_accuracy``, ``val_balanced_accuracy`` lists, and ``n_train``, ``n_val``,
        ``pos_weight``, ``best_epoch``.
    Raises:
        ValueError on malformed data or when the training split lacks one of the classes.
    """
    c, y = _check_dataset(crops, labels)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    rng = np.random.default_rng(seed)
    val_index, train_index = [], []
    for label in (0, 1):  # stratified split
        index = rng.permutation(np.flatnonzero(y == label))
        k = round(val_fraction * len(index))
        val_index.append(index[:k])
        train_index.append(index[k:])
    val_index, train_index = np.concatenate(val_index), np.concatenate(train_index)
    n_pos = int(y[train_index].sum())
    n_neg = len(train_index) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"train_grasp_scorer: the training split needs both classes, got {n_pos} positive and "
                         f"{n_neg} negative examples")
    pos_weight = n_neg / n_pos  # class balancing: positives and negatives weigh the same in the loss

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        # The predictor crops as many points as the network was trained on.
        model = GraspScorerNet({"n_points": c.shape[1], **(config or {})})
    with torch_threads(num_threads):
        return _train(model, c, y, train_index, val_index, pos_weight, epochs, batch_size, lr, weight_decay, seed,
                      augment, jitter_m, verbose)


def _train(model, c, y, train_index, val_index, pos_weight, epochs, batch_size, lr, weight_decay, seed, augment,
           jitter_m, verbose):
    """The training loop of :func:`train_grasp_scorer` (its arguments checked there)."""
    generator = torch.Generator().manual_seed(seed)
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pos_weight))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    X_train, y_train = torch.from_numpy(c[train_index]), torch.from_numpy(y[train_index].astype(np.float32))
    X_val, y_val = torch.from_numpy(c[val_index]), torch.from_numpy(y[val_index].astype(np.float32))
    history = {"train_loss": [], "val_loss": [], "val_accuracy": [], "val_balanced_accuracy": [],
               "n_train": len(train_index), "n_val": len(val_index), "pos_weight": pos_weight, "best_epoch": None}
    best_state, best_loss = None, np.inf
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(X_train), generator=generator)
        total = 0.0
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            inputs = X_train[batch]
            if augment:
                inputs = _augment(inputs, generator, jitter_m)
            loss = loss_fn(model(inputs), y_train[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        history["train_loss"].append(total / len(X_train))
        if len(X_val):
            model.eval()
            with torch.no_grad():
                logits = model(X_val)
                val_loss = float(loss_fn(logits, y_val))
            predicted = (logits > 0).float()
            recalls = [float((predicted[y_val == k] == k).float().mean()) for k in (0.0, 1.0) if (y_val == k).any()]
            history["val_loss"].append(val_loss)
            history["val_accuracy"].append(float((predicted == y_val).float().mean()))
            history["val_balanced_accuracy"].append(float(np.mean(recalls)))
            if val_loss < best_loss:
                best_loss, history["best_epoch"] = val_loss, epoch
                best_state = {k: v.clone() for k, v in model.state_dict().items()}
        if verbose:
            print(f"epoch {epoch + 1}/{epochs}: train loss {history['train_loss'][-1]:.4f}"
                  + (f", val loss {history['val_loss'][-1]:.4f}, val balanced accuracy "
                     f"{history['val_balanced_accuracy'][-1]:.3f}" if len(X_val) else ""))
    if best_state is not None:
        model.load_state_dict(best_state)
    else:
        history["best_epoch"] = epochs - 1
    model.eval()
    return model, history


# ---------------------------------------------------------------------------------------------- files


def save_grasp_scorer(model: GraspScorerNet, path, meta: dict | None = None) -> Path:
    """Write a checkpoint (``state_dict``, ``config``, ``meta``) to ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "config": dict(model.config),
                "state_dict": model.state_dict(), "meta": meta or {}}, path)
    return path


def load_grasp_scorer(path) -> GraspScorerNet:
    """The network saved at ``path`` (by :func:`save_grasp_scorer`), in eval mode.

    Raises:
        FileNotFoundError when there is no file; ValueError when it is not a grasp scorer checkpoint
        (unreadable, another format, or weights that do not fit its configuration).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"grasp scorer checkpoint {str(path)!r} does not exist; train one with "
                                "`python -m handleit.perception.grasp_scorer --data grasps.npz --out PATH`")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a corrupt or foreign file
        raise ValueError(f"grasp scorer checkpoint {str(path)!r} cannot be read: {error}") from error
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{str(path)!r} is not a grasp scorer checkpoint (expected a dict with "
                         f"format={CHECKPOINT_FORMAT!r})")
    if data.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"grasp scorer checkpoint {str(path)!r}: version {data.get('version')!r} is not supported "
                         f"(this code reads version {CHECKPOINT_VERSION})")
    model = GraspScorerNet(data.get("config"))
    try:
        model.load_state_dict(data["state_dict"])
    except (KeyError, RuntimeError) as error:
        raise ValueError(f"grasp scorer checkpoint {str(path)!r}: the weights do not fit its config: {error}") from error
    model.meta = data.get("meta", {})
    return model.eval()


@dataclass(frozen=True)
class GraspDataset:
    """Labelled grasp crops (see the module docstring for the file format)."""

    crops: np.ndarray  # [M, n, 3] float32, G, m
    labels: np.ndarray  # [M] uint8
    extras: dict[str, np.ndarray] = field(default_factory=dict)  # other [M] arrays
    meta: dict = field(default_factory=dict)


def save_grasp_dataset(path, crops, labels, meta: dict | None = None, **extras) -> Path:
    """Write a data set ``.npz``: ``crops`` [M, n, 3], ``labels`` [M] 0/1, ``extras`` [M] arrays, ``meta``."""
    c, y = _check_dataset(crops, labels)
    for name, value in extras.items():
        if name in ("crops", "labels", "meta") or np.shape(value)[:1] != (len(y),):
            raise ValueError(f"extra {name!r}: expected an array of length {len(y)} under another name")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, crops=c, labels=y, meta=np.array(json.dumps(meta or {})), **extras)
    return path


def load_grasp_dataset(path) -> GraspDataset:
    """Read a data set ``.npz`` (crops, labels, optional extras and meta); clear errors for bad files."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"grasp data set {str(path)!r} does not exist")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as error:
        raise ValueError(f"grasp data set {str(path)!r} cannot be read as an .npz: {error}") from error
    missing = {"crops", "labels"} - set(arrays)
    if missing:
        raise ValueError(f"grasp data set {str(path)!r}: missing {sorted(missing)} (has {sorted(arrays)})")
    crops, labels = _check_dataset(arrays.pop("crops"), arrays.pop("labels"))
    meta = json.loads(str(arrays.pop("meta"))) if "meta" in arrays else {}
    return GraspDataset(crops, labels, arrays, meta)


# ---------------------------------------------------------------------------------------------- predictor


class LearnedGraspPredictor:
    """Grasp predictor (registered as ``"learned_scorer"``): analytic candidates re-ranked by the network.

    ``predict(points_W, masks, **context)`` samples candidates with the ``"antipodal_6dof"`` predictor (same
    masks and context: ``table_z``, ``viewpoint_W``, ``seed``), crops the target's points around each, and
    scores them ``(1 - blend) * p_success + blend * analytic_score``.

    Args:
        checkpoint: a checkpoint path; default the shipped ``perception/checkpoints/grasp_scorer.pt``.
        blend: weight of the analytic score, in [0, 1].
        n_candidates: analytic candidates to re-rank.
        max_grasps: grasps returned.
        sampler_kwargs: passed to :func:`~handleit.perception.antipodal_grasps.sample_antipodal_grasps`.
    Raises:
        FileNotFoundError when the checkpoint does not exist, ValueError when it is invalid.
    """

    def __init__(self, checkpoint=None, *, blend: float = 0.0, n_candidates: int = 100, max_grasps: int = 50,
                 **sampler_kwargs):
        if not 0 <= blend <= 1:
            raise ValueError(f"blend must be in [0, 1], got {blend}")
        path = DEFAULT_CHECKPOINT if checkpoint is None else Path(checkpoint)
        if checkpoint is None and not path.is_file():
            raise FileNotFoundError(f"learned_scorer: no shipped checkpoint at {str(path)!r}; pass checkpoint=PATH or "
                                    "train one with `python -m handleit.perception.grasp_scorer --data grasps.npz "
                                    f"--out {path}`")
        self.model = load_grasp_scorer(path)
        self.blend = float(blend)
        self.max_grasps = int(max_grasps)
        self.sampler = AntipodalGraspPredictor6DoF(max_grasps=n_candidates, **sampler_kwargs)

    def predict(self, points_W, masks, **context) -> list[Grasp]:
        target, _ = self.sampler.split(points_W, masks)
        candidates = self.sampler.predict(points_W, masks, **context)
        if not candidates:
            return []
        config = self.model.config
        crops = grasp_crops(target, candidates, config["n_points"], seed=int(context.get("seed") or 0),
                            lower_G=config["crop_lower_G"], upper_G=config["crop_upper_G"],
                            voxel_m=config["crop_voxel_m"])
        success = predict_grasp_success(self.model, crops)
        scores = (1 - self.blend) * success + self.blend * np.array([g.score for g in candidates])
        order = np.argsort(-scores, kind="stable")[: self.max_grasps]
        return [Grasp(candidates[k].X_WG, candidates[k].width_m, float(scores[k])) for k in order]


def main(argv=None) -> None:
    """``python -m handleit.perception.grasp_scorer --data grasps.npz --out scorer.pt``: train, save, report."""
    parser = argparse.ArgumentParser(description="Train the learned grasp scorer on a grasp data set (.npz).")
    parser.add_argument("--data", required=True, nargs="+", help="data set files (concatenated)")
    parser.add_argument("--out", default=str(DEFAULT_CHECKPOINT), help="checkpoint to write")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--val-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sets = [load_grasp_dataset(path) for path in args.data]
    crops = np.concatenate([s.crops for s in sets])
    labels = np.concatenate([s.labels for s in sets])
    print(f"{len(labels)} grasps, {int(labels.sum())} successful, from {len(sets)} file(s)")
    model, history = train_grasp_scorer(crops, labels, args.epochs, batch_size=args.batch_size, lr=args.lr,
                                        val_fraction=args.val_fraction, seed=args.seed, verbose=True)
    meta = {"data": [str(p) for p in args.data], "data_meta": [s.meta for s in sets], "history": history}
    print(f"wrote {save_grasp_scorer(model, args.out, meta)}")


if __name__ == "__main__":
    main()
