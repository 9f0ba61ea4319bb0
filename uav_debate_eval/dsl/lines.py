"""The DSL's lines: one builder per kind of item (SCORES, RISK, DQ, ATTN, EVENT, FORM, WAYPTS, SEG), each a `Line`
with its id, its sort keys (priority, rank) and the numbers it prints (dsl.builder orders them, keeps what fits the
budget and counts the rest in SUMMARY lines)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.records import Event
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.dsl.events import ROUTINE_LOG_EVENTS, UNITS
from uav_debate_eval.dsl.segmentation import segment_vehicles
from uav_debate_eval.metrics.kinematics import smooth_tracks

DATA_QUALITY_PRIORITY = 1
SAFETY_EVENT_PRIORITY = 2
TURN_EVENT_PRIORITY = 3
FORMATION_EVENT_PRIORITY = 4
LOW_SCORE = 0.7
MAX_ATTN_SCORES = 3
CLUSTER_WINDOW_S = 10.0
FORM_WINDOWS = 6


@dataclass
class DslItem:
    id: str
    kind: str
    t_start: float | None
    t_end: float | None
    uavs: list[str]
    values: dict[str, float]
    text: str

    def to_dict(self) -> dict:
        return asdict(self)


class Line:
    """One item being printed; every number goes through `num` so values match the text. `fill(line)`, when given,
    prints the item only once its text is asked for: a large swarm has thousands of SEG candidates, and every one
    after the first over the budget is only counted in a SUMMARY line (by kind and group)."""

    def __init__(self, item_id: str, kind: str, uavs=(), t_start=None, t_end=None, priority=0, rank=0.0,
                 group: str = "", fill: Callable[[Line], Any] | None = None):
        self.id, self.kind, self.uavs = item_id, kind, list(uavs)
        self.t_start, self.t_end = t_start, t_end
        self.priority, self.rank, self.group = priority, rank, group
        self.parts: list[str] = [item_id]
        self.values: dict[str, float] = {}
        self._fill = fill

    def _printed(self) -> Line:
        if self._fill is not None:
            fill, self._fill = self._fill, None
            fill(self)
        return self

    def lit(self, s: str) -> Line:
        if not self.group:
            self.group = s  # e.g. ATTN "veto": what a SUMMARY line counts it as
        self.parts.append(s)
        return self

    def num(self, key: str, v: float, unit: str = "", nd: int = 2) -> Line:
        s = f"{v:.{nd}f}"
        if s.startswith("-") and float(s) == 0.0:
            s = s[1:]
        self.values[key] = float(s)
        self.parts.append(f"{key}={s}{unit}")
        return self

    def span(self, t0: float, t1: float | None) -> Line:
        if t1 is None or abs(t1 - t0) < 5e-3:
            return self.num("t", t0, "s")
        a, b = f"{t0:.2f}", f"{t1:.2f}"
        self.values["t_start"], self.values["t_end"] = float(a), float(b)
        self.parts.append(f"t={a}..{b}s")
        return self

    @property
    def text(self) -> str:
        return " ".join(self._printed().parts)

    def item(self) -> DslItem:
        return DslItem(self.id, self.kind, self.t_start, self.t_end, self.uavs, dict(self._printed().values),
                       self.text)


def _uavs(uavs: list[str], limit: int = 6) -> str:
    return ",".join(uavs) if len(uavs) <= limit else ",".join(uavs[:limit]) + f",+{len(uavs) - limit}"


def overlaps(a0: float, a1: float | None, t_range: tuple[float, float] | None) -> bool:
    if t_range is None:
        return True
    a1 = a0 if a1 is None else a1
    return a0 <= t_range[1] and a1 >= t_range[0]


def risk_lines(safety, mission: Mission, t_range) -> list[Line]:
    """RISK items of the whole flight (stable ids), filtered to t_range."""
    if safety is None:
        return []
    rows: list[tuple] = []
    for v in safety.violations:
        rows.append(("violated", v.constraint, v.uavs, v.t_start, v.t_end, v.worst_value, v.limit, None))
    hard = {v.constraint for v in safety.violations}
    frac = mission.thresholds.borderline_fraction
    if t_range is None:
        for name, m in sorted(safety.margins.items()):
            r = m.get("ratio")
            if name not in hard and r is not None and r >= 1.0 - frac:
                rows.append(("near_limit", name, [], None, None, m.get("worst_value"), m.get("limit"), r))
    for w in safety.warnings:
        rows.append(("warning", w.get("kind", "warning"), list(w.get("uavs", [])), w.get("t"), w.get("t_predicted"),
                     w.get("value"), w.get("limit"), None))
    out = []
    for k, (status, name, uavs, t0, t1, worst, limit, ratio) in enumerate(rows, 1):
        if t0 is not None and not overlaps(t0, t1, t_range):
            continue
        # a rule's robustness is in its own formula's units
        unit = "" if name.startswith("rule:") else UNITS.get(name, "s" if name == "time_to_geofence" else "m")
        pr = 0 if status != "warning" else SAFETY_EVENT_PRIORITY
        line = Line(f"RISK[{k}]", "RISK", uavs, t0, t1, priority=pr, rank=k, group=status).lit(status).lit(name)
        if uavs:
            line.lit(_uavs(uavs))
        if t0 is not None:
            line.span(t0, t1)
        if worst is not None:
            line.num("worst", worst, unit, 3 if unit == "m" else 2)
        if limit is not None:
            line.num("limit", limit, unit, 3 if unit == "m" else 2)
        if ratio is not None:
            line.num("used", 100.0 * ratio, "%", 1)
        out.append(line)
    return out


def rule_lines(safety, t_range) -> list[Line]:
    """RULE[k] items: the mission's k-th rule (stable ids), its outcome and robustness; a failed rule appears in a
    window only where one of its failing intervals overlaps it."""
    out = []
    for k, res in enumerate(getattr(safety, "rules", None) or [], 1):
        failed = res.satisfied is False
        spans = [s for s in res.intervals if overlaps(s[0], s[1], t_range)]
        if failed and not spans and t_range is not None:
            continue
        status = "failed" if failed else "holds" if res.satisfied else "not_evaluable"
        line = Line(f"RULE[{k}]", "RULE", res.worst, spans[0][0] if spans else None, spans[-1][1] if spans else None,
                    priority=0 if failed else SAFETY_EVENT_PRIORITY, rank=k, group=status)
        line.lit(status).lit(res.rule.id).lit(res.rule.severity).lit(res.rule.over)
        if res.robustness is not None:
            line.num("rob", res.robustness, "", 3)
        if res.worst:
            line.lit(_uavs(res.worst))
        if spans:
            line.span(spans[0][0], spans[-1][1])
        out.append(line)
    return out


def quality_lines(safety, t_range) -> list[Line]:
    """DQ items: the flight's data-quality findings (stable ids), filtered to t_range."""
    dq = getattr(safety, "data_quality", None)
    out = []
    for k, f in enumerate(dq.findings if dq is not None else [], 1):
        if not overlaps(f.t_start, f.t_end, t_range):
            continue
        line = Line(f"DQ[{k}]", "DQ", f.uavs, f.t_start, f.t_end, priority=DATA_QUALITY_PRIORITY, rank=k)
        line.lit(f.kind).lit(_uavs(f.uavs)).span(f.t_start, f.t_end)
        for key, v in f.values.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                line.num(key, float(v))
        out.append(line)
    return out


