"""Gradient steps per second of BC and TD3+BC on a demo file: the trainers of ``handleit train``, each timed for
``--seconds`` after a few untimed steps (``baselines.training.measure_steps_per_s``). Imports no simulator, so it
runs on a GPU machine with only torch, numpy and h5py (the package on ``PYTHONPATH``, as ``train_budget.py``).

    python3 benchmarks/train_throughput.py --data .gpu-data/demos/OpenCabinetDrawer.h5 --set num_points=400 \\
        --algos bc,td3bc --seconds 20
"""

from __future__ import annotations

import argparse

import torch

from handleit.baselines.bc import BCTrainer
from handleit.baselines.dataset import load_demo_data
from handleit.baselines.networks import CONFIGS, get_config, parse_overrides
from handleit.baselines.td3bc import TD3BCTrainer
from handleit.baselines.training import measure_steps_per_s, pick_device

TRAINERS = {"bc": BCTrainer, "td3bc": TD3BCTrainer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--config", default="gpu_large", choices=sorted(CONFIGS))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--algos", default="bc,td3bc")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    cfg = get_config(args.config).with_overrides({**parse_overrides(args.set), "steps": str(10**9)})
    device = pick_device(args.device)
    data = load_demo_data(args.data)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    for algo in args.algos.split(","):
        trainer = TRAINERS[algo](data, cfg, 0, str(device))
        steps, rate = measure_steps_per_s(trainer, args.seconds)
        print(f"{algo}: {rate:.1f} steps/s ({steps} steps in {args.seconds:.0f} s; {args.config}, "
              f"{cfg.num_points} points, batch {cfg.batch_size}, on {name})", flush=True)
        del trainer
        if device.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
