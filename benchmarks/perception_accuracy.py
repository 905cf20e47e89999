"""Accuracy of the chair and bucket perception on simulator point clouds, against the simulator's ground truth.

For every bundled object of the chosen splits, ``--seeds`` episodes each (seeds 0, 1, ...; the object is
picked with ``options={"model_id": ...}``), the first observation's fused point cloud (world frame) is cut to
the object's points (``valid & target_link & ~robot``: what a solver gets) and given to the estimators.
Ground truth is read from the env here, in the benchmark, never by an estimator.

1. PushChair: xy error of the chair's centre against ``chair_center_W()`` (the swivel axis, on which success
   is measured) for the baseline of "Let's Handle It" (arXiv 2202.11792; ``mean_center``: the mean of the points),
   its Fig. 10's box (``estimate_chair_center(...).center_W``), the box's seat part (``seat_center_W``) and the
   swivel estimate the trees use (``swivel_center_W``, with the counts of where it came from: star base, column or
   seat). Also the backrest top's height error against ``backrest_top_W()[2]``.
2. MoveBucket, handle lying down as reset leaves it: ``estimate_bucket_rim`` (the z-slice method) against
   ``bucket_geometry()``: rim height, rim centre (xy), outer radius and thickness errors, the thin/thick
   classification (``rim_is_pinchable`` against ``rim_is_thin``), and the height error of the naive "highest
   points" methods (the 99th percentile and the maximum of the bucket points' z).
3. MoveBucket again, same episodes, with the handle raised upright over the rim: the handle joint is set to
   0 with ``bucket.set_qpos`` and the scene observed again by the env's own observation function
   (``env.unwrapped._get_obs()``, which calls ``scene.update_render()`` and fuses the cameras' pictures; no
   physics step, so the handle stays exactly upright and nothing else moves). Rim height errors of both
   methods.

An estimator that raises ValueError counts as a failure (the count is printed); errors are over the rest.
Errors are estimate minus truth; "mean" of a signed error is its bias.

    python benchmarks/perception_accuracy.py [--split both|train|test] [--seeds 2]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from collections import Counter, defaultdict

import numpy as np

import handleit.envs
from handleit.perception.bucket_rim import estimate_bucket_rim, rim_is_pinchable
from handleit.perception.chair_center import estimate_chair_center, mean_center

PAPER_MSE_M2 = {"mean": 0.11, "box": 0.038}  # Let's Handle It Fig. 10


def _object_points(obs) -> np.ndarray:
    pc = obs["pointcloud"]
    assert pc["frame"] == "world"
    mask = pc["valid"] & pc["target_link"] & ~pc["robot"]
    return np.asarray(pc["xyz"][mask], dtype=np.float64)


def _episodes(task: str, splits: list[str], seeds: int):
    """Yield ``(env, split, model_id, seed, obs)`` for every object of the splits and every seed."""
    for split in splits:
        env = handleit.envs.make(task, obs_mode="pointcloud", split=split)
        for model_id in handleit.envs.model_ids(task, split):
            for seed in range(seeds):
                obs, _ = env.reset(seed=seed, options={"model_id": model_id})
                yield env, split, model_id, seed, obs
        env.close()


def _fmt(x: float | None, digits: int = 4) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


# ---------------------------------------------------------------------------------------------- chairs


def chairs(splits: list[str], seeds: int) -> None:
    errors = defaultdict(list)  # estimator -> xy errors (m)
    failures = Counter()
    sources = Counter()
    source_errors = defaultdict(list)
    backrest_errors = []
    n_points = []
    episodes = 0
    for env, _, _, _, obs in _episodes("PushChair", splits, seeds):
        episodes += 1
        points = _object_points(obs)
        n_points.append(len(points))
        truth = env.unwrapped.chair_center_W()
        backrest_top = float(env.unwrapped.backrest_top_W()[2])
        try:
            errors["mean"].append(float(np.linalg.norm(mean_center(points)[:2] - truth[:2])))
        except ValueError:
            failures["mean"] += 1
        try:
            chair = estimate_chair_center(points)
        except ValueError:
            for name in ("box", "seat", "swivel", "backrest"):
                failures[name] += 1
            continue
        for name, estimate in (("box", chair.center_W), ("seat", chair.seat_center_W),
                               ("swivel", chair.swivel_center_W)):
            errors[name].append(float(np.linalg.norm(estimate[:2] - truth[:2])))
        sources[chair.swivel_source] += 1
        source_errors[chair.swivel_source].append(errors["swivel"][-1])
        backrest_errors.append(chair.backrest.top_height_m - backrest_top)

    print(f"### PushChair: chair centre (xy) against the swivel axis, {episodes} episodes "
          f"({len(splits)} split(s) x chairs x {seeds} seeds; {int(np.median(n_points))} chair points median)")
    print()
    labels = {
        "mean": "mean of the points (`mean_center`, Let's Handle It baseline)",
        "box": "upper-body PCA box (`center_W`, Let's Handle It Fig. 10)",
        "seat": "box's seat part (`seat_center_W`)",
        "swivel": "swivel estimate (`swivel_center_W`, used by the trees)",
    }
    rows = []
    for name, label in labels.items():
        e = np.asarray(errors[name])
        mse = float(np.mean(e**2)) if len(e) else None
        paper = PAPER_MSE_M2.get(name)
        rows.append([label, str(len(e)), str(failures[name]), _fmt(mse, 5),
                     _fmt(np.sqrt(mse) if mse is not None else None, 3),
                     _fmt(np.median(e) if len(e) else None, 3), _fmt(e.max() if len(e) else None, 3),
                     "-" if paper is None else f"{paper}"])
    for source in ("base", "column", "seat"):
        e = np.asarray(source_errors[source])
        mse = float(np.mean(e**2)) if len(e) else None
        rows.append([f"  swivel, from the {source}", str(len(e)), "-", _fmt(mse, 5),
                     _fmt(np.sqrt(mse) if mse is not None else None, 3), _fmt(np.median(e) if len(e) else None, 3),
                     _fmt(e.max() if len(e) else None, 3), "-"])
    _table(["estimate", "n", "failed", "MSE (m^2)", "RMS (m)", "median (m)", "max (m)", "Let's Handle It MSE"], rows)
    print("swivel_source counts: " + ", ".join(f"{s} {sources[s]}" for s in ("base", "column", "seat")))
    print()
    b = np.asarray(backrest_errors)
    print("Backrest top height (`ChairCenter.backrest.top_height_m` - `backrest_top_W()[2]`):")
    print()
    _table(["n", "failed", "mean (bias, m)", "mean abs (m)", "max abs (m)"],
           [[str(len(b)), str(failures["backrest"]), _fmt(b.mean() if len(b) else None),
             _fmt(np.abs(b).mean() if len(b) else None), _fmt(np.abs(b).max() if len(b) else None)]])


# ---------------------------------------------------------------------------------------------- buckets


def _rim_record(points: np.ndarray, geometry: dict) -> dict:
    z = points[:, 2]
    record = {
        "p99_height": float(np.percentile(z, 99.0)) - geometry["rim_height_W_m"],
        "max_height": float(z.max()) - geometry["rim_height_W_m"],
        "truth_thin": bool(geometry["rim_is_thin"]),
    }
    try:
        rim = estimate_bucket_rim(points)
    except ValueError:
        record["failed"] = True
        return record
    record.update(
        failed=False,
        height=rim.height_m - geometry["rim_height_W_m"],
        center=float(np.linalg.norm(rim.center_W[:2] - geometry["rim_center_W"][:2])),
        outer_radius=rim.outer_radius_m - geometry["rim_outer_radius_m"],
        thickness=rim.thickness_m - geometry["rim_thickness_m"],
        pinchable=bool(rim_is_pinchable(rim)),
    )
    return record


def _error_row(label: str, values, signed: bool = True) -> list[str]:
    e = np.asarray(values, dtype=np.float64)
    if not len(e):
        return [label, "0", "-", "-", "-"]
    return [label, str(len(e)), _fmt(e.mean()) if signed else "-", _fmt(np.abs(e).mean()), _fmt(np.abs(e).max())]


def buckets(splits: list[str], seeds: int) -> None:
    lying, upright = [], []
    handle_above = []  # handle upright: its highest seen point above the rim (m), per episode with handle points
    handle_angles = []
    n_points = []
    for env, _, _, _, obs in _episodes("MoveBucket", splits, seeds):
        base = env.unwrapped
        points = _object_points(obs)
        n_points.append(len(points))
        lying.append(_rim_record(points, base.bucket_geometry()))
        # The handle raised upright over the rim (joint angle 0), the scene observed again without stepping.
        base.bucket.set_qpos(np.zeros(base.bucket.dof, dtype=np.float32))
        obs = base._get_obs()
        handle_angles.append(base.handle_angle())
        geometry = base.bucket_geometry()
        upright.append(_rim_record(_object_points(obs), geometry))
        pc = obs["pointcloud"]
        handle = pc["xyz"][pc["valid"] & pc["target_handle"] & ~pc["robot"]]
        if len(handle):
            handle_above.append(float(handle[:, 2].max()) - geometry["rim_height_W_m"])

    episodes = len(lying)
    print(f"### MoveBucket: rim from the bucket's points (handle lying down, as reset leaves it), {episodes} "
          f"episodes ({int(np.median(n_points))} bucket points median, handle included)")
    print()
    ok = [r for r in lying if not r["failed"]]
    failed = episodes - len(ok)
    rows = [
        _error_row("rim height, z-slice (`estimate_bucket_rim`)", [r["height"] for r in ok]),
        _error_row("rim height, naive 99th percentile of z", [r["p99_height"] for r in lying]),
        _error_row("rim height, naive highest point", [r["max_height"] for r in lying]),
        _error_row("rim centre, xy distance", [r["center"] for r in ok], signed=False),
        _error_row("rim outer radius", [r["outer_radius"] for r in ok]),
        _error_row("rim thickness", [r["thickness"] for r in ok]),
    ]
    _table(["quantity (estimate - truth)", "n", "mean (bias, m)", "mean abs (m)", "max abs (m)"], rows)
    print(f"`estimate_bucket_rim` failures (ValueError): {failed} of {episodes}")
    print()
    confusion = Counter((r["truth_thin"], r["pinchable"]) for r in ok)
    correct = confusion[(True, True)] + confusion[(False, False)]
    print(f"Rim thickness class (`rim_is_pinchable` against `rim_is_thin`): {correct}/{len(ok)} correct "
          f"({100.0 * correct / max(len(ok), 1):.1f}%)")
    print()
    _table(["truth \\ estimate", "thin (pinchable)", "thick"],
           [["thin", str(confusion[(True, True)]), str(confusion[(True, False)])],
            ["thick", str(confusion[(False, True)]), str(confusion[(False, False)])]])

    ok = [r for r in upright if not r["failed"]]
    above = np.asarray(handle_above)
    print(f"### MoveBucket: rim height with the handle upright over the rim, {len(upright)} episodes")
    print()
    print(f"Handle joint set to 0 with `bucket.set_qpos`, observed again with `env.unwrapped._get_obs()` (no physics "
          f"step); joint angle read back: max |angle| {np.abs(handle_angles).max():.2e} rad. Handle points seen in "
          f"{len(above)} episodes; their top above the rim: "
          f"median {_fmt(np.median(above) if len(above) else None, 3)} m, "
          f"min {_fmt(above.min() if len(above) else None, 3)} m.")
    print()
    rows = [
        _error_row("rim height, z-slice (`estimate_bucket_rim`)", [r["height"] for r in ok]),
        _error_row("rim height, naive 99th percentile of z", [r["p99_height"] for r in upright]),
        _error_row("rim height, naive highest point", [r["max_height"] for r in upright]),
        _error_row("rim centre, xy distance", [r["center"] for r in ok], signed=False),
    ]
    _table(["quantity (estimate - truth)", "n", "mean (bias, m)", "mean abs (m)", "max abs (m)"], rows)
    print(f"`estimate_bucket_rim` failures (ValueError): {len(upright) - len(ok)} of {len(upright)}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("both", "train", "test"), default="both")
    parser.add_argument("--seeds", type=int, default=2, help="episodes (seeds 0..N-1) per object")
    parser.add_argument("--task", choices=("both", "PushChair", "MoveBucket"), default="both")
    args = parser.parse_args()
    splits = ["train", "test"] if args.split == "both" else [args.split]

    start = time.perf_counter()
    print(f"command: python {' '.join(sys.argv)}")
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; "
          f"python {platform.python_version()}")
    print()
    if args.task in ("both", "PushChair"):
        chairs(splits, args.seeds)
    if args.task in ("both", "MoveBucket"):
        buckets(splits, args.seeds)
    print(f"run time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
