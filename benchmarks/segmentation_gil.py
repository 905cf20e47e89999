"""Does a segmenter on a thread leave the tick thread alone? (issue 15: segmentation off the tick)

Records ``--frames`` observations of a lockstep episode (the drawer tree driving), then ticks a stand-in for
the tree (0.5 ms of numpy every ``--period-ms``) for as long as a segmenter takes to segment them all, three ways:
the segmenter idle (the baseline), on a thread of the same process (what ``Segment`` does in real time), and in
the tick itself (every third tick, a 30 Hz camera at 100 Hz, as before). Prints per way the tick's wall ms
(median / p99 / max, from the tick's start to its end: time spent waiting for the GIL included) and the
segmentations' own ms.

    .venv/bin/python benchmarks/segmentation_gil.py --segmenter geometric --frames 30
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.harness.sim_robot import SimRobot
from handleit.perception.segmentation_errors import SegmentationError
from handleit.perception.segmenters import TARGET_MASKS, get_segmenter


def _frames(task: str, n: int, seed: int):
    robot = SimRobot(handleit.envs.make(task, obs_mode="pointcloud", split="test", max_episode_steps=400))
    solver = make_tree_solver(task, robot.model)
    obs = robot.reset(seed=seed)
    solver.reset(obs)
    frames = []
    for step in range(3 * n):
        robot.act(solver.step(obs))
        obs = robot.observe()
        if step % 3 == 0:
            frames.append(obs)
    robot.env.close()
    return robot.model, frames[:n]


def _segment_all(segmenter, frames, times):
    for obs in frames:
        start = time.perf_counter()
        try:
            segmenter.segment(obs)
        except SegmentationError:
            pass
        times.append(time.perf_counter() - start)


def _ticks(period_s: float, stop, inline=None):
    """Tick every ``period_s`` until ``stop()``; ``inline(i)`` runs inside tick i. Returns tick wall s."""
    work = np.random.default_rng(0).random((200, 200))
    ticks, i, t_next = [], 0, time.perf_counter()
    while not stop():
        delay = t_next - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        start = time.perf_counter()
        (work @ work).sum()  # ~0.5 ms: a tick's own numpy
        if inline is not None:
            inline(i)
        ticks.append(time.perf_counter() - start)
        i += 1
        t_next = max(t_next + period_s, start + period_s)
    return np.asarray(ticks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="OpenCabinetDrawer")
    parser.add_argument("--segmenter", default="geometric")
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--period-ms", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model, frames = _frames(args.task, args.frames, args.seed)
    target = {"OpenCabinetDrawer": "cabinet_part", "OpenCabinetDoor": "cabinet_part", "PickCube": "table_object",
              "PickObject": "table_object"}.get(args.task, "floor_object")
    assert TARGET_MASKS[target]
    period = args.period_ms / 1e3

    def fresh():
        segmenter = get_segmenter(args.segmenter, target, model)
        segmenter.reset()
        return segmenter

    rows = []
    # Baseline: ticks alone, as long as one pass of segmentation takes.
    seg_times: list[float] = []
    _segment_all(fresh(), frames, seg_times)
    duration = sum(seg_times)
    end = time.perf_counter() + duration
    rows.append(("segmenter idle", _ticks(period, lambda: time.perf_counter() > end), []))
    # On a thread.
    seg_times = []
    worker = threading.Thread(target=_segment_all, args=(fresh(), frames, seg_times))
    worker.start()
    rows.append(("segmenter on a thread", _ticks(period, lambda: not worker.is_alive()), seg_times))
    # In the tick, every third tick.
    seg_times, segmenter, todo = [], fresh(), list(frames)

    def inline(i):
        if i % 3 == 0 and todo:
            _segment_all(segmenter, [todo.pop(0)], seg_times)

    rows.append(("segmenter in the tick (every 3rd)", _ticks(period, lambda: not todo, inline), seg_times))
    print(f"{args.task}, {args.segmenter}, {len(frames)} clouds of {len(frames[0].points)} points, "
          f"tick period {args.period_ms} ms")
    print("| way | ticks | tick wall ms median / p99 / max | ticks over the period | segmentation ms median / max |")
    print("|---|---:|---|---:|---|")
    for name, t, s in rows:
        t_ms, s_ms = 1e3 * t, 1e3 * np.asarray(s or [np.nan])
        print(f"| {name} | {len(t)} | {np.median(t_ms):.2f} / {np.percentile(t_ms, 99):.1f} / {t_ms.max():.1f} | "
              f"{int((t > period).sum())} | {np.median(s_ms):.0f} / {np.max(s_ms):.0f} |")


if __name__ == "__main__":
    main()
