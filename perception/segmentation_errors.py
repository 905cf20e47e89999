"""The error every segmenter raises for input it cannot segment (see :mod:`handleit.perception.segmenters`).

A separate module so that the segmenter implementations and the registry that imports them share it
without a cycle.
"""

from __future__ import annotations


class SegmentationError(ValueError):
    """A segmenter could not make its masks from this input: an empty cloud, NaN points, a prompt outside
    the cloud, no marker colour found, a marker found in two places. The message names the problem."""
