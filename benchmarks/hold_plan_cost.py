"""What the dual-arm hold plan costs, and what its quick IK search gives up.

The dual-arm trees (PushChair, MoveBucket) start with a hold plan: whole-body IK for both hands over three base
headings, four finger flips and two cost weightings, with the pregrasp above each grasp
(``behaviors/bimanual_nodes.py``: ``quickest_hold_for_move``). In real time the robot holds still meanwhile.
For each episode this runs the tree to its first hold plan and plans it three times on the same snapshot: with the
full IK solves (``quick=False`` forced), as the tree plans it in lockstep (quick solves), and as its first,
provisional plan in real time (``HoldPlanStages``: one cost weighting; the chair every finger flip at the diagonal
heading nearest its own, the bucket the nearest flip at every heading). It prints each plan's wall time, its number
of IK solves, and the chosen hold's time to reach and move (the least of the headings' times, s).

    python benchmarks/hold_plan_cost.py [--task PushChair,MoveBucket] [--split test] [--seeds 0-9]
"""

from __future__ import annotations

import argparse
import platform
import re
import time

import numpy as np

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.behaviors.bucket_nodes import PlanBucketHold
from handleit.behaviors.chair_nodes import PlanBackrestHold
from handleit.harness.sim_robot import SimRobot

PLAN_NODES = {"PushChair": PlanBackrestHold, "MoveBucket": PlanBucketHold}


def seed_list(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def chosen_time_s(summary: str) -> float:
    """The least of the headings' times in a plan's summary ("-39 deg 1.25 s, ...")."""
    times = [float(t) for t in re.findall(r"([0-9.]+) s", summary)]
    return min(times) if times else float("nan")


def first_hold_snapshot(task: str, robot: SimRobot, seed: int, max_ticks: int = 20):
    """(plan node, snapshot) of the tree's first hold plan on this seed's episode."""
    node_type, captured = PLAN_NODES[task], []
    original = node_type.plan

    def capture(self, snap):
        captured.append((self, snap))
        return original(self, snap)

    node_type.plan = capture
    try:
        observation = robot.reset(seed=seed)
        solver = make_tree_solver(task, robot.model)
        solver.reset(observation)
        for _ in range(max_ticks):
            robot.act(solver.step(observation))
            observation = robot.observe()
            if captured:
                return captured[0]
    finally:
        node_type.plan = original
    raise RuntimeError(f"{task} seed {seed}: no hold plan in {max_ticks} ticks")


def timed_plan(node, snap, quick: bool, provisional: bool = False):
    ik = node.tools.ik
    node.provisional_plan = provisional
    snap = {**snap, "provisional": node.provisional_argument()}
    original, calls = ik.solve, []

    def solve(*args, **kwargs):
        if not quick:
            kwargs["quick"] = False
        calls.append(1)
        return original(*args, **kwargs)

    ik.solve = solve
    try:
        start = time.perf_counter()
        kind, value = node.plan(snap)
        return time.perf_counter() - start, len(calls), kind, value
    finally:
        ik.solve = original
        node.provisional_plan = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="PushChair,MoveBucket")
    parser.add_argument("--split", default="test")
    parser.add_argument("--seeds", default="0-9")
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| task | seed | full: s (solves) | quick: s (solves) | provisional: s (solves) | chosen hold, full (s) | "
          "chosen hold, quick (s) | provisional hold (s) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for task in args.task.split(","):
        robot = SimRobot(handleit.envs.make(task, obs_mode="pointcloud", split=args.split, max_episode_steps=200))
        rows = []
        for seed in seed_list(args.seeds):
            node, snap = first_hold_snapshot(task, robot, seed)
            full = timed_plan(node, snap, quick=False)
            quick = timed_plan(node, snap, quick=True)
            prov = timed_plan(node, snap, quick=True, provisional=True)
            t_full, t_quick, t_prov = (chosen_time_s(p[3][-2]) if p[2] == "hold" else float("nan")
                                       for p in (full, quick, prov))
            rows.append((full[0], quick[0], prov[0], t_full, t_quick, t_prov))
            print(f"| {task} | {seed} | {full[0]:.2f} ({full[1]}) | {quick[0]:.2f} ({quick[1]}) | {prov[0]:.2f} "
                  f"({prov[1]}) | {t_full:.2f} | {t_quick:.2f} | {t_prov:.2f} |", flush=True)
        a = np.array(rows)
        print(f"| {task} | median | {np.median(a[:, 0]):.2f} | {np.median(a[:, 1]):.2f} | {np.median(a[:, 2]):.2f} | "
              f"{np.nanmedian(a[:, 3]):.2f} | {np.nanmedian(a[:, 4]):.2f} | {np.nanmedian(a[:, 5]):.2f} |")
        print(f"# {task}: quick/full plan time, median ratio {np.median(a[:, 1] / a[:, 0]):.2f}; provisional/quick "
              f"{np.median(a[:, 2] / a[:, 1]):.2f}; chosen hold time quick - full: {np.nanmin(a[:, 4] - a[:, 3]):+.2f} to "
              f"{np.nanmax(a[:, 4] - a[:, 3]):+.2f} s; provisional - quick: {np.nanmin(a[:, 5] - a[:, 4]):+.2f} to "
              f"{np.nanmax(a[:, 5] - a[:, 4]):+.2f} s (median {np.nanmedian(a[:, 5] - a[:, 4]):+.2f})")


if __name__ == "__main__":
    main()
