"""Trace only: the Grasped / HandEmpty evidence each tick for 40 ticks after each pick's end, beside the env's ground
truth (read for the trace only), on one test episode of TidyIntoDrawer or SetTable, up to a step.

    .venv/bin/python benchmarks/grasped_handoff_trace.py TidyIntoDrawer 19 1640
"""
import sys

import numpy as np
import py_trees

import handleit.envs
from handleit.harness.evaluation import episode_specs
from handleit.harness.sim_robot import SimRobot
from handleit.harness.solvers import make_solver
from handleit.predicates import Predicate

GOALS = {"TidyIntoDrawer": "goal:InsideOf(object, drawer) & Closed(drawer)",
         "SetTable": "goal:OnTopOf(object, table) & Closed(drawer)"}
task, seed, last_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spec = [s for s in episode_specs(task, "test", seed + 1, GOALS[task], 3000) if s.index == seed][0]
env = handleit.envs.make(task, obs_mode="pointcloud", max_episode_steps=3000, split="test")
robot = SimRobot(env, sim_masks=True)
obs = robot.reset(seed=spec.seed, options={"model_id": spec.model_id})
solver = make_solver(spec.solver, task, robot.model, segmenter="simulator")
solver.reset(obs)
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
