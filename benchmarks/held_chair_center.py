"""Chair-centre error while the PushChair tree holds the backrest: the tree's estimate against the plain one.

Runs the tree on PushChair episodes (harness order: episode i uses chair ``i mod n`` and seed ``seed + i``)
and, on every view while the backrest is held (from the push's start to the episode's end), compares with the
chair's swivel axis (ground truth, read here only, never by the tree):

- the tree's centre (``chair_center_W`` on its blackboard: the casters or column when seen, else the centre
  carried in the hands' frame, behaviors/chair_nodes.py ``PerceiveChair``);
- the plain estimate of the same view (``estimate_chair_center(...).swivel_center_W``: casters, column, else
  the seat part of the paper's box).

Prints the xy error of both (mean, 95th percentile, max, m) and how often the casters or column were seen.

    python benchmarks/held_chair_center.py [--split test] [--episodes 10] [--max-steps 300] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np
from py_trees.common import Status

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.perception.chair_center import estimate_chair_center
from handleit.harness.sim_robot import SimRobot


def run(split: str, episodes: int, max_steps: int, seed: int) -> dict[str, list[float]]:
    env = handleit.envs.make("PushChair", obs_mode="pointcloud", split=split, max_episode_steps=max_steps)
    robot = SimRobot(env)
    sim = env.unwrapped
    ids = handleit.envs.model_ids("PushChair", split)
    errors: dict[str, list[float]] = {"tree": [], "plain": [], "sure": []}
    for i in range(episodes):
        observation = robot.reset(seed=seed + i, options={"model_id": ids[i % len(ids)]})
        solver = make_tree_solver("PushChair", robot.model)
        solver.reset(observation)
        push = next(n for n in solver.root.iterate() if n.name == "plan push")
        held = False
        while not robot.done:
            command = solver.step(observation)
            # Compared on the view the tree has just perceived (every other tick), before the world moves on.
            held = held or push.status == Status.SUCCESS
            if held and solver.bb.get("tick") % 2 == 0:
                truth = np.asarray(sim.root_link.entity_pose.p)[:2]
                points = observation.points[observation.masks["target_link"] & ~observation.masks["robot"]]
                try:
                    plain = estimate_chair_center(points)
                    tree = np.asarray(solver.bb.get("chair_center_W"))
                    errors["tree"].append(float(np.linalg.norm(tree[:2] - truth)))
                    errors["plain"].append(float(np.linalg.norm(plain.swivel_center_W[:2] - truth)))
                    errors["sure"].append(float(plain.swivel_source in ("base", "column")))
                except ValueError:  # too few chair points in this view: neither estimate is updated
                    pass
            robot.act(command)
            observation = robot.observe()
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="test", choices=("train", "test"))
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    errors = run(args.split, args.episodes, args.max_steps, args.seed)
    n = len(errors["tree"])
    print(f"PushChair {args.split}, {args.episodes} episodes, {n} views while the backrest is held; casters or "
          f"column seen in {100 * np.mean(errors['sure']):.0f}% of them")
    print("| centre | mean xy error (m) | 95th percentile (m) | max (m) |")
    print("| --- | ---: | ---: | ---: |")
    for name, label in (("tree", "the tree's (carried in the hands' frame when unseen)"),
                        ("plain", "plain estimate of each view (`swivel_center_W`)")):
        e = np.asarray(errors[name])
        print(f"| {label} | {e.mean():.3f} | {np.percentile(e, 95):.3f} | {e.max():.3f} |")


if __name__ == "__main__":
    main()
