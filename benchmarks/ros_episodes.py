"""The trees through ROS in real time: episodes beside lockstep on the same seeds, with tick times and overruns.

Starts a ROS master on a loopback port; for each task and seed, `handleit serve-ros` (the bundled env as a robot
on the contract's topics, its clock held until the tree's first command, then in real time at ``--rtf``) and
`handleit run-ros --report-ticks` (the tree in a RealtimeRunner, planning off the tick thread), each in its own
process; then the same seeds in lockstep (`handleit eval`). Prints, per task: success through ROS and in
lockstep; tick time (wall ms: median, p99, max) of all ticks, and of the solver on ticks where a planning node
planned, apart from the others; overruns (ticks during which the robot's clock moved on by more than a control
period). Records go to OUT/records.jsonl, one line per episode (``--resume`` skips the seeds already there).

    .venv/bin/python benchmarks/ros_episodes.py --task OpenCabinetDrawer,OpenCabinetDoor,PickCube \\
        --episodes 20 --out outputs/ros_bench

Everything listens on 127.0.0.1 (the master on ``--port``); the master and every server are stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HANDLEIT = str(Path(sys.executable).parent / "handleit")


def _ros_env(port: int) -> dict[str, str]:
    return {**os.environ, "ROS_MASTER_URI": f"http://127.0.0.1:{port}", "ROS_HOSTNAME": "127.0.0.1"}


def _start_master(port: int, log: Path) -> subprocess.Popen:
    master = subprocess.Popen(["roscore", "-p", str(port)], env=_ros_env(port), stdout=log.open("w"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        probe = subprocess.run(["rosparam", "get", "/rosversion"], env=_ros_env(port), capture_output=True)
        if probe.returncode == 0:
            return master
        if master.poll() is not None:
            raise RuntimeError(f"roscore -p {port} exited ({master.returncode}); see {log}")
        time.sleep(0.5)
    _stop(master)
    raise RuntimeError(f"no ROS master on 127.0.0.1:{port} after 30 s; see {log}")


def _stop(process: subprocess.Popen, timeout_s: float = 10.0) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def ros_episode(task: str, split: str, seed: int, args, log_dir: Path) -> dict:
    """One episode: serve-ros and run-ros in their own processes; run-ros's JSON line, with the server's."""
    env = _ros_env(args.port)
    serve_log = log_dir / f"serve_{task}_{split}_{seed}.log"
    server = subprocess.Popen(
        [HANDLEIT, "serve-ros", "--task", task, "--split", split, "--seed", str(seed), "--episodes", "1",
         "--max-steps", str(args.max_steps), "--real-time-factor", str(args.rtf), "--camera-hz", str(args.camera_hz),
         "--wait-for-tree", "120",
         *(["--sensor-perturbation", args.sensor_perturbation] if args.sensor_perturbation else [])],
        env=env, stdout=serve_log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        run = subprocess.run([HANDLEIT, "run-ros", "--task", task, "--report-ticks", "--wait", "120",
                              "--rt-priority", str(args.rt_priority),
                              "--max-seconds", str(args.max_seconds)], env=env, capture_output=True, text=True,
                             timeout=args.max_seconds + 240)
        lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
        if not lines:
            return {"success": False, "error": f"run-ros printed no result (exit {run.returncode}): "
                                               f"{run.stderr.strip()[-400:]}"}
        return json.loads(lines[-1])
    except subprocess.TimeoutExpired:
        return {"success": False, "error": "run-ros did not finish in time"}
    finally:
        _stop(server)


def lockstep(tasks: list[str], split: str, episodes: int, args, out: Path) -> dict[tuple[str, int], bool]:
    folder = out / "lockstep"
    subprocess.run([HANDLEIT, "eval", "--task", ",".join(tasks), "--split", split, "--episodes", str(episodes),
                    "--seed", str(args.seed), "--max-steps", str(args.max_steps), "--workers", "1", "--resume",
                    "--out", str(folder)], check=True, capture_output=True)
    results = {}
    for line in (folder / "records.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("split") == split and not r.get("perturb"):
            results[(r["task"], int(r["seed"]))] = bool(r["success"])
    return results


def _stats(values) -> str:
    v = np.asarray(values, dtype=float)
    if not len(v):
        return "-"
    return f"{np.median(v):.1f} / {np.percentile(v, 99):.1f} / {v.max():.1f}"


def report(records: list[dict], lock: dict[tuple[str, int], bool], rtf: float) -> str:
    rows = ["| task | episodes | through ROS | lockstep (same seeds) | tick, wall ms (median / p99 / max) | "
            "solver on planning ticks, wall ms (n) | solver on other ticks, wall ms | overruns | errors | "
            "failed nodes (ROS) |", "|---|---:|---:|---:|---|---|---|---:|---:|---|"]
    for task in sorted({r["task"] for r in records}):
        rs = [r for r in records if r["task"] == task]
        ros_ok = sum(bool(r["result"].get("success")) for r in rs)
        lock_ok = sum(lock.get((task, r["seed"]), False) for r in rs)
        ticks = [t for r in rs for t in r["result"].get("tick_wall_ms", [])]
        solver = np.array([t for r in rs for t in r["result"].get("solver_wall_ms", [])], dtype=float)
        planning = np.array([p for r in rs for p in r["result"].get("planning_tick", [])], dtype=bool)
        if len(planning) != len(solver):
            planning = np.zeros(len(solver), dtype=bool)
        n_ticks = sum(r["result"].get("ticks", 0) for r in rs)
        overruns = sum(r["result"].get("overruns", 0) for r in rs)
        errors = sum(r["result"].get("error") is not None for r in rs)
        failed = {}
        for r in rs:
            node = None if r["result"].get("success") else (r["result"].get("failed_node") or "timeout")
            if node:
                failed[node] = failed.get(node, 0) + 1
        rows.append(f"| {task} | {len(rs)} | {ros_ok}/{len(rs)} | {lock_ok}/{len(rs)} | {_stats(ticks)} | "
                    f"{_stats(solver[planning])} ({int(planning.sum())}) | {_stats(solver[~planning])} | "
                    f"{overruns}/{n_ticks} ({100 * overruns / max(n_ticks, 1):.1f} %) | {errors} | "
                    f"{', '.join(f'{k} {v}' for k, v in sorted(failed.items(), key=lambda kv: -kv[1])) or '-'} |")
    scheduling = sorted({str(r["result"].get("scheduling", "SCHED_OTHER")) for r in records})
    return "\n".join(rows) + (f"\n\nControl period 10 ms simulated = {10 / rtf:.0f} ms wall at a real-time factor "
                              f"of {rtf}; an overrun is a tick during which the robot's clock moved on by more. "
                              f"Tick thread: {', '.join(scheduling)}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="OpenCabinetDrawer", help="bundled tasks, comma-separated")
    parser.add_argument("--split", default="test", choices=("train", "test"))
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--rtf", type=float, default=0.25, help="simulated seconds per wall second")
    parser.add_argument("--camera-hz", type=float, default=15.0)
    parser.add_argument("--sensor-perturbation", default="")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="wall-clock limit of one episode")
    parser.add_argument("--rt-priority", type=int, default=0,
                        help="SCHED_FIFO priority of run-ros (its ticks and ROS threads; 0: the default policy); "
                             "serve-ros stays at the default: on this CPU it falls behind and would take a core")
    parser.add_argument("--port", type=int, default=11431, help="the ROS master's port on 127.0.0.1")
    parser.add_argument("--out", default="outputs/ros_bench")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    records_path = out / "records.jsonl"
    records = [json.loads(line) for line in records_path.read_text().splitlines()] if records_path.exists() else []
    if not args.resume and not args.report_only:
        records = []
        records_path.write_text("")
    tasks = [t.strip() for t in args.task.split(",") if t.strip()]
    if not args.report_only:
        done = {(r["task"], r["split"], r["seed"]) for r in records}
        master = _start_master(args.port, out / "logs" / "roscore.log")
        try:
            for task in tasks:
                for seed in range(args.seed, args.seed + args.episodes):
                    if (task, args.split, seed) in done:
                        continue
                    start = time.monotonic()
                    result = ros_episode(task, args.split, seed, args, out / "logs")
                    record = {"task": task, "split": args.split, "seed": seed, "wall_s": time.monotonic() - start,
                              "settings": {"rtf": args.rtf, "camera_hz": args.camera_hz, "max_steps": args.max_steps,
                                           "rt_priority": args.rt_priority,
                                           "sensor_perturbation": args.sensor_perturbation},
                              "result": result}
                    with records_path.open("a") as f:  # one line per episode: nothing measured is lost
                        f.write(json.dumps(record) + "\n")
                    records.append(record)
                    print(f"{task} {args.split} seed {seed}: success={result.get('success')} "
                          f"steps={result.get('steps')} error={result.get('error')}", flush=True)
        finally:
            _stop(master)
    records = [r for r in records if r["task"] in tasks and r["split"] == args.split]
    lock = lockstep(tasks, args.split, args.episodes, args, out)
    print(report(records, lock, args.rtf))


if __name__ == "__main__":
    main()