def event_line(e: Event) -> Line:
    t0 = e.extra.get("t_from", e.t) if e.type == "sharp_turn" else e.t
    pr = {"sharp_turn": TURN_EVENT_PRIORITY, "formation_breach": FORMATION_EVENT_PRIORITY,
          "autopilot_event": FORMATION_EVENT_PRIORITY, "mission_command": FORMATION_EVENT_PRIORITY}.get(
        e.type, SAFETY_EVENT_PRIORITY)
    rank = e.t if pr == SAFETY_EVENT_PRIORITY else -(e.value or 0.0)
    line = Line(e.id, "EVENT", e.uavs, t0, e.t_end if e.t_end is not None else e.t, priority=pr, rank=rank,
                 group=e.type).lit(e.type).lit(_uavs(e.uavs))
    line.span(e.t, None if e.type == "sharp_turn" else e.t_end)
    if e.value is not None:
        line.num("value", e.value, e.unit or "", 1 if e.unit == "deg" else 2)
    if "t_min" in e.extra:
        line.num("t_min", e.extra["t_min"], "s")
    if "direction" in e.extra:
        line.lit(str(e.extra["direction"]))
    if e.extra.get("silent"):
        line.lit("silent")
    if "label" in e.extra:  # what an autopilot logged: mode=RTL reason=radio_failsafe, GPS_glitch, ...
        line.lit(str(e.extra["label"]))
    return line


