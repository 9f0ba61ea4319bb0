"""Swarm-coordination metrics (None for a single vehicle; the overall score then renormalises).

- formation stability: e = RMS over time and vehicles of the formation error (metrics.swarm:
  against mission.formation_offsets, yaw-aligned, when given; else against the swarm's own
  median pair distances); score = 1/(1+max(0,e-0.05)/tol), tol = mission.formation_tolerance_m.
- communication quality: per vehicle a·(1-g)·r with a = share of samples with link_ok = 1 (1 without
  the column), g = share of the flight lost to data gaps and to falling silent early
  (traj.ingest), r = 1/(1+max(0,cv-0.1)) with cv the coefficient of variation of the sample
  intervals outside gaps (rate regularity); score = mean over vehicles, value = mean a·(1-g).
- coordination delay: per vehicle, the lag (|tau| <= 5 s) maximising the cross-correlation of its
  horizontal acceleration with the mean acceleration of the other vehicles; delay = mean |lag|
  over vehicles that manoeuvre (RMS acceleration >= 0.05 m/s^2, at most 50 vehicles evenly
  chosen); score = 1/(1+max(0,delay-0.1)/1.0). None when nobody manoeuvres (no lag to measure).
- task completion: share of mission waypoints with some sample within mission.waypoint_tolerance_m
  of them (any order); None without waypoints. A live segment (mission.route_so_far) counts only the waypoints
  due by its end: reached (then or before), passed (a later one reached) or, at the end of the flight, all.
"""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.batches import equal_blocks
from uav_debate_eval.core.memo import memo
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.track import Snapshots
from uav_debate_eval.core.trajectory import GAP_FACTOR, MIN_GAP_S, SwarmTrajectory
from uav_debate_eval.metrics.filters import correlate_full, correlation_lags, savgol_filter
from uav_debate_eval.metrics.scoring import detail, rational
from uav_debate_eval.metrics.swarm import formation_error
from uav_debate_eval.metrics.vec import norm

FORMATION_FLOOR = 0.05
RATE_CV_FLOOR = 0.1
MAX_LAG_S = 5.0
MANOEUVRE_MIN_ACC = 0.05
DELAY = (0.1, 1.0)  # floor, ref (s)
DELAY_MAX_VEHICLES = 50
#: Samples per block of vehicles whose closest approaches to their waypoints are computed at once (the planes of a
#: block stay within the CPU cache: 50 vehicles x 120 s at 10 Hz).
WAYPOINT_BLOCK_SAMPLES = 60_000

FORMULAS = {
    "formation_stability": "1/(1+max(0,e-0.05)/tol), e = RMS formation error ({ref}), tol = {tol:g} m",
    "communication_quality": "mean over vehicles of a*(1-g)*r: a = link_ok share, g = share of flight in gaps or "
                             "silent, r = 1/(1+max(0,cv-0.1)), cv of sample intervals; value = mean a*(1-g)",
    "coordination_delay": "1/(1+max(0,d-0.1)/1.0), d = mean |lag| maximising cross-correlation of each vehicle's "
                          "horizontal acceleration with the others' mean (|lag| <= 5 s)",
    "task_completion": "waypoints reached / waypoints, reached = a sample within {tol:g} m",
}


def formation_stability(snap: Snapshots, mission: Mission) -> dict:
    err, ref = formation_error(snap, mission)
    tol = mission.formation_tolerance_m
    formula = FORMULAS["formation_stability"].format(
        ref="yaw-aligned mission offsets" if ref == "offsets" else "median pair distances", tol=tol)
    finite = err[np.isfinite(err)]
    if ref is None or not finite.size:
        return detail(None, None, "m", formula)
    e = float(np.sqrt(np.mean(finite**2)))
    return detail(rational(e, tol, FORMATION_FLOOR), e, "m", formula)


def communication_quality(traj: SwarmTrajectory) -> dict:
    duration = traj.duration
    limit = max(MIN_GAP_S, GAP_FACTOR * (traj.sample_period or 0.0))
    gap_time: dict[str, float] = {}
    for gap in traj.ingest.gaps:
        gap_time[gap.uav] = gap_time.get(gap.uav, 0.0) + gap.duration
    for u, last in traj.ingest.silent.items():
        gap_time[u] = gap_time.get(u, 0.0) + (traj.t_end - last)
    scores, healthy = [], []
    regular = _regular_rates(list(traj.tracks.values()), limit)
    for u, tr in traj.tracks.items():
        a = 1.0
        if tr.link_ok is not None:
            known = tr.link_ok[np.isfinite(tr.link_ok)]
            if known.size:
                a = float(np.mean(known >= 0.5))
        g = min(1.0, gap_time.get(u, 0.0) / duration) if duration > 0 else 0.0
        if id(tr) in regular:
            cv = regular[id(tr)]
        else:
            d = np.diff(tr.t)
            d = d[d <= limit]
            cv = float(np.std(d) / np.mean(d)) if d.size and np.mean(d) > 0 else 0.0
        r = rational(cv, 1.0, RATE_CV_FLOOR)
        scores.append(a * (1.0 - g) * r)
        healthy.append(a * (1.0 - g))
    if not scores:
        return detail(None, None, "fraction", FORMULAS["communication_quality"])
    return detail(float(np.mean(scores)), float(np.mean(healthy)), "fraction", FORMULAS["communication_quality"])


