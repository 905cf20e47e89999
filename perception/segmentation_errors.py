"""The error every segmenter raises for input it cannot segment (see :mod:`handleit.perception.segmenters`),
and the input checks that raise it, shared by the segmentation modules.

A separate module so that the segmenter implementations and the registry that imports them share it
without a cycle.
"""

from __future__ import annotations

import numpy as np

from handleit.clouds import finite_rows


class SegmentationError(ValueError):
    """A segmenter could not make its masks from this input: an empty cloud, NaN points, a prompt outside
    the cloud, no marker colour found, a marker found in two places. The message names the problem.

    ``masks``: the masks that were made before the problem (the robot's, from the self filter, when the
    target was not found), so that a tree looking for its target still knows its own body; None when none."""

    def __init__(self, message: str, masks: dict[str, np.ndarray] | None = None):
        super().__init__(message)
        self.masks = masks

    def __reduce__(self):  # across the segmentation worker's pipe, with its masks
        return (type(self), (str(self), self.masks))


def check_points(points_W) -> np.ndarray:
    """``points_W`` as float64 ``[N, 3]``, N >= 1, finite; or SegmentationError naming the problem."""
    try:
        p = np.asarray(points_W, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise SegmentationError(f"points_W: expected an [N, 3] array of numbers, "
                                f"got {type(points_W).__name__}") from error
    if p.ndim != 2 or p.shape[1] != 3:
        raise SegmentationError(f"points_W: expected shape [N, 3], got {list(p.shape)}")
    if len(p) == 0:
        raise SegmentationError("points_W: the point cloud is empty (0 points)")
    finite = finite_rows(p)
    if not finite.all():
        raise SegmentationError(f"points_W: {int((~finite).sum())} of {len(p)} points contain NaN or inf")
    return p


def check_mask(mask, n: int, name: str) -> np.ndarray:
    """``mask`` as a bool ``[n]`` array, or SegmentationError naming ``name`` and the problem."""
    m = np.asarray(mask)
    if m.dtype != bool:
        raise SegmentationError(f"{name}: expected a boolean array, got dtype {m.dtype}")
    if m.shape != (n,):
        raise SegmentationError(f"{name}: expected shape [{n}] to match the points, got {list(m.shape)}")
    return m


def check_prompt(prompt_W) -> np.ndarray:
    """The prompt as float64 ``[3]`` (a point) or ``[2, 3]`` (a box, min then max corner), or SegmentationError."""
    try:
        prompt = np.asarray(prompt_W, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise SegmentationError(f"prompt_W: expected a [3] point or a [2, 3] box, "
                                f"got {type(prompt_W).__name__}") from error
    if prompt.shape not in ((3,), (2, 3)):
        raise SegmentationError(f"prompt_W: expected a [3] point or a [2, 3] box (min, max corners), "
                                f"got shape {list(prompt.shape)}")
    if not np.isfinite(prompt).all():
        raise SegmentationError(f"prompt_W: contains NaN or inf: {prompt.tolist()}")
    if prompt.ndim == 2:  # the corners of a thin object's noisy box may cross: order them per axis
        prompt = np.stack([prompt.min(axis=0), prompt.max(axis=0)])
    return prompt
