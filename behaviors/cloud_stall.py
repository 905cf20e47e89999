"""A measurement's change over the last few *new* clouds, not ticks: the stall of a pull or a push.

A real robot's camera (10-30 Hz) is slower than the control rate (100 Hz): over ticks that saw no new cloud a
measurement made on the cloud cannot change, and a drawer still sliding, judged over ticks, is taken for one
at its stop (the drawer through ROS at a 15 Hz camera: the tree then held still for the rest of the episode).
Plain Python: the cloud is only compared by identity.
"""

from __future__ import annotations


class CloudStallTracker:
    """The values of a measurement (a part's opening, m) on the new clouds seen since :meth:`reset`, one a
    cloud: a cloud is new when it is not the object seen last."""

    def __init__(self, stall_clouds: int):
        """``stall_clouds``: how many new clouds the change is measured over."""
        self.stall_clouds = stall_clouds
        self.reset()

    def reset(self) -> None:
        self.values: list[float] = []
        self.cloud = None

    def change(self, cloud, value: float) -> float | None:
        """Record ``value`` if ``cloud`` is a new one; return ``value`` minus the value measured
        ``stall_clouds`` new clouds before the latest, or None until that many new clouds have been seen."""
        if cloud is not self.cloud:
            self.cloud = cloud
            self.values.append(value)
        if len(self.values) <= self.stall_clouds:
            return None
        return value - self.values[-1 - self.stall_clouds]
