"""One context manager shared by every torch user of the toolkit (the learned grasp scorer, the baselines)."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Run with ``n`` intra-op threads (restored afterwards); None keeps torch's choice. Small networks run
    fastest on one: more threads only wait on each other, badly so on a shared, busy CPU (60x slower seen on
    2 cores)."""
    previous = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
