"""ManiSkill3's own privileged-state motion-planning solutions, on the seeds the evaluation harness uses.

``mani_skill.examples.motionplanning.panda`` solves PickCube-v1 and StackCube-v1 by reading the cubes' and
the goal's poses from the simulator (ground truth) and planning with mplib: the ceiling for a solver that
perceives from point clouds instead. Run on the same seeds as ``handleit eval --task ms3:<id>``
(``handleit.harness.ms3_adapter.episode_seeds``: the same seed gives the same cube, goal and robot start in both),
the gap between the two tables is the cost of perceiving instead of reading state.

Per episode, as ManiSkill3's ``motionplanning/panda/run.py`` does: ``env.reset(seed)`` and the task's
``solve`` (``pd_joint_pos`` control at ManiSkill3's 20 Hz, ``obs_mode="none"``, CPU backends); a
solution that raises or returns -1 (no plan) is a failure. Columns:

- ``success_end``: ``info["success"]`` after the solution's last step (what ``run.py`` counts);
- ``success_once``: success at any step of the solution (what the harness counts: ManiSkill3 ends its
  episodes at the first success);
- ``within N``: success_once within the first ``--max-steps`` control steps (the harness's episode length;
  the solutions ignore ManiSkill3's own 50-step limit);
- steps: mean control steps of the solutions; s/episode: mean wall time.

    python benchmarks/ms3_motionplanning.py --episodes 50 [--seed 0 --split test --max-steps 200 --task PickCube-v1]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from handleit.harness.ms3_adapter import episode_seeds

TASKS = ("PickCube-v1", "StackCube-v1")


@dataclass
class Outcome:
    seed: int
    success_end: bool
    success_once: bool
    first_success_step: int | None
    steps: int
    wall_time_s: float
    error: str | None = None


class _SuccessTracker:
    """Wraps ``env.step`` to remember the first step at which ``info["success"]`` was true."""

    def __init__(self, env):
        self.env = env
        self.first_success_step: int | None = None
        self._step = env.step
        env.step = self.step

    def step(self, action):
        out = self._step(action)
        if self.first_success_step is None and bool(np.asarray(out[-1]["success"]).any()):
            self.first_success_step = int(np.asarray(self.env.unwrapped.elapsed_steps).reshape(-1)[0])
        return out


def make_env(env_id: str):
    import gymnasium as gym
    import mani_skill.envs  # noqa: F401  (registers the envs)

    # As run.py makes it, on the CPU backends and without observations or rendering.
    return gym.make(env_id, obs_mode="none", control_mode="pd_joint_pos", sim_backend="physx_cpu",
                    render_backend="cpu")


def run_solution(env, solve, seed: int) -> Outcome:
    tracker = _SuccessTracker(env)
    start = time.perf_counter()
    error = None
    try:
        result = solve(env, seed=seed, debug=False, vis=False)
    except Exception as e:  # noqa: BLE001  (ManiSkill3's run.py counts these as failed plans too)
        result, error = -1, f"{type(e).__name__}: {e}"
    wall = time.perf_counter() - start
    env.step = tracker._step  # unwrap for the next episode
    steps = int(np.asarray(env.unwrapped.elapsed_steps).reshape(-1)[0])
    if isinstance(result, int) and result == -1:
        return Outcome(seed, False, tracker.first_success_step is not None, tracker.first_success_step, steps, wall,
                       error or "no motion plan")
    success_end = bool(np.asarray(result[-1]["success"]).reshape(-1)[0])
    return Outcome(seed, success_end, tracker.first_success_step is not None, tracker.first_success_step, steps, wall)


def main() -> None:
    from mani_skill.examples.motionplanning.panda.run import MP_SOLUTIONS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0, help="episode i uses the harness's seed for i (seed + i on test)")
    parser.add_argument("--split", default="test", choices=("train", "test"))
    parser.add_argument("--max-steps", type=int, default=200, help="the harness's episode length, for 'within N'")
    parser.add_argument("--task", action="append", choices=sorted(MP_SOLUTIONS), help=f"default: {', '.join(TASKS)}")
    parser.add_argument("--verbose", action="store_true", help="one line per episode")
    args = parser.parse_args()

    rows = []
    for env_id in args.task or TASKS:
        env = make_env(env_id)
        outcomes = []
        for seed in episode_seeds(args.split, args.episodes, args.seed):
            o = run_solution(env, MP_SOLUTIONS[env_id], seed)
            outcomes.append(o)
            if args.verbose:
                print(f"{env_id} seed {seed}: success_end={o.success_end} success_once={o.success_once} "
                      f"first success at step {o.first_success_step}, {o.steps} steps, {o.wall_time_s:.1f} s"
                      + (f" ({o.error})" if o.error else ""), flush=True)
        env.close()
        rows.append((env_id, outcomes))

    n = args.episodes
    seeds = episode_seeds(args.split, n, args.seed)
    print(f"\nManiSkill3 motion-planning solutions (privileged state), {args.split} seeds {seeds[0]}..{seeds[-1]}")
    print(f"| task | success_end | success_once | within {args.max_steps} steps | failed plans | steps | s/episode |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: |")
    for env_id, outcomes in rows:
        end = sum(o.success_end for o in outcomes)
        once = sum(o.success_once for o in outcomes)
        within = sum(o.first_success_step is not None and o.first_success_step <= args.max_steps for o in outcomes)
        failed = sum(o.error is not None for o in outcomes)
        print(f"| ms3:{env_id} | {end / n:.3f} ({end}/{n}) | {once / n:.3f} ({once}/{n}) | {within / n:.3f} ({within}/{n}) "
              f"| {failed} | {np.mean([o.steps for o in outcomes]):.0f} | {np.mean([o.wall_time_s for o in outcomes]):.2f} |")


if __name__ == "__main__":
    main()
