"""Trace only: each failure and skill hand-off, and, while a composed tree's base drive ("drive to the drawer",
"drive to the object", ...) runs, every 10 steps the base's pose and velocity, the node's message and what the
robot's links touch (SAPIEN's contacts: ground truth, read here only, never by the tree), on one test
episode of TidyIntoDrawer or SetTable.

    .venv/bin/python benchmarks/base_blocked_trace.py TidyIntoDrawer 7 [LAST_STEP] [NODES]

NODES: the watched nodes, comma-separated name prefixes (default "drive to the "; e.g. "drive over it,arm over it").
"""
import sys

import numpy as np
import py_trees
from long_horizon_episode import start_episode

task, seed = sys.argv[1], int(sys.argv[2])
last_step = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
watched = tuple(sys.argv[4].split(",")) if len(sys.argv) > 4 else ("drive to the ",)
env, robot, obs, solver = start_episode(task, seed)
u = env.unwrapped
robot_entities = {link.entity for link in u.robot.articulation.links}
i = solver.tools.base_index
reasons, handoffs = 0, 0
while not robot.done and robot.steps < last_step:
    command = solver.step(obs)
    for why in solver.tools.failure_reasons[reasons:]:
        print(robot.steps, "FAILED", why[:200], "| base", np.round(obs.qpos[i], 3))
    for e in solver.tools.handoffs[handoffs:]:
        print(robot.steps, "HANDOFF", e["skill"], e["event"], e.get("failure", ""))
    reasons, handoffs = len(solver.tools.failure_reasons), len(solver.tools.handoffs)
    drives = [n for n in solver.root.iterate() if n.name.startswith(watched)
              and not n.name.endswith("?") and n.status == py_trees.common.Status.RUNNING]
    if drives and robot.steps % 10 == 0:
        touching = {}
        for contact in u.scene.get_contacts():
            e0, e1 = contact.bodies[0].entity, contact.bodies[1].entity
            if (e0 in robot_entities) == (e1 in robot_entities):
                continue
            mine, other = (e0, e1) if e0 in robot_entities else (e1, e0)
            impulse = np.sum([p.impulse for p in contact.points], axis=0) if contact.points else np.zeros(3)
            force = float(np.linalg.norm(impulse)) / u.scene.get_timestep()
            if force > 1.0:
                key = f"{mine.name}~{other.name}"
                touching[key] = round(touching.get(key, 0.0) + force)
        print(robot.steps, drives[0].name, "| base", np.round(obs.qpos[i], 3), "vel", np.round(obs.qvel[i], 3),
              "|", drives[0].feedback_message, "|", touching)
    robot.act(command)
    obs = robot.observe()
print("done", robot.steps, "success", bool(robot.info.get("success", False)))
