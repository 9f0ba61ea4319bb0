"""The data-quality findings of stamps ingest leaves out: stray stamps, a restarted recording's earlier runs, a
vehicle's samples after its clock restarted alone (core.stamps finds them; SwarmTrajectory.from_columns drops them)."""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.records import Finding
from uav_debate_eval.core.vehicle_codes import VehicleCodes, natural_key


def restart_finding(t: np.ndarray, uav_id: np.ndarray | VehicleCodes, ok: np.ndarray, left: np.ndarray,
                     origin: float) -> Finding:
    """The earlier runs of a recording whose clock restarted (rows `left`), left out: placed at the last run's start."""
    start = float(t[ok].min()) - origin if ok.any() else 0.0
    uavs = _vehicles_of(uav_id, left)
    lo, hi = float(t[left].min()), float(t[left].max())
    return Finding(
        "clock_restart", uavs, start, start,
        f"the recording's clock went back (a simulation reset, a looping bag, runs appended to one file): the last "
        f"run is evaluated, as `live` reports it; {len(left)} sample(s) of {', '.join(uavs)} of the earlier run(s) "
        f"({hi - lo:.4g} s on their own clock) are left out; evaluate them from a recording of their own", [],
        {"samples": len(left), "earlier_span_s": hi - lo})


def _vehicles_of(uav_id: np.ndarray | VehicleCodes, rows: np.ndarray) -> list[str]:
    """The vehicles of input rows `rows`, in natural order."""
    ids = uav_id.names[uav_id.codes[rows]] if isinstance(uav_id, VehicleCodes) else uav_id[rows]
    return sorted({str(u) for u in ids}, key=natural_key)


def clock_back_finding(uav_id: np.ndarray | VehicleCodes, left: np.ndarray, where: list[tuple[float, float]],
                       origin: float) -> Finding:
    """The rows `left` of vehicles whose clock restarted alone, left out: placed at each one's newest stamp before
    its restart (`where`: per vehicle, that stamp and its first after, core.stamps.restarts_alone)."""
    uavs = _vehicles_of(uav_id, left)
    before = [b for b, _ in where]
    went = max(b - a for b, a in where)
    return Finding(
        "clock_back", uavs, min(before) - origin, max(before) - origin,
        f"the clock of {', '.join(uavs)} went back {went:.4g} s while the other vehicles flew on (its autopilot or "
        f"companion computer restarted): {len(left)} later sample(s) cannot be placed on the flight's clock and are "
        "left out, as `live` rejects them; it is unchecked from there", [], {"samples": len(left), "back_s": went})


def stray_finding(t: np.ndarray, uav_id: np.ndarray | VehicleCodes, ok: np.ndarray, stray_rows: np.ndarray,
                   origin: float, limit: float) -> Finding:
    """The stray stamps left out, placed in the flight where they were recorded: at the stamp of the row before
    each in the input (a log's rows are in recording order), else the row after."""
    kept = np.flatnonzero(ok)  # never empty: the largest cluster of stamps is the flight
    near = kept[np.clip(np.searchsorted(kept, stray_rows) - 1, 0, len(kept) - 1)]
    where = t[near] - origin
    uavs = _vehicles_of(uav_id, stray_rows)
    off = np.abs(t[stray_rows] - t[near])
    return Finding(
        "stray_stamp", uavs, float(where.min()), float(where.max()),
        f"{len(stray_rows)} sample(s) of {', '.join(uavs)} stamped {float(off.max()):.4g} s from the rest of the "
        f"recording (more than {limit:.4g} s from the flight's stamps): a corrupted clock value, not data; "
        "left out of the flight", [], {"samples": len(stray_rows), "offset_s": float(off.max())})
