"""Control steps per second of the cabinet tasks, in `state` and `pointcloud` modes, against physics alone.

For each task the same episode (cabinet, target, robot pose) is stepped three ways in one process:
- physics only: ``scene.step()`` five times per control step (500 Hz physics, 100 Hz control), nothing else;
- ``obs_mode="state"``: the full ``env.step`` (action checks, controller, physics, success check,
  observation) through ``gym.make``'s wrappers;
- ``obs_mode="pointcloud"``: the same plus rendering three cameras and fusing the point cloud.
Actions are random normalized joint velocities, so the robot moves and collides.

Targets (issue 2): state mode at least 80% of the physics-only rate; pointcloud mode at least 20 steps/s
on a 2-core CPU machine.

    python benchmarks/env_speed.py [--steps 300] [--camera-width 400 --camera-height 160]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import handleit.envs


def steps_per_second(env, steps: int, seed: int) -> float:
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1, 1, size=(steps, env.action_space.shape[0])).astype(np.float32) * 0.3
    env.step(actions[0])  # first step outside the timing (lazy allocations)
    start = time.perf_counter()
    for a in actions[1:]:
        env.step(a)
    return (steps - 1) / (time.perf_counter() - start)


def physics_steps_per_second(env, steps: int, seed: int) -> float:
    """The same scene and the same motion, stepped by the physics engine alone (the ceiling for any env).

    The robot's drive targets are still set from the same actions (through the controller, a handful of
    joint-target writes): with no targets the robot rests, PhysX puts it to sleep and the "physics" rate
    would measure a sleeping scene."""
    base = env.unwrapped
    base.reset(seed=seed)
    scene, substeps, controller = base.scene, base.substeps, base.controller
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1, 1, size=(steps, env.action_space.shape[0])) * 0.3
    start = time.perf_counter()
    for a in actions:
        controller.apply(a)
        for _ in range(substeps):
            scene.step()
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--camera-width", type=int, default=400)
    parser.add_argument("--camera-height", type=int, default=160)
    args = parser.parse_args()

    print(f"machine: {platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cpus; "
          f"cameras: 3 x {args.camera_width}x{args.camera_height}")
    print(f"{'task':<20} {'physics-only':>13} {'state':>9} {'state/physics':>14} {'pointcloud':>11}")
    for task in ("OpenCabinetDrawer", "OpenCabinetDoor"):
        cams = dict(camera_width=args.camera_width, camera_height=args.camera_height)
        state_env = handleit.envs.make(task, obs_mode="state", **cams)
        physics = physics_steps_per_second(state_env, args.steps, args.seed)
        state = steps_per_second(state_env, args.steps, args.seed)
        pc_env = handleit.envs.make(task, obs_mode="pointcloud", **cams)
        pointcloud = steps_per_second(pc_env, max(args.steps // 3, 30), args.seed)
        print(f"{task:<20} {physics:>13.0f} {state:>9.0f} {state / physics:>14.2f} {pointcloud:>11.1f}")
        state_env.close()
        pc_env.close()
    print("units: control steps per second (5 physics substeps each)")


if __name__ == "__main__":
    main()
