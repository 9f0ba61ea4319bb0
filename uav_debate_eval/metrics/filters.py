"""Savitzky-Golay filtering and FFT cross-correlation, the three scipy.signal calls the metrics make, computed with
the very operations scipy.signal (1.17) performs for float64 numpy input, so every number is the same bit for bit
(test_metrics_filters.py compares them with scipy.signal itself).

Why not scipy.signal: importing it loads scipy.stats, 0.28 s of the 0.5 s the evaluation stages take to import, and
that import runs beside the read of a large flight (runner/preload.py), where it cost a 1,024-vehicle flight
about 0.2 s of wall time. The parts used here need only scipy.linalg, scipy.ndimage and scipy.fft.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import lstsq
from scipy.ndimage import convolve1d


def savgol_coeffs(window_length: int, polyorder: int, deriv: int = 0, delta: float = 1.0) -> np.ndarray:
    """scipy.signal.savgol_coeffs(window_length, polyorder, deriv, delta) (use="conv", centred)."""
    if polyorder >= window_length:
        raise ValueError("polyorder must be less than window_length.")
    halflen, rem = divmod(window_length, 2)
    pos = halflen - 0.5 if rem == 0 else halflen
    if deriv > polyorder:
        return np.zeros(window_length)
    x = np.flip(np.arange(-pos, window_length - pos, dtype=np.float64))  # reversed: coefficients for a convolution
    a = x ** np.arange(polyorder + 1, dtype=np.float64).reshape(-1, 1)
    y = np.zeros(polyorder + 1)
    y[deriv] = float(math.factorial(deriv)) / (delta ** deriv)
    rcond = np.finfo(a.dtype).eps * max(a.shape[-1], a.shape[-2])
    return lstsq(a, y, cond=rcond)[0]


def savgol_filter(x: np.ndarray, window_length: int, polyorder: int, deriv: int = 0, delta: float = 1.0,
                  axis: int = -1) -> np.ndarray:
    """scipy.signal.savgol_filter(x, ..., mode="interp"): a convolution inside, a polynomial fitted to the first and
    last window_length samples at each end."""
    x = np.asarray(x)
    if x.dtype != np.float64 and x.dtype != np.float32:
        x = x.astype(np.float64)
    if window_length > x.shape[axis]:
        raise ValueError("If mode is 'interp', window_length must be less than or equal to the size of x.")
    y = convolve1d(x, savgol_coeffs(window_length, polyorder, deriv, delta), axis=axis, mode="constant")
    halflen, n = window_length // 2, x.shape[axis]
    _fit_edge(x, 0, window_length, 0, halflen, axis, polyorder, deriv, delta, y)
    _fit_edge(x, n - window_length, n, n - halflen, n, axis, polyorder, deriv, delta, y)
    return y


def _fit_edge(x: np.ndarray, start: int, stop: int, fill_start: int, fill_stop: int, axis: int, polyorder: int,
              deriv: int, delta: float, y: np.ndarray) -> None:
    """y[fill_start:fill_stop] along `axis` from the polynomial fitted to x[start:stop] of each 1-D line."""
    swapped = axis not in (0, -x.ndim)
    cut = [slice(None)] * x.ndim
    cut[axis] = slice(start, stop)
    edge = x[tuple(cut)]
    edge = edge.swapaxes(axis, 0) if swapped else edge
    # all lines in one least-squares solve, in scipy's order (LAPACK's blocking over them decides the last bits)
    coeffs = _polyfit(np.arange(0, stop - start, dtype=x.dtype), edge.reshape(edge.shape[0], -1), polyorder)
    if deriv > 0:
        coeffs = _polyder(coeffs, deriv)
    at = np.arange(fill_start - start, fill_stop - start, dtype=coeffs.dtype).reshape(-1, 1)
    values = np.zeros_like(at)
    for row in coeffs:  # Horner, as scipy's polyval
        values = values * at + row
    values = values / (delta ** deriv)
    shape = list(y.shape)
    shape[0], shape[axis] = shape[axis], shape[0]
    values = values.reshape(fill_stop - fill_start, *shape[1:])
    cut[axis] = slice(fill_start, fill_stop)
    y[tuple(cut)] = values.swapaxes(0, axis) if swapped else values


def _polyfit(x: np.ndarray, y: np.ndarray, deg: int) -> np.ndarray:
    """scipy.signal's own polyfit (numpy's, full=False): least squares on the column-scaled Vandermonde matrix."""
    order = int(deg) + 1
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    rcond = x.shape[0] * np.finfo(x.dtype).eps
    lhs = x[:, None] ** np.flip(np.arange(order, dtype=x.dtype))[None, :]
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    lhs /= scale
    c = lstsq(lhs, y, cond=rcond)[0]
    return (c.T / scale).T


def _polyder(p: np.ndarray, m: int) -> np.ndarray:
    """The m-th derivative of the polynomials in the columns of p (highest power first)."""
    n = p.shape[0]
    if n <= m:
        return np.zeros_like(p[:1, ...])
    dp = np.array(p[:-m, ...], copy=True)
    for k in range(m):
        dp *= np.arange(n - k - 1, m - k - 1, -1, dtype=p.dtype).reshape((n - m,) + (1,) * (p.ndim - 1))
    return dp


def correlate_full(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """scipy.signal.correlate(a, b, mode="full", method="fft") of two real 1-D arrays: the convolution of a with b
    reversed, through real FFTs of the next fast length."""
    from scipy import fft

    size = len(a) + len(b) - 1
    n = fft.next_fast_len(size, True)
    out = fft.irfftn(fft.rfftn(a, [n], axes=[0]) * fft.rfftn(b[::-1], [n], axes=[0]), [n], axes=[0])
    return out[:size].copy()


def correlation_lags(n_a: int, n_b: int) -> np.ndarray:
    """scipy.signal.correlation_lags(n_a, n_b, mode="full"): the lag of each entry of :func:`correlate_full`."""
    return np.arange(-n_b + 1, n_a)
