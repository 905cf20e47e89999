"""Contact forces between the robot and a hugged bucket while the MoveBucket tree hugs, lifts and carries it.

Runs the tree on one train episode (a thick-walled bucket is hugged) and prints, every 5 control steps from
``--from-step`` on, the horizontal force (N) each robot link presses on the bucket, read from SAPIEN's
contacts (ground truth, read here only, never by the tree), with the "bucket follows?" check's message.
This is how the hug losing its squeeze when the carry began was found (docs/benchmarks.md, issue 4).

    python benchmarks/hug_contact_forces.py [--seed 1000] [--max-steps 170] [--from-step 60]
"""

from __future__ import annotations

import argparse

import numpy as np

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.harness.sim_robot import SimRobot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--max-steps", type=int, default=170)
    parser.add_argument("--from-step", type=int, default=60)
    args = parser.parse_args()
    env = handleit.envs.make("MoveBucket", obs_mode="pointcloud", split="train", max_episode_steps=args.max_steps)
    robot = SimRobot(env)
    sim = env.unwrapped if hasattr(env, "unwrapped") else env
    observation = robot.reset(seed=args.seed)
    solver = make_tree_solver("MoveBucket", robot.model)
    solver.reset(observation)
    nodes = {n.name: n for n in solver.root.iterate()}
    bucket = {link.entity for link in sim.bucket.links}
    robot_links = {link.entity for link in sim.robot.articulation.links}
    dt = sim.scene.get_timestep()
    print(f"MoveBucket train seed {args.seed}: horizontal force (N) of each robot link on the bucket")
    while not robot.done:
        robot.act(solver.step(observation))
        observation = robot.observe()
        if robot.steps < args.from_step or robot.steps % 5:
            continue
        forces: dict[str, np.ndarray] = {}
        for contact in sim.scene.get_contacts():
            e0, e1 = contact.bodies[0].entity, contact.bodies[1].entity
            other = e1 if e0 in bucket else e0 if e1 in bucket else None
            if other not in robot_links:
                continue
            impulse = np.sum([point.impulse for point in contact.points], axis=0)
            forces[other.name] = forces.get(other.name, np.zeros(3)) + impulse / dt
        pressing = {name: round(float(np.linalg.norm(f[:2]))) for name, f in forces.items()
                    if np.linalg.norm(f[:2]) >= 1.0}
        print(f"{robot.steps:4d} {pressing} | {nodes['bucket follows?'].feedback_message}")
    print(f"end at step {robot.steps}, success {bool(robot.info.get('success', False))}")


if __name__ == "__main__":
    main()
