"""Python's garbage collector in a control loop: the warm-up heap frozen, and the collector's pauses measured.

A tree process holds a few hundred thousand objects once SAPIEN, Drake, mplib, open3d and the trees are loaded
(408,057 in a PickCube solver's process, measured). A full collection walks all of them: 266 ms on this
machine's CPU, 27 control periods, with the GIL held, so every thread of the process stops for it. Python runs
one whenever enough new objects have survived younger collections, at a moment no tick chooses.

:func:`frozen_heap` moves every object alive when the control loop starts into the collector's permanent
generation (``gc.freeze()``, Python 3.7+), the remedy the CPython documentation gives for pauses on a
long-lived heap: the collections during the loop then walk only what the loop itself allocated. The heap is
unfrozen when the loop ends, so that what an episode left behind is collected afterwards.

:class:`GcPauses` counts the collections and their time from the collector's own callbacks (``gc.callbacks``),
so that a run reports how long the collector held the process in each tick.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator

GC_MODES = ("freeze", "auto")  # freeze: the heap at the loop's start frozen; auto: Python's default collector
DEFAULT_GC_MODE = "freeze"


@contextlib.contextmanager
def frozen_heap(enabled: bool = True) -> Iterator[int]:
    """Within the block, the objects alive at its start are out of the collector's reach (``gc.freeze``).
    Yields how many were frozen (0 when not ``enabled``). Unfreezes at the end, even on an error."""
    if not enabled:
        yield 0
        return
    gc.freeze()
    try:
        yield gc.get_freeze_count()
    finally:
        gc.unfreeze()


class GcPauses:
    """The collector's pauses in this process, from its callbacks: :meth:`total_s` (seconds spent collecting since
    :meth:`start`) and ``collections`` (count per generation). A collection in any thread holds the GIL, so it
    stops every thread: the total is not split by thread. Use as a context manager, or start / stop."""

    def __init__(self):
        self.collections = [0, 0, 0]
        self.longest_s = 0.0
        self._total_s = 0.0
        self._started_at: float | None = None
        self._lock = threading.Lock()

    def start(self) -> "GcPauses":
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)
        return self

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._callback)

    def __enter__(self) -> "GcPauses":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def total_s(self) -> float:
        with self._lock:
            return self._total_s

    def _callback(self, phase: str, info: dict) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._started_at = now
            return
        if self._started_at is None:  # registered while a collection ran
            return
        pause = now - self._started_at
        self._started_at = None
        with self._lock:
            self._total_s += pause
            self.longest_s = max(self.longest_s, pause)
            generation = int(info.get("generation", 0))
            if 0 <= generation < len(self.collections):
                self.collections[generation] += 1
