"""Euclidean norms of short vectors along the last axis and medians ignoring NaN along the first, bit for bit as
numpy's np.linalg.norm and np.nanmedian, at a fraction of their cost on a swarm's arrays.

np.linalg.norm(x, axis=-1) reduces over a length-3 axis, which numpy does slowly (about 20x slower than
the arithmetic); adding the same squares in the same order gives the same floats at a fraction of the cost.
The pairwise geometry of large swarms (formation errors, separations) is dominated by these norms.
np.nanmedian(a, axis=0) of an array with NaN in it computes each column's median on its own, a Python call per
column (30,000 of them for the partner distances of a 5,000-vehicle show); one sort of the whole array does it.
"""

from __future__ import annotations

import numpy as np


def norm(x: np.ndarray) -> np.ndarray:
    """np.linalg.norm(x, axis=-1) for a last axis of a few components, identical to the last bit."""
    x = np.asarray(x, dtype=float)
    if not x.shape or x.shape[-1] == 0:
        return np.linalg.norm(x, axis=-1)
    s = x[..., 0] * x[..., 0]
    for k in range(1, x.shape[-1]):
        s += x[..., k] * x[..., k]
    return np.sqrt(s)


def nanmedian0(a: np.ndarray) -> np.ndarray:
    """np.nanmedian(a, axis=0), identical to the last bit (the mean of the two middle values of an even count), NaN
    for a column without a number, without the warning."""
    a = np.asarray(a, dtype=float)
    if not a.shape[0]:
        return np.full(a.shape[1:], np.nan)
    ordered = np.sort(a, axis=0)  # NaN sorts last
    n = np.count_nonzero(~np.isnan(a), axis=0)
    lo = np.take_along_axis(ordered, (np.maximum(n - 1, 0) // 2)[None], axis=0)[0]
    hi = np.take_along_axis(ordered, np.minimum(n // 2, len(a) - 1)[None], axis=0)[0]
    return np.where(n > 0, (lo + hi) / 2, np.nan)
