"""Command line of the learned baselines: ``handleit train`` and ``handleit compare``.

    handleit train --algo bc --data demos/PickCube.h5 --out outputs/baselines/PickCube-bc.pt --config cpu_small
    handleit eval --task PickCube --split train,test --solver bc:outputs/baselines/PickCube-bc.pt --workers 1
    handleit compare --tasks PickCube,PickObject --solvers bt,bc:outputs/baselines/{task}-bc.pt,\
        td3bc:outputs/baselines/{task}-td3bc.pt --seed 1000
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from handleit.baselines.bc import train_bc
from handleit.baselines.dataset import load_demo_data
from handleit.baselines.networks import CONFIGS, get_config
from handleit.baselines.td3bc import train_td3bc
from handleit.baselines.training import TrainLog
from handleit.harness.compare import markdown_table, run_comparison
from handleit.harness.executor import add_executor_arguments, backend_of_args, close_backend


def add_commands(subparsers) -> None:
    train = subparsers.add_parser("train", help="train a learned baseline (BC or TD3+BC) on demonstrations")
    train.add_argument("--algo", required=True, choices=["bc", "td3bc"])
    train.add_argument("--data", required=True, action="append",
                       help="a demonstration file of one task (demos/PickCube.h5); repeat for more")
    train.add_argument("--out", required=True, help="the checkpoint to write, e.g. outputs/baselines/PickCube-bc.pt")
    train.add_argument("--config", default="cpu_small", choices=sorted(CONFIGS),
                       help="network and training sizes (cpu_* train in minutes on a CPU; gpu_* at ManiSkill's scale)")
    train.add_argument("--steps", type=int, default=None, help="gradient steps (default: the config's)")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config value, e.g. --set point_frame=tcp --set point_mlp=64,128,256")
    train.add_argument("--max-demos", type=int, default=None, help="use only the first N demonstrations")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    train.add_argument("--threads", type=int, default=1, help="torch threads on a CPU (1 is fastest on a busy one)")
    train.add_argument("--log-every", type=int, default=100)
    train.set_defaults(func=_train)

    cmp = subparsers.add_parser("compare", help="success of several solvers on tasks and splits: a markdown "
                                "table, a CSV and a bar chart (Let's Handle It (arXiv 2202.11792) Table 1)")
    cmp.add_argument("--tasks", required=True, help="tasks separated by commas, e.g. PickCube,PickObject")
    cmp.add_argument("--solvers", required=True,
                     help="solvers separated by commas, as for eval; {task} in a name is replaced by the task, e.g. "
                          "bt,bc:outputs/baselines/{task}-bc.pt,td3bc:outputs/baselines/{task}-td3bc.pt")
    cmp.add_argument("--split", default="train,test")
    cmp.add_argument("--episodes", type=int, default=50, help="episodes per task, solver and split")
    cmp.add_argument("--max-steps", type=int, default=200)
    cmp.add_argument("--seed", type=int, default=0)
    add_executor_arguments(cmp, default_workers=1)
    cmp.add_argument("--out", default="outputs/compare")
    cmp.add_argument("--records", action="append", default=[],
                     help="records.jsonl of an earlier evaluation to reuse (its matching episodes are not rerun)")
    cmp.add_argument("--episode-timeout", type=float, default=600.0)
    cmp.set_defaults(func=_compare)


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _train(args: argparse.Namespace) -> int:
    overrides = _overrides(args.set)
    if args.steps is not None:
        overrides["steps"] = str(args.steps)
    cfg = get_config(args.config).with_overrides(overrides)
    data = load_demo_data(args.data, max_trajectories=args.max_demos)
    print(f"{args.algo} on {data.task}: {data.trajectories} demonstrations, {len(data)} transitions, "
          f"{data.xyz_W.shape[1]} points each; config {args.config} ({cfg.encoder}, {cfg.steps} steps, batch "
          f"{cfg.batch_size}, {cfg.num_points} points, {cfg.point_frame} frame)")
    train = train_bc if args.algo == "bc" else train_td3bc
    result = train(data, cfg, seed=args.seed, log=TrainLog(every=args.log_every), device=args.device,
                   threads=args.threads)
    path = result.save(args.out, data, ",".join(args.data), seed=args.seed)
    print(f"saved {path}: {cfg.steps} steps in {result.log.wall_s:.0f} s; final losses "
          f"{json.dumps({k: round(v, 5) for k, v in result.log.final().items()})}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    tasks = [t for t in args.tasks.split(",") if t]
    solvers = [s for s in args.solvers.split(",") if s]
    splits = [s for s in args.split.split(",") if s]
    for solver in solvers:  # a missing checkpoint is an error before any episode runs
        prefix, _, path = solver.partition(":")
        if prefix in ("bc", "td3bc", "policy"):
            for task in tasks:
                if not Path(path.replace("{task}", task)).exists():
                    raise SystemExit(f"handleit compare: solver {solver!r} has no checkpoint for {task}: "
                                     f"{path.replace('{task}', task)}")
    out = Path(args.out)
    print(f"comparing {', '.join(solvers)} on {', '.join(tasks)} ({', '.join(splits)}; {args.episodes} episodes "
          f"each, {args.max_steps} steps) -> {out}")
    backend = backend_of_args(args)
    try:
        cells = run_comparison(tasks, solvers, splits, args.episodes, args.max_steps, out, seed=args.seed,
                               extra_records=args.records, episode_timeout_s=args.episode_timeout, backend=backend)
    finally:
        close_backend(backend)
    print(markdown_table(cells))
    print(f"\nwrote {out / 'comparison.md'}, {out / 'comparison.csv'}, {out / 'comparison.png'}")
    return 0