def attn_lines(metrics, events: list[Event], safety, t_range) -> list[Line]:
    out: list[Line] = []

    def new(uavs=(), t0=None, t1=None) -> Line:
        line = Line(f"ATTN[{len(out) + 1}]", "ATTN", uavs, t0, t1, priority=1, rank=len(out))
        out.append(line)
        return line

    if safety is not None:
        vetoes = [(a, b) for a, b in safety.veto_intervals if overlaps(a, b, t_range)]
        if vetoes:
            a, b = max(vetoes, key=lambda v: (v[1] - v[0], -v[0]))
            new([], a, b).lit("veto").num("windows", len(vetoes), "", 0).num(
                "total", sum(q - p for p, q in vetoes), "s").lit("longest").span(a, b)
    if metrics is not None:
        low = [(d["score"], cat, m, d) for cat, ms in metrics.details.items() for m, d in ms.items()
               if d["score"] is not None and d["score"] < LOW_SCORE]
        for score, cat, m, d in sorted(low, key=lambda x: (x[0], x[1], x[2]))[:MAX_ATTN_SCORES]:
            line = new().lit("low_score").lit(f"{cat}.{m}").num("score", score, "", 3)
            if d["value"] is not None:
                line.num("value", d["value"], "" if d["unit"] in ("fraction", "ratio", "violations", "faults")
                         else d["unit"], 3)
    events = [e for e in events if e.type not in ROUTINE_LOG_EVENTS]  # an autopilot's log book is no hazard
    if events:
        ts = np.array([e.t for e in events])
        counts = np.searchsorted(ts, ts + CLUSTER_WINDOW_S, side="right") - np.arange(len(ts))
        i = int(np.argmax(counts))
        if counts[i] >= 3:
            new([], float(ts[i]), float(ts[i]) + CLUSTER_WINDOW_S).lit("event_cluster").span(
                float(ts[i]), float(ts[i]) + CLUSTER_WINDOW_S).num("events", counts[i], "", 0)
        per: dict[str, int] = {}
        for e in events:
            if e.type != "sharp_turn":
                for u in e.uavs:
                    per[u] = per.get(u, 0) + 1
        if per:
            u, n = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            if n >= 2:
                new([u]).lit("vehicle").lit(u).num("safety_events", n, "", 0)
    return out


def form_lines(traj: SwarmTrajectory, mission: Mission) -> list[Line]:
    if len(traj.tracks) < 2:
        return []
    from uav_debate_eval.metrics.swarm import formation_error, separation, snapshots

    snap = snapshots(traj)
    err, ref = formation_error(snap, mission)
    sep = separation(snap)
    if ref is None:
        return []
    edges = np.linspace(snap.t[0], snap.t[-1], FORM_WINDOWS + 1) if len(snap.t) > 1 else np.array([snap.t[0]] * 2)
    out: list[Line] = []
    for k in range(FORM_WINDOWS if len(snap.t) > 1 else 1):
        lo, hi = edges[k], edges[k + 1]
        sel = (snap.t >= lo) & ((snap.t < hi) if k < FORM_WINDOWS - 1 else (snap.t <= hi))
        e = err[sel]
        finite = e[np.isfinite(e)]
        if not finite.size:
            continue
        col_max = np.nanmax(np.where(np.isfinite(e), e, -np.inf), axis=0)
        worst = snap.uav_ids[int(np.argmax(col_max))]
        d = sep.d_min[sel]
        line = Line(f"FORM[{len(out) + 1}]", "FORM", [worst], float(lo), float(hi), priority=5, rank=k, group="window")
        line.lit(f"ref={ref}").span(float(lo), float(hi))
        line.num("err_rms", float(np.sqrt(np.mean(finite**2))), "m").num("err_max", float(finite.max()), "m")
        line.num("tol", mission.formation_tolerance_m, "m").lit(f"worst={worst}")
        if np.isfinite(d).any():
            line.num("d_min", float(np.min(d[np.isfinite(d)])), "m")
        out.append(line)
    return out


