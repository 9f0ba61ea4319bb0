"""The DSL document: compact, citable lines that replace the raw arrays in the debate prompt.

One line per item, each with a stable id, printing `key=value<unit>` numbers:

    DSL v1 mission=<name> type=<type> uavs=<n> t=<t0>..<t1>s
    SCORES[1] flight_control=0.912 coordination=0.780 safety=0.552 overall=0.760
    RISK[k]   violated|near_limit|warning <constraint> <uavs> t=..s worst=.. limit=.. (hard limits first)
    DQ[k]     <finding kind> <uavs> t=..s <numbers>: a recording artefact (data quality), not a hazard
    ATTN[k]   what deserves scrutiny: veto windows, low metric scores, event clusters, busiest vehicle
    EVENT[k]  <type> <uavs> t=..s value=<v><unit> (ids shared with detect_events / the report)
    FORM[k]   formation state per time window: err_rms, err_max, tol, d_min
    WAYPTS[k] waypoints reached (swarm) and per vehicle with misses
    SEG[k]    <uav> <kind> t=..s v= hdg= turn= dz= len=
    SUMMARY   dropped=<n> <KIND> <type>=<count> ... (what the size budget cut)

`DslItem.values` holds exactly the numbers printed on the item's line (parsed back from the
printed text), so a citation such as "EVENT[2] value=4.00 m/s" can be verified with
`doc.resolve("EVENT[2]").values["value"]`. RISK and EVENT ids come from the whole flight, so
they stay the same in every segment's DSL; SEG/ATTN/FORM/WAYPTS ids are per document and
deterministic.

Size budget: the header and SCORES always stay; the other items are taken in priority order
(RISK violations and near-limit margins, ATTN, safety events and RISK warnings, sharp turns,
formation breaches, FORM, WAYPTS, manoeuvre SEG, then straight/hover SEG)
until the next item would not fit; everything after it is dropped and counted in SUMMARY lines.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.records import Event
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.dsl import DEFAULT_BUDGET_TOKENS
from uav_debate_eval.dsl.events import UNITS, detect_events
from uav_debate_eval.dsl.segmentation import segment_vehicles
from uav_debate_eval.dsl.tokens import count_tokens, raw_tokens
from uav_debate_eval.metrics.kinematics import smooth_tracks

DSL_VERSION = 1
KIND_ORDER = ("SCORES", "RISK", "DQ", "ATTN", "EVENT", "FORM", "WAYPTS", "SEG")
DATA_QUALITY_PRIORITY = 1
SAFETY_EVENT_PRIORITY = 2
TURN_EVENT_PRIORITY = 3
FORMATION_EVENT_PRIORITY = 4
LOW_SCORE = 0.7
MAX_ATTN_SCORES = 3
CLUSTER_WINDOW_S = 10.0
FORM_WINDOWS = 6
SUMMARY_RESERVE = 60
NAME_CHARS = 40


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


@dataclass
class DslDocument:
    text: str
    tokens: int
    raw_tokens: int
    index: dict[str, DslItem]
    events: list[Event]
    summarised: dict[str, dict[str, int]] = field(default_factory=dict)
    dropped_ids: list[str] = field(default_factory=list)
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    t_range: tuple[float, float] | None = None

    @property
    def reduction(self) -> float:
        """1 - tokens / raw_tokens (0 when there is no raw data)."""
        return 1.0 - self.tokens / self.raw_tokens if self.raw_tokens else 0.0

    def resolve(self, item_id: str) -> DslItem:
        """The item printed under `item_id`; KeyError names ids that are not in the text."""
        try:
            return self.index[item_id.strip()]
        except KeyError:
            raise KeyError(f"{item_id} is not an id in this DSL") from None

    def to_dict(self) -> dict:
        return {
            "version": DSL_VERSION,
            "text": self.text,
            "tokens": self.tokens,
            "raw_tokens": self.raw_tokens,
            "reduction": round(self.reduction, 6),
            "budget_tokens": self.budget_tokens,
            "t_range": None if self.t_range is None else list(self.t_range),
            "summarised": {k: dict(v) for k, v in self.summarised.items()},
            "dropped_ids": list(self.dropped_ids),
            "index": {k: v.to_dict() for k, v in self.index.items()},
            "events": [e.to_dict() for e in self.events],
        }


class _Line:
    """One item being printed; every number goes through `num` so values match the text. `fill(line)`, when given,
    prints the item only once its text is asked for: a large swarm has thousands of SEG candidates, and every one
    after the first over the budget is only counted in a SUMMARY line (by kind and group)."""

    def __init__(self, item_id: str, kind: str, uavs=(), t_start=None, t_end=None, priority=0, rank=0.0,
                 group: str = "", fill: Callable[[_Line], Any] | None = None):
        self.id, self.kind, self.uavs = item_id, kind, list(uavs)
        self.t_start, self.t_end = t_start, t_end
        self.priority, self.rank, self.group = priority, rank, group
        self.parts: list[str] = [item_id]
        self.values: dict[str, float] = {}
        self._fill = fill

    def _printed(self) -> _Line:
        if self._fill is not None:
            fill, self._fill = self._fill, None
            fill(self)
        return self

    def lit(self, s: str) -> _Line:
        if not self.group:
            self.group = s  # e.g. ATTN "veto": what a SUMMARY line counts it as
        self.parts.append(s)
        return self

    def num(self, key: str, v: float, unit: str = "", nd: int = 2) -> _Line:
        s = f"{v:.{nd}f}"
        if s.startswith("-") and float(s) == 0.0:
            s = s[1:]
        self.values[key] = float(s)
        self.parts.append(f"{key}={s}{unit}")
        return self

    def span(self, t0: float, t1: float | None) -> _Line:
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


def _overlaps(a0: float, a1: float | None, t_range: tuple[float, float] | None) -> bool:
    if t_range is None:
        return True
    a1 = a0 if a1 is None else a1
    return a0 <= t_range[1] and a1 >= t_range[0]


def _risk_lines(safety, mission: Mission, t_range) -> list[_Line]:
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
        if t0 is not None and not _overlaps(t0, t1, t_range):
            continue
        unit = UNITS.get(name, "s" if name == "time_to_geofence" else "m")
        pr = 0 if status != "warning" else SAFETY_EVENT_PRIORITY
        line = _Line(f"RISK[{k}]", "RISK", uavs, t0, t1, priority=pr, rank=k, group=status).lit(status).lit(name)
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


def _quality_lines(safety, t_range) -> list[_Line]:
    """DQ items: the flight's data-quality findings (stable ids), filtered to t_range."""
    dq = getattr(safety, "data_quality", None)
    out = []
    for k, f in enumerate(dq.findings if dq is not None else [], 1):
        if not _overlaps(f.t_start, f.t_end, t_range):
            continue
        line = _Line(f"DQ[{k}]", "DQ", f.uavs, f.t_start, f.t_end, priority=DATA_QUALITY_PRIORITY, rank=k)
        line.lit(f.kind).lit(_uavs(f.uavs)).span(f.t_start, f.t_end)
        for key, v in f.values.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                line.num(key, float(v))
        out.append(line)
    return out