def _regular_rates(tracks: list, limit: float) -> dict[int, float]:
    """The coefficient of variation of the sample intervals of every track without a gap (no interval beyond
    `limit`), the tracks of one length as rows of one array: each row's mean and deviation are its own
    (np.std / np.mean along the row, the same sums as on the track alone)."""
    out: dict[int, float] = {}  # by id() of the track
    for block in equal_blocks([len(tr) if len(tr) > 2 else None for tr in tracks], 256):
        rows = [tracks[i] for i in block]
        d = np.diff(np.stack([tr.t for tr in rows]), axis=1)
        mean, std = np.mean(d, axis=1), np.std(d, axis=1)
        whole = (d <= limit).all(axis=1) & (mean > 0)  # otherwise the track's own intervals are used
        for tr, ok, m, sd in zip(rows, whole.tolist(), mean.tolist(), std.tolist(), strict=True):
            if ok:
                out[id(tr)] = float(np.float64(sd) / np.float64(m))
    return out


def coordination_delay(snap: Snapshots) -> dict:
    formula = FORMULAS["coordination_delay"]
    T, N = snap.valid.shape
    dt = float(snap.t[1] - snap.t[0]) if T > 1 else 0.0
    if N < 2 or dt <= 0:
        return detail(None, None, "s", formula)
    w = int(round(1.0 / dt)) | 1
    w = max(5, w)
    if w > T:
        return detail(None, None, "s", formula)
    acc = savgol_filter(snap.vel[..., :2], w, 2, deriv=1, delta=dt, axis=0)
    acc = np.where(snap.valid[..., None], acc, 0.0)
    total = acc.sum(axis=1)
    count = snap.valid.sum(axis=1)
    max_lag = min(int(round(MAX_LAG_S / dt)), T // 2)
    chosen = np.unique(np.linspace(0, N - 1, min(N, DELAY_MAX_VEHICLES)).round().astype(int))
    lags = []
    for i in chosen:
        others = count - snap.valid[:, i]
        ref = np.where(others[:, None] > 0, (total - acc[:, i]) / np.maximum(others, 1)[:, None], 0.0)
        own = acc[:, i]
        if _rms(own) < MANOEUVRE_MIN_ACC or _rms(ref) < MANOEUVRE_MIN_ACC:
            continue
        c = correlate_full(own[:, 0], ref[:, 0]) + correlate_full(own[:, 1], ref[:, 1])  # x and y
        lag_axis = correlation_lags(T, T)
        keep = np.abs(lag_axis) <= max_lag
        c, lag_axis = c[keep], lag_axis[keep]
        best = int(lag_axis[np.argmax(c - 1e-9 * np.abs(lag_axis))])
        lags.append(abs(best) * dt)
    if not lags:
        return detail(None, None, "s", formula)
    delay = float(np.mean(lags))
    return detail(rational(delay, DELAY[1], DELAY[0]), delay, "s", formula)


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.sum(a * a, axis=-1)))) if a.size else 0.0


def waypoint_status(traj: SwarmTrajectory, mission: Mission) -> dict[str, list[tuple[bool, float]]]:
    """Per vehicle with waypoints: (reached, closest distance in m) for each waypoint in order.

    Cached on the trajectory: the flight's metrics and every segment's WAYPTS lines use the whole flight's.
    """
    return memo(traj, ("waypoints", tuple(traj.tracks)), (mission, *traj.tracks.values()),
                lambda: _waypoint_status(traj, mission))


