"""Train BC or TD3+BC for a budget of wall time, on a machine without the simulators (a GPU machine).

``handleit train`` needs the command line's imports (the envs, SAPIEN); this script imports only
``handleit.baselines`` (torch, numpy, h5py; matplotlib for the curve plot), so it runs wherever those do. It:

1. reads the demonstrations (``load_demo_data``: a recorded file or its ``handleit compact-demos`` copy);
2. measures the gradient steps per second of the config on this machine for ``--probe-s`` seconds (on a
   throw-away trainer; run two of these scripts side by side and each measures its share of the device), and
   sets the run's step count to what fits ``--budget-s`` (times ``--safety``): the cosine learning-rate
   schedule then ends with the run. ``--steps N`` skips the probe;
3. trains with checkpoints (training state: ``--resume`` continues an interrupted run) and curves (CSV, PNG)
   beside ``--out``; ``--snapshots K`` stops at K evenly spaced steps on the way and keeps each step's policy
   (``export_policy``: the actor alone), for a success curve measured afterwards where the simulator runs;
4. writes into ``--export`` what a small transfer can carry back: ``<algo>.pt`` (the final policy alone),
   ``<algo>.curve.csv`` and ``<algo>-extras.tar`` (the curve plot, the snapshots, ``<algo>-summary.json``).

SIGTERM or SIGINT (e.g. ``timeout``) stops the run after the current step with its checkpoint written, and
the export still happens. Example (the issue-18 GPU run, docs/benchmarks.md)::

    python benchmarks/train_budget.py --algo bc --data .gpu-data/demos/OpenCabinetDrawer.h5 --config gpu_large \\
        --set lr=1e-3 --set num_points=384 --budget-s 400 --out /tmp/run/bc.pt --export $OUT --snapshots 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import time
from pathlib import Path

import torch

from handleit.baselines.bc import BCTrainer, train_bc
from handleit.baselines.checkpoint import export_policy
from handleit.baselines.curves import curve_paths
from handleit.baselines.dataset import load_demo_data
from handleit.baselines.networks import CONFIGS, get_config, parse_overrides
from handleit.baselines.td3bc import TD3BCTrainer, train_td3bc
from handleit.baselines.training import TrainingInterrupted, TrainLog, measure_steps_per_s, pick_device
from handleit.torch_threads import torch_threads

TRAINERS = {"bc": (BCTrainer, train_bc), "td3bc": (TD3BCTrainer, train_td3bc)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", required=True, choices=sorted(TRAINERS))
    parser.add_argument("--data", required=True, action="append", help="demonstration file(s) of one task")
    parser.add_argument("--out", required=True, help="the training checkpoint (curves beside it)")
    parser.add_argument("--export", default=None, help="folder for the policy, curve CSV and extras (default: none)")
    parser.add_argument("--config", default="gpu_large", choices=sorted(CONFIGS))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--budget-s", type=float, default=None, help="wall time of the training itself (s)")
    parser.add_argument("--probe-s", type=float, default=20.0, help="seconds of the throughput measurement")
    parser.add_argument("--safety", type=float, default=0.9, help="share of the budget the step count aims at")
    parser.add_argument("--steps", type=int, default=None, help="a fixed step count instead of --budget-s")
    parser.add_argument("--snapshots", type=int, default=0, help="policies kept at this many steps on the way")
    parser.add_argument("--checkpoints", type=int, default=10, help="checkpoints (and curve rewrites) per run")
    parser.add_argument("--log-rows", type=int, default=200, help="rows of the curve CSV per run")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on a CPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true", help="continue the run in --out (same --steps needed)")
    args = parser.parse_args(argv)
    if (args.budget_s is None) == (args.steps is None):
        parser.error("give one of --budget-s and --steps")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    device = pick_device(args.device)
    settings = parse_overrides(args.set)
    cfg = get_config(args.config).with_overrides(settings)
    data = load_demo_data(args.data)
    summary = {"algo": args.algo, "config": args.config, "overrides": settings, "device": str(device),
               "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               "torch": torch.__version__, "data": args.data, "demonstrations": data.trajectories,
               "transitions": len(data), "terminal_labels": data.terminal_labels,
               "points_per_observation": int(data.xyz_W.shape[1]), "load_s": round(time.perf_counter() - started, 1)}
    print(f"{args.algo} on {data.task}: {data.trajectories} demonstrations, {len(data)} transitions, "
          f"{data.xyz_W.shape[1]} points each; {args.config} ({cfg.num_points} points, batch {cfg.batch_size}, "
          f"lr {cfg.lr}) on {summary['device_name']}; data read in {summary['load_s']} s", flush=True)
    trainer_class, train = TRAINERS[args.algo]
    steps = args.steps
    if steps is None:
        with torch_threads(args.threads):
            probe = trainer_class(data, cfg.with_overrides({"steps": str(10**9)}), args.seed, str(device))
            timed, rate = measure_steps_per_s(probe, args.probe_s)
        del probe
        if device.type == "cuda":
            torch.cuda.empty_cache()
        steps = max(1, int(rate * args.budget_s * args.safety))
        summary |= {"probe_steps": timed, "probe_steps_per_s": round(rate, 2), "budget_s": args.budget_s}
        print(f"probe: {timed} steps in {args.probe_s:.0f} s ({rate:.1f} steps/s) -> {steps} steps for "
              f"{args.budget_s:.0f} s", flush=True)
    cfg = cfg.with_overrides({"steps": str(steps)})
    out = Path(args.out)
    if out.exists() and not args.resume:
        raise SystemExit(f"{out} exists: --resume continues it, or choose another --out")
    stops = sorted({steps * (k + 1) // (args.snapshots + 1) for k in range(args.snapshots)} - {0, steps})
    snapshots: list[Path] = []
    log_every = max(1, steps // max(1, args.log_rows))
    options = dict(device=str(device), threads=args.threads, out=out, data_path=",".join(args.data),
                   checkpoint_every=max(1, steps // max(1, args.checkpoints)), handle_signals=True)
    train_start = time.perf_counter()
    stopped_by = None
    result = None
    for stop in [*stops, None]:
        try:
            result = train(data, cfg, seed=args.seed, log=TrainLog(every=log_every), resume=True,
                           stop_after=stop, **options)
        except TrainingInterrupted as interruption:
            if interruption.signum:  # a signal: the checkpoint is written; export what there is
                stopped_by = interruption.signum
                print(f"stopped: {interruption}", flush=True)
                break
            snapshots.append(export_policy(out, out.with_name(f"{out.stem}-step{interruption.step}.pt")))
    summary |= {"steps": steps, "train_wall_s": round(time.perf_counter() - train_start, 1),
                "stopped_by_signal": stopped_by, "snapshots": [p.name for p in snapshots]}
    if result is not None:
        summary |= {"steps_done": len(result.log.wall_at_step), "final_losses": result.log.final(),
                    "run_wall_s": round(result.log.wall_s, 1)}
    if args.export:
        summary["exported"] = export(out, Path(args.export), args.algo, snapshots, summary)
    print(json.dumps(summary, indent=1), flush=True)
    return 0 if stopped_by is None else 128 + stopped_by


def export(out: Path, folder: Path, algo: str, snapshots: list[Path], summary: dict) -> list[str]:
    """The policy, the curve CSV and one tar of the rest into ``folder`` (see the module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = curve_paths(out)
    written = [export_policy(out, folder / f"{algo}.pt")]
    if csv_path.exists():
        written.append(Path(shutil.copyfile(csv_path, folder / f"{algo}.curve.csv")))
    summary_path = out.with_name(f"{algo}-summary.json")
    summary_path.write_text(json.dumps(summary, indent=1))
    tar_path = folder / f"{algo}-extras.tar"
    with tarfile.open(tar_path, "w") as tar:
        for path in [summary_path, png_path, *snapshots]:
            if path.exists():
                tar.add(path, arcname=path.name)
    written.append(tar_path)
    return [p.name for p in written]


if __name__ == "__main__":
    sys.exit(main())
