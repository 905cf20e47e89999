"""One episode of a tree on a segmenter's masks, with the simulator's masks beside them for comparison only.

Every 10 steps it prints the IoU of the segmenter's ``target_link`` mask against the simulator's, the points
each has, those the segmenter missed and those it added, and the tree's last failed node; at step 100, where
the missed points lie (height, distance from the target's centre, how many the robot mask took). The tree
never sees the simulator's masks: it is handed the observation without them, as in ``handleit eval``.

    .venv/bin/python benchmarks/segmenter_replay.py PushChair color_marker 3 chair-train-003
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.harness.sim_robot import SimRobot
from handleit.types import DEFAULT_MARKER_RGB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task")
    parser.add_argument("segmenter")
    parser.add_argument("seed", type=int)
    parser.add_argument("model_id")
    parser.add_argument("--max-steps", type=int, default=200)
    args = parser.parse_args()
    split = "train" if "train" in args.model_id else "test"
    options = {"target_marker_rgb": DEFAULT_MARKER_RGB} if args.segmenter == "color_marker" else {}
    env = handleit.envs.make(args.task, obs_mode="pointcloud", split=split, max_episode_steps=args.max_steps,
                             **options)
    robot = SimRobot(env, sim_masks=True)  # the simulator's masks, for the comparison printed here only
    obs = robot.reset(seed=args.seed, options={"model_id": args.model_id})
    solver = make_tree_solver(args.task, robot.model, segmenter=args.segmenter)
    solver.reset(dataclasses.replace(obs, masks={}))
    t = 0
    while not robot.done:
        sim = obs.masks
        command = solver.step(dataclasses.replace(obs, masks={}))
        mine = solver.bb.observation.masks
        a, b = mine["target_link"], sim["target_link"]
        if t == 100:
            missed = obs.points[b & ~a]
            centre = obs.points[b].mean(axis=0)
            if len(missed):
                heights = np.round(np.percentile(missed[:, 2], [0, 50, 100]), 3)
                spread = np.linalg.norm(missed[:, :2] - centre[:2], axis=1)
                print(f"step 100: missed z (m) min/median/max {heights}, distance from the centre (m) "
                      f"{np.round(np.percentile(spread, [0, 50, 100]), 3)}, "
                      f"{int((b & ~a & mine['robot']).sum())} of them in the robot mask")
        if t % 10 == 0:
            iou = (a & b).sum() / max(1, (a | b).sum())
            print(f"step {t}: IoU {iou:.3f}, points {int(a.sum())} / {int(b.sum())}, missed {int((b & ~a).sum())}, "
                  f"added {int((a & ~b).sum())}, failed node {solver.failed_node}", flush=True)
        robot.act(command)
        obs = robot.observe()
        t += 1
    print(f"success {robot.info['success']} after {t} steps")


if __name__ == "__main__":
    main()
