"""Small helpers over point clouds (N x 3 arrays) shared by every layer."""

from __future__ import annotations

import numpy as np


def finite_rows(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of an (N, 3) array whose three coordinates are all finite.

    The same as ``np.isfinite(points).all(axis=1)``, which numpy computes some 15 times slower on a 192,000-point
    cloud (a reduction along a 3-long axis): column by column it is ~1 ms, off a control tick's budget.
    """
    p = np.asarray(points)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"points must be an (N, 3) array, got shape {p.shape}")
    return np.isfinite(p[:, 0]) & np.isfinite(p[:, 1]) & np.isfinite(p[:, 2])
