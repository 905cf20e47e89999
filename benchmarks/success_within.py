"""Success within N control steps, read from an evaluation's records (one JSON line per episode).

The harness stops an episode at its first success and the trees do not know the horizon, so an episode of a
long run (``--max-steps 1000``) that succeeded by step N is exactly one that succeeds in an N-step run: one
1000-step evaluation gives both the challenge's 200-step figure and the 1000-step one.

    python benchmarks/success_within.py outputs/final-1000/records.jsonl --steps 180,200,220,1000
"""

from __future__ import annotations

import argparse
import collections

import numpy as np

from handleit.harness.records_io import read_record_dicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", help="records.jsonl of handleit eval (or .jsonl.gz)")
    parser.add_argument("--steps", default="200,1000", help="horizons, comma-separated")
    args = parser.parse_args()
    horizons = [int(s) for s in args.steps.split(",")]
    groups = collections.defaultdict(list)
    for record in read_record_dicts([args.records]):
        groups[(record["task"], record["split"], record["max_steps"])].append(record)
    print("| task | split | run's horizon | episodes | " + " | ".join(f"within {h}" for h in horizons)
          + " | median step of a success |")
    print("| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in horizons) + " | ---: |")
    for (task, split, max_steps), records in sorted(groups.items()):
        steps = np.array([r["steps"] if r["success"] else np.inf for r in records])
        cells = []
        for h in horizons:
            ok = int(np.sum(steps <= h)) if h <= max_steps else None
            cells.append("-" if ok is None else f"{ok / len(records):.2f} ({ok}/{len(records)})")
        finite = steps[np.isfinite(steps)]
        median = f"{np.median(finite):.0f}" if len(finite) else "-"
        print(f"| {task} | {split} | {max_steps} | {len(records)} | " + " | ".join(cells) + f" | {median} |")


if __name__ == "__main__":
    main()
