"""Offline safety check of a whole trajectory: violation intervals, warnings, margins, label.

Per-vehicle constraints (speed, vertical speed, geofence, stale data) are checked on each
vehicle's own samples, so their times are exact sample stamps. Separation needs all vehicles
at one instant: the trajectory is resampled onto a common grid (step = median sample period,
linear interpolation, a vehicle is invalid before its first / after its last sample and inside
silences longer than the stale timeout) and every grid snapshot goes through a kd-tree.
Exceedances of one constraint by the same vehicles closer together than the veto hold time (or
``merge_periods`` sample periods, whichever is longer) are one hazard episode: one violation with its sample
count and worst value. The checks run on the trajectory `quality.assess` cleaned: recording artefacts are
data-quality findings, estimator-invalid spans are not evaluable, a vehicle's own recording end is no silence.
"""

from __future__ import annotations

import math

import numpy as np

from uav_debate_eval.core.arming import arming_changes, disarmed_at, landing_changes
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.records import NotEvaluable, Violation
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.metrics.vec import norm
from uav_debate_eval.quality.assessment import Assessment, assess
from uav_debate_eval.quality.jumps import NOISE_FLOOR_M
from uav_debate_eval.quality.updates import BURST_FRACTION
from uav_debate_eval.safety.attitude import attitude_violations
from uav_debate_eval.safety.geometry import fence_ratio, time_to_box_exit
from uav_debate_eval.safety.grid_pairs import GridPairs, pairs_dense, pairs_shared, pairs_sparse_halves
from uav_debate_eval.safety.parked import not_parked_pairs, parked_grid, parked_notes, unpark_nearest
from uav_debate_eval.safety.result import SafetyResult, SeparationTimeline
from uav_debate_eval.safety.runs import denoise, merge_runs
from uav_debate_eval.safety.samples import Samples

#: An implied speed this many times max_speed_mps (or JUMP_SPEED_MPS without a speed limit) is a position jump.
JUMP_FACTOR = 5.0
JUMP_SPEED_MPS = 30.0


def verdict_label(result: SafetyResult) -> str:
    """The contract label: risky (any violation), borderline (within the fraction of a limit), safe."""
    return result.label


