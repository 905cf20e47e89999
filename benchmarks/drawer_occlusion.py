"""Trace only: run SetTable's composed tree to its first "object seen?" failure, then say what hides the object
from each base camera: the object's collision points projected into each camera, and the labelled geometry
rendered at those pixels. Then the robot is placed (not stepped; renders only) at other distances from the
drawer's front with other arm postures, and the same is counted. Evaluation only: it reads the simulator's state.

    .venv/bin/python benchmarks/drawer_occlusion.py 9      # SetTable test episode 9

Prints, per base camera: (camera, object points inside its image, object pixels seen, {what the pixels show}).
"""
import sys

import numpy as np

import handleit.envs
from handleit.envs.mobile_panda import ARM_REST_QPOS
from handleit.harness.evaluation import episode_specs
from handleit.harness.sim_robot import SimRobot
from handleit.harness.solvers import make_solver

GOAL = "goal:OnTopOf(object, table) & Closed(drawer)"
BASE_CAMERAS = 3
DISTANCES_M = (None, 0.9, 0.7, 0.55, 0.45)  # base origin to the drawer's front along its outward normal (None: as is)


def run_to_unseen(seed: int):
    spec = next(s for s in episode_specs("SetTable", "test", seed + 1, GOAL, 3000) if s.index == seed)
    env = handleit.envs.make("SetTable", obs_mode="pointcloud", max_episode_steps=3000, split="test")
    robot = SimRobot(env, sim_masks=True)
    obs = robot.reset(seed=spec.seed, options={"model_id": spec.model_id})
    solver = make_solver(spec.solver, "SetTable", robot.model, segmenter="simulator")
    solver.reset(obs)
    while not robot.done and robot.steps < 2000:
        command = solver.step(obs)
        if getattr(solver, "failed_node", None) == "object seen?":
            break
        robot.act(command)
        obs = robot.observe()
    print("stopped at step", robot.steps, "failed node", solver.failed_node)
    return env.unwrapped


def view(u, labels):
    """Per base camera: (index, object points inside the image, object pixels, {label: pixels at those points})."""
    u.scene.update_render()
    points_W = u.object_points_W()
    out = []
    for index, image in enumerate(u.cameras.capture()[:BASE_CAMERAS]):
        X_CW = np.linalg.inv(image["X_WC_gl"].astype(np.float64))
        p_C = points_W @ X_CW[:3, :3].T + X_CW[:3, 3]
        K, depth = image["K"], -p_C[:, 2]
        x = K[0, 0] * p_C[:, 0] / depth + K[0, 2]
        y = K[1, 1] * -p_C[:, 1] / depth + K[1, 2]
        height, width = image["shape_id"].shape
        inside = (depth > 0) & (x >= 0) & (x < width) & (y >= 0) & (y < height)
        seen = int(np.isin(image["shape_id"], list(labels["object"])).sum())
        shown: dict[str, int] = {}
        for xi, yi in zip(x[inside].astype(int), y[inside].astype(int)):
            sid = int(image["shape_id"][yi, xi])
            name = next((k for k, v in labels.items() if sid in v), "robot or other" if sid else "none")
            shown[name] = shown.get(name, 0) + 1
        out.append((index, int(inside.sum()), seen, shown))
    return out


def main() -> None:
    u = run_to_unseen(int(sys.argv[1]))
    labels = {k: set(np.asarray(v).tolist()) for k, v in u._labelled_shape_ids().items()}
    robot = u.robot
    q_now = robot.qpos.astype(np.float64).copy()
    base, arm = robot.base_index, robot.arm_index[robot.sides[0]]
    X_WL = u.target.link.entity_pose.to_transformation_matrix()
    outward_W, front_W = -X_WL[:3, 0], X_WL[:3, 3]  # +x of the drawer's link frame points into the cabinet
    print("drawer front", np.round(front_W, 2), "outward", np.round(outward_W, 2), "base to front along it",
          round(float((q_now[base][:2] - front_W[:2]) @ outward_W[:2]), 2), "m")
    aside = np.array(ARM_REST_QPOS, dtype=float)
    aside[0] = -1.6  # the shoulder swung to the side
    postures = {"as is": None, "rest": np.array(ARM_REST_QPOS, dtype=float), "aside": aside,
                "up": np.array([0.0, -1.2, 0.0, -2.8, 0.0, 1.6, 0.8])}
    for distance in DISTANCES_M:
        for name, q_arm in postures.items():
            q = q_now.copy()
            if distance is not None:
                q[base[0]], q[base[1]] = front_W[:2] + distance * outward_W[:2]
                q[base[2]] = np.arctan2(-outward_W[1], -outward_W[0])
            if q_arm is not None:
                q[arm] = q_arm
            robot.articulation.set_qpos(q.astype(np.float32))
            print(f"base {distance} m, arm {name}:", view(u, labels))
    robot.articulation.set_qpos(q_now.astype(np.float32))


if __name__ == "__main__":
    main()
