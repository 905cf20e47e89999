"""Control steps per second of the cabinet tasks, in `state` and `pointcloud` modes, against physics alone.

For each task the same episode (cabinet, target, robot pose) is stepped three ways in one process:
- physics only: the robot's drive targets set from the actions (a handful of joint-target writes through
  the controller: without them the robot rests and PhysX puts it to sleep, which would time a sleeping
  scene), then ``scene.step()`` five times (500 Hz physics, 100 Hz control), nothing else;
- ``obs_mode="state"``: the full ``env.step`` (action checks, controller, physics, success check,
  observation) through ``gym.make``'s wrappers;
- ``obs_mode="pointcloud"``: the same plus rendering three cameras and fusing the point cloud.
Actions are random normalized joint velocities (scaled by 0.3), so the robot moves.

Physics-only and state-mode rounds alternate and the medians over rounds are printed, so that load from
other processes on a shared machine hits both alike.

Targets (issue 2): state mode at least 80% of the physics-only rate; pointcloud mode at least 20 steps/s
on a 2-core CPU machine.

    python benchmarks/env_speed.py [--rounds 5 --steps 1000] [--camera-width 400 --camera-height 160]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import handleit.envs


def _actions(env, steps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, size=(steps, env.action_space.shape[0])) * 0.3).astype(np.float32)


def env_steps_per_second(env, steps: int, seed: int) -> float:
    env.reset(seed=seed)
    actions = _actions(env, steps + 1, seed)
    env.step(actions[0])  # outside the timing: lazy allocations on the first step
    start = time.perf_counter()
    for a in actions[1:]:
        env.step(a)
    return steps / (time.perf_counter() - start)


def physics_steps_per_second(env, steps: int, seed: int) -> float:
    """The same scene and motion, stepped by the physics engine alone (the ceiling for any env)."""
    base = env.unwrapped
    base.reset(seed=seed)
    scene, substeps, controller = base.scene, base.substeps, base.controller
    actions = _actions(env, steps + 1, seed).astype(np.float64)
    controller.apply(actions[0])
    scene.step()
    start = time.perf_counter()
    for a in actions[1:]:
        controller.apply(a)
        for _ in range(substeps):
            scene.step()
    return steps / (time.perf_counter() - start)


def pointcloud_breakdown(env, steps: int, seed: int) -> dict[str, float]:
    """Milliseconds per control step spent in physics, rendering (incl. reading pictures back) and fusion."""
    from handleit.envs.cameras import fuse_point_cloud

    base = env.unwrapped
    base.reset(seed=seed)
    totals = {"physics": 0.0, "render": 0.0, "fuse": 0.0}
    for a in _actions(env, steps, seed).astype(np.float64):
        t0 = time.perf_counter()
        base.controller.apply(a)
        for _ in range(base.substeps):
            base.scene.step()
        t1 = time.perf_counter()
        base.scene.update_render()
        images = base.cameras.capture()
        t2 = time.perf_counter()
        fuse_point_cloud(images)
        t3 = time.perf_counter()
        totals["physics"] += t1 - t0
        totals["render"] += t2 - t1
        totals["fuse"] += t3 - t2
    return {k: 1e3 * v / steps for k, v in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000, help="control steps per state/physics round")
    parser.add_argument("--pointcloud-steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--camera-width", type=int, default=400)
    parser.add_argument("--camera-height", type=int, default=160)
    args = parser.parse_args()

    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus; cameras: 3 x {args.camera_width}x{args.camera_height}; "
          f"medians of {args.rounds} rounds")
    print(f"{'task':<20} {'physics-only':>13} {'state':>9} {'state/physics':>14} {'pointcloud':>11}")
    cams = dict(camera_width=args.camera_width, camera_height=args.camera_height)
    breakdowns = []
    for task in ("OpenCabinetDrawer", "OpenCabinetDoor"):
        state_env = handleit.envs.make(task, obs_mode="state", **cams)
        physics, state = [], []
        for _ in range(args.rounds):
            physics.append(physics_steps_per_second(state_env, args.steps, args.seed))
            state.append(env_steps_per_second(state_env, args.steps, args.seed))
        ratio = np.median(np.array(state) / np.array(physics))
        pc_env = handleit.envs.make(task, obs_mode="pointcloud", **cams)
        env_steps_per_second(pc_env, 5, args.seed)  # the process's first render compiles the shaders
        pointcloud = np.median([env_steps_per_second(pc_env, args.pointcloud_steps, args.seed) for _ in range(3)])
        print(f"{task:<20} {np.median(physics):>13.0f} {np.median(state):>9.0f} {ratio:>14.2f} {pointcloud:>11.1f}")
        breakdowns.append((task, pointcloud_breakdown(pc_env, args.pointcloud_steps, args.seed)))
        state_env.close()
        pc_env.close()
    print("units: control steps per second (5 physics substeps each); state/physics is the median of per-round ratios")
    print("pointcloud step breakdown (ms per control step; render includes reading the pictures back):")
    for task, parts in breakdowns:
        print(f"  {task:<20} " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))


if __name__ == "__main__":
    main()
