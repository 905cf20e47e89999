"""The output low-pass filter (Let's Handle It (arXiv 2202.11792) Sec. 2.6: fs = 100 Hz, fc = 40 Hz): passes DC,
attenuates fast input.

Amplitudes are measured on the filtered signal itself (a least-squares sine fit after the transient), then
checked against the documented values and the filter's own frequency response.
"""

from __future__ import annotations

import numpy as np
import pytest

from handleit.control.pid import LowPassFilter

FS_HZ = 100.0


def steady_amplitude(lpf: LowPassFilter, frequency_hz: float, n: int = 400, skip: int = 100) -> float:
    """Amplitude of the filter's steady response to a unit sine of ``frequency_hz`` sampled at FS_HZ."""
    t_s = np.arange(n) / FS_HZ
    x = np.sin(2 * np.pi * frequency_hz * t_s + 0.3)  # phase offset: the samples do not sit on the zeros
    lpf.reset(0.0)
    y = np.array([float(lpf.step(v)) for v in x])
    basis = np.column_stack([np.sin(2 * np.pi * frequency_hz * t_s), np.cos(2 * np.pi * frequency_hz * t_s)])
    coef, *_ = np.linalg.lstsq(basis[skip:], y[skip:], rcond=None)
    return float(np.hypot(*coef))


@pytest.mark.parametrize("method", ["exponential", "bilinear"])
def test_attenuates_45_hz_and_passes_5_hz(method):
    lpf = LowPassFilter(40.0, FS_HZ, method)
    a5, a45 = steady_amplitude(lpf, 5.0), steady_amplitude(lpf, 45.0)
    assert a45 < 0.6 and a45 < 0.65 * a5
    assert a5 > 0.97
    np.testing.assert_allclose([a5, a45], lpf.gain_at([5.0, 45.0]), rtol=1e-6)


@pytest.mark.parametrize("method", ["exponential", "bilinear"])
def test_passes_dc(method):
    lpf = LowPassFilter(40.0, FS_HZ, method)
    lpf.reset(np.zeros(3))  # from rest, three channels at once
    for _ in range(50):
        y = lpf.step(np.array([1.0, -2.0, 0.5]))
    np.testing.assert_allclose(y, [1.0, -2.0, 0.5], atol=1e-12)
    assert lpf.gain_at(0.0) == pytest.approx(1.0)


def test_cutoff_gain_of_each_discretization():
    """Bilinear with pre-warping: exactly -3 dB at 40 Hz. Exponential smoothing (alpha = dt / (RC + dt)):
    -4.8 dB at 40 Hz, its -3 dB point at ~23.4 Hz, as documented (fc is 0.4 fs, close to Nyquist)."""
    bilinear = LowPassFilter(40.0, FS_HZ, "bilinear")
    assert steady_amplitude(bilinear, 40.0) == pytest.approx(1 / np.sqrt(2), rel=1e-6)
    exponential = LowPassFilter(40.0, FS_HZ, "exponential")
    assert steady_amplitude(exponential, 40.0) == pytest.approx(0.576, abs=0.001)
    assert steady_amplitude(exponential, 23.4) == pytest.approx(1 / np.sqrt(2), abs=0.002)


def test_exponential_step_never_overshoots_and_bilinear_does():
    """Why exponential smoothing is the default: a saturated velocity stays within its limit."""
    steps = {}
    for method in ("exponential", "bilinear"):
        lpf = LowPassFilter(40.0, FS_HZ, method)
        lpf.reset(0.0)
        steps[method] = np.array([float(lpf.step(1.0)) for _ in range(20)])
    assert np.all(np.diff(steps["exponential"]) >= 0) and steps["exponential"].max() <= 1.0
    assert steps["exponential"][0] == pytest.approx(0.7154, abs=1e-4)  # alpha
    assert steps["bilinear"].max() == pytest.approx(1.125, abs=0.001)  # pole at -0.51: rings once


def test_first_sample_without_reset_value_starts_there():
    lpf = LowPassFilter()
    np.testing.assert_array_equal(lpf.step([2.0, 3.0]), [2.0, 3.0])  # no start-up transient
    y = lpf.step([0.0, 0.0])
    assert np.all((y > 0) & (y < [2.0, 3.0]))


def test_irregular_step_uses_the_same_analog_filter():
    lpf = LowPassFilter(40.0, FS_HZ)
    lpf.reset(0.0)
    rc_s = 1 / (2 * np.pi * 40.0)
    assert float(lpf.step(1.0, dt_s=0.02)) == pytest.approx(0.02 / (rc_s + 0.02))
    lpf.reset(0.0)
    assert float(lpf.step(1.0)) == pytest.approx(0.01 / (rc_s + 0.01))  # back to the nominal rate


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown filter method"):
        LowPassFilter(method="butterworth")
    with pytest.raises(ValueError, match="Nyquist"):
        LowPassFilter(60.0, FS_HZ, "bilinear")
    with pytest.raises(ValueError, match="> 0"):
        LowPassFilter(0.0)
