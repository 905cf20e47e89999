"""Where an episode's control steps go: the step at which each phase of the tree first succeeds.

Runs the task's behavior tree on test episodes and records, per episode, the first control step at which
each of the main nodes returned SUCCESS (the handle seen, the grasp planned, the pregrasp and the grasp
reached, the gripper closed), then the step the episode ended and whether it succeeded. Prints the
per-episode rows and the medians. This is how the 200-step budget of the challenge is spent.

    python benchmarks/phase_steps.py [--task OpenCabinetDoor|OpenCabinetDrawer|PushChair|MoveBucket]
        [--split test] [--episodes 10] [--max-steps 200] [--set door_nodes.ARC_LEAD_RAD=0.25 ...]

``--set MODULE.NAME=VALUE`` overrides a constant of a module of handleit.behaviors for the run (VALUE is read as
JSON), to measure one change at a time: e.g. the door swing's ``door_nodes.ARC_LEAD_RAD``,
``door_nodes.SWING_SPEED_FRACTION`` or ``door_nodes.SWING_WEIGHTS``.
"""

from __future__ import annotations

import argparse
import importlib
import json

import numpy as np
from py_trees.common import Status

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.harness.sim_robot import SimRobot

CABINET_PHASES = ("wait for handle points", "plan grasp", "move to pregrasp", "move to grasp", "close gripper")
PHASES = {
    "OpenCabinetDoor": CABINET_PHASES,
    "OpenCabinetDrawer": CABINET_PHASES,
    "PushChair": ("plan hold", "reach above backrest", "lower onto backrest", "plan push", "push to target",
                  "chair centred?"),
    "MoveBucket": ("plan rim hold", "reach above rim", "lower onto rim", "close grippers", "plan hug",
                   "reach beside bucket", "hug walls", "lift and carry", "lower", "let go"),
}


def run(task: str, episodes: int, max_steps: int, seed: int, split: str = "test") -> list[dict]:
    robot = SimRobot(handleit.envs.make(task, obs_mode="pointcloud", split=split, max_episode_steps=max_steps))
    rows = []
    for episode in range(episodes):
        observation = robot.reset(seed=seed + episode)
        solver = make_tree_solver(task, robot.model)
        solver.reset(observation)
        nodes = [n for n in solver.root.iterate() if n.name in PHASES[task]]
        first: dict[str, int] = {}
        failed: list[str] = []
        while not robot.done:
            robot.act(solver.step(observation))
            observation = robot.observe()
            failed_node = getattr(solver, "failed_node", None)
            if failed_node and (not failed or failed[-1] != failed_node):
                failed.append(failed_node)
            for node in nodes:
                if node.status == Status.SUCCESS and node.name not in first:
                    first[node.name] = robot.steps
        rows.append({"seed": seed + episode, **first, "end": robot.steps,
                     "success": bool(robot.info.get("success", False)), "failed": failed})
    return rows


def apply_overrides(settings: list[str]) -> None:
    """``MODULE.NAME=VALUE`` (VALUE as JSON): set the constant NAME of handleit.behaviors.MODULE."""
    for setting in settings:
        target, _, value = setting.partition("=")
        module_name, _, name = target.rpartition(".")
        if not value or not module_name:
            raise SystemExit(f"--set {setting!r}: expected MODULE.NAME=VALUE")
        module = importlib.import_module(f"handleit.behaviors.{module_name}")
        if not hasattr(module, name):
            raise SystemExit(f"--set {setting!r}: handleit.behaviors.{module_name} has no {name}")
        setattr(module, name, json.loads(value))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="OpenCabinetDoor", choices=sorted(PHASES))
    parser.add_argument("--split", default="test", choices=("train", "test"))
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                        help="override a constant of handleit.behaviors.MODULE (VALUE as JSON); repeatable")
    args = parser.parse_args()
    apply_overrides(args.set)
    rows = run(args.task, args.episodes, args.max_steps, args.seed, args.split)
    columns = (*PHASES[args.task], "end")
    print(f"{args.task}, {args.split} split, {args.max_steps}-step episodes: first step each phase succeeded")
    print(f"{'seed':>5} " + " ".join(f"{c[:14]:>14}" for c in columns) + f" {'success':>8}")
    for row in rows:
        cells = " ".join(f"{row[c] if c in row else '-':>14}" for c in columns)
        print(f"{row['seed']:>5} {cells} {row['success']!s:>8}  {', '.join(row['failed'])}")
    medians = []
    for c in columns:
        values = [row[c] for row in rows if c in row]
        medians.append(f"{np.median(values):>14.0f}" if values else f"{'-':>14}")
    print(f"{'median':>5} " + " ".join(medians))
    closed = [row["end"] - row["close gripper"] for row in rows if "close gripper" in row and row["success"]]
    if closed and args.task.startswith("OpenCabinet"):
        print(f"steps from the gripper closed to success (successful episodes): median {np.median(closed):.0f}")
    print(f"success: {sum(row['success'] for row in rows)}/{len(rows)}")


if __name__ == "__main__":
    main()
