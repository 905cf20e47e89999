"""Trace only: run one test episode of TidyIntoDrawer's composed tree up to the first "plan placement (IK)" failure
and save what the drawer's interior was estimated from then (the target drawer's and handle's points, the outward
directions the tree knew) with the estimate, to an .npz; the env's open fraction (ground truth, for the trace only)
is printed beside it.

    .venv/bin/python benchmarks/drawer_interior_dump.py 48 /tmp/drawer-48.npz
"""
import sys

import numpy as np
import py_trees
from long_horizon_episode import start_episode

seed, out = int(sys.argv[1]), sys.argv[2]
env, robot, obs, solver = start_episode("TidyIntoDrawer", seed)
store = py_trees.blackboard.Blackboard.storage
reasons = 0
while not robot.done:
    command = solver.step(obs)
    new = solver.tools.failure_reasons[reasons:]
    reasons = len(solver.tools.failure_reasons)
    if any(r.startswith("plan placement (IK)") for r in new):
        def bb(key):
            return store.get(next((k for k in store if k.endswith("/" + key)), ""), None)
        region = bb("place_region")
        part, handle = obs.points[obs.masks["target_link"]], obs.points[obs.masks["target_handle"]]
        np.savez(out, part=part, handle=handle, drawer_outward_W=np.asarray(bb("drawer_outward_W"), dtype=float),
                 cabinet_front_W=np.asarray(bb("cabinet_front_W"), dtype=float), X_WB=obs.X_WB,
                 sensor_index=obs.sensor_index[obs.masks["target_link"]], size_m=region.size_m,
                 center_W=region.center_W, outward_W=region.outward_W)
        print(robot.steps, new, "| region", np.round(region.size_m, 3), np.round(region.center_W, 3),
              np.round(region.outward_W, 3), "| part points", len(part), "handle", len(handle),
              "| open fraction (truth)", round(float(env.unwrapped.open_fraction()), 3)
              if hasattr(env.unwrapped, "open_fraction") else "")
        break
    robot.act(command)
    obs = robot.observe()
print("stopped at", robot.steps)
