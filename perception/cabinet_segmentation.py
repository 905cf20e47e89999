"""The target cabinet part (drawer or door) and its handle from geometry, prompted by the operator (work in progress)."""

from __future__ import annotations

import numpy as np

from handleit.perception.segmentation_errors import SegmentationError


class CabinetPartTracker:
    """Placeholder with the final API; the geometric tracker replaces it shortly."""

    def __init__(self, **params):
        self.params = params

    def reset(self) -> None:
        pass

    def update(self, points_W, candidate_mask, prompt_W, X_WB, handle_hint_mask=None) -> tuple[np.ndarray, np.ndarray]:
        raise SegmentationError("CabinetPartTracker: not implemented yet")
