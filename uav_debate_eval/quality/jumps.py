"""Physically implausible positions: one-frame excursions (motion-capture swaps, estimator glitches) and steps.

A vehicle limited to `a_max` cannot leave its neighbours' path by more than about a_max (W dt)^2 / 2 within W
updates. A sample that does, and whose neighbours on both sides agree with each other (a rolling median
over 2W+1 updates), is an excursion that came back: a recording artefact. Its samples are left out of the
kinematics and of every check and reported as a `position_jump` finding. A step that stays (the position
moves and remains there) is never explained away: the median follows it, so it is not removed, and any
violation it causes stays, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from uav_debate_eval.core.batches import equal_blocks
from uav_debate_eval.metrics.vec import norm

#: Updates on each side of the rolling median; an excursion of up to this many updates can be recognised (the
#: median's sorting network, _MEDIAN7, is for this window).
WINDOW = 3
#: An excursion longer than this (s) is not a glitch.
MAX_EXCURSION_S = 0.25
#: Position noise floor (m) below which nothing is called a jump.
NOISE_FLOOR_M = 0.05
#: An implied speed this many times max_speed (or STEP_SPEED_MPS without one) between two updates is a step.
STEP_FACTOR = 5.0
STEP_SPEED_MPS = 30.0
#: A silence longer than this many sample periods is a dropout: the medians take no update across it.
DROPOUT_PERIODS = 5.0
#: Tracks filtered together at most (the stacked temporaries stay a few MB).
TRACK_BLOCK = 64


@dataclass
class Excursion:
    """Updates first..last (inclusive, indexes into the update arrays) left the path; back on it at t_end."""

    first: int
    last: int
    t_start: float
    t_end: float
    distance_m: float
    implied_mps: float


def excursions(t: np.ndarray, pos: np.ndarray, a_max: float) -> list[Excursion]:
    """Short excursions from the path that return, on distinct updates (t, pos)."""
    return excursions_of([(t, pos, a_max)])[0]


def excursions_of(tracks: Sequence[tuple[np.ndarray, np.ndarray, float]]) -> list[list[Excursion]]:
    """excursions(t, pos, a_max) of each track; the tracks with as many updates are filtered together, a (updates,
    tracks, 3) stack along its first axis only (one scipy call instead of three per track; each column's numbers
    are its track's alone)."""
    out: list[list[Excursion]] = [[] for _ in tracks]
    lengths = [len(t) if len(t) >= 2 * WINDOW + 1 else None for t, _, _ in tracks]
    for block in equal_blocks(lengths, TRACK_BLOCK):
        t = np.stack([tracks[i][0] for i in block], axis=1)
        pos = np.stack([tracks[i][1] for i in block], axis=1)
        dev = norm(pos - rolling_median(pos))
        steps = np.diff(t, axis=0)
        dts = np.median(steps, axis=0).tolist()
        for r in np.flatnonzero((steps > DROPOUT_PERIODS * np.array(dts)).any(axis=0)).tolist():
            _apart_at_dropouts(t[:, r], pos[:, r], dts[r], dev[:, r])
        noises = (6.0 * 1.4826 * np.median(dev, axis=0)).tolist()
        for r, i in enumerate(block):
            out[i] = _returning(t[:, r], pos[:, r], dev[:, r], dts[r], noises[r], tracks[i][2])
    return out


def _apart_at_dropouts(t: np.ndarray, pos: np.ndarray, dt: float, dev: np.ndarray) -> None:
    """`dev` of a track with dropouts (silences over DROPOUT_PERIODS sample periods) from medians of the updates on
    its own side of each (in place): a median across a dropout is no local path (a real fixed-wing flight's smooth
    turn through a 169-ms dropout strayed 7 cm from it, a 'glitch'), while a marker swap just after one is judged
    by the steady bound as anywhere else."""
    cuts = np.flatnonzero(np.diff(t) > DROPOUT_PERIODS * dt) + 1
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(t)], strict=True):
        part = pos[a:b, None, :]
        dev[a:b] = norm(part - rolling_median(part))[:, 0]


#: A median-of-7 sorting network (compare-exchange pairs; the median ends at index 3): 13 vectorised steps over the
#: whole stack, ~4x faster than scipy's rank filter, and the same numbers (a median is one of its inputs).
_MEDIAN7 = ((0, 5), (0, 3), (1, 6), (2, 4), (0, 1), (3, 5), (2, 6), (2, 3), (3, 6), (4, 5), (1, 4), (1, 3), (3, 4))


def rolling_median(x: np.ndarray) -> np.ndarray:
    """The median of the 2 WINDOW + 1 = 7 updates around each along the first axis, the ends padded with the edge
    value (scipy.ndimage.median_filter(x, 7, axes=(0,), mode="nearest"); the tests hold it to that)."""
    n = len(x)
    padded = np.concatenate([np.repeat(x[:1], WINDOW, axis=0), x, np.repeat(x[-1:], WINDOW, axis=0)])
    p = [padded[k:k + n].copy() for k in range(2 * WINDOW + 1)]
    spare = np.empty_like(p[0])
    for i, j in _MEDIAN7:
        np.minimum(p[i], p[j], out=spare)
        np.maximum(p[i], p[j], out=p[j])
        p[i], spare = spare, p[i]
    return p[3]


def _returning(t: np.ndarray, pos: np.ndarray, dev: np.ndarray, dt: float, noise: float, a_max: float
               ) -> list[Excursion]:
    """The runs of updates further than allowed from the rolling median (`dev`) that come back in time."""
    n = len(t)
    allowed = 0.5 * a_max * (WINDOW * dt) ** 2 + max(NOISE_FLOOR_M, noise)
    flagged = dev > allowed
    flagged[:1] = flagged[-1:] = False  # an excursion needs a neighbour on both sides to have come back
    if not flagged.any():
        return []
    out: list[Excursion] = []
    edges = np.diff(np.concatenate([[0], flagged.astype(np.int8), [0]]))
    for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1, strict=True):
        before, after = a - 1, b + 1
        if after >= n or t[after] - t[before] > MAX_EXCURSION_S + 2 * dt:
            continue
        dist = float(dev[a:b + 1].max())
        step = np.linalg.norm(pos[a] - pos[before]) / max(float(t[a] - t[before]), 1e-6)
        out.append(Excursion(int(a), int(b), float(t[a]), float(t[after]), dist, float(step)))
    return out


def steps(t: np.ndarray, pos: np.ndarray, max_speed: float | None) -> list[tuple[int, float, float]]:
    """Updates i where the position jumped from update i-1 faster than a vehicle can fly: (i, metres, seconds)."""
    if len(t) < 2:
        return []
    limit = STEP_FACTOR * max_speed if max_speed else STEP_SPEED_MPS
    dt = np.diff(t)
    dist = np.linalg.norm(np.diff(pos, axis=0), axis=1)
    fast = np.flatnonzero(dist / np.where(dt > 0, dt, np.inf) > limit)
    return [(int(i + 1), float(dist[i]), float(dt[i])) for i in fast]
