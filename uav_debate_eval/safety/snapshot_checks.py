"""The hard constraints on one snapshot of the fresh vehicles: speed, vertical speed, geofence and separation, and
(when due) the predictive warnings (time to the geofence, closest approach), each vehicle first brought to the
newest stamp by constant velocity (at most `max_extrapolation_s`).

A pure function of the snapshot, apart from the live monitor's state (safety.monitor keeps the slots, the veto's
hysteresis and when warnings are due), so the checks read as the constraints they are.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.safety.geometry import close_pairs, closest_approach, cpa_candidates, time_to_box_exit
from uav_debate_eval.safety.parked import live_pairs

#: Separation evidence lists at most this many pairs (the worst first); the count is always exact.
MAX_EVIDENCE_PAIRS = 50
_SLACK = 1e-9  # relative slack on the time-to-geofence pruning bound: rounding can only add candidates, never drop one


def check_snapshot(mission: Mission, pos: np.ndarray, vel: np.ndarray, stamps: np.ndarray, parked: np.ndarray,
                   names: Callable[[np.ndarray], list[str]], predict: bool, max_extrapolation_s: float
                   ) -> tuple[list[dict], list[dict], dict[str, dict], np.ndarray]:
    """(violations, warnings (empty unless `predict`), each constraint's worst value, the extrapolated positions)
    of vehicles at `pos`/`vel` sampled at `stamps`; `parked` flags the vehicles on the ground (no separation), and
    `names` turns row indexes into vehicle names."""
    c, th = mission.constraints, mission.thresholds
    active: list[dict] = []
    warnings: list[dict] = []
    values: dict[str, dict] = {}
    t_ref = float(stamps.max())
    ahead = np.minimum(np.maximum(t_ref - stamps, 0.0), max_extrapolation_s)  # np.clip, without its overhead
    speed = np.sqrt(np.einsum("ij,ij->i", vel, vel))
    if ahead.any():
        ext = vel
        if c.max_speed_mps is not None:  # a position jump must not carry a vehicle through another one
            ext = vel * np.minimum(1.0, c.max_speed_mps / np.maximum(speed, 1e-12))[:, None]
        pos = pos + ext * ahead[:, None]

    for name, limit, q in (("max_speed", c.max_speed_mps, lambda: speed),
                           ("max_vertical_speed", c.max_vertical_speed_mps, lambda: np.abs(vel[:, 2]))):
        if limit is None:
            continue
        qv = q()
        worst = float(qv.max())
        values[name] = {"value": worst, "limit": limit}
        if worst > limit:
            bad = np.flatnonzero(qv > limit)
            active.append({"constraint": name, "uavs": sorted(names(bad)),
                           "value": float(qv[bad].max()), "limit": limit, "t": t_ref, "count": len(bad)})

    fence = c.geofence
    if fence is not None:
        if fence.polygon:
            out = fence.outside_distance(pos)
        else:  # Geofence.outside_distance of a box; max over 3 columns by hand (a short-axis reduce is slow)
            per_axis = np.maximum(np.subtract(fence.min, pos), np.subtract(pos, fence.max))
            out = np.maximum(np.maximum(per_axis[:, 0], per_axis[:, 1]), per_axis[:, 2])
        worst = float(out.max())
        values["geofence"] = {"value": worst, "limit": 0.0}
        if worst > 0:
            bad = np.flatnonzero(out > 0)
            active.append({"constraint": "geofence", "uavs": sorted(names(bad)),
                           "value": float(out[bad].max()), "limit": 0.0, "t": t_ref, "count": len(bad)})
        if predict:
            # inside at depth -out, leaving takes at least -out / speed: only nearer vehicles need the exact time
            horizon = th.prediction_horizon_s
            near = np.flatnonzero((out <= 0) & (-out <= speed * (horizon * (1 + _SLACK)) + _SLACK))
            if len(near):
                tte = time_to_box_exit(pos[near], vel[near], fence)
                hit = tte <= horizon
                for name, tt in zip(names(near[hit]), tte[hit].tolist(), strict=True):
                    warnings.append({"t": t_ref, "kind": "time_to_geofence", "uavs": [name], "value": tt,
                                     "limit": horizon, "t_predicted": t_ref + tt})

    limit = c.min_separation_m
    if limit is not None and len(pos) >= 2:
        if predict:
            i, j, d = cpa_candidates(pos, vel, limit, th.prediction_horizon_s)  # violating pairs included
        else:
            i, j, d = close_pairs(pos, limit)
        i, j, d = live_pairs(parked, i, j, d)
        values["min_separation"] = {"value": float(d.min()) if len(d) else None, "limit": limit}
        close = d < limit
        if close.any():
            bi, bj, bd = i[close], j[close], d[close]
            order = np.lexsort((bj, bi, bd))  # worst first; ties by slot, so the evidence is deterministic
            bi, bj, bd = bi[order], bj[order], bd[order]
            first_a, first_b = names(bi[:MAX_EVIDENCE_PAIRS]), names(bj[:MAX_EVIDENCE_PAIRS])
            pairs = [sorted(ab) for ab in zip(first_a, first_b, strict=True)]
            involved = sorted(names(np.unique(np.concatenate([bi, bj]))))
            active.append({"constraint": "min_separation", "uavs": involved, "value": float(bd[0]),
                           "limit": limit, "t": t_ref, "count": int(close.sum()), "pairs": pairs})
        if predict:
            ok = ~close  # pairs already violating are evidence, not predictions
            if ok.any():
                oi, oj = i[ok], j[ok]
                tc, dc = closest_approach(pos[oj] - pos[oi], vel[oj] - vel[oi], th.prediction_horizon_s)
                w = np.flatnonzero(dc < limit)
                if len(w):
                    w = w[np.lexsort((oj[w], oi[w]))]
                    for a, b, dd, tt in zip(names(oi[w]), names(oj[w]), dc[w].tolist(), tc[w].tolist(),
                                            strict=True):
                        warnings.append({"t": t_ref, "kind": "cpa", "uavs": sorted((a, b)), "value": dd,
                                         "limit": limit, "t_predicted": t_ref + tt})
    return active, warnings, values, pos
