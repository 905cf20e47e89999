"""CabinetPartTracker's masks against the simulator's, while the behavior tree opens the part.

For each task and seed (train split), the task's tree runs on the simulator's masks (as it does today) and,
every ``--every`` control steps, the tracker is given the same observation with the robot's simulator mask as
its candidate filter and the operator's box prompt (the env's ``obs["extra"]["target_prompt_box"]`` when the
env gives one, else the target's visible points' box in the first closed views plus 2 cm Gaussian noise per
coordinate). Printed: the mean IoU of ``part_mask`` against ``target_link`` and of ``handle_mask`` against
``target_handle`` per phase (closed: open fraction < 0.01; opening: 0.01-0.5; open: >= 0.5; handle IoU
only over views where the simulator sees handle points), and ms per update.

    python benchmarks/cabinet_segmentation.py [--tasks OpenCabinetDrawer,OpenCabinetDoor] [--seeds 0,1,2]
        [--max-steps 250] [--every 3]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.perception.cabinet_segmentation import CabinetPartTracker
from handleit.harness.sim_robot import SimRobot


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def _phase(open_fraction: float) -> str:
    return "closed" if open_fraction < 0.01 else ("opening" if open_fraction < 0.5 else "open")


def run_episode(env, task: str, seed: int, max_steps: int, every: int, rng: np.random.Generator):
    robot = SimRobot(env)
    obs = robot.reset(seed=seed)
    solver = make_tree_solver(task, robot.model)
    solver.reset(obs)
    extra = robot._obs.get("extra", {})  # the env's prompt, when it gives one
    box = np.asarray(extra["target_prompt_box"], dtype=np.float64) if "target_prompt_box" in extra else None
    seen = obs.points[obs.masks["target_link"]]
    if box is None:
        if len(seen) < 10:
            raise RuntimeError(f"{task} seed {seed}: the target is not in view at the start; no prompt to make")
        box = np.stack([seen.min(axis=0), seen.max(axis=0)]) + rng.normal(0.0, 0.02, (2, 3))
    tracker = CabinetPartTracker()
    rows = []
    for step in range(max_steps):
        if step % every == 0:
            start = time.perf_counter()
            handle, part = tracker.update(obs.points, ~obs.masks["robot"], box, obs.X_WB)
            ms = 1000.0 * (time.perf_counter() - start)
            gt_handle = obs.masks["target_handle"]
            rows.append((_phase(float(robot.info.get("open_fraction", 0.0))), _iou(part, obs.masks["target_link"]),
                         _iou(handle, gt_handle) if gt_handle.any() else np.nan, ms))
        robot.act(solver.step(obs))
        if robot.done:
            break
        obs = robot.observe()
    return rows, bool(robot.info.get("success", False)), tracker.kind


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="OpenCabinetDrawer,OpenCabinetDoor")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--max-steps", type=int, default=250)
    parser.add_argument("--every", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for task in args.tasks.split(","):
        env = handleit.envs.make(task, obs_mode="pointcloud", split="train")
        by_phase = defaultdict(list)
        times = []
        for seed in (int(s) for s in args.seeds.split(",")):
            rows, success, kind = run_episode(env, task, seed, args.max_steps, args.every, rng)
            times += [r[3] for r in rows[1:]]  # the first update imports open3d
            for phase, part, handle, _ in rows:
                by_phase[phase].append((part, handle))
            summary = {p: np.round(np.nanmean([r[1:3] for r in rows if r[0] == p], axis=0), 3).tolist()
                       for p in ("closed", "opening", "open") if any(r[0] == p for r in rows)}
            print(f"{task} seed {seed}: tree success {success}, kind {kind}, part/handle IoU by phase {summary}",
                  flush=True)
        print(f"\n{task} (train, seeds {args.seeds}, every {args.every} steps)")
        print("| phase | views | part IoU mean | part IoU p10 | handle IoU mean | handle IoU p10 |")
        print("|---|---|---|---|---|---|")
        for phase in ("closed", "opening", "open"):
            values = np.array(by_phase.get(phase, []), dtype=float).reshape(-1, 2)
            if len(values):
                h = values[~np.isnan(values[:, 1]), 1]
                print(f"| {phase} | {len(values)} | {values[:, 0].mean():.3f} | {np.percentile(values[:, 0], 10):.3f} | "
                      f"{h.mean() if len(h) else float('nan'):.3f} | "
                      f"{np.percentile(h, 10) if len(h) else float('nan'):.3f} |")
        print(f"ms per update: mean {np.mean(times):.1f}, p95 {np.percentile(times, 95):.1f}, max {np.max(times):.1f}\n")


if __name__ == "__main__":
    main()
