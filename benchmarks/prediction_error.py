"""How well latency compensation predicted the robot, from the records of real-time episodes.

Each real-time tick hands the tree the joint states predicted to now from a late measurement and the commands sent
since (handleit.control.latency). When the measurement stamped at that moment arrives, the runner keeps how far off
the prediction was, per joint (``diagnostics.realtime.prediction_error`` in `handleit eval` records; the same
statistics in `handleit run-ros` results). This prints, per task and perturbation, for each group of joints: the
median over the episodes of each episode's p95 error, and the largest error of all. The base's x and y and the torso
in mm, the yaw and the arm joints in mrad (the arm joints: the worst of them); the fingers are not predicted.

    python benchmarks/prediction_error.py RECORDS.jsonl[.gz] [MORE ...]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from handleit.harness.records_io import read_record_dicts

GROUPS = (  # (label, unit scale, test on the joint's name)
    ("base x, y (mm)", 1e3, lambda n: n.startswith("root_x") or n.startswith("root_y")),
    ("base yaw (mrad)", 1e3, lambda n: n.startswith("root_z_rotation")),
    ("torso (mm)", 1e3, lambda n: n.startswith("linear_actuator")),
    ("arm joints (mrad)", 1e3, lambda n: "panda_joint" in n),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+")
    args = parser.parse_args()
    per_condition: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in read_record_dicts(args.records):
        stats = ((record.get("diagnostics") or {}).get("realtime") or {}).get("prediction_error")
        if stats and stats.get("n"):
            per_condition[(record["task"], record.get("perturb") or "")].append(stats)
    if not per_condition:
        print("no real-time records with prediction errors (records from before the runner kept them?)")
        return
    for (task, perturb), episodes in sorted(per_condition.items()):
        compared = sum(e["n"] for e in episodes)
        print(f"{task} [{perturb}]: {len(episodes)} episodes, {compared} predictions checked against their measurement")
        names = episodes[0]["joints"]
        for label, scale, member in GROUPS:
            columns = [i for i, n in enumerate(names) if member(n)]
            if not columns:
                continue
            p95 = [scale * max(e["p95"][i] for i in columns) for e in episodes]
            worst = max(scale * max(e["max"][i] for i in columns) for e in episodes)
            print(f"  {label:<20} p95 per episode, median {np.median(p95):6.1f} (range {min(p95):.1f}-{max(p95):.1f});"
                  f" largest {worst:.1f}")


if __name__ == "__main__":
    main()
