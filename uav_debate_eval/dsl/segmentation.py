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
    """segment_vehicle of every vehicle; the per-sample work (classes, headings, steps) is done once per group of
    vehicles on equally long grids of one step instead of once per vehicle (the same numbers, row by row)."""
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
        steps = norm(np.diff(np.stack([k.pos for k in group]), axis=1))
        degrees = np.degrees(headings)
        for r, k in enumerate(group):
            k.__dict__.setdefault("_heading", headings[r])
            segs = _segments(k, labels[r], degrees[r], steps[r], window_s, min_duration_s)
            remember(k, key, (), segs)
    return [segment_vehicle(k, window_s, min_duration_s) for k in kins]


def _segment_vehicle(k: Kinematics, window_s: float, min_duration_s: float) -> list[Segment]:
    n = len(k.t)
    if n < 2 or k.dt <= 0:
        return []
    return _segments(k, _classify(k, window_s), np.degrees(k.heading()), norm(np.diff(k.pos, axis=0)), window_s,
                     min_duration_s)


def _segments(k: Kinematics, labels: np.ndarray, h: np.ndarray, step: np.ndarray, window_s: float,
              min_duration_s: float) -> list[Segment]:
    """The segments from each sample's class, the heading in degrees and the length of each step."""
    n = len(k.t)
    min_n = max(1, int(round(min_duration_s / k.dt)))
    runs = _absorb_short(_runs(labels), min_n)
    w = max(1, int(round(window_s / k.dt)))
    out = []
    for label, a, b in runs:
        pieces = _split_speed(k, a, b, w, min_n) if label == 0 else [(a, b)]
        for p, q in pieces:
            last = min(q, n - 1)
            out.append(Segment(
                uav=k.uav_id, kind=KINDS[label], t_start=float(k.t[p]), t_end=float(k.t[last]),
                mean_speed=float(np.mean(k.speed[p:q])), heading_deg=float(round(float(h[p])) % 360),
                turn_deg=float(h[last] - h[p]), dz=float(k.pos[last, 2] - k.pos[p, 2]),
                length=float(step[p:last].sum()),
            ))
    return out
