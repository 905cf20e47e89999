"""Where an episode's steps go: the tree's tip node per step, from the records of lockstep and real-time episodes.

Both harnesses keep, per episode, the tip of the tree at each step, run-length coded (harness/tree_phases.py):
the lockstep one in ``diagnostics.phases``, the real-time one in ``diagnostics.realtime.phases``, with
"(planning)" where the node held still for a background plan and "(settling)" where a hand-eye node waited for a
cloud taken at rest. This prints, per episode, the steps spent in each tip node, and per node the median over
the episodes. With ``--compare``, per node and condition, the steps added to the lockstep run of the same seed
(the records of both in the file or files given).

    python benchmarks/realtime_phases.py RECORDS.jsonl [MORE.jsonl] [--task T] [--perturb TEXT] [--top 12] [--compare]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json

import numpy as np


def phases_of(record: dict) -> list[list] | None:
    diagnostics = record.get("diagnostics") or {}
    return (diagnostics.get("realtime") or {}).get("phases") or diagnostics.get("phases")


def load(paths: list[str], task: str | None, perturb: str | None) -> list[dict]:
    records = []
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not phases_of(r):
                    continue
                if task and r["task"] != task or perturb is not None and (r.get("perturb") or "") not in ("", perturb):
                    continue
                records.append(r)
    return records


def compare(records: list[dict]) -> None:
    """Per task, condition and node: the median over seeds of the steps added to the same seed's lockstep run."""
    lockstep = {(r["task"], r["split"], r["seed"]): steps_by_node(phases_of(r)) for r in records if not r.get("perturb")}
    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in records:
        if r.get("perturb") and (r["task"], r["split"], r["seed"]) in lockstep:
            groups[(r["task"], r["perturb"])].append(r)
    for (task, perturb), group in groups.items():
        added: dict[str, list[int]] = collections.defaultdict(list)
        total = []
        for r in group:
            base = lockstep[(r["task"], r["split"], r["seed"])]
            steps = steps_by_node(phases_of(r))
            for label in set(base) | set(steps):
                added[label].append(steps.get(label, 0) - base.get(label, 0))
            total.append(sum(steps.values()) - sum(base.values()))
        print(f"\n{task} [{perturb}] against lockstep, {len(group)} seeds: steps added per tip node "
              f"(median, min..max over the seeds); all nodes: median {float(np.median(total)):+.0f}, "
              f"{min(total):+d}..{max(total):+d}")
        for label, values in sorted(added.items(), key=lambda kv: -float(np.sum(kv[1]))):
            if any(values):
                print(f"  {label}: {float(np.median(values)):+.0f} ({min(values):+d}..{max(values):+d})")


def steps_by_node(phases: list[list]) -> dict[str, int]:
    """Steps per tip label, in the order the labels first appear."""
    steps: dict[str, int] = {}
    for label, _t, n in phases:
        steps[label] = steps.get(label, 0) + int(n)
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+")
    parser.add_argument("--task")
    parser.add_argument("--perturb", help="only records with this perturbation text, and the lockstep ones")
    parser.add_argument("--top", type=int, default=12, help="nodes shown per episode")
    parser.add_argument("--compare", action="store_true",
                        help="steps added per node against the lockstep run of the same seed")
    args = parser.parse_args()
    records = load(args.records, args.task, args.perturb)
    if not records:
        raise SystemExit(f"{args.records}: no records with phases (run them at this commit or later)")
    per_node: dict[tuple, dict[str, list[int]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in records:
        steps = steps_by_node(phases_of(r))
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
    if args.compare:
        compare(records)


if __name__ == "__main__":
    main()
