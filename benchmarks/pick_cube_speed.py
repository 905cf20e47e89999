"""Control steps per second of the bundled PickCube against ManiSkill3's PickCube-v1, in one run.

Both envs are stepped in this process, in ``state`` and ``pointcloud`` modes, with the same number of random
actions (uniform in [-1, 1] x 0.3, each env's joint-velocity controller: the bundled env's
``normalized_joint_vel``, ManiSkill3's ``pd_joint_vel``, so that the arm moves in both), from the same
seed. The bundled env gets ManiSkill3's camera rig: as many cameras, at the same resolution, read from
ManiSkill3's own sensor configs (PickCube-v1: one 128x128 ``base_camera``). ManiSkill3 runs on its CPU
backends (``physx_cpu``, ``render_backend="cpu"``), one sub-scene, unbatched (its ``CPUGymWrapper``).

The two envs keep their own rates unless ``--match-rates``: the bundled env steps 500 Hz physics at 100 Hz
control, ManiSkill3 100 Hz physics at 20 Hz control; both take 5 physics substeps per control step, so a
control step costs the same physics work and "steps/s" compares like with like; the table also gives the
simulated seconds per wall-clock second. ``--match-rates`` runs the bundled env at ManiSkill3's rates.

Rounds alternate between the envs and medians are printed, so that load from other processes on a shared
machine hits both alike. The first render of each env (shader compilation) happens before the timing.

Targets (issue 5): bundled at least 5x ManiSkill3's steps/s in ``pointcloud`` mode, at least 2x in ``state``.

    python benchmarks/pick_cube_speed.py [--rounds 3 --state-steps 500 --pointcloud-steps 100 --match-rates]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

MS3_ENV_ID = "PickCube-v1"
BUNDLED_TASK = "PickCube"
ACTION_SCALE = 0.3


def make_ms3(obs_mode: str, max_episode_steps: int):
    from handleit.harness.ms3_adapter import make_env

    return make_env(MS3_ENV_ID, max_episode_steps=max_episode_steps, obs_mode=obs_mode)


def ms3_cameras(env) -> list[tuple[str, int, int]]:
    """(name, width, height) of a ManiSkill3 env's observation cameras."""
    return [(name, cfg.width, cfg.height) for name, cfg in env.unwrapped._sensor_configs.items()]


def make_bundled(obs_mode: str, max_episode_steps: int, cameras: list[tuple[str, int, int]], rates: dict):
    import handleit.envs

    sizes = {(w, h) for _, w, h in cameras}
    if len(sizes) != 1:
        raise ValueError(f"ManiSkill3's cameras differ in resolution ({cameras}); the bundled rig has one size")
    (width, height), = sizes
    env = handleit.envs.make(BUNDLED_TASK, obs_mode=obs_mode, camera_width=width, camera_height=height,
                             hand_camera=len(cameras) > 1, max_episode_steps=max_episode_steps, **rates)
    bundled = [(c.name, c.width, c.height) for c in env.unwrapped.camera_configs]
    if len(bundled) != len(cameras):
        raise ValueError(f"camera rigs differ: bundled {bundled}, ManiSkill3 {cameras}")
    return env


def steps_per_second(env, steps: int, seed: int) -> float:
    """Random-action control steps per second, after a reset and one untimed step (lazy allocations)."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = (rng.uniform(-1, 1, size=(steps + 1,) + env.action_space.shape) * ACTION_SCALE).astype(np.float32)
    env.step(actions[0])
    start = time.perf_counter()
    for a in actions[1:]:
        env.step(a)
    return steps / (time.perf_counter() - start)


def control_freq(env) -> float:
    return float(env.unwrapped.control_freq)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--state-steps", type=int, default=500, help="control steps per state-mode round")
    parser.add_argument("--pointcloud-steps", type=int, default=100, help="control steps per pointcloud-mode round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--match-rates", action="store_true",
                        help="run the bundled env at ManiSkill3's physics and control rates (100 Hz, 20 Hz)")
    args = parser.parse_args()

    targets = {"state": 2.0, "pointcloud": 5.0}
    rows = []
    for mode, steps in (("state", args.state_steps), ("pointcloud", args.pointcloud_steps)):
        ms3 = make_ms3(mode, max_episode_steps=steps + 10)
        cameras = ms3_cameras(ms3)  # configured in every mode (rendered only in pointcloud mode)
        rates = {}
        if args.match_rates:
            rates = {"sim_freq": int(ms3.unwrapped.sim_freq), "control_freq": int(ms3.unwrapped.control_freq)}
        bundled = make_bundled(mode, steps + 10, cameras, rates)
        for env in (bundled, ms3):  # warm-up: the first render compiles shaders
            steps_per_second(env, 3, args.seed)
        rates_b, rates_m = [], []
        for _ in range(args.rounds):
            rates_b.append(steps_per_second(bundled, steps, args.seed))
            rates_m.append(steps_per_second(ms3, steps, args.seed))
        b, m = float(np.median(rates_b)), float(np.median(rates_m))
        rows.append((mode, steps, b, m, control_freq(bundled), control_freq(ms3), cameras))
        bundled.close()
        ms3.close()

    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus; medians of {args.rounds} rounds; "
          f"cameras (both envs): {', '.join(f'{n} {w}x{h}' for n, w, h in rows[-1][6])}")
    print("| mode | steps | bundled steps/s | ManiSkill3 steps/s | ratio | target | bundled sim-s/s | ManiSkill3 sim-s/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode, steps, b, m, fb, fm, _ in rows:
        ratio = b / m
        verdict = "met" if ratio >= targets[mode] else "missed"
        print(f"| {mode} | {steps} | {b:.1f} | {m:.1f} | {ratio:.1f}x | >= {targets[mode]:.0f}x ({verdict}) "
              f"| {b / fb:.2f} | {m / fm:.2f} |")
    print(f"control rates: bundled {rows[0][4]:.0f} Hz, ManiSkill3 {rows[0][5]:.0f} Hz (5 physics substeps each unless "
          "--match-rates); sim-s/s: simulated seconds per wall-clock second")


if __name__ == "__main__":
    main()
