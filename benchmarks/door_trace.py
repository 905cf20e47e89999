"""A door episode step by step: the active node, the door's opening and turning speed, the base's velocity in its
own frame, and the fingers. How docs/benchmarks.md ("A quicker approach and swing", issue 17) found where the
door's 200 steps go and why handles slipped mid-swing.

The env's open fraction and link speed are read for this diagnosis only; the tree sees the point cloud as always.

    python benchmarks/door_trace.py --split train --seed 49 --model door-train-007 [--max-steps 300]
        [--set door_nodes.ARC_LEAD_RAD=0.5 ...]

``--model`` names the cabinet as ``handleit eval`` does for an episode (its records' ``model_id``), so that an
evaluation's episode is traced as it ran.
"""

from __future__ import annotations

import argparse

import numpy as np
from phase_steps import apply_overrides

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.control.actions import world_to_base_velocity
from handleit.harness.sim_robot import SimRobot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="test", choices=("train", "test"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="model_id, as in an evaluation's records")
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=5, help="print every N steps, and whenever the node changes")
    parser.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                        help="override a constant of handleit.behaviors.MODULE (VALUE as JSON); repeatable")
    args = parser.parse_args()
    apply_overrides(args.set)
    env = handleit.envs.make("OpenCabinetDoor", obs_mode="pointcloud", split=args.split,
                             max_episode_steps=args.max_steps)
    robot = SimRobot(env)
    observation = robot.reset(seed=args.seed, options={"model_id": args.model} if args.model else None)
    solver = make_tree_solver("OpenCabinetDoor", robot.model)
    solver.reset(observation)
    base = robot.model.index(robot.model.base_joint_names)
    fingers = robot.model.index(robot.model.finger_joint_names["right"])
    print("step node | door open fraction, rad/s | base m/s in its frame, yaw rad | finger opening m | feedback")
    last = None
    while not robot.done:
        robot.act(solver.step(observation))
        observation = robot.observe()
        tip = solver.root.tip()
        name = tip.name if tip else None
        if robot.steps % args.every == 0 or name != last:
            info = robot.info
            v_B = world_to_base_velocity(observation.qvel[base[:2]], float(observation.qpos[base[2]]))
            print(f"{robot.steps:4d} {name} | {info.get('open_fraction', float('nan')):.3f}, "
                  f"{info.get('link_angular_speed_radps', float('nan')):.2f} | {np.round(v_B, 2)}, "
                  f"{observation.qpos[base[2]]:.2f} | {observation.qpos[fingers].sum():.4f} | "
                  f"{(tip.feedback_message if tip else '')[:80]}")
        last = name
    print(f"success {robot.info.get('success', False)} at step {robot.steps}")


if __name__ == "__main__":
    main()
