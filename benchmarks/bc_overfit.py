"""The learned baselines' pipeline check (issue 18): overfit BC on ONE demonstration, then replay it.

For each demonstration id and training seed: the recorded actions replayed open loop on the demonstration's
seed (the env must retrace them and succeed), BC trained on that demonstration alone, the policy solver fed
the recorded trajectory's observations (its actions against the recorded ones), and the policy in closed loop
on the demonstration's seed (it must succeed). One line per run; ``--no-terminal-labels`` leaves out the
expert's action at the last observation (the data as before issue 18).

    python benchmarks/bc_overfit.py --demos outputs/issue18/demos/PickCube.h5 --episodes 0,1,2 --seeds 0,1 \
        [--config cpu_small] [--steps 4000] [--set lr=1e-3] [--no-terminal-labels] [--out outputs/issue18/overfit]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from handleit.baselines.bc import train_bc
from handleit.baselines.dataset import load_demo_data
from handleit.baselines.networks import get_config, parse_overrides
from handleit.baselines.training import TrainLog
from handleit.harness.pipeline_check import policy_on_recorded_observations, replay_demo_actions, roll_out_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demos", required=True)
    parser.add_argument("--episodes", default="0")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--config", default="cpu_small")
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-terminal-labels", dest="terminal_labels", action="store_false")
    parser.add_argument("--max-steps", type=int, default=200, help="closed-loop episode length")
    parser.add_argument("--out", default="outputs/issue18/overfit")
    args = parser.parse_args()
    overrides = parse_overrides(args.set) | {"steps": str(args.steps)}
    cfg = get_config(args.config).with_overrides(overrides)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for episode in [int(e) for e in args.episodes.split(",")]:
        replay = replay_demo_actions(args.demos, episode)
        print(f"demo {episode}: recorded actions open loop: success {replay.success} at step "
              f"{replay.first_success_step}, max |qpos - recorded| {replay.max_qpos_error:.2e}", flush=True)
        data = load_demo_data(args.demos, terminal_labels=args.terminal_labels, episode_ids=[episode])
        for seed in [int(s) for s in args.seeds.split(",")]:
            tag = f"demo{episode}-seed{seed}-{'labels' if args.terminal_labels else 'nolabels'}"
            start = time.perf_counter()
            result = train_bc(data, cfg, seed=seed, log=TrainLog(printer=None))
            train_s = time.perf_counter() - start
            ckpt = result.save(out / f"{tag}.pt", data, args.demos, seed)
            fed = policy_on_recorded_observations(ckpt, args.demos, episode)
            closed = roll_out_policy(ckpt, args.demos, episode, args.max_steps)
            line = {"run": tag, "transitions": len(data), "train_s": round(train_s, 1),
                    "final_action_mse": round(result.log.final()["action_mse"], 6),
                    "wrapper_action_mse_on_recorded_obs": round(float(np.mean(fed.action_mse)), 6),
                    "closed_loop_success": closed.success, "success_step": closed.first_success_step,
                    "recorded_steps": replay.steps, "end_dist_m": round(float(closed.info.get("obj_to_goal_dist", np.nan)), 4),
                    "end_grasped": closed.info.get("is_grasped"),
                    "max_qpos_error_vs_recorded": round(closed.max_qpos_error or 0.0, 4)}
            print(json.dumps(line), flush=True)
            with (out / "runs.jsonl").open("a") as f:
                f.write(json.dumps(line | {"config": args.config, "overrides": overrides}) + "\n")


if __name__ == "__main__":
    main()
