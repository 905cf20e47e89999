"""finite_rows: the rows with three finite coordinates, as np.isfinite(...).all(axis=1) gives them."""

import numpy as np
import pytest

from handleit.clouds import finite_rows


def test_finite_rows_agrees_with_numpy_on_nan_inf_and_huge_values():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(1000, 3)).astype(np.float32)
    points[::7] = np.nan
    points[5, 1], points[6, 2], points[8, 0] = np.inf, -np.inf, np.nan
    points[9] = np.finfo(np.float32).max  # finite, though their sum would overflow
    expected = np.isfinite(points).all(axis=1)
    assert np.array_equal(finite_rows(points), expected) and finite_rows(points)[9]
    assert np.array_equal(finite_rows(points.astype(np.float64)), expected)


def test_finite_rows_of_an_empty_cloud_and_a_bad_shape():
    assert finite_rows(np.zeros((0, 3))).shape == (0,)
    with pytest.raises(ValueError, match=r"\(N, 3\) array, got shape \(4, 2\)"):
        finite_rows(np.zeros((4, 2)))
