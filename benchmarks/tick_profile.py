"""Where a tree's lockstep ticks go: the tick's wall time (median, p90, max) and a cProfile of ``solver.step``
over one episode, sorted by cumulative time.

    python benchmarks/tick_profile.py --task MoveBucket --seed 0 [--split test] [--top 35]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.harness.sim_robot import SimRobot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--top", type=int, default=35)
    args = parser.parse_args()
    robot = SimRobot(handleit.envs.make(args.task, obs_mode="pointcloud", split=args.split,
                                        max_episode_steps=args.max_steps))
    observation = robot.reset(seed=args.seed)
    solver = make_tree_solver(args.task, robot.model)
    solver.reset(observation)
    profile, ticks_s = cProfile.Profile(), []
    for step in range(args.max_steps):
        start = time.perf_counter()
        if step > 3:  # the first ticks build the tree's workers and caches
            profile.enable()
        command = solver.step(observation)
        profile.disable()
        ticks_s.append(time.perf_counter() - start)
        try:
            robot.act(command)
        except RuntimeError:  # the episode has ended
            break
        observation = robot.observe()
    t = 1e3 * np.array(ticks_s[4:])
    print(f"{args.task} {args.split} seed {args.seed}: {len(ticks_s)} ticks; tick ms: median {np.median(t):.1f}, "
          f"p90 {np.percentile(t, 90):.1f}, max {t.max():.1f}")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
