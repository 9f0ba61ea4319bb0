"""Message stamps: seconds <-> integer nanoseconds, one way for every reader and writer, so the live flight's tape,
its annotated MCAP and its PX4 session bag give the same times to the last bit."""

from __future__ import annotations

from typing import NamedTuple

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


#: A vehicle's stamps going back by more than RESTART_S in recording order, and staying back for RESTART_ROWS of its
#: rows, restart the recording's clock (a simulation reset, a looping bag recorded, two runs appended to one file):
#: the threshold `live` resets on (StreamingSwarm.clock_jump_s). Fewer rows back are out-of-order rows, sorted.
RESTART_S = 1.0
RESTART_ROWS = 5
#: Rows of another vehicle going on on its old clock that make it a vote for "the vehicle whose clock went back
#: restarted it alone" (two such votes, the one other in a pair): its last row of a bag's run, delivered after the
#: first row of the next run of another vehicle's topic, is one; a vehicle flying on delivers its next.
ON_OLD_CLOCK_ROWS = 2
#: Rows in any order are no recording order: a vehicle whose stamps step back more often than this share of its rows
#: (a shuffled or re-sorted table: about half), and more than 3 times, restarts nothing; a recording steps back once
#: per restart.
RESTART_DISORDER = 0.01


def clock_restarts(t: np.ndarray, bounds: np.ndarray) -> np.ndarray | None:
    """Which rows come before their vehicle's last clock restart, or None when no vehicle's clock restarted.
    `t` holds each vehicle's stamps in recording order, vehicle k at t[bounds[k]:bounds[k + 1]]."""
    earlier = None
    for k in range(len(bounds) - 1):
        lo, hi = int(bounds[k]), int(bounds[k + 1])
        cut = lo
        while (start := _last_restart(t[cut:hi])) is not None:
            cut += start
        if cut > lo:
            if earlier is None:
                earlier = np.zeros(len(t), dtype=bool)
            earlier[lo:cut] = True
    return earlier


def _last_restart(tv: np.ndarray) -> int | None:
    """The row of `tv` (one vehicle's stamps in recording order) that starts its last new run: RESTART_ROWS or more
    rows stamped RESTART_S behind every earlier row, after RESTART_ROWS or more rows stamped past it (one sample
    stamped ahead, then the flight going on, is a stray, not a run), or None."""
    steps = np.diff(tv)
    disorder = (steps < 0).sum() > max(3, RESTART_DISORDER * len(tv))
    if len(tv) <= RESTART_ROWS or not (steps < -RESTART_S).any() or disorder:
        return None
    back = np.concatenate([[False], tv[1:] < np.maximum.accumulate(tv)[:-1] - RESTART_S])
    edges = np.flatnonzero(np.diff(back.astype(np.int8)))  # a run of rows behind: (start - 1, end - 1)
    starts, ends = edges[::2] + 1, np.append(edges[1::2] + 1, len(tv))[: len(edges[::2])]
    for start in starts[ends - starts >= RESTART_ROWS][::-1].tolist():
        if (tv[:start] > tv[start] + RESTART_S).sum() >= RESTART_ROWS:
            return int(start)
    return None


def restarts_alone(t: np.ndarray, rows: np.ndarray, bounds: np.ndarray, earlier: np.ndarray
                   ) -> tuple[np.ndarray, list[tuple[float, float]]] | None:
    """Of the vehicles whose clock restarted (`earlier`: clock_restarts' rows), those whose clock restarted alone,
    as `live` tells them (core.streaming): after the restart (`rows`: each row's place in the recording), other
    vehicles went on on their old clocks for ON_OLD_CLOCK_ROWS rows each before any of them went back too. Their rows
    from the restart on stamped no later than their newest before it cannot be placed on the flight's clock:
    returned as a mask with each such vehicle's (newest stamp before, first stamp after) its restart (None: none),
    and their rows are taken out of `earlier` (the run kept is the one the others fly on)."""
    restarted = [k for k in range(len(bounds) - 1) if earlier[bounds[k]:bounds[k + 1]].any()]
    if not restarted:
        return None
    behind = _behind_own_clock(t, bounds)
    recording = _Recording.of(t, rows, bounds, behind)
    back, where = None, []
    for k in restarted:
        lo, hi = int(bounds[k]), int(bounds[k + 1])
        first = 1 + int(np.argmax(behind[lo + 1:hi]))
        if not _others_flew_on(recording, k, lo + first):
            continue
        tv = t[lo:hi]
        newest = float(tv[:first].max())
        if back is None:
            back = np.zeros(len(t), dtype=bool)
        back[lo + first:hi] = tv[first:] <= newest
        earlier[lo:hi] = False
        where.append((newest, float(tv[first])))
    return None if back is None else (back, where)


