"""Command line of the learned baselines: ``handleit train`` and ``handleit compare``.

    handleit train --algo bc --data demos/PickCube.h5 --out outputs/baselines/PickCube-bc.pt --config cpu_small
    handleit train --algo bc --data demos/PickCube.h5 --out outputs/baselines/PickCube-bc.pt --config gpu_large \
        --checkpoint-every 1000 --eval-every 5000 --eval-episodes 20 --resume   # hours; run again after a stop
    handleit eval --task PickCube --split train,test --solver bc:outputs/baselines/PickCube-bc.pt --workers 1
    handleit compare --tasks PickCube,PickObject --solvers bt,bc:outputs/baselines/{task}-bc.pt,\
        td3bc:outputs/baselines/{task}-td3bc.pt --seed 1000
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path

from handleit.baselines.bc import train_bc
from handleit.baselines.curves import curve_paths
from handleit.baselines.dataset import DemoData, load_demo_data
from handleit.baselines.networks import CONFIGS, get_config, parse_overrides
from handleit.baselines.td3bc import train_td3bc
from handleit.baselines.training import TrainingInterrupted, TrainLog
from handleit.harness.compare import markdown_table, run_comparison
from handleit.harness.evaluation import _EpisodeRunner, episode_specs
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
    train.add_argument("--no-terminal-labels", dest="terminal_labels", action="store_false",
                       help="leave out the expert's action at each demonstration's last observation (kept by default "
                            "where the file has it)")
    train.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    train.add_argument("--threads", type=int, default=1, help="torch threads on a CPU (1 is fastest on a busy one)")
    train.add_argument("--log-every", type=int, default=100, help="print the losses (and a row of the curve CSV) "
                       "every N steps")
    train.add_argument("--checkpoint-every", type=int, default=1000,
                       help="write the checkpoint (policy and training state, atomically) every N steps (0: at the "
                            "end, at each evaluation and on SIGINT/SIGTERM only)")
    train.add_argument("--resume", action="store_true",
                       help="continue the run in --out from its last checkpoint (weights, optimizer, step, random "
                            "state, data order); starts afresh when there is none yet")
    train.add_argument("--eval-every", type=int, default=0,
                       help="every N steps, run the policy on the task's env and put its success in the curves")
    train.add_argument("--eval-episodes", type=int, default=10, help="episodes per evaluation")
    train.add_argument("--eval-split", default="train", choices=["train", "test"])
    train.add_argument("--eval-seed", type=int, default=1000,
                       help="evaluation episode i: seed eval-seed + i (must not be a demonstration's seed)")
    train.add_argument("--eval-max-steps", type=int, default=200)
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


def _train(args: argparse.Namespace) -> int:
    overrides = parse_overrides(args.set)
    if args.steps is not None:
        overrides["steps"] = str(args.steps)
    cfg = get_config(args.config).with_overrides(overrides)
    data = load_demo_data(args.data, max_trajectories=args.max_demos, terminal_labels=args.terminal_labels)
    evaluate = None
    if args.eval_every:
        try:
            evaluate = PolicyEvaluator(data, args.eval_split, args.eval_episodes, args.eval_max_steps, args.eval_seed)
        except ValueError as error:
            print(f"handleit train: {error}")
            return 2
    out = Path(args.out)
    if out.exists() and not args.resume:
        print(f"note: {out} exists and is replaced by a new run (--resume continues it instead)")
    print(f"{args.algo} on {data.task}: {data.trajectories} demonstrations, {len(data)} transitions "
          f"({data.terminal_labels} of them the expert's labels of final observations), "
          f"{data.xyz_W.shape[1]} points each; config {args.config} ({cfg.encoder}, {cfg.steps} steps, batch "
          f"{cfg.batch_size}, {cfg.num_points} points, {cfg.point_frame} frame)")
    train = train_bc if args.algo == "bc" else train_td3bc
    try:
        result = train(data, cfg, seed=args.seed, log=TrainLog(every=args.log_every), device=args.device,
                       threads=args.threads, out=out, data_path=",".join(args.data),
                       checkpoint_every=args.checkpoint_every, resume=args.resume, evaluate=evaluate,
                       eval_every=args.eval_every, handle_signals=True)
    except TrainingInterrupted as stop:
        print(f"handleit train: {stop}; run the same command with --resume to go on")
        return 128 + stop.signum if stop.signum else 1
    except ValueError as error:
        print(f"handleit train: {error}")
        return 2
    csv_path, png_path = curve_paths(out)
    print(f"saved {out}: {cfg.steps} steps in {result.log.wall_s:.0f} s; final losses "
          f"{json.dumps({k: round(v, 5) for k, v in result.log.final().items()})}; curves {csv_path}, {png_path}")
    return 0


class PolicyEvaluator:
    """``evaluate(checkpoint, step)`` for :func:`~handleit.baselines.training.run_training`: the checkpoint's
    policy on ``episodes`` episodes of the task (episode i: seed ``seed + i``, object ``i mod n``, as ``handleit
    eval``), in this process, with one env kept between evaluations. The seeds must differ from the
    demonstrations' on that split (``ValueError``): a policy is not measured on the episodes it copied."""

    def __init__(self, data: DemoData, split: str, episodes: int, max_steps: int, seed: int):
        if episodes < 1:
            raise ValueError(f"--eval-episodes must be >= 1, got {episodes}")
        self.task, self.split, self.episodes, self.max_steps, self.seed = data.task, split, episodes, max_steps, seed
        seeds = {seed + i for i in range(episodes)}
        shared = sorted(seeds & {s for sp, s in data.episode_keys if sp == split})
        if shared:
            raise ValueError(f"evaluation seeds {shared[:5]}{'...' if len(shared) > 5 else ''} are demonstration "
                             f"seeds on the {split} split; choose another --eval-seed")
        self._runner = _EpisodeRunner()  # keeps its env between evaluations

    def __call__(self, checkpoint: Path, step: int) -> dict:
        start = time.perf_counter()
        specs = episode_specs(self.task, self.split, self.episodes, f"policy:{checkpoint}", self.max_steps, self.seed)
        # A stop during an evaluation waits for its end (a few episodes): the checkpoint is written after it.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            records = [self._runner.run(spec) for spec in specs]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        errors = [r.error for r in records if r.error]
        if errors:
            print(f"  evaluation at step {step}: {len(errors)} episode(s) failed to run; first:\n{errors[0]}")
        wins = sum(r.success for r in records)
        return {"success": wins / len(records), "successes": wins, "episodes": len(records),
                "seeds": f"{self.split} {self.seed}-{self.seed + self.episodes - 1}", "errors": len(errors),
                "wall_s": round(time.perf_counter() - start, 1)}


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