def check_trajectory(traj: SwarmTrajectory, mission: Mission, merge_periods: float = 2.0,
                     quality: Assessment | None = None, predict: bool = True,
                     flight: SafetyResult | None = None) -> SafetyResult:
    """Run every hard constraint of the mission over the trajectory (see module docstring).

    `quality` is the data assessment of `traj` (made here when not given); the checks run on its clean trajectory.
    `predict=False` leaves out the predictive warnings (CPA, time to the geofence): the metrics of a segment
    window read only its separations, violations, margins and integrity faults.
    `flight`: the result of the flight `traj` is a window of; without predictions, the grid steps the window shares
    with the flight take the flight's closest and close pairs (the same numbers, computed once).
    """
    if quality is None:  # a window of an assessed flight keeps the flight's assessment
        quality = traj.assessment.for_window(traj) if traj.assessment is not None else assess(traj, mission)
    traj = quality.traj
    arming = arming_changes(traj.ingest.log_events)  # who was disarmed when: parked pairs and silences
    c, th = mission.constraints, mission.thresholds
    ids = traj.uav_ids
    if not ids:
        empty = SeparationTimeline(np.zeros(0), np.zeros(0), [])
        return SafetyResult([], [], [], {}, empty, [], "safe", notes=["no vehicles"])
    period = traj.sample_period or 0.1
    gap = max(merge_periods * period, th.veto_hold_s) + 1e-9
    violations: list[tuple[Violation, float]] = []  # with the time the margin is restored
    margins: dict[str, dict] = {}

    def margin(name: str, worst: float | None, limit: float, ratio: float | None) -> None:
        margins[name] = {"worst_value": worst, "limit": limit, "ratio": ratio}

    # per-vehicle constraints on the raw samples the estimator vouches for: every vehicle's samples end to end, each
    # check pointwise (the numbers of one vehicle at a time), the worst values folded in vehicle order as before
    rows = Samples.of(traj)
    per_vehicle = [
        ("max_speed", c.max_speed_mps, lambda r: norm(r.vel)),  # np.linalg.norm(vel, axis=1), bit for bit
        ("max_vertical_speed", c.max_vertical_speed_mps, lambda r: np.abs(r.vel[:, 2])),
    ]
    for name, limit, quantity in per_vehicle:
        if limit is None:
            continue
        ok = rows.trusted(quality, name)
        q = quantity(rows)
        worst = rows.fold_max(q, ok, 0.0)
        bad = (q > limit) & ok
        for k, t0, t1, w, _, n in merge_runs(rows.key[bad], rows.t[bad], q[bad], gap):
            detail = f"{ids[k]} {w:.3f} m/s > {limit:g} m/s" + _step_note(quality, ids[k], t0, t1)
            violations.append((Violation(name, t0, t1, [ids[k]], w, limit, detail, n), t1 + period))
        margin(name, worst, limit, worst / limit)

    outside = None
    fence = c.geofence
    if fence is not None:
        ok = rows.trusted(quality, "geofence")
        outside = rows.pointwise(lambda pos, _vel: fence.outside_distance(pos))
        worst_out = rows.fold_max(outside, ok, -math.inf)
        worst_ratio = rows.fold_max(rows.pointwise(lambda pos, _vel: fence_ratio(pos, fence)), ok, 0.0)
        bad = (outside > 0) & ok
        for k, t0, t1, w, _, n in merge_runs(rows.key[bad], rows.t[bad], outside[bad], gap):
            v = Violation("geofence", t0, t1, [ids[k]], w, 0.0, f"{ids[k]} {w:.3f} m outside the geofence", n)
            violations.append((v, t1 + period))
        if math.isfinite(worst_out):
            margin("geofence", worst_out, 0.0, worst_ratio)

    if c.stale_timeout_s is not None:
        limit = c.stale_timeout_s
        longest = 0.0
        end = traj.t_end
        silences_of: dict[tuple[int, float], tuple[np.ndarray, float, np.ndarray]] = {}  # shared stamps: once
        for u in ids:
            tr = traj.tracks[u]
            # silence up to the end of the flight counts too, but only while this vehicle's recorder ran
            stop = end if tr.recording_end is None else min(end, max(tr.recording_end, float(tr.t[-1])))
            if (key := (id(tr.t), stop)) not in silences_of:
                stamps = np.append(tr.t, stop)
                silences = np.diff(stamps)
                silences_of[key] = (stamps, float(silences.max()) if len(silences) else 0.0,
                                    np.flatnonzero(silences > limit))
            stamps, most, long_ones = silences_of[key]
            if u in arming and len(long_ones):  # parked when it fell silent (disarmed): no flight's pose was lost
                silent_parked = disarmed_at(arming[u], stamps[long_ones])
                if silent_parked.any():
                    most = float(np.delete(np.diff(stamps), long_ones[silent_parked]).max(initial=0.0))
                    long_ones = long_ones[~silent_parked]
            longest = max(longest, most)
            for i in long_ones:
                last, back = float(stamps[i]), float(stamps[i + 1])
                ended = i == len(tr.t) - 1
                detail = f"{u} silent from {last:.3f} s" + (" to the end" if ended else f" until {back:.3f} s")
                v = Violation("stale_data", denoise(last + limit), denoise(back), [u], denoise(back - last), limit,
                              detail)
                violations.append((v, back))
        margin("stale_data", longest, limit, longest / limit)

    if c.max_attitude_error_deg is not None and traj.ingest.attitude:
        inside = {u: _within(a, traj.t_start, traj.t_end) for u, a in traj.ingest.attitude.items() if u in ids}
        found, worst_err = attitude_violations(inside, c.max_attitude_error_deg, c.attitude_error_hold_s)
        violations.extend(found)
        if worst_err is not None:
            margin("attitude_control", worst_err, c.max_attitude_error_deg, worst_err / c.max_attitude_error_deg)

    separation_lost = any(ne.constraint == "min_separation" and len(ne.uavs) == len(ids) and ne.t_start is not None
                          and ne.t_start <= traj.t_start and (ne.t_end or 0) >= traj.t_end
                          for ne in quality.not_evaluable)
    separation, sep_viol, warnings, nearest, parked = _pairwise(traj, mission, gap, quality, rows, arming,
                                                                skip_limit=separation_lost, predict=predict,
                                                                flight=flight)
    violations.extend(sep_viol)
    if c.min_separation_m is not None and not separation_lost:
        sep_worst = float(np.nanmin(separation.d_min)) if np.isfinite(separation.d_min).any() else None
        ratio = None if sep_worst is None else 2.0 - sep_worst / c.min_separation_m
        margin("min_separation", sep_worst, c.min_separation_m, ratio)
    if outside is not None and predict:
        warnings.extend(_fence_warnings(rows, outside, mission, gap))
    warnings.sort(key=lambda w: (w["t"], w["kind"], w["uavs"]))

    rules = _rules(traj, mission, quality, separation, flight, gap, period)
    violations.extend(_rule_violations(rules, traj, flight, period))
    violations.sort(key=lambda vr: (vr[0].t_start, vr[0].constraint, vr[0].uavs))
    vetoes = _veto_intervals([(v.t_start, restored) for v, restored in violations], th.veto_hold_s, traj.t_end)
    viol = [v for v, _ in violations]
    checked = c.checked
    if viol:
        label = "risky"
    elif not checked and not rules:
        label = "inconclusive"  # CONTRACT.md §3: nothing was checked, which is no verdict of safe
    elif quality.material_gaps(traj, checked) or any(r.rule.severity == "hard" and r.satisfied is None
                                                      for r in rules):
        label = "inconclusive"  # a hard rule the data cannot decide is a check that could not be evaluated
    elif any(m["ratio"] is not None and m["ratio"] >= 1.0 - th.borderline_fraction for m in margins.values()):
        label = "borderline"
    else:
        label = "safe"
    data_quality = quality.data_quality(traj, checked)
    data_quality.not_evaluable.extend(_rules_not_evaluable(rules) if flight is None else [])
    return SafetyResult(viol, warnings, _integrity(traj, rows, mission), margins, separation, vetoes, label,
                        data_quality=data_quality, nearest=nearest, rules=rules,
                        notes=parked_notes(ids, separation.t, parked) if c.min_separation_m is not None else [])