def _behind_own_clock(t: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Rows stamped more than RESTART_S behind an earlier row of their vehicle (recording order)."""
    behind = np.zeros(len(t), dtype=bool)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if hi - lo > 1:
            behind[lo + 1:hi] = t[lo + 1:hi] < np.maximum.accumulate(t[lo:hi - 1]) - RESTART_S
    return behind


class _Recording(NamedTuple):
    """Each vehicle's stamps in recording order (vehicle k at t[bounds[k]:bounds[k + 1]]), each row's place in the
    recording (`rows`, below `span`), the places in t of the rows behind their vehicle's own clock, and each row's
    (vehicle, place in the recording) as one sorted key."""

    t: np.ndarray
    rows: np.ndarray
    bounds: np.ndarray
    span: int
    behind: np.ndarray
    keys: np.ndarray

    @classmethod
    def of(cls, t: np.ndarray, rows: np.ndarray, bounds: np.ndarray, behind: np.ndarray) -> _Recording:
        span = int(rows.max()) + 1
        keys = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds)) * span + rows
        return cls(t, rows, bounds, span, np.flatnonzero(behind), keys)

    def next_rows(self, row: int) -> np.ndarray:
        """Each vehicle's first place in t after recording row `row` (its end when none)."""
        return np.searchsorted(self.keys, np.arange(len(self.bounds) - 1) * self.span + row)


def _others_flew_on(rec: _Recording, k: int, at: int) -> bool:
    """Whether, after vehicle k's clock went back at `at` (its place in t), min(2, the other vehicles seen before)
    other vehicles delivered ON_OLD_CLOCK_ROWS rows each on their old clock before any other went back too, and
    before k's own new clock went on RESTART_S (the others quiet: a new run), as `live` decides it."""
    t, rows, lo, hi, last = rec.t, rec.rows, rec.bounds[:-1], rec.bounds[1:], len(rec.t) - 1
    others = np.arange(len(lo)) != k
    nxt = rec.next_rows(int(rows[at]))
    quorum = min(2, int((others & (nxt > lo)).sum()))
    if quorum == 0:
        return False  # no other vehicle to ask: a new run
    ends = np.flatnonzero(t[at + 1:hi[k]] > t[at] + RESTART_S)
    decide_by = int(rows[at + 1 + ends[0]]) if len(ends) else rec.span
    behind = rec.behind
    first_back = behind[np.minimum(np.searchsorted(behind, nxt), len(behind) - 1)] if len(behind) else nxt
    back_row = np.where(others & (first_back >= nxt) & (first_back < hi), rows[np.minimum(first_back, last)],
                        rec.span)
    vote_at = nxt + ON_OLD_CLOCK_ROWS - 1
    vote_row = np.where(others & (vote_at < hi), rows[np.minimum(vote_at, last)], rec.span)
    vote_row = np.where(vote_row < back_row, vote_row, rec.span)  # a vehicle going back first casts no vote
    return bool(np.sort(vote_row)[quorum - 1] < min(int(back_row.min()), decide_by))


def _steps_back(t: np.ndarray, bounds: np.ndarray) -> list[tuple[int, int]]:
    """(row, its vehicle) of each row stamped more than RESTART_S before the row before it, in recording order
    (vehicle k at t[bounds[k]:bounds[k + 1]]), in vehicles whose rows keep a recording order (RESTART_DISORDER)."""
    steps = np.diff(t)
    starts = np.zeros(len(t), dtype=bool)
    starts[bounds[:-1][bounds[:-1] < len(t)]] = True
    back = np.flatnonzero(steps < -RESTART_S) + 1
    back = back[~starts[back]]
    if not len(back):
        return []
    # each vehicle's steps back, counted once (a shuffled table has one per other row: a count per row was quadratic)
    behind = np.concatenate([[0], np.cumsum(steps < 0)])
    lo, hi = bounds[:-1], bounds[1:]
    ordered = behind[np.maximum(hi - 1, lo)] - behind[lo] <= np.maximum(3, RESTART_DISORDER * (hi - lo))
    vehicle = np.searchsorted(bounds, back, side="right") - 1
    keep = ordered[vehicle]
    return list(zip(back[keep].tolist(), vehicle[keep].tolist(), strict=True))


def ahead_strays(t: np.ndarray, bounds: np.ndarray) -> np.ndarray | None:
    """Rows stamped ahead of their vehicle's clock, which then goes on where it was (recording order; vehicle k at
    t[bounds[k]:bounds[k + 1]]): fewer than RESTART_ROWS rows more than RESTART_S past the row before them, whose
    vehicle's next row is stamped no earlier than that row. A time-sync glitch or a flipped bit: `live` holds such
    a pose and drops it as stray_stamp (core.streaming); sorted in, it took the place of the real sample at its
    stamp. A mask (None: none); vehicles whose rows are in no recording order (RESTART_DISORDER) have none."""
    stray = None
    for b, k in _steps_back(t, bounds):
        lo_k = int(bounds[k])
        a = b
        while a > lo_k and b - a < RESTART_ROWS and t[a - 1] > t[b] + RESTART_S:
            a -= 1
        if a in (lo_k, b) or b - a >= RESTART_ROWS or t[a - 1] > t[b]:
            continue  # no row before the run, a longer run (a restart: clock_restarts), or no return to its clock
        if stray is None:
            stray = np.zeros(len(t), dtype=bool)
        stray[a:b] = True
    return stray


def behind_strays(t: np.ndarray, bounds: np.ndarray) -> np.ndarray | None:
    """Rows stamped behind their vehicle's clock, before anything it recorded, which then goes on where it was
    (recording order, as for ahead_strays): fewer than RESTART_ROWS rows more than RESTART_S before every earlier row
    of their vehicle, after which its rows are stamped at the clock's time again. A corrupted stamp (a real
    ArduCopter SITL log: one XKF1 at 0.06 s among rows at 125 s, its first at 89.6 s); sorted in, it became the
    flight's start, 89.5 s early. A row stamped back within the vehicle's span is a late delivery: sorted, counted.
    A mask (None: none); vehicles whose rows are in no recording order have none."""
    stray = None
    for b, k in _steps_back(t, bounds):
        start, end = int(bounds[k]), int(bounds[k + 1])
        earliest = t[start:b].min()
        c = b
        while c < end and c - b < RESTART_ROWS and t[c] < earliest - RESTART_S:
            c += 1
        if c in (b, end) or c - b >= RESTART_ROWS or t[c] < t[b - 1] - RESTART_S:
            continue  # within its span, the recording ending behind, a longer run (a restart) or no return
        if stray is None:
            stray = np.zeros(len(t), dtype=bool)
        stray[b:c] = True
    return stray
