"""Training batches per second on this machine: ``sample_batch`` (the features of ``baselines/features.py``) for a
demo file, and the points' frame change alone, as a batched matmul (what ``batch_features`` does) against the
einsum it replaced, timed in the same run. The batches are built on the CPU: on the GPU machine of issue 18 they,
not the GPU, paced training (21-46 % GPU utilisation).

    .venv/bin/python benchmarks/batch_sampling_speed.py --data .gpu-data/demos/OpenCabinetDrawer.h5 --points 400 \\
        --batch 256 --repeats 30

Prints milliseconds per batch (median of ``--repeats``), without and with the next observations (TD3+BC).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from handleit.baselines.dataset import load_demo_data
from handleit.baselines.training import sample_batch
from handleit.poses import pose7_to_matrix


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a demo file (handleit demos or compact-demos)")
    parser.add_argument("--points", type=int, default=1200, help="points per observation fed to the network")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_demo_data(args.data)
    spec = data.feature_spec(args.points)
    rng = np.random.default_rng(0)
    cpu = torch.device("cpu")
    print(f"{args.data}: {len(data)} transitions, {data.xyz_W.shape[1]} points stored, {args.points} fed, "
          f"batch {args.batch}")
    for with_next in (False, True):
        ms = _median_ms(lambda: sample_batch(data, spec, args.batch, rng, cpu, with_next=with_next), args.repeats)
        print(f"sample_batch{' with next observations' if with_next else ''}: {ms:.1f} ms per batch")
    obs = rng.integers(len(data.xyz_W), size=args.batch)
    xyz_W = data.xyz_W[obs][:, : args.points].astype(np.float64)
    X_WB = pose7_to_matrix(data.base_pose[obs], normalize=True)
    R, p = X_WB[:, :3, :3], X_WB[:, :3, 3]
    einsum_ms = _median_ms(lambda: np.einsum("bji,bnj->bni", R, xyz_W - p[:, None, :]), args.repeats)
    matmul_ms = _median_ms(lambda: np.matmul(xyz_W - p[:, None, :], R), args.repeats)
    same = np.allclose(np.einsum("bji,bnj->bni", R, xyz_W - p[:, None, :]), np.matmul(xyz_W - p[:, None, :], R))
    print(f"frame change of [{args.batch}, {args.points}, 3]: einsum {einsum_ms:.2f} ms, matmul {matmul_ms:.2f} ms "
          f"({einsum_ms / matmul_ms:.1f}x; same result: {same})")


if __name__ == "__main__":
    main()
