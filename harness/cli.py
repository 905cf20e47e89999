"""The ``handleit`` command line."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np

import handleit.envs
from handleit.blas_threads import single_blas_thread
from handleit.harness.baseline_commands import add_commands as add_baseline_commands
from handleit.harness.compact_demos import add_commands as add_compact_demos_commands
from handleit.harness.convert_demos import add_commands as add_convert_demos_commands
from handleit.harness.demos import add_commands as add_demo_commands
from handleit.harness.executor import ExecutorError, add_executor_arguments, backend_of_args, close_backend
from handleit.envs.object_model_errors import ObjectModelError
from handleit.harness.cabinet_export_command import add_commands as add_cabinet_export_commands
from handleit.harness.evaluation import (
    OutputInUse,
    canonical_perturbation,
    episode_specs,
    object_split,
    robustness_table,
    run_episodes,
    summarize,
)
from handleit.harness.grasp_data import add_commands as add_grasp_data_commands
from handleit.harness.ros_commands import add_commands as add_ros_commands
from handleit.behaviors import TREES
from handleit.perception.segmenters import available_segmenters


def _demo(args: argparse.Namespace) -> int:
    """Open a bundled env, step it, print the point cloud and the success check, save a camera image."""
    env = handleit.envs.make(args.task, obs_mode="pointcloud", split=args.split, render_mode="rgb_array")
    print(f"{args.task} ({env.spec.id}), split {args.split}, control mode {env.unwrapped.control_mode}, "
          f"action dim {env.action_space.shape[0]}, {env.spec.max_episode_steps}-step episodes")
    for episode in range(args.episodes):
        seed = args.seed + episode
        obs, info = env.reset(seed=seed)
        target = f", target {info['target_link']}" if "target_link" in info else ""
        print(f"episode {episode} (seed {seed}): object {info['model_id']}{target}")
        # A random exploratory policy: it does not solve the task, the success check will say so.
        rng = np.random.default_rng(seed)
        start = time.perf_counter()
        for step in range(args.steps):
            obs, reward, terminated, truncated, info = env.step(rng.uniform(-0.3, 0.3, env.action_space.shape))
            if terminated or truncated:
                break
        rate = (step + 1) / (time.perf_counter() - start)
        pc = obs["pointcloud"]
        masks = ", ".join(f"{name.replace('_', ' ')} {int(pc[name].sum())}" for name in env.unwrapped.mask_names)
        print(f"  point cloud ({pc['frame']} frame): {int(pc['valid'].sum())} valid points of {len(pc['valid'])}; "
              f"{masks}")
        # The task's success conditions (every task reports them as flags beside "success").
        checks = [f"opened {info['open_fraction']:.0%} of its range"] if "open_fraction" in info else []
        checks += [f"{k}={v}" for k, v in info.items() if isinstance(v, bool) and k != "success"]
        print(f"  after {step + 1} steps ({rate:.1f} steps/s): success={info['success']} ({', '.join(checks)})")

    out = Path(args.image)
    out.parent.mkdir(parents=True, exist_ok=True)
    base = env.unwrapped
    front = base.cameras.capture()[0]["rgb"]
    view = env.render()
    # Nearest-neighbour resize of the camera image to the view's width.
    rows = np.arange(int(front.shape[0] * view.shape[1] / front.shape[1])) * front.shape[1] // view.shape[1]
    cols = np.arange(view.shape[1]) * front.shape[1] // view.shape[1]
    iio.imwrite(out, np.concatenate([view, front[rows][:, cols]], 0))
    print(f"saved {out}: a third-person view above the robot's front camera image")
    env.close()
    return 0


def _eval(args: argparse.Namespace) -> int:
    """Run a solver on tasks and splits in parallel workers; write records and print the summary table."""
    tasks = list(handleit.envs.TASKS) if args.task == "all" else args.task.split(",")
    splits = [object_split(args.object)] if args.object else args.split.split(",")
    treeless = [t for t in tasks if t in handleit.envs.ALL_TASKS and t not in TREES]
    if (args.solver == "bt" or args.solver.startswith("bt:")) and treeless:
        print(f"handleit eval: no behavior tree for {', '.join(treeless)} (trees: {', '.join(TREES)}); a task given "
              f"as a goal over predicates takes a composed tree: --solver 'goal:<predicates>'", file=sys.stderr)
        return 2
    if args.target_link and not args.object:
        print("handleit eval: --target-link names a part of the models given with --object", file=sys.stderr)
        return 2
    segmenters = args.segmenter.split(",")
    unknown = [s for s in segmenters if s not in available_segmenters()]
    if unknown:
        print(f"handleit eval: unknown segmenter {', '.join(unknown)}; available: {', '.join(available_segmenters())}",
              file=sys.stderr)
        return 2
    try:
        perturbations = [canonical_perturbation(p) for p in (args.perturb or [])]
    except ValueError as error:
        print(f"handleit eval: --perturb: {error}", file=sys.stderr)
        return 2
    if any(perturbations):  # the unperturbed run on the same seeds, to compare against
        perturbations = ["", *[p for p in dict.fromkeys(perturbations) if p]]
    perturbations = perturbations or [""]
    out = Path(args.out)
    video_episodes = tuple(range(args.video))
    specs = []
    for task in tasks:
        for split in splits:
            for segmenter in segmenters:
                for perturb in perturbations:
                    try:
                        specs += episode_specs(task, split, args.episodes, args.solver, args.max_steps, args.seed,
                                               video_episodes, out / "videos", segmenter=segmenter, perturb=perturb,
                                               target_link=args.target_link)
                    except ObjectModelError as error:  # bad models from disk: said before any episode runs
                        print(f"handleit eval: {error}", file=sys.stderr)
                        return 2
    backend = backend_of_args(args)
    print(f"{len(specs)} episodes ({', '.join(tasks)}; {', '.join(splits)}; solver {args.solver}; segmenter "
          f"{', '.join(segmenters)}; {len(perturbations)} perturbation settings; {args.max_steps} steps) on "
          f"{backend.describe()}; records -> {out / 'records.jsonl'}")
    try:
        records = run_episodes(specs, out / "records.jsonl", resume=args.resume,
                               episode_timeout_s=args.episode_timeout, backend=backend)
    finally:
        close_backend(backend)
    wanted = {s.key for s in specs}
    mine = [r for r in records if r.key in wanted]
    table = summarize(mine)
    (out / "summary.md").write_text(table + "\n")
    print(table)
    if len(perturbations) > 1:
        robustness = robustness_table(mine)
        (out / "robustness.md").write_text(robustness + "\n")
        print("\nRobustness (perturbed against unperturbed, same seeds):\n" + robustness)
    errors = [r for r in mine if r.error]
    for r in errors[:3]:
        print(f"\nerror in {r.task} {r.split} seed {r.seed} ({r.model_id}):\n{r.error}")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        single_blas_thread()  # here and in every process a command starts (handleit/blas_threads.py)
    except ValueError as error:
        print(f"handleit: {error}", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog="handleit", description="Sense-plan-act manipulation toolkit")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help=_demo.__doc__)
    demo.add_argument("--task", default="OpenCabinetDrawer", choices=sorted(handleit.envs.TASKS))
    demo.add_argument("--split", default="test", choices=["train", "test"])
    demo.add_argument("--episodes", type=int, default=2)
    demo.add_argument("--steps", type=int, default=50)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--image", default="outputs/demo.png")
    demo.set_defaults(func=_demo)

    ev = sub.add_parser("eval", help=_eval.__doc__)
    ev.add_argument("--task", default="OpenCabinetDrawer",
                    help="a task, several separated by commas, or 'all' (the bundled tasks); ManiSkill3 envs as "
                         "ms3:<env id>, e.g. ms3:PickCube-v1 (success: ManiSkill3's info['success'])")
    ev.add_argument("--split", default="test", help="train, test, or train,test")
    ev.add_argument("--object", metavar="PATH",
                    help="cabinets from disk instead of the bundled splits (OpenCabinetDrawer, OpenCabinetDoor): a "
                         "mobility.urdf, or a folder of model folders in PartNet-Mobility's layout "
                         "(<id>/mobility.urdf, <id>/textured_objs/*.obj, optional <id>/semantics.txt); episode i "
                         "uses model i mod n, and each of its parts of the task's kind with a handle in turn (replaces --split)")
    ev.add_argument("--target-link", metavar="NAME",
                    help="with --object: the link to open in every model (else every part with a handle in turn)")
    ev.add_argument("--episodes", type=int, default=50, help="episodes per task and split")
    ev.add_argument("--solver", default="bt", help="bt, bt:<grasp predictor> (e.g. bt:learned_scorer), "
                    "'goal:<predicates>' (a tree composed for a goal, e.g. 'goal:Open(drawer)'), idle, "
                    "bc:<checkpoint>, td3bc:<checkpoint>, policy:<checkpoint> (handleit train), or "
                    "package.module:factory")
    ev.add_argument("--max-steps", type=int, default=200, help="episode length in control steps (100 Hz)")
    add_executor_arguments(ev, default_workers=2)
    ev.add_argument("--seed", type=int, default=0, help="episode i uses seed + i")
    ev.add_argument("--out", default="outputs/eval")
    ev.add_argument("--video", type=int, default=0, help="save videos of the first N episodes of each split")
    ev.add_argument("--segmenter", default="simulator",
                    help="the masks the trees read: simulator (the reference), color_marker, geometric, or a "
                         "registered plug-in; several separated by commas")
    ev.add_argument("--perturb", action="append", metavar="SPEC",
                    help="sensor perturbation, e.g. depth_noise=0.005,extrinsics=0.01/1deg,odometry_drift=0.02 "
                         "(repeatable); the unperturbed run on the same seeds is added, and OUT/robustness.md "
                         "compares them")
    ev.add_argument("--resume", action="store_true", help="skip episodes already in OUT/records.jsonl")
    ev.add_argument("--episode-timeout", type=float, default=600.0, help="seconds before a hung episode is stopped")
    ev.set_defaults(func=_eval)
    # The learned grasp scorer's tools: `grasp-data` (physical trials -> .npz) and `train-grasp-scorer`.
    add_grasp_data_commands(sub)
    # Demonstrations for the learned baselines: `demos` (record the trees), `convert-demos` (controllers) and
    # `compact-demos` (a smaller copy that training reads unchanged).
    add_demo_commands(sub)
    add_convert_demos_commands(sub)
    add_compact_demos_commands(sub)
    # Learned baselines: `train` (BC, TD3+BC on demonstrations) and `compare` (the success table of solvers).
    add_baseline_commands(sub)
    add_ros_commands(sub)  # `serve-ros`, `run-ros` (ROS bridge)
    add_cabinet_export_commands(sub)  # `export-cabinets` (mesh-based copies of generated cabinets)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except OutputInUse as error:
        print(f"handleit {args.command}: {error}", file=sys.stderr)
        return 1
    except ExecutorError as error:  # Ray missing, its cluster unreachable, or every worker gone
        print(f"handleit {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
