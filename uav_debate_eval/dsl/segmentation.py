"""Per-vehicle segmentation into straight / turn / climb / descent / hover pieces.

Change points come from sliding-window statistics of the smoothed kinematics
(metrics.kinematics): each grid sample is classified from the window centred on it
(`window_s`, default 2 s): hover if the mean speed < 0.3 m/s; climb / descent if the mean
vertical speed exceeds +/-0.5 m/s; turn if the heading changes faster than 8 deg/s across the
window; straight otherwise. Runs of one class are segments; runs shorter than `min_duration_s`
(default 2 s) are absorbed by their longer neighbour so that noise does not fragment the flight.
Straight segments are further split where the mean speed over the next window differs from the
previous window by more than max(0.5 m/s, 25 %) (a speed regime change), at least one window in
from either end so the ramp into a neighbouring segment is not mistaken for one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import uniform_filter1d

from uav_debate_eval.core.batches import equal_blocks
from uav_debate_eval.core.memo import memo, memo_hit, remember
from uav_debate_eval.metrics.kinematics import Kinematics, held_headings
from uav_debate_eval.metrics.vec import norm

HOVER_SPEED = 0.3
VERTICAL_SPEED = 0.5
TURN_RATE_DEG_S = 8.0
SPEED_CHANGE = (0.5, 0.25)  # absolute m/s, relative
KINDS = ("straight", "turn", "climb", "descent", "hover")
#: Vehicles whose samples are classified together (the stacked arrays of a block stay within the CPU cache).
VEHICLE_BLOCK = 32


@dataclass
class Segment:
    uav: str
    kind: str
    t_start: float
    t_end: float
    mean_speed: float  # m/s
    heading_deg: float  # course at the start, degrees from +x (ENU east) counter-clockwise, 0..360
    turn_deg: float  # signed heading change over the segment (deg, counter-clockwise positive)
    dz: float  # altitude change (m)
    length: float  # path length (m)

    @property
    def duration(self) -> float:
        return self.t_end - self.t_start


def _classify(k: Kinematics, window_s: float) -> np.ndarray:
    return _labels(k.speed, k.vz, k.hspeed, k.heading(), k.dt, window_s)


def _labels(speed: np.ndarray, vz: np.ndarray, hspeed: np.ndarray, h: np.ndarray, dt: float, window_s: float
            ) -> np.ndarray:
    """Each sample's class along the last axis (one vehicle, or a (vehicles, samples) stack on one grid: every
    filter and difference works along that axis alone, so a row gets exactly the labels of its vehicle alone)."""
    n = speed.shape[-1]
    w = max(1, int(round(window_s / dt))) if dt > 0 else 1
    mean_speed = uniform_filter1d(speed, w, axis=-1, mode="nearest")
    mean_vz = uniform_filter1d(vz, w, axis=-1, mode="nearest")
    half = w // 2
    idx = np.arange(n)
    hi, lo = np.minimum(idx + half, n - 1), np.maximum(idx - half, 0)
    span = np.maximum((hi - lo) * dt, dt)
    rate = np.degrees(np.abs(h[..., hi] - h[..., lo])) / span
    moving = uniform_filter1d(hspeed, w, axis=-1, mode="nearest") >= HOVER_SPEED
    labels = np.full(speed.shape, 0, dtype=int)  # straight
    labels[(rate > TURN_RATE_DEG_S) & moving] = 1
    labels[mean_vz > VERTICAL_SPEED] = 2
    labels[mean_vz < -VERTICAL_SPEED] = 3
    labels[mean_speed < HOVER_SPEED] = 4
    return labels


def _runs(labels: np.ndarray) -> list[list[int]]:
    brk = np.flatnonzero(np.diff(labels)) + 1
    starts = np.concatenate([[0], brk])
    ends = np.concatenate([brk, [len(labels)]])
    return [[int(labels[a]), int(a), int(b)] for a, b in zip(starts, ends, strict=True)]


def _absorb_short(runs: list[list[int]], min_n: int) -> list[list[int]]:
    """Merge runs shorter than min_n samples into their longer neighbour, shortest first."""
    runs = [r[:] for r in runs]
    while len(runs) > 1:
        lengths = [b - a for _, a, b in runs]
        i = int(np.argmin(lengths))
        if lengths[i] >= min_n:
            break
        if i == 0:
            j = 1
        elif i == len(runs) - 1:
            j = i - 1
        else:
            j = i - 1 if lengths[i - 1] >= lengths[i + 1] else i + 1
        lo, hi = min(i, j), max(i, j)
        runs[lo] = [runs[j][0], runs[lo][1], runs[hi][2]]
        del runs[hi]
        if lo > 0 and runs[lo - 1][0] == runs[lo][0]:
            runs[lo - 1][2] = runs[lo][2]
            del runs[lo]
        if lo + 1 < len(runs) and runs[lo + 1][0] == runs[lo][0]:
            runs[lo][2] = runs[lo + 1][2]
            del runs[lo + 1]
    return runs


def _split_speed(k: Kinematics, a: int, b: int, w: int, min_n: int) -> list[tuple[int, int]]:
    """Split a straight run where the mean speed of the next w samples differs from the previous w."""
    speed = k.speed[a:b]
    n = len(speed)
    if n < 4 * w or n < 2 * min_n:
        return [(a, b)]
    c = np.cumsum(np.concatenate([[0.0], speed]))
    idx = np.arange(2 * w, n - 2 * w + 1)  # a window in from both ends: the neighbours' ramps are not a change
    before = (c[idx] - c[idx - w]) / w
    after = (c[idx + w] - c[idx]) / w
    jump = np.abs(after - before)
    thr = np.maximum(SPEED_CHANGE[0], SPEED_CHANGE[1] * np.maximum(before, after))
    cand = idx[jump > thr]
    if not len(cand):
        return [(a, b)]
    best = int(idx[np.argmax(np.where(jump > thr, jump - thr, -np.inf))])
    if best < min_n or n - best < min_n:
        return [(a, b)]
    return _split_speed(k, a, a + best, w, min_n) + _split_speed(k, a + best, b, w, min_n)


def segment_vehicle(k: Kinematics, window_s: float = 2.0, min_duration_s: float = 2.0) -> list[Segment]:
    """Segments of one vehicle covering its whole time range, in time order.

    Cached on the kinematics (the events' slow turns and the DSL's SEG lines segment the same flight).
    """
    key = ("segments", window_s, min_duration_s)
    return list(memo(k, key, (), lambda: _segment_vehicle(k, window_s, min_duration_s)))


def segment_vehicles(kins: list[Kinematics], window_s: float = 2.0, min_duration_s: float = 2.0
                     ) -> list[list[Segment]]:
    """segment_vehicle of every vehicle; the per-sample work (classes, headings, steps) and the segments' numbers
    are computed once per group of vehicles on equally long grids of one step instead of once per vehicle (the
    same code as one vehicle alone, row by row)."""
    key = ("segments", window_s, min_duration_s)
    shapes = [(len(k.t), k.dt) if not memo_hit(k, key, ()) and len(k.t) >= 2 and k.dt > 0 else None for k in kins]
    for block in equal_blocks(shapes, VEHICLE_BLOCK):
        if len(block) < 2:  # one vehicle alone: segment_vehicle below
            continue
        group = [kins[i] for i in block]
        dt = group[0].dt
        vel = np.stack([k.vel for k in group])
        speed = np.stack([k.speed for k in group])
        hspeed = np.stack([k.hspeed for k in group])
        headings = held_headings(vel, hspeed)
        labels = _labels(speed, vel[..., 2], hspeed, headings, dt, window_s)
        pos = np.stack([k.pos for k in group])
        steps = norm(np.diff(pos, axis=1))
        for r, k in enumerate(group):
            k.__dict__.setdefault("_heading", headings[r])
        segs = _segments(group, labels, np.degrees(headings), steps, speed, pos[..., 2], window_s, min_duration_s)
        for k, own in zip(group, segs, strict=True):
            remember(k, key, (), own)
    return [segment_vehicle(k, window_s, min_duration_s) for k in kins]


def _segment_vehicle(k: Kinematics, window_s: float, min_duration_s: float) -> list[Segment]:
    n = len(k.t)
    if n < 2 or k.dt <= 0:
        return []
    return _segments([k], _classify(k, window_s)[None], np.degrees(k.heading())[None],
                     norm(np.diff(k.pos, axis=0))[None], k.speed[None], k.pos[None, :, 2], window_s,
                     min_duration_s)[0]


def _segments(group: list[Kinematics], labels: np.ndarray, h: np.ndarray, step: np.ndarray, speed: np.ndarray,
              z: np.ndarray, window_s: float, min_duration_s: float) -> list[list[Segment]]:
    """Each vehicle's segments from the (vehicles, samples) classes, headings in degrees, steps' lengths, speeds
    and altitudes of vehicles on equally long grids of one step: the pieces are cut vehicle by vehicle, their
    numbers computed for the whole group at once."""
    n, k0 = labels.shape[1], group[0]
    min_n = max(1, int(round(min_duration_s / k0.dt)))
    w = max(1, int(round(window_s / k0.dt)))
    rows, cols = np.nonzero(labels[:, 1:] != labels[:, :-1])
    first = np.searchsorted(rows, np.arange(len(group) + 1)).tolist()
    cuts = (cols + 1).tolist()
    starts_label = labels[:, 0].tolist()
    after_label = labels[rows, cols + 1].tolist()
    row_of, kind_of, start_of, end_of = [], [], [], []
    for r, k in enumerate(group):
        lo, hi = first[r], first[r + 1]
        bounds = [0, *cuts[lo:hi], n]
        kinds = [starts_label[r], *after_label[lo:hi]]
        runs = [[kinds[i], bounds[i], bounds[i + 1]] for i in range(len(kinds))]
        if len(runs) > 1 and min(b - a for _, a, b in runs) < min_n:
            runs = _absorb_short(runs, min_n)
        for label, a, b in runs:
            for p, q in _split_speed(k, a, b, w, min_n) if label == 0 else [(a, b)]:
                row_of.append(r)
                kind_of.append(label)
                start_of.append(p)
                end_of.append(q)
    rows, starts = np.array(row_of, dtype=np.intp), np.array(start_of, dtype=np.intp)
    ends = np.array(end_of, dtype=np.intp)
    last = np.minimum(ends, n - 1)
    t = np.stack([k.t for k in group])
    mean_speed = _slice_sums(speed, rows, starts, ends) / (ends - starts)
    length = _slice_sums(step, rows, starts, last)
    values = zip(rows.tolist(), kind_of, t[rows, starts].tolist(), t[rows, last].tolist(), mean_speed.tolist(),
                 h[rows, starts].tolist(), (h[rows, last] - h[rows, starts]).tolist(),
                 (z[rows, last] - z[rows, starts]).tolist(), length.tolist(), strict=True)
    out: list[list[Segment]] = [[] for _ in group]
    for row, label, t0, t1, v, head, turn, dz, dist in values:
        out[row].append(Segment(uav=group[row].uav_id, kind=KINDS[label], t_start=t0, t_end=t1, mean_speed=v,
                                heading_deg=float(round(head) % 360), turn_deg=turn, dz=dz, length=dist))
    return out


def _slice_sums(values: np.ndarray, rows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """values[row, start:end].sum() for each (row, start, end) of a 2-D array, 0 for an empty slice (one
    np.add.reduceat over the flattened rows)."""
    width = values.shape[1]
    flat = np.append(values.ravel(), 0.0)  # an end at the last row's end stays a valid index
    bounds = np.empty(2 * len(rows), dtype=np.intp)
    bounds[0::2] = rows * width + starts
    bounds[1::2] = rows * width + ends
    sums = np.add.reduceat(flat, bounds)[0::2] if len(rows) else np.zeros(0)
    return np.where(ends > starts, sums, 0.0)