def waypoint_lines(traj: SwarmTrajectory, mission: Mission) -> list[Line]:
    if not mission.waypoints:
        return []
    from uav_debate_eval.metrics.coordination import due_waypoints, waypoint_status

    status = waypoint_status(traj, mission)
    due = due_waypoints(traj, mission)  # a live segment judges only the waypoints due by its end
    total = sum(sum(d) for d in due.values())
    reached = sum(r for u, s in status.items() for (r, _), d in zip(s, due[u], strict=True) if d)
    out = [Line("WAYPTS[1]", "WAYPTS", sorted(status), priority=6, group="swarm").lit("swarm")
           .num("reached", reached, "", 0).num("total", total, "", 0).num("tol", mission.waypoint_tolerance_m, "m")]
    for u, s in status.items():
        missed = [(i, d) for i, (r, d) in enumerate(s, 1) if not r and due[u][i - 1]]
        if not missed:
            continue
        worst = max(d for _, d in missed)
        line = Line(f"WAYPTS[{len(out) + 1}]", "WAYPTS", [u], priority=6, rank=-worst, group="vehicle").lit(u)
        line.num("missed", len(missed), "", 0).num("total", sum(due[u]), "", 0)
        line.lit("which=" + ",".join(str(i) for i, _ in missed))
        if np.isfinite(worst):
            line.num("worst_miss", worst, "m")
        else:
            line.lit("not_flown")
        out.append(line)
    return out


def prepare_dsl(part: SwarmTrajectory) -> None:
    """Compute now the costly part of build_dsl(..., part=part) that needs neither the metrics nor the flight's
    events: the part's vehicle segments (kept on its kinematics)."""
    segment_vehicles(smooth_tracks(list(part.tracks.values())))


def segment_lines(traj: SwarmTrajectory) -> list[Line]:
    segs = []
    for per_vehicle in segment_vehicles(smooth_tracks(list(traj.tracks.values()))):
        segs += per_vehicle
    segs.sort(key=lambda s: (s.t_start, s.uav))
    return [Line(f"SEG[{k}]", "SEG", [s.uav], s.t_start, s.t_end, priority=8 if s.kind in ("straight", "hover") else 7,
                  rank=-s.duration, group=s.kind, fill=functools.partial(_print_segment, s))
            for k, s in enumerate(segs, 1)]


def _print_segment(s: Any, line: Line) -> None:
    line.lit(s.uav).lit(s.kind).span(s.t_start, s.t_end)
    line.num("v", s.mean_speed, "m/s")
    if s.kind != "hover":
        line.num("hdg", s.heading_deg, "deg", 0)
    if s.kind == "turn" or abs(s.turn_deg) >= 5.0:
        line.num("turn", s.turn_deg, "deg", 0)
    if s.kind in ("climb", "descent") or abs(s.dz) >= 0.5:
        line.num("dz", s.dz, "m", 1)
    line.num("len", s.length, "m", 1)


def scores_line(metrics) -> Line:
    line = Line("SCORES[1]", "SCORES")
    for k in ("flight_control", "coordination", "safety", "overall"):
        v = metrics.scores.get(k) if metrics is not None else None
        if v is None:
            line.lit(f"{k}=n/a")
        else:
            line.num(k, v, "", 3)
    return line
