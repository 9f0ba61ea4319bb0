"""Swarm-level mission segments: the debate runs once per segment.

mode="window": fixed windows of `window_s` from the first sample; a last piece shorter than a
third of a window joins the previous one.

mode="phase": the swarm's mean motion (mean over vehicles of the smoothed velocity on the common
grid) is classified per step into hover (mean speed < 0.3 m/s), climb / descent (mean vz beyond
+/-0.5 m/s) or cruise, averaged over a 5 s window; runs shorter than `min_phase_s` (10 s) are
absorbed by a neighbour. Segments are also cut at the edges of the safety checker's veto intervals
(so a violation gets its own segment, labelled "veto"), then pieces longer than `max_phase_s`
(120 s) are split evenly so every debate sees a bounded amount of flight.
Ids are MSEG[1..n] in time order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import uniform_filter1d

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.dsl.segmentation import HOVER_SPEED, VERTICAL_SPEED, _absorb_short, _runs
from uav_debate_eval.metrics.vec import norm

PHASES = ("cruise", "climb", "descent", "hover")
PHASE_WINDOW_S = 5.0
MIN_PHASE_S = 10.0
MAX_PHASE_S = 120.0
MIN_VETO_PIECE_S = 1.0


@dataclass
class MissionSegment:
    id: str
    t_start: float
    t_end: float
    label: str

    def to_dict(self) -> dict:
        return {"id": self.id, "t_start": self.t_start, "t_end": self.t_end, "label": self.label}


def _to_ms(pieces: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Bounds to the millisecond, as the segments carry them; the last end rounded up, so that it still holds the
    flight's last sample (a log stamps in microseconds: a segment of a single late sample was left empty)."""
    out = [(round(a, 3), round(b, 3), lab) for a, b, lab in pieces]
    if out and pieces[-1][1] - out[-1][1] > 1e-9:
        out[-1] = (out[-1][0], round(out[-1][1] + 0.001, 3), out[-1][2])
    return out


def _number(pieces: list[tuple[float, float, str]]) -> list[MissionSegment]:
    return [MissionSegment(f"MSEG[{k}]", a, b, lab) for k, (a, b, lab) in enumerate(pieces, 1)]


def _windows(t0: float, t1: float, window_s: float) -> list[tuple[float, float, str]]:
    if window_s <= 0:
        raise InputError(f"window length must be > 0 s, got {window_s:g}")
    edges = list(np.arange(t0, t1, window_s)) + [t1]
    if len(edges) > 2 and edges[-1] - edges[-2] < window_s / 3:
        del edges[-2]
    if len(edges) < 2:
        edges = [t0, t1]
    return [(float(a), float(b), f"window {k}") for k, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True), 1)]


def _phases(traj: SwarmTrajectory) -> list[tuple[float, float, str]]:
    from uav_debate_eval.metrics.swarm import snapshots

    snap = snapshots(traj)
    t = snap.t
    if len(t) < 2:
        return [(traj.t_start, traj.t_end, "cruise")]
    dt = float(t[1] - t[0])
    w = max(1, int(round(PHASE_WINDOW_S / dt)))
    valid = snap.valid[..., None]
    n = np.maximum(snap.valid.sum(axis=1), 1)[:, None]
    mean_v = (np.where(valid, snap.vel, 0.0)).sum(axis=1) / n
    speed = uniform_filter1d(norm(np.where(valid, snap.vel, 0.0)).sum(axis=1) / n[:, 0], w,
                             mode="nearest")
    vz = uniform_filter1d(mean_v[:, 2], w, mode="nearest")
    labels = np.zeros(len(t), dtype=int)
    labels[vz > VERTICAL_SPEED] = 1
    labels[vz < -VERTICAL_SPEED] = 2
    labels[speed < HOVER_SPEED] = 3
    runs = _absorb_short(_runs(labels), max(1, int(round(MIN_PHASE_S / dt))))
    return [(float(t[a]), float(t[min(b, len(t) - 1)]), PHASES[lab]) for lab, a, b in runs]


def _cut_at_vetoes(pieces: list[tuple[float, float, str]], vetoes: list[tuple[float, float]]
                   ) -> list[tuple[float, float, str]]:
    out = []
    for a, b, lab in pieces:
        cuts = sorted({x for v in vetoes for x in v if a + MIN_VETO_PIECE_S <= x <= b - MIN_VETO_PIECE_S})
        edges = [a, *cuts, b]
        for p, q in zip(edges[:-1], edges[1:], strict=True):
            mid = (p + q) / 2
            inside = any(v0 <= mid <= v1 for v0, v1 in vetoes)
            out.append((p, q, "veto" if inside else lab))
    return out


def _split_long(pieces: list[tuple[float, float, str]], max_s: float) -> list[tuple[float, float, str]]:
    out = []
    for a, b, lab in pieces:
        k = max(1, int(np.ceil((b - a) / max_s - 1e-9)))
        edges = np.linspace(a, b, k + 1)
        out += [(float(p), float(q), lab) for p, q in zip(edges[:-1], edges[1:], strict=True)]
    return out


def mission_segments(traj: SwarmTrajectory, mission: Mission, mode: str = "phase", window_s: float = 30.0,
                     safety=None) -> list[MissionSegment]:
    """Swarm-level segments covering [traj.t_start, traj.t_end] (see module docstring)."""
    if not traj.tracks:
        raise InputError("trajectory has no vehicles")
    t0, t1 = traj.t_start, traj.t_end
    if mode == "window":
        return _number(_with_samples(traj, _to_ms(_windows(t0, t1, window_s))))
    if mode != "phase":
        raise InputError(f"unknown segment mode '{mode}' (expected phase or window)")
    if safety is None:
        from uav_debate_eval.metrics.compute import run_checker

        safety = run_checker(traj, mission)
    pieces = _phases(traj)
    # the phases end on the checker's grid, which may stop short of the flight's last stamp (a log's microseconds)
    pieces[-1] = (pieces[-1][0], max(pieces[-1][1], t1), pieces[-1][2])
    if safety is not None and safety.veto_intervals:
        pieces = _cut_at_vetoes(pieces, list(safety.veto_intervals))
    return _number(_with_samples(traj, _to_ms(_split_long(pieces, MAX_PHASE_S))))


def _with_samples(traj: SwarmTrajectory, pieces: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """A piece inside a logging gap (no vehicle has a sample in it, as a telemetry log's long gaps leave) is
    joined to the piece before it (the first one to the next), so every segment has samples to describe: checked on
    the bounds the segments carry (to the millisecond: a sliver between two vetoes 0.1 s apart can hold its one
    sample only before rounding)."""
    t = np.unique(np.concatenate([tr.t for tr in traj.tracks.values()]))
    out: list[tuple[float, float, str]] = []
    pending = None
    for a, b, lab in pieces:
        i = np.searchsorted(t, a, side="left")
        empty = i >= len(t) or t[i] > b
        if empty and out:
            out[-1] = (out[-1][0], b, out[-1][2])
        elif empty:
            pending = a if pending is None else pending
        else:
            out.append((a if pending is None else pending, b, lab))
            pending = None
    return out or pieces
