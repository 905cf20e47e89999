"""The stall tracker of the drawer pull and push: a measurement's change over new clouds, not ticks."""

from __future__ import annotations

import numpy as np

from handleit.behaviors.cloud_stall import CloudStallTracker


def test_the_change_is_measured_over_new_clouds_and_ticks_on_one_cloud_do_not_count():
    tracker = CloudStallTracker(stall_clouds=2)
    a, b, c = np.zeros((1, 3)), np.ones((1, 3)), np.full((1, 3), 2.0)
    assert tracker.change(a, 0.01) is None
    assert tracker.change(a, 0.01) is None  # the same cloud again: nothing recorded
    assert tracker.change(b, 0.03) is None
    assert tracker.change(b, 0.03) is None
    assert np.isclose(tracker.change(c, 0.04), 0.03)  # 0.04 - 0.01, two new clouds back
    assert tracker.values == [0.01, 0.03, 0.04]


def test_equal_clouds_that_are_other_objects_are_new_and_reset_forgets():
    tracker = CloudStallTracker(stall_clouds=1)
    assert tracker.change(np.zeros((1, 3)), 0.05) is None
    assert tracker.change(np.zeros((1, 3)), 0.05) == 0.0  # a new array, though equal: a new cloud
    tracker.reset()
    assert tracker.change(np.zeros((1, 3)), 0.05) is None