def _within(att: tuple, t0: float, t1: float) -> tuple:
    """A vehicle's attitude record within [t0, t1] (a window of the flight checks its own part)."""
    keep = (att[0] >= t0) & (att[0] <= t1)
    return tuple(a[keep] for a in att)


def _rules(traj: SwarmTrajectory, mission: Mission, quality: Assessment, separation: SeparationTimeline,
           flight: SafetyResult | None, gap: float, period: float) -> list:
    """The mission rules on the checker's grid (rules.check); a segment window keeps its flight's results."""
    if not mission.rules:
        return []
    if flight is not None:
        return flight.rules
    from uav_debate_eval.rules.check import check_rules, grid_of

    grid = grid_of(traj, mission, quality, separation.d_min if len(separation.d_min) else None)
    return check_rules(traj, mission, grid=grid, gap=max(gap, 2.0 * period + 1e-9))


def _rule_violations(rules: list, traj: SwarmTrajectory, flight: SafetyResult | None, period: float
                     ) -> list[tuple[Violation, float]]:
    """A hard rule's failing runs are violations `rule:<id>` (CONTRACT.md §2a); a window keeps the parts of its
    flight's that fall inside it."""
    out = []
    for res in rules:
        if res.rule.severity != "hard":
            continue
        for uavs, t0, t1, worst, n in res.failures:
            if flight is not None:
                if t1 < traj.t_start or t0 > traj.t_end:
                    continue
                t0, t1 = max(t0, traj.t_start), min(t1, traj.t_end)
            who = "-".join(uavs) or "the swarm"
            v = Violation(f"rule:{res.rule.id}", denoise(t0), denoise(t1), list(uavs), denoise(worst), 0.0,
                          f"{who} breaks rule {res.rule.id} ({res.rule.stl}): robustness {worst:.3f} < 0", n)
            out.append((v, t1 + period))
    return out


def _rules_not_evaluable(rules: list) -> list[NotEvaluable]:
    """One entry per rule and span, naming every vehicle (of every pair) the rule could not read there: a silent
    vehicle leaves each of its pairs unknown over the same span, which is one fact, not one per pair."""
    spans: dict[tuple[str, float, float], set[str]] = {}
    for res in rules:
        for uavs, t0, t1 in res.unknown:
            spans.setdefault((res.rule.id, t0, t1), set()).update(uavs)
    return [NotEvaluable(f"rule:{rule_id}", sorted(uavs), "the rule reads signals with no data there (samples the "
                         "data-quality pass left out, a silence, or a distance with one vehicle)", t0, t1)
            for (rule_id, t0, t1), uavs in spans.items()]


def _step_note(quality: Assessment, uav: str, t0: float, t1: float) -> str:
    """Why a speed violation at a persistent position step is kept (the artefact explanation does not hold)."""
    for u, t, dist, dt in quality.steps:
        if u == uav and t0 - 0.5 <= t <= t1 + 0.5:
            return (f"; includes a {dist:.2f} m position step in {dt * 1000:.0f} ms at {t:.2f} s that persists, so it "
                    "is kept: a one-frame artefact would have come back")
    return ""


