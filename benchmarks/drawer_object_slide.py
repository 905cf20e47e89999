"""Trace only: the object's position in the target drawer's link frame through one SetTable test episode, every
50 steps and at each skill's start and end, with the drawer's open fraction and the object's points in view.
Evaluation only: it reads the simulator's state.

    .venv/bin/python benchmarks/drawer_object_slide.py 9 1300     # test episode 9, up to step 1300
"""
import sys

import numpy as np

import handleit.envs
from handleit.harness.evaluation import episode_specs
from handleit.harness.sim_robot import SimRobot
from handleit.harness.solvers import make_solver

GOAL = "goal:OnTopOf(object, table) & Closed(drawer)"


def main() -> None:
    seed, last_step = int(sys.argv[1]), int(sys.argv[2])
    spec = next(s for s in episode_specs("SetTable", "test", seed + 1, GOAL, 3000) if s.index == seed)
    env = handleit.envs.make("SetTable", obs_mode="pointcloud", max_episode_steps=3000, split="test")
    robot = SimRobot(env, sim_masks=True)
    obs = robot.reset(seed=spec.seed, options={"model_id": spec.model_id})
    solver = make_solver(spec.solver, "SetTable", robot.model, segmenter="simulator")
    solver.reset(obs)
    u = env.unwrapped

    def object_L():
        X_WL = u.target.link.entity_pose.to_transformation_matrix()
        return np.round((np.linalg.inv(X_WL) @ np.append(u.object_com_W(), 1.0))[:3], 3)

    print("object in L at reset", object_L(), "drawer interior", np.round(u.drawer_interior_L, 3).tolist())
    seen = 0
    while not robot.done and robot.steps < last_step:
        command = solver.step(obs)
        for e in solver.tools.handoffs[seen:]:
            print(robot.steps, e["skill"], e["event"], "object in L", object_L(), "open", round(u.open_fraction(), 3))
        seen = len(solver.tools.handoffs)
        robot.act(command)
        obs = robot.observe()
        if robot.steps % 50 == 0:
            print(robot.steps, "object in L", object_L(), "open", round(u.open_fraction(), 3),
                  "object points", int(obs.masks["object"].sum()))
    print("done at step", robot.steps, "success", robot.info.get("success"))


if __name__ == "__main__":
    main()
