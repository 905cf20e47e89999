"""Success of recorded episodes by the target joint's damping (drawn per episode from U(5, 20)).

Reads ``records.jsonl`` files written by ``handleit eval``, rebuilds each episode's initial state (the
same seed and cabinet give the same draws) to read the target joint's damping and friction, and prints
success rates per damping bin. Ground truth is read here, in an analysis of finished episodes, never by a
solver.

    python benchmarks/success_by_damping.py outputs/eval-200/records.jsonl [--task OpenCabinetDoor]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import handleit.envs

BINS = ((5.0, 8.75), (8.75, 12.5), (12.5, 16.25), (16.25, 20.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+")
    parser.add_argument("--task", default="OpenCabinetDoor")
    args = parser.parse_args()
    records = [json.loads(line) for path in args.records for line in open(path) if line.strip()]
    records = [r for r in records if r["task"] == args.task and r["error"] is None]
    envs = {}
    table = defaultdict(lambda: [0, 0])
    for r in records:
        if r["split"] not in envs:
            envs[r["split"]] = handleit.envs.make(args.task, obs_mode="state", split=r["split"])
        env = envs[r["split"]]
        env.reset(seed=r["seed"], options={"model_id": r["model_id"]})
        damping = float(env.unwrapped.target.joint.damping)
        b = next(i for i, (lo, hi) in enumerate(BINS) if lo <= damping <= hi)
        table[(r["max_steps"], b)][0] += int(r["success"])
        table[(r["max_steps"], b)][1] += 1
    print(f"{args.task}: success by target-joint damping (N m s/rad for doors, N s/m for drawers)")
    print(f"{'steps':>6} " + " ".join(f"{f'[{lo:g}, {hi:g}]':>16}" for lo, hi in BINS))
    for steps in sorted({s for s, _ in table}):
        cells = []
        for b in range(len(BINS)):
            wins, n = table.get((steps, b), [0, 0])
            cells.append(f"{wins:>3}/{n:<3} ({wins / n:.2f})" if n else f"{'-':>16}")
        print(f"{steps:>6} " + " ".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
