"""Throughput of the episode executor: episodes per minute with 1 and 2 local worker processes and with Ray
actors on a 2-node Ray cluster on this machine (loopback, 1 CPU per node), the same episodes each time, against
a bare loop (one env in this process, no executor).

    .venv/bin/python benchmarks/executor_throughput.py --task PickCube --episodes 12 --max-steps 200

Per configuration: the wall time from the first job handed out to the last record written (worker start-up and
env builds included: what a user waits for), episodes per minute, the mean time inside an episode (the
episode's own ``wall_time_s``), and the overhead per episode: worker time not spent inside an episode,
``workers * wall / episodes - mean episode time`` (process or actor start, imports, env build, hand-over,
record writing), beside the bare loop's (its env build only).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from handleit.harness.evaluation import _EpisodeRunner, episode_specs, run_episodes
from handleit.harness.executor import InProcess, LocalProcesses, RayCluster, close_backend
from handleit.harness.ray_loopback import LoopbackCluster


def _row(name: str, workers: int, wall_s: float, records) -> dict:
    inside = statistics.fmean(r.wall_time_s for r in records)
    n = len(records)
    return {"config": name, "workers": workers, "episodes": n, "wall_s": round(wall_s, 1),
            "episodes_per_min": round(60.0 * n / wall_s, 2), "mean_episode_s": round(inside, 2),
            "overhead_per_episode_s": round(workers * wall_s / n - inside, 2),
            "successes": sum(r.success for r in records)}


def bare_loop(specs) -> dict:
    """One env in this process, the episodes one after the other: no executor, no records file."""
    start = time.perf_counter()
    runner = _EpisodeRunner()
    records = [runner.run(s) for s in specs]
    return _row("bare loop (this process)", 1, time.perf_counter() - start, records)


def with_backend(name: str, backend, specs, out: Path) -> dict:
    start = time.perf_counter()
    records = run_episodes(specs, out / "records.jsonl", progress=False, backend=backend)
    return _row(name, backend.workers, time.perf_counter() - start, records)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="PickCube")
    parser.add_argument("--split", default="train")
    parser.add_argument("--solver", default="bt")
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    specs = episode_specs(args.task, args.split, args.episodes, args.solver, args.max_steps)
    print(f"{args.episodes} episodes of {args.task} ({args.split}, solver {args.solver}, {args.max_steps} steps); "
          f"{platform.node()}, {platform.processor() or platform.machine()}", flush=True)
    rows = [bare_loop(specs)]
    print(json.dumps(rows[-1]), flush=True)
    with TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, backend in (("in process (executor, 1 worker)", InProcess()),
                              ("local processes, 1 worker", LocalProcesses(1)),
                              ("local processes, 2 workers", LocalProcesses(2))):
            rows.append(with_backend(name, backend, specs, tmp / name.replace(" ", "_").replace(",", "")))
            print(json.dumps(rows[-1]), flush=True)
        with LoopbackCluster(nodes=2, cpus_per_node=1) as cluster:
            for workers in (1, 2):
                backend = RayCluster(cluster.address, workers=workers)
                try:
                    rows.append(with_backend(f"Ray, {workers} actor{'s' if workers > 1 else ''} on 2 nodes",
                                             backend, specs, tmp / f"ray{workers}"))
                finally:
                    close_backend(backend)
                print(json.dumps(rows[-1]), flush=True)
    bare = rows[0]
    print("\n| configuration | workers | wall (s) | episodes/min | mean episode (s) | overhead/episode (s) | "
          "over the bare loop (s) | successes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        extra = r["overhead_per_episode_s"] - bare["overhead_per_episode_s"]
        print(f"| {r['config']} | {r['workers']} | {r['wall_s']} | {r['episodes_per_min']} | {r['mean_episode_s']} | "
              f"{r['overhead_per_episode_s']} | {extra:+.2f} | {r['successes']}/{r['episodes']} |")
    local = {r["workers"]: r for r in rows if r["config"].startswith("local")}
    for r in rows:
        if r["config"].startswith("Ray") and r["workers"] in local:
            ratio = r["episodes_per_min"] / local[r["workers"]]["episodes_per_min"]
            print(f"Ray with {r['workers']} actor(s): {ratio:.3f} of the local pool's throughput at that count "
                  f"({'within' if ratio >= 0.95 else 'short of'} the 5% target)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