def _waypoint_status(traj: SwarmTrajectory, mission: Mission) -> dict[str, list[tuple[bool, float]]]:
    before = mission.route_so_far.closest if mission.route_so_far is not None else {}
    tracks = {u: tr for u in mission.waypoints if (tr := traj.tracks.get(u)) is not None}
    flown = [u for u, pts in mission.waypoints.items() if u in tracks and len(tracks[u]) and len(pts)]
    closest: dict[str, list[float]] = {}
    # every waypoint of a block of vehicles (equally many samples and waypoints) at once: the same distances per
    # sample as one vehicle alone, the closest of each waypoint's column
    shapes = [(len(tracks[u]), len(mission.waypoints[u])) for u in flown]
    for group in equal_blocks(shapes, max(1, len(flown))):
        n_samples = shapes[group[0]][0]
        size = max(1, WAYPOINT_BLOCK_SAMPLES // n_samples)
        for a in range(0, len(group), size):
            names = [flown[i] for i in group[a:a + size]]
            for u, row in zip(names, _closest(tracks, mission, names), strict=True):
                closest[u] = row
    out = {}
    for u, pts in mission.waypoints.items():
        prior = before.get(u) or [np.inf] * len(pts)
        near = np.minimum(closest[u], prior).tolist() if u in closest else prior
        out[u] = [(d <= mission.waypoint_tolerance_m, d) for d in near]
    return out


def _closest(tracks: dict, mission: Mission, names: list[str]) -> list[list[float]]:
    """The closest distance of each vehicle's samples to each of its waypoints, for vehicles with equally many: one
    contiguous (vehicles, samples) plane per axis and waypoint, the squares added in vec.norm's order (the same
    distances), the square root taken of the smallest only (it is monotonic: the same minimum)."""
    pos = np.stack([tracks[u].pos for u in names])
    planes = [np.ascontiguousarray(pos[..., c]) for c in range(3)]
    pts = np.asarray([mission.waypoints[u] for u in names], dtype=float)
    out = np.empty(pts.shape[:2])
    for j in range(pts.shape[1]):
        square = np.zeros(pos.shape[:2])
        for c, plane in enumerate(planes):
            d = plane - pts[:, j, c, None]
            square += d * d
        out[:, j] = np.sqrt(square.min(axis=1))
    return [row.tolist() for row in out]


def route_progress(traj: SwarmTrajectory, mission: Mission, start: dict[str, int]) -> dict[str, int]:
    """Per vehicle how many of its waypoints the route reached or passed in order by the trajectory's end, from
    `start` (the flight before it): a sample within tolerance of waypoint j (the first such j not passed yet)
    passes every waypoint up to j, once the vehicle has left the waypoint it reached last (so hovering at the
    start of a closed route does not count as its return)."""
    out = {}
    for u, pts in mission.waypoints.items():
        p, tr = start.get(u, 0), traj.tracks.get(u)
        if tr is not None and len(tr) and p < len(pts):
            near = norm(tr.pos[:, None, :] - np.asarray(pts, dtype=float)[None]) <= mission.waypoint_tolerance_m
            for row in near[near.any(axis=1)]:
                hits = np.flatnonzero(row[p:])
                if hits.size and not (p > 0 and row[p - 1]):
                    p += int(hits[0]) + 1
                    if p >= len(pts):
                        break
        out[u] = p
    return out


def due_waypoints(traj: SwarmTrajectory, mission: Mission) -> dict[str, list[bool]]:
    """Which waypoints are judged: every one for a whole flight (or the last segment of a live one); inside a
    live segment (mission.route_so_far) only those its route reached or passed in order by the segment's end."""
    status = waypoint_status(traj, mission)
    route = mission.route_so_far
    if route is None or route.final:
        return {u: [True] * len(s) for u, s in status.items()}
    passed = route_progress(traj, mission, route.passed)
    return {u: [i < passed.get(u, 0) for i in range(len(s))] for u, s in status.items()}


def task_completion(traj: SwarmTrajectory, mission: Mission) -> dict:
    formula = FORMULAS["task_completion"].format(tol=mission.waypoint_tolerance_m)
    status = waypoint_status(traj, mission)
    due = due_waypoints(traj, mission)
    total = sum(sum(d) for d in due.values())
    if not total:
        return detail(None, None, "fraction", formula)
    share = sum(r for u, s in status.items() for (r, _), d in zip(s, due[u], strict=True) if d) / total
    return detail(share, share, "fraction", formula)


def coordination(traj: SwarmTrajectory, mission: Mission, snap: Snapshots | None) -> dict[str, dict] | None:
    """The coordination details, or None for fewer than two vehicles."""
    if len(traj.tracks) < 2 or snap is None:
        return None
    # the formation last: a segment child's windows take the flight's formation errors, which may still be on
    # their way from the parent (segment_work)
    others = {"communication_quality": communication_quality(traj), "coordination_delay": coordination_delay(snap),
              "task_completion": task_completion(traj, mission)}
    return {"formation_stability": formation_stability(snap, mission), **others}
