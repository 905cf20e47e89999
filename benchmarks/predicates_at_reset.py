"""Predicates from perception against the long-horizon envs' ground truth, on the first observation of
episodes (issue 19): what the tree's conditions would read before the robot has moved.

For each episode of TidyIntoDrawer and SetTable (their default initial states, and SetTable with the drawer
open), every predicate over the scene's entities is evaluated by
:class:`~handleit.behaviors.predicate_nodes.PerceivePredicates` from the robot's first point cloud (behind
the cabinet trees' ``perceive``, which estimates the drawer's front normal) and by the env on simulator state.
A predicate whose deciding points are not in view is "not observed" (the tree would keep its last value).
Table: per predicate, observed / episodes, and over the observed ones, agreement with the ground truth.

    python benchmarks/predicates_at_reset.py --episodes 5
"""

from __future__ import annotations

import argparse
import collections

import handleit.envs
from handleit.behaviors import make_goal_solver
from handleit.behaviors.predicate_nodes import PerceivePredicates
from handleit.harness.sim_robot import SimRobot
from handleit.predicates import parse_goal

ALL = parse_goal("Open(drawer) & Closed(drawer) & HandEmpty() & Grasped(object) & InsideOf(object, drawer) & "
                 "OnTopOf(object, table)")
SETTINGS = (("TidyIntoDrawer", None), ("SetTable", None), ("SetTable", "InsideOf(object, drawer) & Open(drawer)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=5, help="per setting")
    parser.add_argument("--split", default="train")
    args = parser.parse_args()
    counts = collections.defaultdict(lambda: [0, 0, 0])  # predicate -> episodes, observed, agreeing
    wrong = []
    for task, init in SETTINGS:
        env = handleit.envs.make(task, obs_mode="pointcloud", split=args.split, max_episode_steps=10)
        robot = SimRobot(env)
        for seed in range(args.episodes):
            obs = robot.reset(seed=seed, options={} if init is None else {"init": init})
            solver = make_goal_solver("Open(drawer)", task, robot.model)
            solver.reset(obs)
            solver.step(obs)  # perceive: the drawer's front normal, when the drawer is in view
            node = PerceivePredicates("every predicate", solver.tools, ALL)
            node.tick_once()
            truth = env.unwrapped.evaluate_predicates(ALL)
            for p in ALL:
                value = node.bb.predicates[p]
                c = counts[str(p)]
                c[0] += 1
                if value.observed:
                    c[1] += 1
                    c[2] += value.holds == truth[str(p)]
                    if value.holds != truth[str(p)]:
                        wrong.append(f"{task} {init or 'default'} seed {seed}: {p} truth {truth[str(p)]}, "
                                     f"perception: {value.evidence}")
    print("| predicate | observed | agrees with the ground truth (of the observed) |")
    print("| --- | --- | --- |")
    for p in ALL:
        n, observed, agree = counts[str(p)]
        print(f"| {p} | {observed}/{n} | {agree}/{observed} |")
    for line in wrong:
        print("disagrees:", line)


if __name__ == "__main__":
    main()
