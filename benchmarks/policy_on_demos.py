"""A trained policy on demonstrations it was trained on (issue 18): does it copy them, open and closed loop?

For each demonstration id: the policy solver fed the observations of the recorded trajectory (the env driven by
the recorded actions; fresh point samples of the live cloud, as when it acts), its mean action error against the
recorded actions, to compare with the training loss; then the policy in closed loop on the demonstration's seed
and cabinet (``harness/pipeline_check.py``). One line per demonstration; ``--out`` gets them as JSON lines.

    python benchmarks/policy_on_demos.py --checkpoint outputs/issue18-gpu/device/bc.pt \\
        --demos outputs/demos-gpu/OpenCabinetDrawer.h5 --episodes 0,1,2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from handleit.baselines.checkpoint import load_checkpoint
from handleit.harness.pipeline_check import policy_on_recorded_observations, roll_out_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--demos", required=True, help="the demonstration file (the recorded one or a compact copy)")
    parser.add_argument("--episodes", default="0", help="demonstration ids, separated by commas")
    parser.add_argument("--out", default=None, help="a JSON-lines file for the results")
    args = parser.parse_args()
    policy = load_checkpoint(args.checkpoint)
    meta = policy.meta
    print(f"{args.checkpoint}: {policy.algo} trained {meta.get('steps_done')} steps on {meta.get('data')}; "
          f"final losses {json.dumps({k: round(v, 6) for k, v in meta.get('final_losses', {}).items()})}")
    for episode in [int(e) for e in args.episodes.split(",") if e]:
        start = time.perf_counter()
        recorded = policy_on_recorded_observations(args.checkpoint, args.demos, episode)
        closed = roll_out_policy(args.checkpoint, args.demos, episode)
        row = {"episode": episode, "recorded_steps": recorded.steps,
               "action_mse_on_recorded": float(np.mean(recorded.action_mse)),
               "closed_loop_success": closed.success, "closed_loop_steps": closed.steps,
               "first_success_step": closed.first_success_step, "max_qpos_error": closed.max_qpos_error,
               "open_fraction": closed.info.get("open_fraction"), "wall_s": round(time.perf_counter() - start, 1)}
        print(json.dumps(row), flush=True)
        if args.out:
            with Path(args.out).open("a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
