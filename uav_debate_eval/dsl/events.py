"""Event detection: the noteworthy moments the DSL prints and the debate cites (CONTRACT.md §3).

All per-vehicle events use the smoothed kinematics (metrics.kinematics), pairwise ones the
common grid of metrics.swarm, so sensor noise does not create events:

- sharp_turn: the angle between the mean horizontal velocity over [t-1.5 s, t-0.25 s] and over
  [t+0.25 s, t+1.5 s] exceeds mission.thresholds.sharp_turn_deg (a course change within a 3 s
  window; both means >= 0.5 m/s, so hover noise has no course); each contiguous run of such
  samples is ONE turn, reported at the sample of the largest angle (the corner) with value = the
  course change from 1.5 s before the run to 1.5 s after it (deg). Vehicles turning together
  (same direction, corners within 2 s) are one event listing all of them (a swarm corner), with
  t = the median corner time and value = the mean course change. Slow arcs whose segment (dsl.segmentation)
  turns by more than the threshold within 10 s are reported too (heading change across segment
  boundaries).
- altitude_rate: |vz| > mission.thresholds.altitude_rate_mps for >= 0.2 s; value = peak |vz| (m/s). Vehicles
  climbing (or descending) together, starts within 2 s, are one event listing all of them (a show's climb), from
  the first start to the last end, value = the highest peak.
- proximity: a pair closer than mission.thresholds.proximity(constraints); value = closest
  distance (m), extra.t_min = when.
- formation_breach: a vehicle's formation error (metrics.swarm.formation_error) above
  mission.formation_tolerance_m for >= 0.5 s, only when the mission gives formation offsets or
  is of type "formation"; value = worst error (m).
- link_loss: link_ok == 0 runs; value = duration (s).
- data_gap: ingest gaps (value = duration, s) and vehicles that fell silent before the end.
- violation:<constraint>: one per hard-constraint violation of the SafetyResult; value = worst value.
- what the autopilot logged (`ingest.log_events`, ArduPilot logs): flight_mode, failsafe, autopilot_error (t_end:
  when resolved), autopilot_event, mission_command; extra.label is what the DSL prints (mode=RTL reason=...).
Ids EVENT[k] (k from 1) follow the order (t, type, vehicles), so the same input gives the same ids.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from uav_debate_eval.core.batches import equal_blocks
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.records import Event
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.dsl.segmentation import segment_vehicle, segment_vehicles
from uav_debate_eval.metrics.kinematics import Kinematics, runs, smooth_tracks
from uav_debate_eval.metrics.swarm import (
    adopt_checker_pairs,
    breach_intervals,
    close_approaches,
    formation_error,
    snapshots,
)
from uav_debate_eval.metrics.vec import norm

TURN_WINDOW_S = 3.0
TURN_GAP_S = 0.25
TURN_MIN_SPEED = 0.5
SLOW_TURN_MAX_S = 10.0
SWARM_TURN_S = 2.0
ALT_RATE_MIN_S = 0.2
#: What an autopilot logs in the course of a flight (arming, mode changes, mission items): printed, not counted as
#: safety events.
ROUTINE_LOG_EVENTS = ("autopilot_event", "mission_command", "flight_mode")
UNITS = {"min_separation": "m", "max_speed": "m/s", "max_vertical_speed": "m/s", "geofence": "m", "stale_data": "s",
         "attitude_control": "deg"}


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


def sharp_turns(k: Kinematics, threshold_deg: float) -> list[Event]:
    signal = _turn_signal(k.vel, k.dt)
    return [] if signal is None else _turns(k, *signal, threshold_deg)


def sharp_turns_all(kins: list[Kinematics], threshold_deg: float) -> list[list[Event]]:
    """sharp_turns of every vehicle; the turn angles of vehicles on equally long grids of one step are computed
    together (every difference and sum runs along each vehicle's own samples: the same numbers)."""
    out: list[list[Event]] = [[] for _ in kins]
    for block in equal_blocks([(len(k.t), k.dt) for k in kins], 64):
        signal = _turn_signal(np.stack([kins[i].vel for i in block]), kins[block[0]].dt)
        if signal is None:
            continue
        angle, moving, half = signal
        for r, i in enumerate(block):
            out[i] = _turns(kins[i], angle[r], moving[r], half, threshold_deg)
    return out


def _turn_signal(vel: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(course change angle per sample in degrees, both means fast enough, half window) along the samples axis of
    (..., samples, 3) velocities; None when no sample has both a "before" and an "after"."""
    n = vel.shape[-2]
    if n < 3 or dt <= 0:
        return None
    half = max(2, int(round(TURN_WINDOW_S / 2 / dt)))
    if n <= 2 * half:
        return None  # shorter than one turn window: no sample has both a "before" and an "after"
    gap = min(half - 1, int(round(TURN_GAP_S / dt)))
    c = np.concatenate([np.zeros((*vel.shape[:-2], 1, 2)), np.cumsum(vel[..., :2], axis=-2)], axis=-2)
    idx = np.arange(n)
    full = (idx >= half) & (idx + half <= n - 1)  # the ends have no "before" / "after"
    i = np.clip(idx, half, n - 1 - half)
    before = (c[..., i - gap + 1, :] - c[..., i - half, :]) / (half - gap + 1)
    after = (c[..., i + half + 1, :] - c[..., i + gap, :]) / (half - gap + 1)
    cross = before[..., 0] * after[..., 1] - before[..., 1] * after[..., 0]
    dot = (before * after).sum(axis=-1)
    angle = np.degrees(np.abs(np.arctan2(cross, dot)))
    moving = (norm(before) >= TURN_MIN_SPEED) & (norm(after) >= TURN_MIN_SPEED)
    moving &= full
    return angle, moving, half


def _turns(k: Kinematics, angle: np.ndarray, moving: np.ndarray, half: int, threshold_deg: float) -> list[Event]:
    """One sharp_turn per run of samples turning faster than the threshold."""
    turning = (angle > threshold_deg) & moving
    if not turning.any():
        return []
    n = len(k.t)
    h = np.degrees(k.heading())
    out = []
    for a, b in runs(turning):
        m = a + int(np.argmax(angle[a:b]))
        p, q = max(a - half, 0), min(b - 1 + half, n - 1)
        out.append(Event("", "sharp_turn", _r(k.t[m]), [k.uav_id], _r(k.t[q]), _r(abs(h[q] - h[p]), 1), "deg",
                         {"t_from": _r(k.t[p]), "direction": "left" if h[q] > h[p] else "right"}))
    return out


def slow_turns(k: Kinematics, threshold_deg: float, seen: list[Event]) -> list[Event]:
    """Turn segments over the threshold within SLOW_TURN_MAX_S that no window event already covers."""
    out = []
    for s in segment_vehicle(k):
        if s.kind != "turn" or abs(s.turn_deg) <= threshold_deg or s.duration > SLOW_TURN_MAX_S:
            continue
        if any(e.t_end is not None and e.extra["t_from"] <= s.t_end and e.t_end >= s.t_start for e in seen):
            continue
        i = int(np.searchsorted(k.t, (s.t_start + s.t_end) / 2))
        out.append(Event("", "sharp_turn", _r(k.t[min(i, len(k.t) - 1)]), [k.uav_id], _r(s.t_end),
                         _r(abs(s.turn_deg), 1), "deg",
                         {"t_from": _r(s.t_start), "direction": "left" if s.turn_deg > 0 else "right"}))
    return out


def altitude_rates(k: Kinematics, limit: float) -> list[Event]:
    vz = k.vz
    out = []
    for a, b in runs(np.abs(vz) > limit):
        if (b - a) * k.dt < ALT_RATE_MIN_S:
            continue
        m = a + int(np.argmax(np.abs(vz[a:b])))
        out.append(Event("", "altitude_rate", _r(k.t[a]), [k.uav_id], _r(k.t[b - 1]), _r(abs(vz[m]), 2), "m/s",
                         {"direction": "climb" if vz[m] > 0 else "descent"}))
    return out


def link_losses(traj: SwarmTrajectory) -> list[Event]:
    out = []
    for u, tr in traj.tracks.items():
        if tr.link_ok is None:
            continue
        for a, b in runs(np.nan_to_num(tr.link_ok, nan=1.0) < 0.5):
            t_end = float(tr.t[b]) if b < len(tr) else float(tr.t[-1])
            out.append(Event("", "link_loss", _r(tr.t[a]), [u], _r(t_end), _r(t_end - tr.t[a], 2), "s"))
    return out


def data_gaps(traj: SwarmTrajectory) -> list[Event]:
    out = [Event("", "data_gap", _r(g.t_start), [g.uav], _r(g.t_end), _r(g.duration, 2), "s") for g in traj.ingest.gaps]
    end = traj.t_end
    for u, last in traj.ingest.silent.items():
        out.append(Event("", "data_gap", _r(last), [u], _r(end), _r(end - last, 2), "s", {"silent": True}))
    return out


def pairwise_events(traj: SwarmTrajectory, mission: Mission, safety=None) -> list[Event]:
    if len(traj.tracks) < 2:
        return []
    snap = snapshots(traj)
    adopt_checker_pairs(snap, safety)  # the close approaches' kd-trees only where the checker saw a pair come close
    ids = snap.uav_ids
    unverified = _separation_not_evaluable(safety)
    out = [
        Event("", "proximity", _r(c.t_start), [ids[c.i], ids[c.j]], _r(c.t_end), _r(c.d_min, 2), "m",
              {"t_min": _r(c.t_min)})
        for c in close_approaches(snap, mission.thresholds.proximity(mission.constraints))
        if not any(lo <= c.t_start and c.t_end <= hi and (ids[c.i] in who or ids[c.j] in who)
                   for who, lo, hi in unverified)
    ]
    if mission.formation_offsets or mission.type.strip().lower() == "formation":
        err, ref = formation_error(snap, mission)
        if ref is not None:
            for j, u in enumerate(ids):
                for a, b in breach_intervals(snap.t, err[:, j], mission.formation_tolerance_m):
                    m = a + int(np.nanargmax(err[a:b, j]))
                    out.append(Event("", "formation_breach", _r(snap.t[a]), [u], _r(snap.t[b - 1]),
                                     _r(err[m, j], 2), "m", {"reference": ref}))
    return out


def _separation_not_evaluable(safety) -> list[tuple[set[str], float, float]]:
    """(vehicles, from, to) where the checker could not evaluate min_separation (frames not one frame, an invalid
    estimate): a close approach there is the data's, not the flight's, and no event."""
    if safety is None:
        return []
    return [(set(n.uavs), -math.inf if n.t_start is None else n.t_start, math.inf if n.t_end is None else n.t_end)
            for n in safety.data_quality.not_evaluable if n.constraint == "min_separation"]


def violation_events(safety) -> list[Event]:
    if safety is None:
        return []
    return [
        Event("", f"violation:{v.constraint}", _r(v.t_start), list(v.uavs), _r(v.t_end),
              None if v.worst_value is None else _r(v.worst_value, 3), UNITS.get(v.constraint),
              {"limit": v.limit})
        for v in safety.violations
    ]


def autopilot_events(traj: SwarmTrajectory) -> list[Event]:
    """The autopilot's own log entries of the vehicles in `traj` (copies: numbering gives them ids)."""
    return [replace(e, uavs=list(e.uavs), extra=dict(e.extra)) for e in traj.ingest.log_events
            if set(e.uavs) <= set(traj.tracks)]


def _swarm_clusters(events: list[Event], rank: dict[str, int]) -> list[list[Event]]:
    """One-vehicle events grouped as a swarm does them: same direction, within SWARM_TURN_S of the group's first,
    each vehicle once; in (t, vehicle rank) order."""
    clusters: list[list[Event]] = []
    members: list[set[str]] = []  # each cluster's vehicles: a show's corner holds a thousand (not rebuilt per event)
    first_open = 0  # clusters start in time order: those before this one are over SWARM_TURN_S behind for good
    for e in sorted(events, key=lambda e: (e.t, rank.get(e.uavs[0], 0))):
        while first_open < len(clusters) and e.t - clusters[first_open][0].t > SWARM_TURN_S:
            first_open += 1
        for c, seen in zip(clusters[first_open:], members[first_open:], strict=True):
            if c[0].extra["direction"] == e.extra["direction"] and e.uavs[0] not in seen:
                c.append(e)
                seen.add(e.uavs[0])
                break
        else:
            clusters.append([e])
            members.append({e.uavs[0]})
    return clusters


def _merge_swarm(events: list[Event], order: list[str], merged: Callable[[list[Event], list[str], float], Event]
                 ) -> list[Event]:
    """The events of `_swarm_clusters`: a vehicle alone keeps its own, a group becomes `merged(group, its vehicles in
    `order`, the group's last end)`."""
    rank = {u: i for i, u in enumerate(order)}
    out = []
    for c in _swarm_clusters(events, rank):
        if len(c) == 1:
            out.append(c[0])
            continue
        uavs = sorted({x.uavs[0] for x in c}, key=lambda u: rank.get(u, 0))
        out.append(merged(c, uavs, max(x.t if x.t_end is None else x.t_end for x in c)))
    return out


def merge_swarm_turns(turns: list[Event], order: list[str]) -> list[Event]:
    """One sharp_turn per swarm corner: same direction, corners within SWARM_TURN_S, distinct vehicles."""
    return _merge_swarm(turns, order, lambda c, uavs, t_end: Event(
        "", "sharp_turn", _r(float(np.median([x.t for x in c]))), uavs, t_end,
        _r(float(np.mean([x.value for x in c])), 1), "deg",
        {"t_from": min(x.extra["t_from"] for x in c), "direction": c[0].extra["direction"]}))


def merge_swarm_climbs(climbs: list[Event], order: list[str]) -> list[Event]:
    """One altitude_rate per climb or descent that vehicles start together (same direction, starts within
    SWARM_TURN_S): from the first start to the last end, the highest peak (a show's 5,000 vehicles climbing together
    had made 5,000 events, findings and prompt lines)."""
    return _merge_swarm(climbs, order, lambda c, uavs, t_end: Event(
        "", "altitude_rate", min(x.t for x in c), uavs, t_end, max(float(x.value or 0.0) for x in c), "m/s",
        {"direction": c[0].extra["direction"]}))


def number_events(events: list[Event]) -> list[Event]:
    """Sort by (t, type, vehicles) and assign EVENT[1..n]."""
    events = sorted(events, key=lambda e: (e.t, e.type, e.uavs, e.t_end if e.t_end is not None else e.t))
    for k, e in enumerate(events, 1):
        e.id = f"EVENT[{k}]"
    return events


def detect_events(traj: SwarmTrajectory, mission: Mission, safety=None) -> list[Event]:
    """All events of the flight, numbered EVENT[1..n] in (t, type, vehicles) order.

    `safety` is a SafetyResult; when None the checker is run if the safety package exists.
    """
    if safety is None:
        from uav_debate_eval.metrics.compute import run_checker

        safety = run_checker(traj, mission)
    th = mission.thresholds
    events: list[Event] = []
    turns: list[Event] = []
    climbs: list[Event] = []
    kins = smooth_tracks(list(traj.tracks.values()))
    segment_vehicles(kins)  # the slow turns read every vehicle's segments: made together
    for k, fast in zip(kins, sharp_turns_all(kins, th.sharp_turn_deg), strict=True):
        turns += fast + slow_turns(k, th.sharp_turn_deg, fast)
        climbs += altitude_rates(k, th.altitude_rate_mps)
    events += merge_swarm_turns(turns, traj.uav_ids) + merge_swarm_climbs(climbs, traj.uav_ids)
    events += pairwise_events(traj, mission, safety) + link_losses(traj) + data_gaps(traj) + violation_events(safety)
    events += autopilot_events(traj)
    return number_events(events)