def _event_line(e: Event) -> _Line:
    t0 = e.extra.get("t_from", e.t) if e.type == "sharp_turn" else e.t
    pr = {"sharp_turn": TURN_EVENT_PRIORITY, "formation_breach": FORMATION_EVENT_PRIORITY}.get(
        e.type, SAFETY_EVENT_PRIORITY)
    rank = e.t if pr == SAFETY_EVENT_PRIORITY else -(e.value or 0.0)
    line = _Line(e.id, "EVENT", e.uavs, t0, e.t_end if e.t_end is not None else e.t, priority=pr, rank=rank,
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
    return line


def _attn_lines(metrics, events: list[Event], safety, t_range) -> list[_Line]:
    out: list[_Line] = []

    def new(uavs=(), t0=None, t1=None) -> _Line:
        line = _Line(f"ATTN[{len(out) + 1}]", "ATTN", uavs, t0, t1, priority=1, rank=len(out))
        out.append(line)
        return line

    if safety is not None:
        vetoes = [(a, b) for a, b in safety.veto_intervals if _overlaps(a, b, t_range)]
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


def _form_lines(traj: SwarmTrajectory, mission: Mission) -> list[_Line]:
    if len(traj.tracks) < 2:
        return []
    from uav_debate_eval.metrics.swarm import formation_error, separation, snapshots

    snap = snapshots(traj)
    err, ref = formation_error(snap, mission)
    sep = separation(snap)
    if ref is None:
        return []
    edges = np.linspace(snap.t[0], snap.t[-1], FORM_WINDOWS + 1) if len(snap.t) > 1 else np.array([snap.t[0]] * 2)
    out = []
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
        line = _Line(f"FORM[{len(out) + 1}]", "FORM", [worst], float(lo), float(hi), priority=5, rank=k, group="window")
        line.lit(f"ref={ref}").span(float(lo), float(hi))
        line.num("err_rms", float(np.sqrt(np.mean(finite**2))), "m").num("err_max", float(finite.max()), "m")
        line.num("tol", mission.formation_tolerance_m, "m").lit(f"worst={worst}")
        if np.isfinite(d).any():
            line.num("d_min", float(np.min(d[np.isfinite(d)])), "m")
        out.append(line)
    return out


def _waypoint_lines(traj: SwarmTrajectory, mission: Mission) -> list[_Line]:
    if not mission.waypoints:
        return []
    from uav_debate_eval.metrics.coordination import waypoint_status

    status = waypoint_status(traj, mission)
    total = sum(len(s) for s in status.values())
    reached = sum(r for s in status.values() for r, _ in s)
    out = [_Line("WAYPTS[1]", "WAYPTS", sorted(status), priority=6, group="swarm").lit("swarm")
           .num("reached", reached, "", 0).num("total", total, "", 0).num("tol", mission.waypoint_tolerance_m, "m")]
    for u, s in status.items():
        missed = [(i, d) for i, (r, d) in enumerate(s, 1) if not r]
        if not missed:
            continue
        worst = max(d for _, d in missed)
        line = _Line(f"WAYPTS[{len(out) + 1}]", "WAYPTS", [u], priority=6, rank=-worst, group="vehicle").lit(u)
        line.num("missed", len(missed), "", 0).num("total", len(s), "", 0)
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


def _segment_lines(traj: SwarmTrajectory) -> list[_Line]:
    segs = []
    for per_vehicle in segment_vehicles(smooth_tracks(list(traj.tracks.values()))):
        segs += per_vehicle
    segs.sort(key=lambda s: (s.t_start, s.uav))
    return [_Line(f"SEG[{k}]", "SEG", [s.uav], s.t_start, s.t_end, priority=8 if s.kind in ("straight", "hover") else 7,
                  rank=-s.duration, group=s.kind, fill=functools.partial(_print_segment, s))
            for k, s in enumerate(segs, 1)]


def _print_segment(s: Any, line: _Line) -> None:
    line.lit(s.uav).lit(s.kind).span(s.t_start, s.t_end)
    line.num("v", s.mean_speed, "m/s")
    if s.kind != "hover":
        line.num("hdg", s.heading_deg, "deg", 0)
    if s.kind == "turn" or abs(s.turn_deg) >= 5.0:
        line.num("turn", s.turn_deg, "deg", 0)
    if s.kind in ("climb", "descent") or abs(s.dz) >= 0.5:
        line.num("dz", s.dz, "m", 1)
    line.num("len", s.length, "m", 1)


def _scores_line(metrics) -> _Line:
    line = _Line("SCORES[1]", "SCORES")
    for k in ("flight_control", "coordination", "safety", "overall"):
        v = metrics.scores.get(k) if metrics is not None else None
        if v is None:
            line.lit(f"{k}=n/a")
        else:
            line.num(k, v, "", 3)
    return line


def _summary_lines(dropped: list[_Line]) -> tuple[list[str], dict[str, dict[str, int]]]:
    summary: dict[str, dict[str, int]] = {}
    for line in dropped:
        g = summary.setdefault(line.kind, {})
        key = line.group or "other"
        g[key] = g.get(key, 0) + 1
    text = []
    for kind in KIND_ORDER:
        if kind in summary:
            parts = " ".join(f"{k}={v}" for k, v in sorted(summary[kind].items()))
            text.append(f"SUMMARY dropped={sum(summary[kind].values())} {kind} {parts}")
    return text, summary


def build_dsl(traj: SwarmTrajectory, mission: Mission, metrics=None, safety=None,
              budget_tokens: int = DEFAULT_BUDGET_TOKENS, t_range: tuple[float, float] | None = None,
              events: list[Event] | None = None, part: SwarmTrajectory | None = None) -> DslDocument:
    """The DSL of `traj` (or of its part within t_range) with its index and size figures.

    metrics/safety: MetricsResult / SafetyResult to print; computed when None (metrics on the
    window, safety on the whole flight so RISK ids are global). events: the whole flight's
    detect_events() output, to avoid recomputing it per segment. part: traj.window(*t_range) when
    the caller already cut it, so the window's cached kinematics and snapshots are reused.
    """
    if not traj.tracks:
        raise InputError("trajectory has no vehicles")
    if budget_tokens <= 0:
        raise InputError(f"DSL budget must be a positive number of tokens, got {budget_tokens}")
    if safety is None:
        from uav_debate_eval.metrics.compute import run_checker

        safety = run_checker(traj, mission)
    if events is None:
        events = detect_events(traj, mission, safety)
    if t_range is None:
        part = traj
    else:
        t_range = (float(t_range[0]), float(t_range[1]))
        part = traj.window(*t_range) if part is None else part
        if not part.tracks:
            raise InputError(f"no samples in t_range {t_range[0]:g}..{t_range[1]:g} s")
    if metrics is None:
        from uav_debate_eval.metrics.compute import compute_metrics

        metrics = compute_metrics(part, mission, safety)
    in_range = [e for e in events if _overlaps(e.extra.get("t_from", e.t), e.t_end, t_range)]

    t0, t1 = t_range if t_range is not None else (traj.t_start, traj.t_end)
    name = mission.name if len(mission.name) <= NAME_CHARS else mission.name[:NAME_CHARS] + "..."
    header = (f"DSL v{DSL_VERSION} mission={name.replace(' ', '_')} type={mission.type.replace(' ', '_')} "
              f"uavs={len(part.tracks)} t={t0:.2f}..{t1:.2f}s")
    fixed = [_scores_line(metrics)]
    candidates = (_risk_lines(safety, mission, t_range) + _quality_lines(safety, t_range)
                  + _attn_lines(metrics, in_range, safety, t_range)
                  + [_event_line(e) for e in in_range] + _form_lines(part, mission)
                  + _waypoint_lines(traj, mission) + _segment_lines(part))
    candidates.sort(key=lambda ln: (ln.priority, ln.rank, ln.id))

    used = count_tokens(header + "\n") + sum(count_tokens(ln.text + "\n") for ln in fixed)
    kept: list[_Line] = []
    dropped: list[_Line] = []
    for line in candidates:
        if dropped:  # once one line is dropped, so is every later one (their cost is not needed)
            dropped.append(line)
            continue
        cost = count_tokens(line.text + "\n")
        if used + cost + SUMMARY_RESERVE <= budget_tokens:
            kept.append(line)
            used += cost
        else:
            dropped.append(line)
    while True:
        summary_text, summary = _summary_lines(dropped)
        body = _render(header, fixed + kept, summary_text)
        tokens = count_tokens(body)
        if tokens <= budget_tokens or not kept:
            break
        dropped.insert(0, kept.pop())
    index = {ln.id: ln.item() for ln in fixed + kept}
    dropped_ids = sorted((ln.id for ln in dropped), key=_id_key)
    return DslDocument(body, tokens, raw_tokens(traj, t_range), index, in_range, summary, dropped_ids,
                       budget_tokens, t_range)


def _id_key(item_id: str) -> tuple[int, int]:
    kind, _, num = item_id.partition("[")
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), int(num.rstrip("]") or 0)


def _render(header: str, lines: list[_Line], summary: list[str]) -> str:
    ordered = sorted(lines, key=lambda ln: _id_key(ln.id))
    return "\n".join([header, *(ln.text for ln in ordered), *summary]) + "\n"
