"""The DSL document: compact, citable lines that replace the raw arrays in the debate prompt.

One line per item, each with a stable id, printing `key=value<unit>` numbers:

    DSL v1 mission=<name> type=<type> uavs=<n> t=<t0>..<t1>s
    SCORES[1] flight_control=0.912 coordination=0.780 safety=0.552 overall=0.760
    RISK[k]   violated|near_limit|warning <constraint> <uavs> t=..s worst=.. limit=.. (hard limits first)
    RULE[k]   failed|holds|not_evaluable <rule id> hard|soft <over> rob=<robustness> <worst uavs> t=..s (mission rules)
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

from dataclasses import dataclass, field

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.records import Event
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.dsl import DEFAULT_BUDGET_TOKENS
from uav_debate_eval.dsl.events import detect_events
from uav_debate_eval.dsl.lines import (
    DslItem,
    Line,
    attn_lines,
    event_line,
    form_lines,
    overlaps,
    quality_lines,
    risk_lines,
    rule_lines,
    scores_line,
    segment_lines,
    waypoint_lines,
)
from uav_debate_eval.dsl.tokens import count_tokens, raw_tokens

__all__ = ["DslDocument", "DslItem", "build_dsl"]

DSL_VERSION = 1
KIND_ORDER = ("SCORES", "RISK", "RULE", "DQ", "ATTN", "EVENT", "FORM", "WAYPTS", "SEG")
SUMMARY_RESERVE = 60
NAME_CHARS = 40


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
            "reduction": float(self.reduction),
            "budget_tokens": self.budget_tokens,
            "t_range": None if self.t_range is None else list(self.t_range),
            "summarised": {k: dict(v) for k, v in self.summarised.items()},
            "dropped_ids": list(self.dropped_ids),
            "index": {k: v.to_dict() for k, v in self.index.items()},
            "events": [e.to_dict() for e in self.events],
        }


def _summary_lines(dropped: list[Line]) -> tuple[list[str], dict[str, dict[str, int]]]:
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
    in_range = [e for e in events if overlaps(e.extra.get("t_from", e.t), e.t_end, t_range)]

    t0, t1 = t_range if t_range is not None else (traj.t_start, traj.t_end)
    name = mission.name if len(mission.name) <= NAME_CHARS else mission.name[:NAME_CHARS] + "..."
    header = (f"DSL v{DSL_VERSION} mission={name.replace(' ', '_')} type={mission.type.replace(' ', '_')} "
              f"uavs={len(part.tracks)} t={t0:.2f}..{t1:.2f}s")
    fixed = [scores_line(metrics)]
    candidates = (risk_lines(safety, mission, t_range) + rule_lines(safety, t_range) + quality_lines(safety, t_range)
                  + attn_lines(metrics, in_range, safety, t_range)
                  + [event_line(e) for e in in_range] + form_lines(part, mission)
                  + waypoint_lines(traj, mission) + segment_lines(part))
    candidates.sort(key=lambda ln: (ln.priority, ln.rank, ln.id))

    used = count_tokens(header + "\n") + sum(count_tokens(ln.text + "\n") for ln in fixed)
    kept: list[Line] = []
    dropped: list[Line] = []
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


def _render(header: str, lines: list[Line], summary: list[str]) -> str:
    ordered = sorted(lines, key=lambda ln: _id_key(ln.id))
    return "\n".join([header, *(ln.text for ln in ordered), *summary]) + "\n"
