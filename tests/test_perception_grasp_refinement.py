"""Refining predicted grasps on sparse clouds: re-centring between the swept points, and the object's shift
when the fingers close."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.perception.grasp_refinement import closing_shift_m, point_spacing_m, recenter_grasp
from handleit.types import Grasp


def _top_down(x, y, z, closing=(1.0, 0.0, 0.0)) -> np.ndarray:
    """A grasp from above (approach -z) closing along ``closing`` (horizontal)."""
    yv = np.asarray(closing, dtype=float) / np.linalg.norm(closing)
    zv = np.array([0.0, 0.0, -1.0])
    X = np.eye(4)
    X[:3, 0], X[:3, 1], X[:3, 2], X[:3, 3] = np.cross(yv, zv), yv, zv, (x, y, z)
    return X


def _grid(x_range, y_range, z, spacing):
    xs = np.arange(x_range[0], x_range[1] + 1e-9, spacing)
    ys = np.arange(y_range[0], y_range[1] + 1e-9, spacing)
    a, b = np.meshgrid(xs, ys)
    return np.column_stack([a.ravel(), b.ravel(), np.full(a.size, z)])


def test_a_grasp_off_the_middle_of_a_sparse_cube_is_recentred_and_widened():
    # The top of a 4 cm cube at the origin, sampled every 9 mm (a far camera): points at -0.018 .. +0.018.
    top = _grid((-0.018, 0.018), (-0.018, 0.018), 0.04, 0.009)
    assert point_spacing_m(top) == pytest.approx(0.009)
    # A grasp that saw only part of it: 1.6 cm off the middle, 2 cm wide.
    grasp = Grasp(_top_down(0.016, 0.0, 0.02), width_m=0.02, score=0.5)
    refined = recenter_grasp(grasp, top)
    np.testing.assert_allclose(refined.X_WG[:3, 3], [0.0, 0.0, 0.02], atol=1e-9)
    np.testing.assert_allclose(refined.X_WG[:3, :3], grasp.X_WG[:3, :3])
    assert 0.04 <= refined.width_m <= 0.08 and refined.score == grasp.score
    # Nothing in the fingers' band, or too wide for the open hand: unchanged.
    assert recenter_grasp(Grasp(_top_down(0.3, 0.3, 0.02), 0.02, 0.5), top).X_WG[0, 3] == 0.3
    wide = _grid((-0.06, 0.06), (-0.01, 0.01), 0.04, 0.005)
    assert recenter_grasp(Grasp(_top_down(0.0, 0.0, 0.02), 0.05, 0.5), wide).width_m == 0.05


def test_closing_shift_centres_the_clamped_arm_of_an_l_shape():
    # An L from above: a bar along x (y in [0, 0.03]) and a leg along y at x in [0.07, 0.1].
    bar = _grid((0.0, 0.1), (0.0, 0.03), 0.03, 0.005)
    leg = _grid((0.07, 0.1), (0.03, 0.1), 0.03, 0.005)
    points = np.concatenate([bar, leg])
    # Fingers closing across the bar (along y) at x = 0.02, centred 5 mm off the bar's middle (y = 0.015).
    X = _top_down(0.02, 0.02, 0.015, closing=(0.0, 1.0, 0.0))
    assert closing_shift_m(X, points) == pytest.approx(0.005, abs=1e-9)  # the bar moves +y by 5 mm in G
    assert closing_shift_m(_top_down(0.5, 0.5, 0.015), points) == 0.0  # nothing between the fingers
    with pytest.raises(ValueError):
        closing_shift_m(X, np.full((4, 3), np.inf))
