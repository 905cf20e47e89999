"""Trace only: run one test episode of TidyIntoDrawer's composed tree and save what the drawer's interior was
estimated from (the target drawer's and handle's points, the outward directions the tree knew) with the estimate,
to an .npz. ``failure`` (the default) stops at the first "plan placement (IK)" failure, ``planned`` at the tick the
first placement was planned (whether or not the place then works). The env's ground truth, for the trace only, is
saved and printed beside it: the open fraction and the drawer's interior box (its corners in the world, ``box_W``:
the link frame's box ``drawer_interior_L`` moved by the link's pose).

    .venv/bin/python benchmarks/drawer_interior_dump.py 48 /tmp/drawer-48.npz
    .venv/bin/python benchmarks/drawer_interior_dump.py 9 /tmp/drawer-9.npz planned
"""
import sys

import numpy as np
import py_trees
from long_horizon_episode import start_episode

seed, out = int(sys.argv[1]), sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else "failure"
if mode not in ("failure", "planned"):
    sys.exit(f"mode must be 'failure' or 'planned', got {mode!r}")
env, robot, obs, solver = start_episode("TidyIntoDrawer", seed)
store = py_trees.blackboard.Blackboard.storage


def bb(key):
    return store.get(next((k for k in store if k.endswith("/" + key)), ""), None)


reasons = 0
while not robot.done:
    command = solver.step(obs)
    new = solver.tools.failure_reasons[reasons:]
    reasons = len(solver.tools.failure_reasons)
    failed = any(r.startswith("plan placement (IK)") for r in new)
    planned = mode == "planned" and bb("place_goal_W") is not None and bb("place_region") is not None
    if (mode == "failure" and failed) or planned:
        region = bb("place_region")
        seen = obs  # this tick's region was estimated on it before the plan was made
        part, handle = seen.points[seen.masks["target_link"]], seen.points[seen.masks["target_handle"]]
        u = env.unwrapped
        X_WL = u.target.link.entity_pose.to_transformation_matrix()
        box_L = np.asarray(u.drawer_interior_L, dtype=float)
        corners_L = np.array([[x, y, z] for x in box_L[:, 0] for y in box_L[:, 1] for z in box_L[:, 2]])
        box_W = corners_L @ X_WL[:3, :3].T + X_WL[:3, 3]
        np.savez(out, part=part, handle=handle, drawer_outward_W=np.asarray(bb("drawer_outward_W"), dtype=float),
                 cabinet_front_W=np.asarray(bb("cabinet_front_W"), dtype=float), X_WB=seen.X_WB,
                 sensor_index=seen.sensor_index[seen.masks["target_link"]], size_m=region.size_m,
                 center_W=region.center_W, outward_W=region.outward_W, floor_z=region.floor_z, rim_z=region.rim_z,
                 box_W=box_W, place_goal_W=np.asarray(bb("place_goal_W") if planned else np.nan, dtype=float))
        print(robot.steps, new, "| region", np.round(region.size_m, 3), np.round(region.center_W, 3),
              np.round(region.outward_W, 3), "floor", round(region.floor_z, 3), "rim", round(region.rim_z, 3),
              "| part points", len(part), "handle", len(handle),
              "| truth: open fraction", round(float(u.open_fraction()), 3), "box z",
              np.round([box_W[:, 2].min(), box_W[:, 2].max()], 3))
        break
    robot.act(command)
    obs = robot.observe()
print("stopped at", robot.steps)
