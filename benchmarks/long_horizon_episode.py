"""One test episode of a long-horizon task (TidyIntoDrawer, SetTable) set up as ``handleit eval`` runs it, with its
goal's composed tree reading the simulator's masks, and what the traces read of a cabinet on simulator state (for
the traces only): for the trace scripts beside this module."""
import numpy as np

import handleit.envs
from handleit.harness.evaluation import episode_specs
from handleit.harness.sim_robot import SimRobot
from handleit.harness.solvers import make_solver

GOALS = {"TidyIntoDrawer": "goal:InsideOf(object, drawer) & Closed(drawer)",
         "SetTable": "goal:OnTopOf(object, table) & Closed(drawer)"}
MAX_STEPS = 3000


def start_episode(task: str, seed: int):
    """(env, robot, first observation, solver reset on it) for test episode ``seed`` of ``task``."""
    spec = next(s for s in episode_specs(task, "test", seed + 1, GOALS[task], MAX_STEPS) if s.index == seed)
    env = handleit.envs.make(task, obs_mode="pointcloud", max_episode_steps=MAX_STEPS, split="test")
    robot = SimRobot(env, sim_masks=True)
    obs = robot.reset(seed=spec.seed, options={"model_id": spec.model_id})
    solver = make_solver(spec.solver, task, robot.model, segmenter="simulator")
    solver.reset(obs)
    return env, robot, obs, solver


def box_corners_W(link) -> np.ndarray | None:
    """[8 n, 3] corners (world, m) of a link's n box collision shapes (the generated cabinets are built from boxes);
    None for a link without one."""
    unit = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
    corners = []
    for shape in link.get_collision_shapes():
        if hasattr(shape, "half_size"):
            X = (link.entity_pose * shape.local_pose).to_transformation_matrix()
            corners.append((unit * np.asarray(shape.half_size)) @ X[:3, :3].T + X[:3, 3])
    return np.vstack(corners) if corners else None


def cabinet_of(env, link_name: str):
    """The articulation in ``env``'s scene that holds the link named ``link_name`` (the target drawer)."""
    return next(a for a in env.unwrapped.scene.get_all_articulations()
                if any(link.name == link_name for link in a.links))
