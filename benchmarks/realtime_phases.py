"""Where a real-time episode's steps go: the tree's tip node per step, from the records of real-time episodes.

The real-time harness (harness/realtime_sim.py) keeps, per episode, the tip of the tree at each step,
run-length coded, with "(planning)" where the node held still for a background plan and "(settling)" where a
hand-eye node waited for a cloud taken at rest. This prints, per episode, the steps spent in each tip node (in
the order they first ran), and per node the median over the episodes.

    python benchmarks/realtime_phases.py RECORDS.jsonl [--task T] [--perturb TEXT] [--top 12]
"""

from __future__ import annotations

import argparse
import collections
import json

import numpy as np


def load(path: str, task: str | None, perturb: str | None) -> list[dict]:
    records = []
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            rt = (r.get("diagnostics") or {}).get("realtime")
            if not rt or "phases" not in rt:
                continue
            if task and r["task"] != task or perturb is not None and r.get("perturb") != perturb:
                continue
            records.append(r)
    return records


def steps_by_node(phases: list[list]) -> dict[str, int]:
    """Steps per tip label, in the order the labels first appear."""
    steps: dict[str, int] = {}
    for label, _t, n in phases:
        steps[label] = steps.get(label, 0) + int(n)
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records")
    parser.add_argument("--task")
    parser.add_argument("--perturb", help="only records with this perturbation text")
    parser.add_argument("--top", type=int, default=12, help="nodes shown per episode")
    args = parser.parse_args()
    records = load(args.records, args.task, args.perturb)
    if not records:
        raise SystemExit(f"{args.records}: no real-time records with phases (run them at this commit or later)")
    per_node: dict[tuple, dict[str, list[int]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in records:
        steps = steps_by_node(r["diagnostics"]["realtime"]["phases"])
        key = (r["task"], r.get("perturb", ""))
        for label, n in steps.items():
            per_node[key][label].append(n)
        shown = sorted(steps.items(), key=lambda kv: -kv[1])[: args.top]
        print(f"{r['task']} {r['split']} seed {r['seed']} [{r.get('perturb', '')}] "
              f"{'success' if r['success'] else 'fail: ' + str(r.get('failed_node'))} in {r['steps']} steps: "
              + ", ".join(f"{label} {n}" for label, n in shown))
    for (task, perturb), nodes in per_node.items():
        count = sum(1 for r in records if (r["task"], r.get("perturb", "")) == (task, perturb))
        print(f"\n{task} [{perturb}], {count} episodes: steps per tip node (median over the episodes it ran in, "
              f"episodes)")
        for label, values in sorted(nodes.items(), key=lambda kv: -float(np.sum(kv[1]))):
            print(f"  {label}: {float(np.median(values)):.0f} ({len(values)})")


if __name__ == "__main__":
    main()
