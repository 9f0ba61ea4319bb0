"""Kinematics that respect how a source records: republished estimates, receive-time stamps, measured velocity.

A MAVROS or PX4 bridge republishes its latest estimate at the message rate (e.g. 38 Hz) while the estimator
updates it more slowly (e.g. 10 Hz); a recorder without header stamps gives receive times with a few ms of
jitter; a motion-capture client that stamps on delivery (VRPN's ROS client) gives stamps in bursts, two poses
tens of microseconds apart on a 10 ms period. Differentiating every message then divides a whole update's
displacement by a few ms of jitter, which is how a 9 m/s flight reads as 50 m/s (and a slow Crazyflie as 394 m/s).
Here velocity comes from the distinct updates only (the last pose of each burst), as a central difference over a
baseline of at least one update period, so jitter, bursts and repeats cannot fake speed, while any motion that
lasts longer than the baseline keeps its true speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from uav_debate_eval.core.records import Finding
from uav_debate_eval.core.track import MAX_SPEED_MPS, Track

#: A track republishes when at least this share of its samples repeat the previous position exactly.
REPEAT_MIN_FRACTION = 0.2
#: A run of identical positions up to this long (s) is a republished estimate; longer is a vehicle at rest.
REPEAT_RUN_S = 0.5
#: Velocity baselines are at least this long (s) on receive-time stamps.
MIN_BASELINE_S = 0.1
#: Receive-time jitter (p95 deviation of the update interval) worth a finding, as a share of the interval.
JITTER_FRACTION = 0.1
#: An interval under this share of the median is a burst (two samples delivered, and stamped, at once); a track
#: stamps in bursts when at least BURST_MIN_FRACTION of its intervals are.
BURST_FRACTION = 0.25
BURST_MIN_FRACTION = 0.02
#: Measured and position-derived velocity disagree when they differ by more than this (m/s) and this share.
MISMATCH_MPS = 1.0
MISMATCH_FRACTION = 0.3
MISMATCH_MIN_S = 1.0


@dataclass
class Updates:
    """The distinct updates of a track: `index` into its samples, and the rates that describe the stream."""

    index: np.ndarray
    message_hz: float
    update_hz: float
    repeated_fraction: float
    burst_fraction: float = 0.0  # the share of intervals that are bursts (the later sample of each is kept)

    @property
    def republished(self) -> bool:
        return self.repeated_fraction >= REPEAT_MIN_FRACTION

    @property
    def bursty(self) -> bool:
        return self.burst_fraction >= BURST_MIN_FRACTION


def distinct_updates(track: Track) -> Updates:
    """Samples that carry a new position; a still vehicle's last repeat is kept too, so a stop stays a stop.

    Only short runs of repeats (up to REPEAT_RUN_S) count as republishing: a vehicle parked without noise
    repeats its position for seconds, which is no artefact.
    """
    n = len(track)
    span = float(track.t[-1] - track.t[0]) if n > 1 else 0.0
    message_hz = (n - 1) / span if span > 0 else 0.0
    if n < 3:
        return Updates(np.arange(n), message_hz, message_hz, 0.0)
    changed = np.concatenate([[True], (np.diff(track.pos, axis=0) != 0).any(axis=1)])
    first = np.flatnonzero(changed)
    last = np.concatenate([first[1:] - 1, [n - 1]])
    run = track.t[last] - track.t[first]
    short = (last > first) & (run <= REPEAT_RUN_S)
    repeated = float((last - first)[short].sum()) / n
    if len(first) < 3 or repeated < REPEAT_MIN_FRACTION:
        return _without_bursts(track, Updates(np.arange(n), message_hz, message_hz, repeated))
    index = np.union1d(first, last[~short & (last > first)])
    return _without_bursts(track, Updates(index, message_hz, (len(first) - 1) / span, repeated))


def burst_free(t: np.ndarray, isolated: bool = False) -> tuple[np.ndarray | None, float]:
    """(which samples to keep: all but the earlier of each burst, the share of intervals that are bursts), or
    (None, share) when the stamps do not come in bursts (checked on the mean interval first: cheap); `isolated`:
    the bursts of a track with too few of them to be stamped in bursts (None when it has none or is). A burst's
    stamps are delivery times: the later sample is the newest measurement."""
    if len(t) < 4:
        return None, 0.0
    dt = np.diff(t)
    if dt.min() >= BURST_FRACTION * (t[-1] - t[0]) / len(dt):
        return None, 0.0
    burst = dt < BURST_FRACTION * float(np.median(dt))
    fraction = float(burst.mean())
    if (fraction < BURST_MIN_FRACTION) != isolated or not burst.any():
        return None, fraction
    return np.concatenate([~burst, [True]]), fraction


def _without_bursts(track: Track, upd: Updates) -> Updates:
    """The updates but the earlier sample of each burst, when the track stamps in bursts; unchanged otherwise."""
    keep, fraction = burst_free(track.t if len(upd.index) == len(track) else track.t[upd.index])
    if keep is None:
        return upd
    index = upd.index[keep]
    span = float(track.t[index[-1]] - track.t[index[0]])
    return Updates(index, upd.message_hz, (len(index) - 1) / span if span > 0 else upd.update_hz,
                   upd.repeated_fraction, fraction)


def baseline_velocity(t: np.ndarray, pos: np.ndarray, at: np.ndarray, baseline: float) -> np.ndarray:
    """Velocity at times `at` as (p(t + b/2) - p(t - b/2)) / b on the linear interpolant of (t, pos)."""
    lo = np.clip(at - baseline / 2, t[0], t[-1])
    hi = np.clip(at + baseline / 2, t[0], t[-1])
    span = np.where(hi - lo > 0, hi - lo, np.inf)
    return np.column_stack([(np.interp(hi, t, pos[:, k]) - np.interp(lo, t, pos[:, k])) / span for k in range(3)])


def jitter(track: Track, updates: Updates) -> float:
    """p95 deviation (s) of the intervals between distinct updates from their median."""
    dt = np.diff(track.t[updates.index])
    if len(dt) < 3:
        return 0.0
    return float(np.percentile(np.abs(dt - np.median(dt)), 95))


def source_velocity(track: Track, upd: Updates, a_max: float) -> tuple[np.ndarray, list[Finding]]:
    """The velocity the checks should use for this track, and what the recording did (findings).

    `upd` are the track's distinct updates. Measured velocity (vel_derived False) is kept but for one-sample
    spikes the vehicle cannot fly (beyond `a_max` m/s^2 into the sample and out of it, the positions not moving
    with it); a derived one is recomputed from distinct updates over a baseline when the stream republishes or is
    stamped on receipt. Tracks recorded cleanly keep their velocity.
    """
    findings: list[Finding] = []
    t0, t1 = float(track.t[0]), float(track.t[-1])
    u = track.uav_id
    if not track.vel_derived:
        track, findings = _without_velocity_spikes(track, a_max)
    if upd.republished:
        findings.append(Finding(
            "repeated_samples", [u], t0, t1,
            f"{u}: estimate republished unchanged between updates: {upd.message_hz:.0f} Hz messages carry "
            f"{upd.update_hz:.1f} Hz updates ({upd.repeated_fraction:.0%} repeats); kinematics from the updates only",
            ["max_speed", "max_vertical_speed"],
            {"message_hz": float(upd.message_hz), "update_hz": float(upd.update_hz),
             "repeated_fraction": float(upd.repeated_fraction)}))
    jit = jitter(track, upd) if track.receive_time else 0.0
    interval = 1.0 / upd.update_hz if upd.update_hz > 0 else 0.0
    if upd.bursty:
        findings.append(Finding(
            "timing_jitter", [u], t0, t1,
            f"{u}: its stamps come in bursts: {upd.burst_fraction:.0%} of its samples within "
            f"{BURST_FRACTION * interval * 1000:.1f} ms of the one before, on a {interval * 1000:.0f} ms period "
            "(stamped on delivery, as a motion-capture client does); kinematics from the last sample of each burst, "
            f"velocity taken over at least {MIN_BASELINE_S:g} s",
            ["max_speed", "max_vertical_speed"], {"burst_fraction": upd.burst_fraction, "interval_s": interval}))
    if track.receive_time and interval and jit > JITTER_FRACTION * interval:
        findings.append(Finding(
            "timing_jitter", [u], t0, t1,
            f"{u}: no header stamps; receive times jitter by {jit * 1000:.0f} ms (p95) on a "
            f"{interval * 1000:.0f} ms update interval; velocity taken over at least {MIN_BASELINE_S:g} s",
            ["max_speed", "max_vertical_speed"], {"jitter_s": float(jit), "interval_s": float(interval)}))
    on_receipt = track.receive_time or upd.bursty
    if not (upd.republished or on_receipt) or len(upd.index) < 2:
        if not track.vel_derived:
            return track.vel, findings
        vel, found = _across_isolated_bursts(track)
        return vel, findings + found
    baseline = max(2.0 * interval, MIN_BASELINE_S if on_receipt else 0.0)
    derived = baseline_velocity(track.t[upd.index], track.pos[upd.index], track.t, baseline)
    if track.vel_derived:
        return derived, findings
    mismatch = _mismatch_spans(track.t, track.vel, derived)
    vel = track.vel.copy()
    for a, b in mismatch:
        span = (track.t >= a) & (track.t <= b)
        faster = np.linalg.norm(derived[span], axis=1) > np.linalg.norm(vel[span], axis=1)
        vel[np.flatnonzero(span)[faster]] = derived[span][faster]
        findings.append(Finding(
            "velocity_mismatch", [u], a, b,
            f"{u}: recorded velocity disagrees with the positions over {b - a:.1f} s; the speed checks use the "
            "faster of the two there", ["max_speed", "max_vertical_speed"]))
    return vel, findings


def _across_isolated_bursts(track: Track) -> tuple[np.ndarray, list[Finding]]:
    """A track stamped in bursts only here and there (too few to be stamped in bursts): the velocity of the two
    samples of each burst over a baseline of two intervals, without the earlier one (a 10-mm step over 1.3 ms
    between two motion-capture stamps read as 7.4 m/s on a real 0.9-m/s descent)."""
    keep, _ = burst_free(track.t, isolated=True)
    if keep is None:
        return track.vel, []
    t, u = track.t, track.uav_id
    first = np.flatnonzero(~keep)  # the earlier sample of each burst; the later one is its neighbour
    near = np.union1d(first, first + 1)
    interval = float(np.median(np.diff(t)))
    vel = track.vel.copy()
    vel[near] = baseline_velocity(t[keep], track.pos[keep], t[near], 2.0 * interval)
    return vel, [Finding(
        "timing_jitter", [u], float(t[first[0]]), float(t[first[-1] + 1]),
        f"{u}: {len(first)} pair(s) of its stamps lie within {BURST_FRACTION * interval * 1000:.1f} ms on a "
        f"{interval * 1000:.0f} ms period (first at {t[first[0]]:.3f} s); the velocity there is taken over "
        f"{2.0 * interval * 1000:.0f} ms, not over the pair", ["max_speed", "max_vertical_speed"],
        {"pairs": len(first), "interval_s": interval})]


def _without_velocity_spikes(track: Track, a_max: float) -> tuple[Track, list[Finding]]:
    """The track with each measured-velocity spike replaced by its positions' central difference, and a finding
    each. A spike: one sample whose velocity differs from both neighbours' by more than `a_max` times the time
    between them (and MISMATCH_MPS), that its positions do not show (differing from their central difference by
    MISMATCH_MPS and MISMATCH_FRACTION: `_disagree`, as a velocity mismatch). A flipped bit of a logged float reads as
    1e15 m/s; a speed the vehicle reaches and leaves within one sample is no speed it flew."""
    t, pos = track.t, track.pos
    if len(t) < 3:
        return track, []
    vel = np.clip(track.vel, -MAX_SPEED_MPS, MAX_SPEED_MPS)  # 1e308 (a flipped bit): its square would overflow
    step = np.linalg.norm(np.diff(vel, axis=0), axis=1)
    bound = np.maximum(a_max * np.diff(t), MISMATCH_MPS)
    jump = step > bound
    candidates = np.flatnonzero(jump[:-1] & jump[1:]) + 1
    if not len(candidates):
        return track, []
    dt = t[candidates + 1] - t[candidates - 1]
    derived = (pos[candidates + 1] - pos[candidates - 1]) / np.where(dt > 0, dt, np.inf)[:, None]
    spike = _disagree(vel[candidates], derived)
    if not spike.any():
        return track, []
    fixed = track.vel.copy()
    fixed[candidates[spike]] = derived[spike]
    u = track.uav_id

    def speed(i: int) -> float:  # as recorded (math.hypot: no overflow at 1e308)
        return math.hypot(*track.vel[i].tolist())

    found = [Finding(
        "velocity_spike", [u], float(t[i]), float(t[i]),
        f"{u}'s recorded velocity read {speed(i):.4g} m/s for one sample at {t[i]:.2f} s, between "
        f"{speed(i - 1):.1f} and {speed(i + 1):.1f} m/s (beyond {a_max:g} m/s^2 into it and out of it), while its "
        f"positions moved at {float(np.linalg.norm(d)):.1f} m/s: a recording artefact; the speed checks there use "
        "the positions", ["max_speed", "max_vertical_speed"], {"recorded_mps": speed(i)})
        for i, d in zip(candidates[spike].tolist(), derived[spike], strict=True)]
    return track.select(slice(None), vel=fixed), found


def _disagree(measured: np.ndarray, derived: np.ndarray) -> np.ndarray:
    """Rows where a measured velocity and the positions' differ by more than MISMATCH_MPS and MISMATCH_FRACTION."""
    diff = np.linalg.norm(measured - derived, axis=1)
    scale = np.maximum(np.linalg.norm(measured, axis=1), np.linalg.norm(derived, axis=1))
    return (diff > MISMATCH_MPS) & (diff > MISMATCH_FRACTION * scale)


def _mismatch_spans(t: np.ndarray, measured: np.ndarray, derived: np.ndarray) -> list[tuple[float, float]]:
    return [(a, b) for a, b in true_spans(t, _disagree(measured, derived)) if b - a >= MISMATCH_MIN_S]


def true_spans(t: np.ndarray, mask: np.ndarray) -> list[tuple[float, float]]:
    """(t_start, t_end) of each run of True in mask."""
    if not mask.any():
        return []
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [(float(t[a]), float(t[b])) for a, b in zip(starts, ends, strict=True)]
