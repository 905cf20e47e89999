"""Trace only: where TidyIntoDrawer's place goal lies against the cabinet's parts over the target drawer, along the
drawer's outward axis, from a dump of ``drawer_interior_dump.py SEED OUT planned``. The cabinet's links are read
from the simulator (ground truth, for the trace only) in their closed pose at reset: every link but the target stays
closed in the episode. A part over the drawer whose front lies in front of the goal by less than the hand's half
width overhangs where the hand goes.

    .venv/bin/python benchmarks/drawer_interior_dump.py 26 /tmp/drawer-26.npz planned
    .venv/bin/python benchmarks/drawer_overhang.py 26 /tmp/drawer-26.npz
"""
import sys

import numpy as np
from long_horizon_episode import box_corners_W, cabinet_of, start_episode

seed, dump = int(sys.argv[1]), np.load(sys.argv[2])
env, robot, obs, solver = start_episode("TidyIntoDrawer", seed)
target = robot.info.get("target_link")
outward = dump["outward_W"][:2] / np.linalg.norm(dump["outward_W"][:2])
lateral = np.array([-outward[1], outward[0]])


def along(points):
    return np.asarray(points, dtype=float)[..., :2] @ outward


def across(points):
    return np.asarray(points, dtype=float)[..., :2] @ lateral


box_W = dump["box_W"]
print(f"seed {seed}, target {target}: true interior along the axis {along(box_W).min():.3f}..{along(box_W).max():.3f}"
      f" m, z {box_W[:, 2].min():.3f}..{box_W[:, 2].max():.3f}")
print(f"estimated opening centre {float(along(dump['center_W'])):.3f}, size {np.round(dump['size_m'], 3)}; "
      f"place goal {float(along(dump['place_goal_W'])):.3f} along, z {float(dump['place_goal_W'][2]):.3f}")
for link in cabinet_of(env, target).links:
    corners = box_corners_W(link)
    if corners is None or corners[:, 2].max() <= box_W[:, 2].max():
        continue  # only what reaches above the drawer's rim can overhang the hand's way in
    if across(corners).max() <= across(box_W).min() or across(corners).min() >= across(box_W).max():
        continue  # beside the drawer's column
    lowest = corners[:, 2].min()
    print(f"  {link.name}: along {along(corners).min():.3f}..{along(corners).max():.3f}, z {lowest:.3f}.."
          f"{corners[:, 2].max():.3f}; its front {float(along(dump['place_goal_W'])) - along(corners).max():.3f} m "
          "behind the goal" + (" (over the drawer)" if lowest > box_W[:, 2].min() else " (the body round it)"))
