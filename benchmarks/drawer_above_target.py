"""Trace only: for each episode of a TidyIntoDrawer records file, whether a closed drawer lies right over the target
drawer (the cabinet read on simulator state at reset, for the trace only), beside whether the episode's place
failed "arm over it" and whether it succeeded. The counts at the end test the lead that the drawer over the target
is what the hand meets (docs/benchmarks.md, issue 19).

    .venv/bin/python benchmarks/drawer_above_target.py docs/records/issue19-s30-tidy-test-50-1298214.jsonl.gz
"""
import collections
import gzip
import json
import sys

import numpy as np
from long_horizon_episode import box_corners_W, cabinet_of

import handleit.envs
from handleit.harness.sim_robot import SimRobot

path = sys.argv[1]
with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
    records = [json.loads(line) for line in f if line.strip()]
env = handleit.envs.make("TidyIntoDrawer", obs_mode="pointcloud", max_episode_steps=3000, split=records[0]["split"])
robot = SimRobot(env, sim_masks=True)


def gap_to_drawer_above(cabinet, target):
    """The gap (m) from the target's top to the bottom of a moving part right over its centre, or None."""
    t = box_corners_W(next(link for link in cabinet.links if link.name == target))
    centre = t[:, :2].mean(axis=0)
    joints = {j.child_link.name for j in cabinet.get_active_joints()}
    gaps = []
    for link in cabinet.links:
        if link.name == target or link.name not in joints:
            continue
        corners = box_corners_W(link)
        if corners is None:
            continue
        over = bool(np.all(corners[:, :2].min(axis=0) < centre) and np.all(corners[:, :2].max(axis=0) > centre))
        gap = float(corners[:, 2].min() - t[:, 2].max())
        if over and -0.01 <= gap < 0.10:
            gaps.append(gap)
    return min(gaps) if gaps else None


counts = collections.Counter()
for r in records:
    robot.reset(seed=r["seed"], options={"model_id": r["model_id"]})
    target = robot.info.get("target_link")
    gap = gap_to_drawer_above(cabinet_of(env, target), target)
    arm_over = "arm over it" in json.dumps((r.get("diagnostics") or {}).get("handoffs", []))
    counts[(gap is not None, arm_over, bool(r["success"]))] += 1
    print(f"seed {r['seed']}: target {target}, drawer above: "
          f"{'none' if gap is None else f'{100 * gap:.1f} cm over it'}, 'arm over it': {arm_over}, "
          f"success: {r['success']}", flush=True)
print("| drawer above the target | episodes | with 'arm over it' | successful |")
print("| --- | --- | --- | --- |")
for above in (True, False):
    n = sum(v for k, v in counts.items() if k[0] == above)
    print(f"| {'yes' if above else 'no'} | {n} | {sum(v for k, v in counts.items() if k[0] == above and k[1])} | "
          f"{sum(v for k, v in counts.items() if k[0] == above and k[2])} |")
