"""Reset cost and memory over many episodes (each reset builds a fresh scene, for determinism).

Prints the median reset time (the first reset, which compiles shaders and may generate assets, is left
out) and the process's resident memory after every block of resets: flat memory means no leak across
scenes.

    python benchmarks/env_resets.py [--task OpenCabinetDoor --resets 150 --obs-mode pointcloud]
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

import handleit.envs


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="OpenCabinetDoor", choices=sorted(handleit.envs.TASKS))
    parser.add_argument("--obs-mode", default="pointcloud", choices=handleit.envs.OBS_MODES)
    parser.add_argument("--resets", type=int, default=150)
    parser.add_argument("--block", type=int, default=30)
    args = parser.parse_args()

    env = handleit.envs.make(args.task, obs_mode=args.obs_mode)
    env.reset(seed=0)
    env.step(np.zeros(env.action_space.shape))
    print(f"{args.task}, obs_mode={args.obs_mode}: after the first reset {resident_mb():.0f} MB resident")
    times = []
    for i in range(1, args.resets + 1):
        start = time.perf_counter()
        env.reset(seed=i)
        times.append(time.perf_counter() - start)
        env.step(np.zeros(env.action_space.shape))
        if i % args.block == 0:
            gc.collect()
            print(f"  after {i:4d} resets: {resident_mb():.0f} MB resident")
    print(f"median reset time {1e3 * np.median(times):.0f} ms (95th percentile {1e3 * np.quantile(times, 0.95):.0f} ms)")


if __name__ == "__main__":
    main()
