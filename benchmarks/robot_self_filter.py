"""The robot self filter against the simulator's own "robot" mask, and its time per call.

For each task, ``--seeds`` episodes (seeds 0, 1, ...; default cameras, world-frame clouds): the behavior tree
drives the robot (so the arm moves, reaches and holds the target: the hand next to the handle, the backrest,
the cube) and every ``--every`` steps the observation's cloud goes to ``RobotSelfFilter.mask`` with the
measured joint positions and base pose. A second pass over the same views adds Gaussian noise to the points
(``--noise-m`` per axis, a depth camera's error) to show what the padding buys. Figures per view:

- IoU of the filter's mask and the simulator's (``Observation.masks["robot"]``),
- miss rate: share of the simulator's robot points the filter leaves unmarked,
- false-mark rate: share of the non-robot points the filter marks (the most in a view, and the share of all
  false marks that lie on the task's target link: a handle or cube in the hand),
- time per call (ms; per view the median of ``--repeat`` calls, then the median and max over views; one
  process, on this machine's shared cores).

    python benchmarks/robot_self_filter.py [--tasks OpenCabinetDrawer,PushChair,PickCube] [--seeds 2]
        [--steps 150] [--every 15] [--padding-m 0.02]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.perception.robot_self_filter import RobotSelfFilter
from handleit.harness.sim_robot import SimRobot


def agreement(filter_mask: np.ndarray, sim_mask: np.ndarray) -> dict[str, float]:
    union = (filter_mask | sim_mask).sum()
    return {
        "iou": float((filter_mask & sim_mask).sum() / union) if union else 1.0,
        "miss": float((sim_mask & ~filter_mask).sum() / max(1, sim_mask.sum())),
        "false": float((filter_mask & ~sim_mask).sum() / max(1, (~sim_mask).sum())),
        "false_count": int((filter_mask & ~sim_mask).sum()),
    }


def views(task: str, seed: int, steps: int, every: int):
    """Observations along a tree-driven episode: at reset and every ``every`` steps."""
    env = handleit.envs.make(task, obs_mode="pointcloud")
    robot = SimRobot(env)
    solver = make_tree_solver(task, robot.model)
    obs = robot.reset(seed=seed)
    solver.reset(obs)
    for step in range(steps + 1):
        if step % every == 0:
            yield robot.model, step, obs
        if step == steps or robot.done:
            break
        robot.act(solver.step(obs))
        obs = robot.observe()
    env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="OpenCabinetDrawer,PushChair,PickCube")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--every", type=int, default=15)
    parser.add_argument("--padding-m", type=float, default=0.02)
    parser.add_argument("--noise-m", type=float, default=0.005)
    parser.add_argument("--repeat", type=int, default=5, help="calls per view; its time is their median")
    args = parser.parse_args()
    print(f"# robot self filter vs simulator mask ({platform.node()}, {platform.processor() or platform.machine()}); "
          f"padding {args.padding_m} m, noise pass sigma {args.noise_m} m")
    rng = np.random.default_rng(0)
    header = f"{'task':18s} {'views':>5s} {'points':>7s} {'robot':>6s} {'IoU min/mean':>13s} {'miss max':>9s} " \
             f"{'false max':>9s} {'false pts':>9s} {'on target':>9s} {'ms med/max':>11s} " \
             f"| noisy: {'IoU min':>7s} {'miss max':>8s} " \
             f"{'false max':>9s}"
    print(header)
    for task in args.tasks.split(","):
        rows, noisy, times, counts, on_target = [], [], [], [], []
        self_filter = None
        for seed in range(args.seeds):
            for model, _step, obs in views(task, seed, args.steps, args.every):
                if self_filter is None:
                    self_filter = RobotSelfFilter.from_robot_model(model, padding_m=args.padding_m)
                sim = obs.masks["robot"]
                calls = []
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    mask = self_filter.mask(obs.points, obs.qpos, obs.X_WB)
                    calls.append(time.perf_counter() - start)
                times.append(np.median(calls))
                rows.append(agreement(mask, sim))
                on_target.append(int((mask & ~sim & obs.masks["target_link"]).sum()))
                counts.append((len(obs.points), int(sim.sum())))
                jittered = obs.points + rng.normal(0.0, args.noise_m, obs.points.shape).astype(obs.points.dtype)
                noisy.append(agreement(self_filter.mask(jittered, obs.qpos, obs.X_WB), sim))
        ms = 1e3 * np.array(times)
        col = lambda rs, k: np.array([r[k] for r in rs])  # noqa: E731
        print(f"{task:18s} {len(rows):5d} {int(np.mean([c[0] for c in counts])):7d} "
              f"{int(np.mean([c[1] for c in counts])):6d} "
              f"{col(rows, 'iou').min():6.3f}/{col(rows, 'iou').mean():.3f} {col(rows, 'miss').max():9.4f} "
              f"{col(rows, 'false').max():9.5f} {int(col(rows, 'false_count').max()):9d} "
              f"{sum(on_target) / max(1, int(col(rows, 'false_count').sum())):9.2f} "
              f"{np.median(ms):5.1f}/{ms.max():5.1f} | noisy: {col(noisy, 'iou').min():7.3f} "
              f"{col(noisy, 'miss').max():8.4f} {col(noisy, 'false').max():9.5f}")


if __name__ == "__main__":
    main()
