"""What a full garbage collection costs in a tree's process, with the heap frozen and without.

For each task: the env and the tree solver are built and the tree ticked in lockstep for ``--steps`` control steps
(its planners, IK and perception loaded and used, as at the start of a real-time run), then a full collection
(``gc.collect()``) is timed ``--rounds`` times with Python's default collector, and again after ``gc.freeze()``
(handleit.harness.gc_pauses.frozen_heap, what RealtimeRunner does for a run by default). Prints the objects the
collector tracks and the pauses (median and max, ms). The env lives in the same process here; in a real-time run
it lives in its own, so the tree's process holds somewhat fewer objects.

    .venv/bin/python benchmarks/gc_pause.py --task PickCube,PushChair --steps 50
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.harness.gc_pauses import frozen_heap
from handleit.harness.sim_robot import SimRobot


def full_collection_ms(rounds: int) -> list[float]:
    pauses = []
    for _ in range(rounds):
        start = time.perf_counter()
        gc.collect()
        pauses.append(1e3 * (time.perf_counter() - start))
    return pauses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="PickCube,OpenCabinetDrawer,PushChair")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| task | objects tracked | full collection, default collector: median / max ms | "
          "full collection, heap frozen: median / max ms | objects frozen |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for task in [t.strip() for t in args.task.split(",") if t.strip()]:
        robot = SimRobot(handleit.envs.make(task, obs_mode="pointcloud", split="test", max_episode_steps=200))
        observation = robot.reset(seed=0)
        solver = make_tree_solver(task, robot.model)
        solver.reset(observation)
        for _ in range(args.steps):
            if robot.done:
                break
            robot.act(solver.step(observation))
            observation = robot.observe()
        gc.collect()
        tracked = len(gc.get_objects())
        default = full_collection_ms(args.rounds)
        with frozen_heap() as frozen:
            frozen_ms = full_collection_ms(args.rounds)
        print(f"| {task} | {tracked:,} | {np.median(default):.1f} / {max(default):.1f} | "
              f"{np.median(frozen_ms):.2f} / {max(frozen_ms):.2f} | {frozen:,} |")
        del robot, solver, observation
        gc.collect()


if __name__ == "__main__":
    main()
