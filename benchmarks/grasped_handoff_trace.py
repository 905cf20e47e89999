"""Trace only: the Grasped / HandEmpty evidence each tick for 40 ticks after each pick's end, beside the env's ground
truth (read for the trace only), on one test episode of TidyIntoDrawer or SetTable, up to a step.

    .venv/bin/python benchmarks/grasped_handoff_trace.py TidyIntoDrawer 19 1640
"""
import sys

import numpy as np
import py_trees
from long_horizon_episode import start_episode

from handleit.predicates import Predicate

task, seed, last_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
env, robot, obs, solver = start_episode(task, seed)
u = env.unwrapped
G, HE = Predicate("Grasped", ("object",)), Predicate("HandEmpty", ())
store = py_trees.blackboard.Blackboard.storage
seen, printing = 0, 0
while not robot.done and robot.steps < last_step:
    command = solver.step(obs)
    for e in solver.tools.handoffs[seen:]:
        print(robot.steps, e["skill"], e["event"], e.get("failure", ""))
        if e["skill"].startswith("pick") and e["event"] in ("succeeded", "failed"):
            printing = 40 if e["event"] == "succeeded" else 0
    seen = len(solver.tools.handoffs)
    if printing:
        preds = store[next(k for k in store if k.endswith("/predicates"))]
        gripper = store[next(k for k in store if k.endswith("/gripper_commanded"))]
        side = solver.tools.side
        in_view = obs.masks["object"]
        d = np.linalg.norm(obs.points[in_view] - obs.X_WT[side][:3, 3], axis=1)
        rate = float(np.sum(obs.qvel[solver.tools.finger_indices[side]]))
        print("  ", robot.steps, "object points", int(in_view.sum()), "nearest to the hand",
              round(float(d.min()), 3) if len(d) else None, "G:", preds[G].holds, preds[G].evidence[:150],
              "| HE:", preds[HE].holds, "| gripper", gripper, "finger rate", round(rate, 4),
              "| truth", u.evaluate_predicates([G]))
        printing -= 1
    robot.act(command)
    obs = robot.observe()
print("done", robot.steps)
