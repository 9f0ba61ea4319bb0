"""Complexity router: a segment's complexity score picks L1 (one round), L2 (standard) or L3 (deep + jury).

score = w_e min(1, events per minute / rate_ref) + w_v min(1, violations) + w_s H_speed + w_h H_heading,
H = normalised Shannon entropy (0..1) of a fixed-bin histogram: speeds in `bins` bins over
[0, max_speed] (mission limit, else the largest observed speed), headings in `bins` 360/bins-degree
sectors centred on the compass points (east, north-east, ...: a course along an axis, the commonest, would sit on
a sector's edge, where the sign of a velocity component's last bit decides its sector).
Speeds/headings come from the segment's trajectory when the context has one, else from the numeric
`speed*` / `heading*` values of its DSL items.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from uav_debate_eval.core.batches import equal_blocks
from uav_debate_eval.metrics.vec import norm


@dataclass
class Route:
    layer: int
    score: float
    terms: dict[str, float]
    agents: int | None = None  # agents that answer (None: the whole panel)
    reason: str = "complexity"  # complexity | settled (nothing notable) | veto (the veto fixes the label)
    rounds: int | None = None  # most rounds (None: the layer's max_rounds)

    def to_dict(self) -> dict:
        return {"layer": self.layer, "score": self.score, "terms": self.terms, "agents": self.agents,
                "reason": self.reason, "rounds": self.rounds}


def notable(findings: list) -> bool:
    """A finding near a limit: anything above `info` (violations, warnings, margins, events, data quality)."""
    return any(getattr(f, "severity", "info") != "info" for f in findings)


def sparse_route(base: Route, findings: list, vetoed: bool, settled_agents: int = 1, veto_rounds: int = 1) -> Route:
    """The sparse router on top of the complexity score: nothing notable -> L1 with `settled_agents` agents (one by
    default); a vetoed segment at most L2 and `veto_rounds` rounds (the veto fixes its label; one round of the panel
    names the hazard, further rounds could not change the verdict); the rest by complexity."""
    if not notable(findings):
        return Route(1, base.score, base.terms, agents=settled_agents, reason="settled")
    if vetoed:
        return Route(min(base.layer, 2), base.score, base.terms, reason="veto", rounds=veto_rounds)
    return base


def entropy(values: np.ndarray, lo: float, hi: float, bins: int) -> float:
    values = values[np.isfinite(values)]
    if values.size == 0 or hi <= lo:
        return 0.0
    counts, _ = np.histogram(np.clip(values, lo, hi), bins=bins, range=(lo, hi))
    p = counts[counts > 0] / counts.sum()
    return max(0.0, float(-(p * np.log(p)).sum() / math.log(bins)))  # one bin: 0, not -0


def _dsl_series(dsl: Any, prefix: str) -> np.ndarray:
    out = []
    for item in (getattr(dsl, "index", {}) or {}).values():
        for k, v in (getattr(item, "values", {}) or {}).items():
            if str(k).startswith(prefix) and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(float(v))
    return np.asarray(out, dtype=float)


def _series(ctx: Any) -> tuple[np.ndarray, np.ndarray]:
    traj = getattr(ctx, "traj", None)
    if traj is not None and traj.tracks:
        inside = ctx.t_start <= traj.t_start and traj.t_end <= ctx.t_end  # the segment's window already: all of it
        w = traj.window(ctx.t_start, ctx.t_end) if ctx.t_end > ctx.t_start and not inside else traj
        tracks = [tr for tr in w.tracks.values() if len(tr)]
        if not tracks:
            return np.zeros(0), np.zeros(0)
        # Track.speed, .horizontal_speed and .heading of every vehicle end to end, computed once over all samples
        # (pointwise; the course unwrapped along each vehicle's own samples)
        vel = np.concatenate([tr.vel for tr in tracks])
        heading = np.concatenate(_courses(tracks))
        return norm(vel), heading[norm(vel[:, :2]) > 0.2]
    return _dsl_series(ctx.dsl, "speed"), np.radians(_dsl_series(ctx.dsl, "heading"))


def _courses(tracks: list) -> list[np.ndarray]:
    """Track.heading of each track; the tracks of one length unwrapped together, row by row."""
    out: list[np.ndarray] = [np.zeros(0)] * len(tracks)
    for block in equal_blocks([len(tr) for tr in tracks], 64):
        vel = np.stack([tracks[i].vel for i in block])
        rows = np.unwrap(np.arctan2(vel[..., 1], vel[..., 0]), axis=-1)
        for r, i in enumerate(block):
            out[i] = rows[r]
    return out


def segment_violations(safety: Any, t0: float, t1: float) -> list:
    """Violations of `safety` overlapping [t0, t1] (all of them when the window is empty)."""
    vs = list(getattr(safety, "violations", []) or [])
    if t1 <= t0:
        return vs
    return [v for v in vs if v.t_start <= t1 and v.t_end >= t0]


def segment_events(dsl: Any, t0: float, t1: float) -> list:
    evs = list(getattr(dsl, "events", []) or [])
    if t1 <= t0:
        return evs
    return [e for e in evs if e.t <= t1 and (e.t_end if e.t_end is not None else e.t) >= t0]


def route(ctx: Any, weights: dict[str, float], thresholds: tuple[float, float], rate_ref: float = 6.0,
          bins: int = 8, max_speed: float | None = None) -> Route:
    """Score a SegmentContext and pick its layer."""
    minutes = max(ctx.t_end - ctx.t_start, 1e-9) / 60.0
    n_events = len(segment_events(ctx.dsl, ctx.t_start, ctx.t_end))
    n_viol = len(segment_violations(ctx.safety, ctx.t_start, ctx.t_end))
    speed, heading = _series(ctx)
    v_hi = max_speed or (float(np.nanmax(speed)) if speed.size else 0.0)
    terms = {
        "events": min(1.0, n_events / minutes / rate_ref) if ctx.t_end > ctx.t_start else min(1.0, n_events / 10),
        "violations": min(1.0, float(n_viol)),
        "speed_entropy": entropy(speed, 0.0, v_hi, bins),
        "heading_entropy": entropy(np.mod(heading + math.pi / bins, 2 * math.pi), 0.0, 2 * math.pi, bins),
    }
    score = float(sum(weights.get(k, 0.0) * v for k, v in terms.items()))
    layer = 1 if score < thresholds[0] else 2 if score < thresholds[1] else 3
    return Route(layer, score, terms)
