"""Runs of samples per key (a vehicle, a pair, a rule's column): the intervals a violation or a failing rule
is reported over. Shared by the safety checker and the mission rules (rules.check)."""

from __future__ import annotations

import numpy as np


def denoise(x: float) -> float:
    """Round grid arithmetic noise (3.9999999999 -> 4.0) out of reported times and values."""
    return round(float(x), 9)


def merge_runs(key: np.ndarray, t: np.ndarray, value: np.ndarray, gap: float, worst: str = "max"
               ) -> list[tuple[int, float, float, float, float, int]]:
    """Group (key, t, value) samples into runs per key where consecutive t differ by <= gap.

    Returns (key, t_start, t_end, worst value, t of worst, samples) per run, ordered by t_start.
    """
    if not len(t):
        return []
    order = np.lexsort((t, key))
    key, t, value = key[order], t[order], value[order]
    brk = np.flatnonzero((np.diff(key) != 0) | (np.diff(t) > gap)) + 1
    starts = np.concatenate([[0], brk])
    ends = np.concatenate([brk, [len(t)]])
    out = []
    for s, e in zip(starts, ends, strict=True):
        seg = value[s:e]
        w = int(np.argmax(seg) if worst == "max" else np.argmin(seg))
        out.append((int(key[s]), denoise(t[s]), denoise(t[e - 1]), denoise(seg[w]), denoise(t[s + w]), int(e - s)))
    out.sort(key=lambda r: (r[1], r[0]))
    return out
