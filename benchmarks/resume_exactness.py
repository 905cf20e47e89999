"""Does a resumed training run equal an uninterrupted one? (issue 18) N steps in one go against N/2, stop,
resume, N/2, on any device: prints whether every weight is bit-identical (else the largest difference), and the
gradient steps per second.

    python benchmarks/resume_exactness.py --data demos/PickCube.h5 [--max-demos 20] [--algo bc] \
        [--config gpu_large] [--steps 400] [--device cuda] [--out outputs/resume-check]

Needs only torch, numpy and h5py (the baselines layer): it runs on an accelerator machine without the
simulator.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from handleit.baselines.bc import train_bc
from handleit.baselines.dataset import load_demo_data
from handleit.baselines.networks import get_config
from handleit.baselines.td3bc import train_td3bc
from handleit.baselines.training import TrainingInterrupted, TrainLog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--max-demos", type=int, default=None)
    parser.add_argument("--algo", default="bc", choices=["bc", "td3bc"])
    parser.add_argument("--config", default="cpu_small")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="outputs/resume-check")
    args = parser.parse_args()
    cfg = get_config(args.config).with_overrides({"steps": str(args.steps)})
    data = load_demo_data(args.data, max_trajectories=args.max_demos)
    train = train_bc if args.algo == "bc" else train_td3bc
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for p in out.glob("*.pt"):
        p.unlink()
    common = {"seed": 0, "device": args.device, "threads": args.threads}
    start = time.perf_counter()
    whole = train(data, cfg, log=TrainLog(printer=None), out=out / "whole.pt", **common)
    whole_s = time.perf_counter() - start
    try:
        train(data, cfg, log=TrainLog(printer=None), out=out / "halves.pt", stop_after=args.steps // 2, **common)
    except TrainingInterrupted:
        pass
    resumed = train(data, cfg, log=TrainLog(printer=None), out=out / "halves.pt", resume=True, **common)
    pairs = [(whole.actor, resumed.actor)] + ([(whole.critic, resumed.critic)] if whole.critic is not None else [])
    worst, identical = 0.0, True
    for a, b in pairs:
        for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
            if not torch.equal(va, vb):
                identical = False
                worst = max(worst, float((va.double() - vb.double()).abs().max()))
    print(json.dumps({"device": args.device or "auto",
                      "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                      "torch": torch.__version__, "algo": args.algo, "config": args.config, "steps": args.steps,
                      "transitions": len(data), "identical_weights": identical, "max_abs_difference": worst,
                      "same_losses": dict(whole.log.history) == dict(resumed.log.history),
                      "steps_per_s_uninterrupted": round(args.steps / whole_s, 1)}))


if __name__ == "__main__":
    main()
