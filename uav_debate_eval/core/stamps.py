"""Message stamps: seconds <-> integer nanoseconds, one way for every reader and writer, so the live flight's tape,
its annotated MCAP and its PX4 session bag give the same times to the last bit."""

from __future__ import annotations

import numpy as np


def stamp_ns(t: np.ndarray) -> np.ndarray:
    """Input-clock seconds as integer nanoseconds (a message stamp)."""
    return np.round(np.asarray(t, dtype=float) * 1e9).astype(np.int64)


def stamp_s(ns: np.ndarray) -> np.ndarray:
    """A message stamp in seconds, as the live pose input reads it (sec + nanosec * 1e-9)."""
    ns = np.asarray(ns, dtype=np.int64)
    return (ns // 1_000_000_000).astype(float) + (ns % 1_000_000_000) * 1e-9


def tape_seconds(ns: np.ndarray) -> np.ndarray:
    """The seconds the live flight's tape holds for messages stamped `ns`: read as live reads a stamp (sec + nanosec
    * 1e-9), taped as nanoseconds of that float and read back (live.tape). A bag of the session read this way gives
    the live flight's times to the last bit; `ns / 1e9` differed for a quarter of unix stamps, and a sample on a
    segment's edge then fell in another segment of the replay."""
    return stamp_s(stamp_ns(stamp_s(ns)))


#: Stamps further apart than STRAY_FACTOR times the flight's core span (its 1st to 99th percentile of stamps), and
#: at least STRAY_MIN_GAP_S, split a recording; a part beyond such a gap holding fewer than STRAY_SHARE of the rows
#: is stray stamps (a corrupted clock value: one flipped bit of a log's microsecond counter lands days off), not
#: data of the flight. A flight's own pauses (a second hop after minutes on the ground) are far shorter than ten
#: flights, and a vehicle that logs on after the others stopped keeps far more than 1% of the rows.
STRAY_FACTOR = 10.0
STRAY_MIN_GAP_S = 60.0
STRAY_SHARE = 0.01
#: The core span is taken on at most this many stamps (evenly strided): a threshold, not a result.
_CORE_SAMPLES = 100_000


def stray_stamps(t: np.ndarray) -> tuple[np.ndarray, float] | None:
    """(which of the finite stamps `t` are stray, the gap limit that split them off), or None when none are.
    A recording without an outlying stamp costs a min, a max and a subsample's percentiles; one with, a sort."""
    if len(t) < 2:
        return None
    span = float(t.max() - t.min())
    if span <= STRAY_MIN_GAP_S:
        return None
    lo, hi = np.percentile(t[::max(1, len(t) // _CORE_SAMPLES)], [1.0, 99.0])
    limit = max(STRAY_MIN_GAP_S, STRAY_FACTOR * float(hi - lo))
    if span <= limit:
        return None
    ordered = np.sort(t)
    cuts = np.flatnonzero(np.diff(ordered) > limit) + 1
    starts, ends = np.concatenate([[0], cuts]), np.concatenate([cuts, [len(t)]])
    sizes = ends - starts
    small = (sizes < STRAY_SHARE * len(t)) & (np.arange(len(sizes)) != sizes.argmax())  # the largest is the flight
    if not small.any():
        return None
    stray = np.zeros(len(t), dtype=bool)
    for a, b in zip(starts[small].tolist(), ends[small].tolist(), strict=True):
        stray |= (t >= ordered[a]) & (t <= ordered[b - 1])
    return stray, limit