def _pairwise(traj: SwarmTrajectory, mission: Mission, gap: float, quality: Assessment, rows: Samples, arming: dict,
              skip_limit: bool = False, predict: bool = True, flight: SafetyResult | None = None
              ) -> tuple[SeparationTimeline, list[tuple[Violation, float]], list[dict], GridPairs | None,
                         np.ndarray | None]:
    """Separation timeline, min_separation intervals, CPA warnings, (kd-tree path) the grid with each step's
    closest pair (SafetyResult.nearest) over the common grid, and which vehicles stood parked at each step of it
    (safety.parked: disarmed or landed; `arming`: core.arming.arming_changes of the flight).

    Grid points where a vehicle's separation is not evaluable (estimator invalid) are no data for it;
    `skip_limit` (frames that cannot be one) keeps only the timeline.
    """
    c, th = mission.constraints, mission.thresholds
    ids = traj.uav_ids
    snaps = traj.resample(max_gap_s=c.stale_timeout_s, own_gaps=True)
    trusted = rows.trusted(quality, "min_separation")
    for j in rows.vehicles_with(~trusted):  # grid points where a vehicle's separation is not evaluable
        ok = trusted[rows.bounds[j]:rows.bounds[j + 1]]
        k = np.clip(np.searchsorted(traj.tracks[ids[j]].t, snaps.t), 0, len(ok) - 1)
        snaps.valid[:, j] &= ok[k]
    period = float(snaps.t[1] - snaps.t[0]) if len(snaps.t) > 1 else traj.sample_period or 0.1
    T, N = snaps.valid.shape
    d_min = np.full(T, np.nan)
    closest: list[tuple[str, str] | None] = [None] * T
    limit = None if skip_limit else c.min_separation_m
    hv: list[np.ndarray] = []  # violating pairs: key, t, distance
    ht: list[np.ndarray] = []
    hd: list[np.ndarray] = []
    wk: list[np.ndarray] = []  # CPA warnings: key, t, predicted distance, predicted time
    wt: list[np.ndarray] = []
    wd: list[np.ndarray] = []
    wtp: list[np.ndarray] = []
    horizon = th.prediction_horizon_s if predict else None
    if N <= DENSE_MAX_VEHICLES:
        pairs_dense(snaps, limit, horizon, d_min, closest, (hv, ht, hd), (wk, wt, wd, wtp))
    else:
        pair_index = np.full((T, 2), -1, dtype=int)
        shared = horizon is None and pairs_shared(snaps, None if flight is None else flight.nearest, limit, d_min,
                                                  closest, (hv, ht, hd), pair_index)
        if not shared:
            pairs_sparse_halves(snaps, limit, horizon, d_min, closest, (hv, ht, hd), (wk, wt, wd, wtp), pair_index)
    hit_keys, hit_t, hit_d = (np.concatenate(h) if h else np.zeros(0) for h in (hv, ht, hd))
    parked = parked_grid(arming, landing_changes(traj.ingest.log_events), ids, snaps.t)
    if parked is not None:  # two vehicles parked on the ground: no pair of the constraint (safety.parked)
        keep = not_parked_pairs(hit_keys, hit_t, snaps, parked)
        hit_keys, hit_t, hit_d = hit_keys[keep], hit_t[keep], hit_d[keep]
        unpark_nearest(snaps, parked, d_min, closest, pair_index if N > DENSE_MAX_VEHICLES else None)
        if wk:
            keep = not_parked_pairs(np.concatenate(wk), np.concatenate(wt), snaps, parked)
            wk, wt, wd, wtp = ([np.concatenate(w)[keep]] for w in (wk, wt, wd, wtp))
    hits = (hit_keys, hit_t, hit_d)
    nearest = GridPairs(snaps, pair_index, d_min, closest, limit, hits) if N > DENSE_MAX_VEHICLES else None
    timeline = SeparationTimeline(snaps.t, d_min, closest)
    violations: list[tuple[Violation, float]] = []
    warnings: list[dict] = []
    if limit is None:
        return timeline, violations, warnings, nearest, parked
    grid_gap = max(gap, 2.0 * period + 1e-9)
    if len(hits[0]):
        for key, t0, t1, w, _, n in merge_runs(hit_keys, hit_t, hit_d, grid_gap, worst="min"):
            pair = sorted((ids[key // N], ids[key % N]))
            v = Violation("min_separation", t0, t1, pair, w, limit, f"{pair[0]}-{pair[1]} {w:.3f} m < {limit:g} m", n)
            violations.append((v, t1 + period))
    if wk:
        keys, ts, tps = np.concatenate(wk), np.concatenate(wt), np.concatenate(wtp)
        dcs = np.concatenate(wd)
        for key, t0, _t1, _w, _, _n in merge_runs(keys, ts, dcs, grid_gap, worst="min"):
            first = np.flatnonzero((keys == key) & (np.abs(ts - t0) < 1e-6))[0]
            warnings.append({"t": t0, "kind": "cpa", "uavs": sorted((ids[key // N], ids[key % N])),
                             "value": denoise(dcs[first]), "limit": limit, "t_predicted": denoise(tps[first])})
    return timeline, violations, warnings, nearest, parked


#: Up to this many vehicles all pairs of a block of time steps are checked at once with numpy
#: (N^2/2 pairs is cheap and avoids a Python loop over every step); above it, kd-trees (safety.grid_pairs).
DENSE_MAX_VEHICLES = 64


def _fence_warnings(rows: Samples, outside: np.ndarray, mission: Mission, gap: float) -> list[dict]:
    """Time-to-geofence warnings: inside now, but leaving within the prediction horizon at current velocity."""
    fence, horizon = mission.constraints.geofence, mission.thresholds.prediction_horizon_s
    assert fence is not None  # called only for a mission with a geofence
    tte_all = rows.pointwise(lambda pos, vel: time_to_box_exit(pos, vel, fence))
    hit_all = (outside <= 0) & (tte_all <= horizon)
    out = []
    for j in rows.vehicles_with(hit_all):
        sl = slice(rows.bounds[j], rows.bounds[j + 1])
        t, tte, hit = rows.t[sl], tte_all[sl], hit_all[sl]
        for _, t0, _t1, _w, _, _n in merge_runs(np.zeros(int(hit.sum()), dtype=int), t[hit], tte[hit], gap, "min"):
            k = int(np.searchsorted(t, t0))
            out.append({"t": t0, "kind": "time_to_geofence", "uavs": [rows.ids[j]], "value": denoise(tte[k]),
                        "limit": horizon, "t_predicted": denoise(t0 + tte[k])})
    return out


def _veto_intervals(spans: list[tuple[float, float]], hold: float, t_end: float) -> list[tuple[float, float]]:
    """Veto up from a violation's start until its margin has been restored for `hold` seconds (eq. 19-20)."""
    out: list[list[float]] = []
    for t0, restored in sorted(spans):
        clear = min(restored + hold, t_end)  # still up at the end of the data: the interval ends there
        if out and t0 <= out[-1][1]:
            out[-1][1] = max(out[-1][1], clear)
        else:
            out.append([t0, clear])
    return [(denoise(a), denoise(b)) for a, b in out]


def _integrity(traj: SwarmTrajectory, rows: Samples, mission: Mission) -> list[dict]:
    """Data-integrity faults (reported apart from the hard constraints): dropped rows, order, jumps."""
    ing = traj.ingest
    faults: list[dict] = [{"kind": f"dropped_{reason}", "count": n} for reason, n in sorted(ing.dropped.items())]
    if ing.out_of_order:
        faults.append({"kind": "out_of_order", "count": ing.out_of_order})
    for g in ing.gaps:
        faults.append({"kind": "gap", "uavs": [g.uav], "t_start": g.t_start, "t_end": g.t_end})
    limit = mission.constraints.max_speed_mps
    jump = JUMP_FACTOR * limit if limit else JUMP_SPEED_MPS
    dt = np.diff(rows.t)
    # a burst's step (two samples a fraction of the period apart: stamped on delivery) was measured over a period,
    # as the live monitor takes it (safety.periods): real VRPN bags' poses under 3 ms apart made hundreds of
    # 'jumps' of a vehicle flying well within its limit
    period = np.array([traj.tracks[u].sample_period for u in rows.ids])[rows.key[1:]]
    over = np.where(dt < BURST_FRACTION * period, period, dt)
    step = norm(np.diff(rows.pos, axis=0))  # np.linalg.norm(..., axis=1), bit for bit
    with np.errstate(divide="ignore", invalid="ignore"):  # from one vehicle's last sample to the next one's first
        implied = step / over
    # within one vehicle, and beyond the position noise (quality.jumps.NOISE_FLOOR_M)
    for i in np.flatnonzero((rows.key[1:] == rows.key[:-1]) & (implied > jump) & (step > NOISE_FLOOR_M)):
        u = rows.ids[rows.key[i]]
        faults.append({"kind": "position_jump", "uavs": [u], "t": float(rows.t[i + 1]),
                       "value": float(implied[i]), "limit": jump,
                       "detail": f"{u} moved {step[i]:.2f} m in {dt[i]:.3f} s"})
    return faults
