"""np.interp for many vehicles sampled at the same stamps, in one pass instead of one call per vehicle and axis.

A swarm logged together (a simulator, a time-major CSV, a window of either) has identical stamps on every vehicle,
and the evaluation interpolates every vehicle's position and velocity onto common grids several times; one call of
np.interp per vehicle and component dominates that for large swarms. `interp_columns` computes what np.interp
computes for each column, with its arithmetic (numpy/_core/src/multiarray/compiled_base.c, arr_interp): below the
first stamp the first value, from the last stamp on the last value, the sample itself at a stamp, otherwise
slope * (x - xp[j]) + fp[j] with slope = (fp[j+1] - fp[j]) / (xp[j+1] - xp[j]), so the numbers are the same to the
last bit (test_core_interp.py checks it against np.interp). Non-finite samples go through np.interp itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Vehicles interpolated together (their (grid, vehicles, components) arrays stay within the CPU cache).
VEHICLE_BLOCK = 64


def interp_columns(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """np.interp(x, xp, fp[:, ...]) for every trailing index of fp (xp strictly increasing): shape (len(x), ...)."""
    n = len(xp)
    if n == 1 or not np.isfinite(fp).all():
        cols = fp.reshape(n, -1)
        out = np.column_stack([np.interp(x, xp, cols[:, k]) for k in range(cols.shape[1])]) if cols.shape[1] else (
            np.zeros((len(x), 0)))
        return out.reshape((len(x), *fp.shape[1:]))
    j = np.searchsorted(xp, x, side="right") - 1  # xp[j] <= x < xp[j + 1]; -1 below the first stamp
    inner = np.clip(j, 0, n - 2)
    shape = (len(x),) + (1,) * (fp.ndim - 1)
    slope = (fp[inner + 1] - fp[inner]) / (xp[inner + 1] - xp[inner]).reshape(shape)
    out = slope * (x - xp[inner]).reshape(shape) + fp[inner]
    at_sample = (j < 0) | (j >= n - 1) | (xp[inner] == x)
    if at_sample.any():
        k = np.where(j < 0, 0, np.minimum(j, n - 1))[at_sample]
        out[at_sample] = fp[k]
    return out


def same_stamps(stamps: Sequence[np.ndarray]) -> list[list[int]]:
    """Indexes of the arrays in `stamps`, grouped by equal contents (first occurrence order). A caller that
    interpolates the same stamps more than once computes this once and passes it on (`groups`)."""
    groups: list[list[int]] = []
    by_key: dict[tuple, list[int]] = {}
    for i, t in enumerate(stamps):
        key = (len(t), float(t[0]), float(t[-1])) if len(t) else (0,)
        for g in by_key.setdefault(key, []):
            if stamps[groups[g][0]] is t or np.array_equal(stamps[groups[g][0]], t):
                groups[g].append(i)
                break
        else:
            by_key[key].append(len(groups))
            groups.append([i])
    return groups


class SharedStamps:
    """One stamps array for the vehicles sampled at the same instants (a simulator, a time-major CSV, a motion-capture
    export): the same numbers, held once; what compares stamps (core.interp.same_stamps) then sees one array, and a
    window cuts it once for all of them."""

    def __init__(self) -> None:
        self.seen: dict[tuple, list[np.ndarray]] = {}

    def shared(self, t: np.ndarray) -> np.ndarray:
        """`t`, or the array with the same stamps given before."""
        if not len(t):
            return t
        same = self.seen.setdefault((len(t), float(t[0]), float(t[-1])), [])
        for earlier in same:
            if np.array_equal(earlier, t):
                earlier.setflags(write=False)  # a write meant for one vehicle would move every vehicle's stamps
                return earlier
        same.append(t)
        return t


def interp_vehicles(x: np.ndarray, stamps: Sequence[np.ndarray], values: Sequence[np.ndarray],
                    groups: list[list[int]] | None = None) -> np.ndarray:
    """(len(x), vehicles, k): np.interp(x, stamps[v], values[v][:, c]) for every vehicle v and component c;
    `groups`: same_stamps(stamps), when the caller has it."""
    k = values[0].shape[1] if values else 0
    out = np.empty((len(x), len(values), k))
    for group in same_stamps(stamps) if groups is None else groups:
        for a in range(0, len(group), VEHICLE_BLOCK):
            sel = group[a:a + VEHICLE_BLOCK]
            cols = slice(sel[0], sel[-1] + 1) if sel[-1] - sel[0] == len(sel) - 1 else sel  # usually a run
            out[:, cols] = interp_columns(x, stamps[sel[0]], np.stack([values[v] for v in sel], axis=1))
    return out


def interp_each(xs: Sequence[np.ndarray], stamps: Sequence[np.ndarray], values: Sequence[np.ndarray],
                groups: list[list[int]] | None = None) -> list[np.ndarray]:
    """Per vehicle v, (len(xs[v]), k): np.interp(xs[v], stamps[v], values[v][:, c]) for each component c; the
    vehicles with the same stamps and the same x in one pass (each result a C-contiguous array of its own);
    `groups`: same_stamps(stamps), when the caller has it."""
    out: list[np.ndarray] = [np.empty(0)] * len(values)
    for group in same_stamps(stamps) if groups is None else groups:
        for sub in same_stamps([xs[v] for v in group]):
            members = [group[i] for i in sub]
            for a in range(0, len(members), VEHICLE_BLOCK):
                sel = members[a:a + VEHICLE_BLOCK]
                res = interp_columns(xs[sel[0]], stamps[sel[0]], np.stack([values[v] for v in sel], axis=1))
                for r, v in enumerate(sel):
                    out[v] = np.ascontiguousarray(res[:, r])
    return out
