"""Chosen episodes of one task (by episode index, as ``handleit eval`` numbers them: episode i has seed i and object
i mod n), to re-run the failures of a long evaluation after a fix, beside a few that succeeded.

    .venv/bin/python benchmarks/chosen_episodes.py --task OpenCabinetDrawer --split train \\
        --episodes 15,23,36,41,0,1,2,3,4,5 --segmenter geometric --out outputs/lip-check

Prints each episode's success, steps and failed node, and the success count. Resumes from ``OUT/records.jsonl``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from handleit.harness.evaluation import episode_specs, run_episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--episodes", required=True, help="comma-separated episode indices, e.g. 3,17,40")
    parser.add_argument("--segmenter", default="simulator")
    parser.add_argument("--solver", default="bt")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--perturb", default="")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--episode-timeout", type=float, default=600.0,
                        help="wall seconds an episode may take before it is recorded as failed (default 600)")
    parser.add_argument("--hand-camera", action="store_true",
                        help="the env's hand_camera=True (a camera on the hand; give the run an --out of its own)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    try:
        wanted = sorted({int(i) for i in args.episodes.split(",")})
    except ValueError:
        parser.error(f"--episodes: comma-separated integers, got {args.episodes!r}")
    if not wanted or wanted[0] < 0:
        parser.error("--episodes: give episode indices >= 0")
    out = Path(args.out)
    specs = [s for s in episode_specs(args.task, args.split, wanted[-1] + 1, args.solver, args.max_steps, 0, (),
                                      out / "videos", segmenter=args.segmenter, perturb=args.perturb)
             if s.index in wanted]
    records = run_episodes(specs, out / "records.jsonl", workers=args.workers, resume=True,
                           episode_timeout_s=args.episode_timeout,
                           env_options={"hand_camera": True} if args.hand_camera else None)
    for r in sorted(records, key=lambda r: r.index):
        print(f"episode {r.index} seed {r.seed} {r.model_id}: {'success' if r.success else 'failure'}, "
              f"{r.steps} steps, failed node {r.failed_node}")
    print(f"success {sum(r.success for r in records)} / {len(records)}")


if __name__ == "__main__":
    main()
