"""Small linear algebra of the control tick with OpenBLAS at one thread and at its default, in turn.

Each setting runs in its own process (OpenBLAS reads OPENBLAS_NUM_THREADS when it loads), the settings take
turns ``--rounds`` times, and the table gives the median per call over all rounds:

    python benchmarks/blas_threads.py [--rounds 3] [--threads 1,2]

What it times: the inverse of a 4 x 4 pose (``np.linalg.inv``), a 3 x 3 covariance's eigenvectors (``eigh``, as
the plane fits), and a 192,000-point cloud moved by a pose (``points @ R.T + t``, the size of the drawer's cloud).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

import numpy as np

CHILD = r"""
import json, time, numpy as np
rng = np.random.default_rng(0)
X = np.eye(4); X[:3, 3] = [0.3, -0.2, 1.0]
C = np.cov(rng.normal(size=(3, 500)))
P = rng.normal(size=(192000, 3)).astype(np.float32)
R = np.eye(3, dtype=np.float32); t = np.ones(3, np.float32)
def per_call(fn, n):
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6
print(json.dumps({"inv 4x4": per_call(lambda: np.linalg.inv(X), 300),
                  "eigh 3x3": per_call(lambda: np.linalg.eigh(C), 300),
                  "192k points @ R.T + t": per_call(lambda: P @ R.T + t, 30)}))
"""


def run(threads: int) -> dict[str, float]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2", help="OPENBLAS_NUM_THREADS values to compare")
    args = parser.parse_args()
    settings = [int(v) for v in args.threads.split(",")]
    results: dict[int, list[dict[str, float]]] = {n: [] for n in settings}
    for _ in range(args.rounds):
        for n in settings:
            results[n].append(run(n))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, load average {load:.1f}; "
          f"{args.rounds} rounds; microseconds per call (median over rounds)")
    names = list(results[settings[0]][0])
    print("| operation | " + " | ".join(f"OPENBLAS_NUM_THREADS={n}" for n in settings) + " |")
    print("|---|" + "---:|" * len(settings))
    for name in names:
        cells = [f"{np.median([r[name] for r in results[n]]):.1f}" for n in settings]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
