"""The behavior-tree solver's own cost per control step: the whole tick, and its parts.

Runs episodes of the cabinet tasks and times, per control step (one tree tick):
- ``solver.step``: the whole tick (perception, the tree, IK and planning when they run, control);
- the same over the ticks in which no IK or motion-planning call ran (the issue's target: median < 10 ms);
- the perception node (merging handle points, the front plane, the open-state estimate);
- PID control (both controllers, summed per tick);
- each whole-body IK and each mplib planning call (ms per call; they run a few times per episode).
Also ``SimRobot.observe`` (turning the env's observation into the robot interface's), which is the robot's
side of the interface, not the solver's.

    python benchmarks/solver_cost.py [--episodes 4] [--max-steps 300]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections import defaultdict

import numpy as np

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.behaviors.cabinet_nodes import Perceive
from handleit.harness.sim_robot import SimRobot


def _timed(obj, name: str, sink: list, per_tick: dict | None = None, key: str | None = None):
    """Replace ``obj.name`` by a wrapper that appends each call's duration (s) to ``sink``."""
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            dt = time.perf_counter() - start
            sink.append(dt)
            if per_tick is not None:
                per_tick[key] += dt

    setattr(obj, name, wrapper)


def measure(task: str, episodes: int, max_steps: int, seed: int) -> dict[str, np.ndarray]:
    robot = SimRobot(handleit.envs.make(task, obs_mode="pointcloud", split="test", max_episode_steps=max_steps))
    samples = defaultdict(list)
    per_tick = defaultdict(float)  # one dict for the whole run: the planner's timing wrapper outlives an episode
    for episode in range(episodes):
        observation = robot.reset(seed=seed + episode)
        solver = make_tree_solver(task, robot.model)
        solver.reset(observation)
        tools = solver.tools
        _timed(tools.ik, "solve", samples["ik_call"], per_tick, "ik")
        planner_factory = tools.motion_planner

        def planner(planner_factory=planner_factory):
            p = planner_factory()
            if not getattr(p, "_timed_for_benchmark", False):
                _timed(p, "plan_to_configuration", samples["planning_call"], per_tick, "planning")
                p._timed_for_benchmark = True
            return p

        tools.motion_planner = planner
        for pid in (tools.pid, tools.tracking_pid):
            _timed(pid, "step", samples["_pid_calls"], per_tick, "control")
        perceive = next(n for n in solver.root.iterate() if isinstance(n, Perceive))
        _timed(perceive, "update", samples["perception"])
        while not robot.done:
            per_tick.clear()
            start = time.perf_counter()
            command = solver.step(observation)
            step_s = time.perf_counter() - start
            samples["tick"].append(step_s)
            samples["control"].append(per_tick["control"])
            if per_tick["ik"] == 0.0 and per_tick["planning"] == 0.0:
                samples["tick_without_ik_or_planning"].append(step_s)
            robot.act(command)
            start = time.perf_counter()
            observation = robot.observe()
            samples["robot_observe"].append(time.perf_counter() - start)
        # restore the shared IK (cached per process) for the next episode
        del tools.ik.solve
    samples.pop("_pid_calls")
    return {k: 1e3 * np.asarray(v) for k, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus; {args.episodes} test episodes per task, "
          f"up to {args.max_steps} steps; times in ms")
    rows = ("tick", "tick_without_ik_or_planning", "perception", "control", "ik_call", "planning_call", "robot_observe")
    print(f"{'task':<18} {'measure':<30} {'n':>6} {'median':>8} {'p95':>8} {'max':>8}")
    for task in ("OpenCabinetDrawer", "OpenCabinetDoor"):
        result = measure(task, args.episodes, args.max_steps, args.seed)
        for row in rows:
            v = result.get(row, np.zeros(0))
            if len(v):
                print(f"{task:<18} {row:<30} {len(v):>6} {np.median(v):>8.2f} {np.percentile(v, 95):>8.2f} {v.max():>8.2f}")
            else:
                print(f"{task:<18} {row:<30} {0:>6} {'-':>8} {'-':>8} {'-':>8}")
    print("target (issue 3): median tick under 10 ms outside IK and planning calls")


if __name__ == "__main__":
    main()
