"""Putting two flights on one axis: by mission phase, by time from take-off, or by path progress.

`phase` maps each flight's phase boundaries (the report's mission segments; veto segments are cut by the verifier,
not phases, so they are merged into their neighbours) piecewise-linearly onto the reference flight's, in the
reference's flight time; when the phase sequences differ it falls back to take-off time and says so.
`takeoff`: flight time minus the first moment any vehicle climbs 0.3 m or moves faster than 0.3 m/s.
`progress`: the fraction (0..1) of the swarm centroid's path length flown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from uav_debate_eval.compare_flights.options import MODES  # noqa: F401 (re-exported)

TAKEOFF_CLIMB_M = 0.3
TAKEOFF_SPEED_MPS = 0.3


@dataclass
class Alignment:
    mode: str  # the mode actually used
    requested: str
    axis_label: str
    note: str = ""

    def to_dict(self) -> dict:
        return {"mode": self.mode, "requested": self.requested, "axis": self.axis_label, "note": self.note}


def takeoff_time(ev) -> float:
    """Flight time of take-off: first climb or motion of any vehicle (0 when it never moves)."""
    times = []
    for tr in ev.traj.tracks.values():
        if len(tr.t) == 0:
            continue
        moved = (tr.pos[:, 2] - tr.pos[0, 2] > TAKEOFF_CLIMB_M) | (tr.speed > TAKEOFF_SPEED_MPS)
        idx = np.flatnonzero(moved)
        if len(idx):
            times.append(float(tr.t[idx[0]]))
    return min(times) if times else 0.0


def phases(report: dict) -> list[tuple[str, float, float]]:
    """(label, t_start, t_end) per phase, veto segments merged into the phase around them."""
    out: list[list] = []
    for s in report.get("segments", []):
        label = s.get("label") or ""
        if out and (label == "veto" or out[-1][0] == label):
            out[-1][2] = s["t_end"]
        else:
            out.append([label, s["t_start"], s["t_end"]])
    return [(a, float(b), float(c)) for a, b, c in out]


def align(evaluations: list, mode: str) -> tuple[Alignment, list]:
    """(alignment, one function per flight mapping its flight times to the common axis)."""
    if mode == "phase":
        ref = phases(evaluations[0].report)
        other = [phases(ev.report) for ev in evaluations]
        if ref and all([p[0] for p in o] == [p[0] for p in ref] for o in other):
            return Alignment("phase", mode, "reference flight time [s] (phase-aligned)"), [
                _warp(o, ref) for o in other]
        align_to, note = "takeoff", "phase sequences differ between the flights; aligned by take-off instead"
    else:
        align_to, note = mode, ""
    if align_to == "takeoff":
        fns = [_shift(takeoff_time(ev)) for ev in evaluations]
        return Alignment("takeoff", mode, "time from take-off [s]", note), fns
    return Alignment("progress", mode, "path progress (fraction of the path flown)", note), [
        _progress(ev) for ev in evaluations]


def _shift(t0: float):
    return lambda t: np.asarray(t, dtype=float) - t0


def _warp(own: list[tuple[str, float, float]], ref: list[tuple[str, float, float]]):
    xs = [own[0][1]] + [p[2] for p in own]
    ys = [ref[0][1]] + [p[2] for p in ref]
    xs_u, keep = np.unique(np.asarray(xs), return_index=True)
    ys_u = np.asarray(ys)[keep]
    return lambda t: np.interp(np.asarray(t, dtype=float), xs_u, ys_u)


def _progress(ev):
    snaps = ev.traj.resample()
    pos = np.where(snaps.valid[..., None], snaps.pos, np.nan)
    centroid = np.nanmean(pos, axis=1)
    step = np.linalg.norm(np.diff(centroid, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(np.nan_to_num(step))])
    frac = cum / cum[-1] if cum[-1] > 0 else np.zeros_like(cum)
    t = np.asarray(snaps.t, dtype=float)
    return lambda q: np.interp(np.asarray(q, dtype=float), t, frac)
