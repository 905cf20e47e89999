"""One cloud through a segmenter: what the segment node does with each new cloud, in the tick (lockstep), on a
thread or in the segmentation worker process (real time: behaviors/segment_nodes.py, behaviors/planning_worker.py)."""

from __future__ import annotations

import dataclasses

import numpy as np

from handleit.clouds import finite_rows
from handleit.perception.segmentation_errors import SegmentationError
from handleit.types import Observation


def segment_cloud(segmenter, obs: Observation) -> tuple[np.ndarray | None, dict[str, np.ndarray], str | None]:
    """``(finite, masks, error)``: the points kept (a bool mask over ``obs.points``; None when all are finite),
    the segmenter's masks over the kept points, and the SegmentationError's message (None when it found the
    target; the masks are then those the error carries, the robot's for example, and empty otherwise). Other
    exceptions propagate."""
    finite = finite_rows(obs.points) if len(obs.points) else np.zeros(0, dtype=bool)
    keep = None if finite.all() else finite
    if keep is not None:
        obs = finite_points(obs, keep)
    try:
        return keep, segmenter.segment(obs), None
    except SegmentationError as error:
        made, n = error.masks or {}, len(obs.points)
        masks = {name: np.asarray(made[name], dtype=bool) if name in made else np.zeros(n, dtype=bool)
                 for name in segmenter.mask_names}
        return keep, masks, str(error)


def finite_points(obs: Observation, keep: np.ndarray | None) -> Observation:
    """The observation with only the points under ``keep`` (None: unchanged)."""
    if keep is None:
        return obs
    return dataclasses.replace(obs, points=obs.points[keep], colors=obs.colors[keep],
                               masks={k: np.asarray(v)[keep] for k, v in obs.masks.items()},
                               sensor_index=None if obs.sensor_index is None else obs.sensor_index[keep])
