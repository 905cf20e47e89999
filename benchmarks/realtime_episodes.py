"""The trees in real time against the simulated robot that does not wait (handleit.harness.realtime_sim), beside lockstep.

For each task, N episodes on the same seeds twice: lockstep (``handleit eval``'s loop: the env waits for every
tick) and real time (the env in its own process on its own clock, at ``rtf`` simulated seconds per wall second,
with the camera rate and latencies of ``--perturb``). Prints success side by side, and for the real-time runs the
tick time (wall ms, and the same on the simulated clock: wall x the factor reached, against the 10 ms control
period), the overruns of the control period (ticks during which the robot's clock moved on by more than a
period), ticks per control step, the factor reached, slips, watchdog stops and stale ticks. Records go to
``OUT/records.jsonl`` (``--resume`` reuses them), so a run can be continued or re-read with ``--report-only``.

    .venv/bin/python benchmarks/realtime_episodes.py --task PickCube --episodes 2 \\
        --perturb latency=0.1,camera_hz=15 --out outputs/realtime_bench
    # planning on a thread against planning in the worker process (the default), back to back
    .venv/bin/python benchmarks/realtime_episodes.py --task OpenCabinetDrawer --episodes 2 \\
        --perturb latency=0,camera_hz=30,planning=thread --perturb latency=0,camera_hz=30 --out outputs/rt_planning

Ticks during which a planning node planned (in the tick with ``planning=inline``, or while its background plan
runs: behaviors/background.py) are shown apart, with the plans' own wall time (in the worker process: from sending
the snapshot to the result's arrival).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from handleit.harness.evaluation import EpisodeRecord, canonical_perturbation, episode_specs, run_episodes
from handleit.harness.realtime_sim import split_perturbation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="PickCube", help="bundled tasks, comma-separated")
    parser.add_argument("--split", default="test")
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--solver", default="bt")
    parser.add_argument("--segmenter", default="simulator")
    parser.add_argument("--perturb", action="append",
                        help="a real-time run's --perturb (at least one of latency, command_latency, camera_hz, "
                             "rtf, planning; sensor keys may be mixed in); repeat it to compare runs (e.g. "
                             "planning=thread against the default, process), run one after the other per task "
                             "(default: latency=0)")
    parser.add_argument("--workers", type=int, default=1, help="1: the real-time runs are not slowed by another")
    parser.add_argument("--out", default="outputs/realtime_bench")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--report-only", action="store_true", help="print the table of OUT's records")
    args = parser.parse_args()
    perturbs = [canonical_perturbation(p) for p in (args.perturb or ["latency=0"])]
    for text, perturb in zip(args.perturb or ["latency=0"], perturbs):
        if split_perturbation(perturb)[0] is None:
            parser.error(f"--perturb {text!r} has no real-time key (latency, command_latency, camera_hz, rtf)")
    records_path = Path(args.out) / "records.jsonl"
    tasks = [t.strip() for t in args.task.split(",") if t.strip()]
    if args.report_only:
        records = [EpisodeRecord(**json.loads(line)) for line in records_path.read_text().splitlines() if line]
    else:
        specs = []
        for task in tasks:
            # Lockstep first, then real time on the same seeds, the real-time conditions taking turns episode by
            # episode (on a shared machine the load drifts: compared runs should see the same drift).
            by_condition = [episode_specs(task, args.split, args.episodes, args.solver, args.max_steps, args.seed,
                                          segmenter=args.segmenter, perturb=condition) for condition in ("", *perturbs)]
            specs += by_condition[0]
            specs += [spec for episode in zip(*by_condition[1:]) for spec in episode]
        records = run_episodes(specs, records_path, workers=args.workers, resume=args.resume)
    print("\n\n".join(table(records, perturb) for perturb in perturbs))


def table(records: list[EpisodeRecord], perturb: str) -> str:
    """Markdown: per task, lockstep and real-time success on the seeds run both ways, and the real-time ticks."""
    runs: dict[str, dict[str, dict[tuple, EpisodeRecord]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        if r.perturb in ("", perturb):
            runs[r.task][r.perturb][(r.split, r.seed, r.model_id, r.max_steps)] = r
    lines = [f"real time: {perturb}", "",
             "| task | episodes | lockstep | real time | tick median / p99 / max, wall ms | same on the simulated "
             "clock, ms | solver ticks while planning, wall ms (n) | other solver ticks, wall ms | plans, wall ms "
             "(n) | overruns of 10 ms | ticks over the wall budget (40 ms at rtf 0.25): n, wall ms = CPU + run queue + other (GIL, pipes) | garbage collector: collections (full), ticks it paused > 1 ms, longest pause ms | "
             "ticks per step | factor reached | slips | watchdog stops | stale ticks | errors |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
             "---: | ---: | ---: | ---: |"]
    for task, by_perturb in sorted(runs.items()):
        lock, real = by_perturb.get("", {}), by_perturb.get(perturb, {})
        shared = sorted(set(lock) & set(real))
        if not shared:
            continue
        rts = [real[k].diagnostics.get("realtime", {}) for k in shared]
        ticks_ms = np.concatenate([np.asarray(d.get("tick_wall_ms", []), float) for d in rts] + [np.zeros(0)])
        sim_ms = np.concatenate([np.asarray(d.get("tick_wall_ms", []), float) * d.get("real_time_factor", np.nan)
                                 for d in rts] + [np.zeros(0)])
        solver_ms, planning = [], []
        for d in rts:
            times, marks = d.get("solver_wall_ms", []), d.get("planning_tick", [])
            if len(times) == len(marks):
                solver_ms += list(times)
                planning += [bool(m) for m in marks]
        solver_ms, planning = np.asarray(solver_ms, float), np.asarray(planning, bool)
        plans_ms = 1e3 * np.asarray([p["wall_s"] for d in rts for p in d.get("plans", [])], float)
        n_ticks = sum(d.get("ticks", 0) for d in rts)
        overruns = sum(d.get("overruns", 0) for d in rts)
        # Overruns by ticks shorter than the wall budget of a period (10 ms / the target factor): the robot's clock
        # jumped (the simulator catching up after it fell behind), not the tick ran long.
        short = sum(1 for d in rts for _, wall_ms, _ in d.get("overrun_ticks", [])
                    if wall_ms < 10.0 / d.get("real_time_factor_target", 1.0))
        known = all("overrun_ticks" in d for d in rts)
        # Ticks longer than that budget: how much of them the tick's thread computed (the rest it waited).
        # Of their wall time, the tick thread's CPU time, its wait for a CPU (the kernel's run queue: other
        # processes), and the rest (waiting for Python's GIL, held by another thread of the tick's process).
        long_wall, long_cpu, long_queue = [], [], []
        for d in rts:
            budget_ms = 10.0 / d.get("real_time_factor_target", 1.0)
            queued = d.get("tick_runqueue_ms") or [np.nan] * len(d.get("tick_wall_ms", []))
            for wall_ms, cpu_ms, queue_ms in zip(d.get("tick_wall_ms", []), d.get("tick_cpu_ms", []), queued):
                if wall_ms > budget_ms:
                    long_wall.append(wall_ms)
                    long_cpu.append(cpu_ms)
                    long_queue.append(queue_ms)
        long_text = "-" if not long_wall else (
            f"{len(long_wall)}: {np.sum(long_wall):.0f} ms = CPU {np.sum(long_cpu):.0f} + " + (
                f"run queue {np.sum(long_queue):.0f} + other {np.sum(long_wall) - np.sum(long_cpu) - np.sum(long_queue):.0f}"
                if not np.isnan(long_queue).any() else f"waiting {np.sum(long_wall) - np.sum(long_cpu):.0f}")
            + f" (longest {max(long_wall):.0f})")
        # Python's garbage collector in the tree's process (handleit.harness.gc_pauses; records from before it
        # was measured have no tick_gc_ms)
        gc_ms = np.concatenate([np.asarray(d.get("tick_gc_ms", []), float) for d in rts] + [np.zeros(0)])
        gc_text = "-" if not any("tick_gc_ms" in d for d in rts) else (
            f"{sum(sum(d.get('gc_collections', [0, 0, 0])) for d in rts)} "
            f"({sum(d.get('gc_collections', [0, 0, 0])[2] for d in rts)}), {int((gc_ms > 1.0).sum())}, "
            f"{max((1e3 * d.get('gc_longest_s', 0.0) for d in rts), default=0.0):.1f}")
        steps = sum(d.get("sim_steps", 0) for d in rts)
        factors = [d["real_time_factor"] for d in rts if "real_time_factor" in d]

        def stats(x):
            return "-" if not len(x) else f"{np.median(x):.1f} / {np.percentile(x, 99):.1f} / {x.max():.0f}"

        lines.append(
            f"| {task} | {len(shared)} | {sum(lock[k].success for k in shared)}/{len(shared)} | "
            f"{sum(real[k].success for k in shared)}/{len(shared)} | {stats(ticks_ms)} | {stats(sim_ms)} | "
            f"{stats(solver_ms[planning])} ({int(planning.sum())}) | {stats(solver_ms[~planning])} | "
            f"{stats(plans_ms)} ({len(plans_ms)}) | "
            f"{overruns} ({overruns / max(n_ticks, 1):.1%}{f'; {short} by short ticks' if known else ''}) | "
            f"{long_text if any('tick_cpu_ms' in d for d in rts) else '-'} | {gc_text} | "
            f"{n_ticks / max(steps, 1):.2f} | "
            f"{min(factors, default=float('nan')):.2f}-{max(factors, default=float('nan')):.2f} | "
            f"{sum(d.get('slips', 0) for d in rts)} | {sum(d.get('watchdog_stops', 0) for d in rts)} | "
            f"{sum(d.get('stale_ticks', 0) for d in rts)} | {sum(real[k].error is not None for k in shared)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
