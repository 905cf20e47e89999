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
import os
import platform
import statistics
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from handleit.harness.evaluation import _EpisodeRunner, episode_specs, run_episodes
from handleit.harness.executor import InProcess, LocalProcesses, RayCluster, close_backend
from handleit.harness.ray_loopback import SINGLE_MACHINE_ENV, LoopbackCluster


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


class NoOp:
    """A job with nothing in it: the executor's own cost per job (hand-over, transfer, bookkeeping)."""

    def __call__(self, job: int) -> dict:
        return {"index": job, "success": True, "payload": "x" * 1000}  # about one episode record's size


def noop_overheads(jobs: int, cluster_address: str) -> list[dict]:
    """Jobs per second and driver time per job for no-op jobs, per back end (this process is the driver)."""
    rows = []
    backends = [("in process", lambda: InProcess()), ("local processes, 2 workers", lambda: LocalProcesses(2)),
                ("Ray, 2 actors on 2 nodes", lambda: RayCluster(cluster_address, workers=2))]
    for name, make in backends:
        backend = make()
        try:
            backend.run(range(4), NoOp(), lambda job, result: None)  # start the workers (not counted)
            cpu0, start = time.process_time(), time.perf_counter()
            backend.run(range(jobs), NoOp(), lambda job, result: None)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        finally:
            close_backend(backend)
        rows.append({"config": name, "jobs": jobs, "wall_ms_per_job": round(1000 * wall / jobs, 3),
                     "driver_cpu_ms_per_job": round(1000 * cpu / jobs, 3)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _mean_row(rows: list[dict]) -> dict:
    """The rounds of one configuration: wall time, episode time and overhead averaged; per-round wall times kept."""
    out = dict(rows[0])
    for key in ("wall_s", "mean_episode_s", "overhead_per_episode_s"):
        out[key] = round(statistics.fmean(r[key] for r in rows), 2)
    out["episodes_per_min"] = round(60.0 * out["episodes"] / out["wall_s"], 2)
    out["wall_s_rounds"] = [r["wall_s"] for r in rows]
    out["successes"] = min(r["successes"] for r in rows)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="PickCube")
    parser.add_argument("--split", default="train")
    parser.add_argument("--solver", default="bt")
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds over every configuration, in reverse order every other round (a shared "
                             "machine's load drifts); the table holds their means")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--noop-jobs", type=int, default=0,
                        help="instead of episodes: this many no-op jobs per back end (the executor's own cost)")
    args = parser.parse_args(argv)
    os.environ.update(SINGLE_MACHINE_ENV)  # this process is a driver of the loopback cluster (127.0.0.1)
    if args.noop_jobs:
        with LoopbackCluster(nodes=2, cpus_per_node=1) as cluster:
            rows = noop_overheads(args.noop_jobs, cluster.address)
        print("\n| back end | jobs | wall per job (ms) | driver CPU per job (ms) |\n| --- | ---: | ---: | ---: |")
        for r in rows:
            print(f"| {r['config']} | {r['jobs']} | {r['wall_ms_per_job']} | {r['driver_cpu_ms_per_job']} |")
        return 0
    specs = episode_specs(args.task, args.split, args.episodes, args.solver, args.max_steps)
    print(f"{args.episodes} episodes of {args.task} ({args.split}, solver {args.solver}, {args.max_steps} steps), "
          f"{args.rounds} rounds; {platform.node()}, {platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the start", flush=True)
    results: dict[str, list[dict]] = {}
    with TemporaryDirectory() as tmp, LoopbackCluster(nodes=2, cpus_per_node=1) as cluster:
        tmp = Path(tmp)

        def ray_config(workers: int):
            def run(out: Path) -> dict:
                backend = RayCluster(cluster.address, workers=workers)
                try:
                    return with_backend(f"Ray, {workers} actor{'s' if workers > 1 else ''} on 2 nodes", backend,
                                        specs, out)
                finally:
                    close_backend(backend)
            return run

        configs = [
            ("bare", lambda out: bare_loop(specs)),
            ("inprocess", lambda out: with_backend("in process (executor, 1 worker)", InProcess(), specs, out)),
            ("local1", lambda out: with_backend("local processes, 1 worker", LocalProcesses(1), specs, out)),
            ("local2", lambda out: with_backend("local processes, 2 workers", LocalProcesses(2), specs, out)),
            ("ray1", ray_config(1)),
            ("ray2", ray_config(2)),
        ]
        for k in range(args.rounds):
            for name, run in (configs if k % 2 == 0 else configs[::-1]):
                row = run(tmp / f"{name}-{k}")
                row["load_average"] = round(os.getloadavg()[0], 1)
                results.setdefault(name, []).append(row)
                print(json.dumps({"round": k, **row}), flush=True)
    rows = [_mean_row(results[name]) for name, _ in configs]
    bare = rows[0]
    print("\n| configuration | workers | wall (s), rounds | episodes/min | mean episode (s) | overhead/episode (s) "
          "| over the bare loop (s) | successes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        extra = r["overhead_per_episode_s"] - bare["overhead_per_episode_s"]
        rounds = " / ".join(str(w) for w in r["wall_s_rounds"])
        print(f"| {r['config']} | {r['workers']} | {rounds} | {r['episodes_per_min']} | {r['mean_episode_s']} | "
              f"{r['overhead_per_episode_s']} | {extra:+.2f} | {r['successes']}/{r['episodes']} |")
    local = {r["workers"]: r for r in rows if r["config"].startswith("local")}
    for r in rows:
        if r["config"].startswith("Ray") and r["workers"] in local:
            ratio = r["episodes_per_min"] / local[r["workers"]]["episodes_per_min"]
            print(f"Ray with {r['workers']} actor(s): {ratio:.3f} of the local pool's throughput at that count "
                  f"({'within' if ratio >= 0.95 else 'short of'} the 5% target)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rounds": results, "means": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
