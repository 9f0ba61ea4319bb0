"""Safety metrics (0..1) from the separation geometry and the deterministic checker's SafetyResult.

- separation margin: d = smallest distance between any two vehicles; s = min_separation_m (0 when
  unset), w = proximity warning distance; score = clip((d - s) / (w - s), 0, 1): 1 when nobody came
  inside the warning distance, 0 at or below the hard limit. None for a single vehicle, and (with the next
  two) when the checker could not evaluate separation at all (local frames that are not one frame).
- proximity exposure: f = share of the time (with >= 2 vehicles) in which some pair is closer than
  w; score = 1 - f.
- emergency response: for every close approach (a pair inside w) the response time is the time
  from its onset to its closest point, after which the separation grows again (the corrective
  manoeuvre); R = mean response; score = 1/(1+max(0,R-0.5)/2.0). None without any hazard.
- constraint compliance: n = number of hard-constraint violation intervals; score = 1/(1+n).
- envelope margin: r = largest SafetyResult margin ratio (fraction of a limit used: 1 = at the
  limit); score = clip((1 - r) / 0.5, 0, 1): full marks up to half the envelope, 0 at the limit.
- data integrity: n = data-integrity faults (checker's integrity_faults: dropped rows per reason,
  reordering, gaps, position jumps) + vehicles that fell silent; score = 1/(1+n).
"""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.metrics.scoring import clip01, detail, rational
from uav_debate_eval.metrics.swarm import CloseApproach, Separation

RESPONSE = (0.5, 2.0)  # floor, ref (s)
ENVELOPE_FULL_BELOW = 0.5

FORMULAS = {
    "separation_margin": "clip((d-s)/(w-s),0,1), d = min pair distance, s = {s:g} m limit, w = {w:g} m warning",
    "proximity_exposure": "1-f, f = share of time with a pair closer than {w:g} m",
    "emergency_response": "1/(1+max(0,R-0.5)/2.0), R = mean time from a pair entering {w:g} m to its closest point",
    "constraint_compliance": "1/(1+n), n = hard-constraint violation intervals",
    "envelope_margin": "clip((1-r)/0.5,0,1), r = largest fraction of a limit used (checker margin ratio)",
    "data_integrity": "1/(1+n), n = integrity faults (dropped rows per reason, reordering, gaps, jumps) "
                      "+ silent vehicles",
}


def safety_details(traj: SwarmTrajectory, mission: Mission, sep: Separation | None,
                   approaches: list[CloseApproach], safety) -> dict[str, dict]:
    """All safety metric details; `safety` is a SafetyResult or None (checker-based metrics are then None)."""
    s = mission.constraints.min_separation_m or 0.0
    w = mission.thresholds.proximity(mission.constraints)
    out: dict[str, dict] = {}
    if safety is not None and not np.isfinite(safety.separation.d_min).any() and any(
            n.constraint == "min_separation" for n in safety.data_quality.not_evaluable):
        sep, approaches = None, []  # the checker could not evaluate separation (local frames): nothing to score

    d = None
    if safety is not None and len(safety.separation.d_min) and np.isfinite(safety.separation.d_min).any():
        d = float(np.nanmin(safety.separation.d_min))
    elif sep is not None and np.isfinite(sep.d_min).any():
        d = float(np.min(sep.d_min))
    if d is None:
        score = None
    elif w > s:
        score = clip01((d - s) / (w - s))
    else:
        score = 1.0 if d > s else 0.0
    out["separation_margin"] = detail(score, d, "m", FORMULAS["separation_margin"].format(s=s, w=w))

    f = None
    if sep is not None and np.isfinite(sep.d_min).any():
        f = float(np.mean(sep.d_min[np.isfinite(sep.d_min)] < w))
    out["proximity_exposure"] = detail(None if f is None else 1.0 - f, f, "fraction",
                                       FORMULAS["proximity_exposure"].format(w=w))

    if approaches:
        r = float(np.mean([a.t_min - a.t_start for a in approaches]))
        out["emergency_response"] = detail(rational(r, RESPONSE[1], RESPONSE[0]), r, "s",
                                           FORMULAS["emergency_response"].format(w=w))
    else:
        out["emergency_response"] = detail(None, None, "s", FORMULAS["emergency_response"].format(w=w))

    if safety is None:
        out["constraint_compliance"] = detail(None, None, "violations", FORMULAS["constraint_compliance"])
        out["envelope_margin"] = detail(None, None, "ratio", FORMULAS["envelope_margin"])
        n = sum(1 for v in traj.ingest.dropped.values() if v) + bool(traj.ingest.out_of_order)
        n += len(traj.ingest.gaps)
    else:
        nv = len(safety.violations)
        out["constraint_compliance"] = detail(1.0 / (1.0 + nv), nv, "violations", FORMULAS["constraint_compliance"])
        ratios = [m["ratio"] for m in safety.margins.values() if m.get("ratio") is not None]
        if ratios:
            r = max(ratios)
            out["envelope_margin"] = detail(clip01((1.0 - r) / ENVELOPE_FULL_BELOW), r, "ratio",
                                            FORMULAS["envelope_margin"])
        else:
            out["envelope_margin"] = detail(None, None, "ratio", FORMULAS["envelope_margin"])
        n = len(safety.integrity_faults)
    n += len(traj.ingest.silent)
    out["data_integrity"] = detail(1.0 / (1.0 + n), n, "faults", FORMULAS["data_integrity"])
    return out
