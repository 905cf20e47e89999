"""One test episode of a long-horizon task (TidyIntoDrawer, SetTable) set up as ``handleit eval`` runs it, with its
goal's composed tree reading the simulator's masks: for the trace scripts beside this module."""
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
