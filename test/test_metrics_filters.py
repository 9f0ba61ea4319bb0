"""metrics.filters computes what scipy.signal computes, bit for bit (the metrics use it to avoid importing
scipy.signal, which loads scipy.stats)."""

import numpy as np
import pytest
import scipy.signal as ss

from uav_debate_eval.metrics import filters


@pytest.mark.parametrize(("window", "order", "deriv", "delta"),
                         [(5, 2, 0, 1.0), (11, 2, 1, 0.1), (21, 2, 2, 0.1), (7, 1, 0, 1.0), (41, 2, 1, 0.05),
                          (9, 3, 3, 0.2), (5, 2, 3, 1.0), (6, 2, 0, 1.0)])
def test_savgol_coeffs_match_scipy(window, order, deriv, delta):
    got = filters.savgol_coeffs(window, order, deriv=deriv, delta=delta)
    want = ss.savgol_coeffs(window, order, deriv=deriv, delta=delta)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize(("shape", "axis", "window", "order", "deriv", "delta"),
                         [((300,), -1, 41, 2, 0, 1.0), ((7, 120), -1, 41, 2, 0, 1.0), ((1024, 1201), -1, 41, 2, 0, 1.0),
                          ((200, 9, 2), 0, 11, 2, 1, 0.1), ((1201, 1024, 2), 0, 11, 2, 1, 0.1),
                          ((5, 60, 3), 1, 7, 2, 2, 0.05), ((4, 3, 50), 2, 9, 2, 1, 0.1), ((11,), 0, 11, 2, 1, 0.1)])
def test_savgol_filter_interp_matches_scipy(shape, axis, window, order, deriv, delta):
    x = np.cumsum(np.random.default_rng(sum(shape)).normal(size=shape), axis=axis)
    got = filters.savgol_filter(x, window, order, deriv=deriv, delta=delta, axis=axis)
    want = ss.savgol_filter(x, window, order, deriv=deriv, delta=delta, axis=axis, mode="interp")
    assert np.array_equal(got, want)


def test_savgol_filter_rejects_a_window_longer_than_the_data():
    with pytest.raises(ValueError, match="window_length"):
        filters.savgol_filter(np.zeros(5), 7, 2)


@pytest.mark.parametrize("n", [1, 2, 17, 600, 1201, 6001])
def test_correlate_full_and_lags_match_scipy(n):
    rng = np.random.default_rng(n)
    a, b = rng.normal(size=(2, 3 * n))[:, ::3]  # strided views, as the metrics pass columns
    assert np.array_equal(filters.correlate_full(a, b), ss.correlate(a, b, mode="full", method="fft"))
    assert np.array_equal(filters.correlation_lags(n, n), ss.correlation_lags(n, n, mode="full"))
