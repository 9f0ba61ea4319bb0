"""The findings catalogue: what the deterministic layers verified, one short sentence each, ranked.

A finding is written by the tool, never by a model: its sentence names the vehicles, the constraint or
metric, the flight times and the numbers, and it carries the ids it rests on (`refs`: RISK/EVENT/FORM/WAYPTS
DSL ids and `category.metric` names) and one or more specific candidate recommendations. Sources, in the
order of `SEVERITY`: violations (hazard); predictive warnings, margins near a limit, proximity / altitude-rate /
link-loss events, sharp turns by part of the swarm, formation breaches, waypoint misses (warning); the
recording's data-quality findings (data_quality); whole-swarm route turns and low metric scores (info).
The panel chooses among these; `key` identifies the same finding in a segment's and in the flight's list.
"""

from __future__ import annotations

from typing import Any

import uav_debate_eval.findings.recommend as recommend
from uav_debate_eval.findings.autopilot import autopilot_findings
from uav_debate_eval.findings.model import SEVERITY, VerifiedFinding
from uav_debate_eval.findings.text import num, span, vehicles

UNITS = {"min_separation": "m", "max_speed": "m/s", "max_vertical_speed": "m/s", "geofence": "m",
         "stale_data": "s", "attitude_control": "deg"}
#: A metric scoring below this is worth an info finding (when nothing stronger already covers it).
LOW_SCORE = 0.5
#: A soft rule's worst failing runs (vehicles or pairs) that become findings.
MAX_RULE_RUNS = 5
_WARNING_EVENTS = ("proximity", "altitude_rate", "link_loss", "formation_breach")


def _overlaps(t0: float | None, t1: float | None, rng: tuple[float, float] | None) -> bool:
    if rng is None or t0 is None:
        return True
    return t0 <= rng[1] and (t1 if t1 is not None else t0) >= rng[0]


def _dsl_refs(index: dict, kind: str, t0: float | None, t1: float | None, uavs: list[str],
              text: str = "") -> list[str]:
    """Ids of `kind` items of the DSL that overlap [t0, t1], share a vehicle and (optionally) contain `text`."""
    out = []
    for ref, it in index.items():
        if it.kind != kind or (text and text not in str(getattr(it, "text", ""))):
            continue
        if uavs and it.uavs and not set(uavs) & set(it.uavs):
            continue
        if t0 is not None and it.t_start is not None and not _overlaps(it.t_start, it.t_end, (t0, t1 or t0)):
            continue
        out.append(ref)
    return out


def _violations(safety: Any, index: dict, events: list, rng: tuple | None) -> list[VerifiedFinding]:
    out = []
    for v in getattr(safety, "violations", []) or []:
        if not _overlaps(v.t_start, v.t_end, rng):
            continue
        unit = UNITS.get(v.constraint, "")
        refs = _dsl_refs(index, "RISK", v.t_start, v.t_end, v.uavs, v.constraint)
        refs += [e.id for e in events if e.type in (f"violation:{v.constraint}", "proximity")
                 and set(v.uavs) <= set(e.uavs) and _overlaps(e.t, e.t_end, (v.t_start, v.t_end)) and e.id]
        turns = [e for e in events if e.type == "sharp_turn" and _overlaps(e.extra.get("t_from", e.t), e.t_end,
                                                                            (v.t_start, v.t_end))]
        where = f"at {span(v.t_start, v.t_end)}"
        if v.constraint == "min_separation":
            sentence = (f"{vehicles(v.uavs)} came within {num(v.worst_value)} m of each other {where}, "
                        f"below the {num(v.limit)} m min_separation limit.")
        elif v.constraint == "geofence":
            sentence = f"{vehicles(v.uavs)} left the geofence by up to {num(v.worst_value)} m {where}."
        elif v.constraint.startswith("rule:"):
            sentence = _rule_sentence(v.constraint[5:], v.uavs, v.t_start, v.t_end, v.worst_value, "hard")
            refs = _rule_refs(safety, v.constraint[5:]) + refs
        elif v.constraint == "stale_data":
            sentence = (f"{vehicles(v.uavs)} sent no pose for {num(v.worst_value)} s {where} "
                        f"(stale_data limit {num(v.limit)} s).")
        else:
            sentence = (f"{vehicles(v.uavs)} exceeded {v.constraint} {where}: peak {num(v.worst_value)} {unit}, "
                        f"limit {num(v.limit)} {unit}.")
        worst = abs(float(v.worst_value or 0.0))
        out.append(VerifiedFinding(
            "violation:" + v.constraint, "hazard", sentence, v.t_start, v.t_end, list(v.uavs),
            list(dict.fromkeys(refs)), recommend.for_violation(v, bool(turns)),
            f"violation:{v.constraint}:{','.join(v.uavs)}:{v.t_start:.2f}",
            1.0 + (v.t_end - v.t_start) / 100.0 + min(worst, 10.0) / 1000.0))
    return out


def _rule_refs(safety: Any, rule_id: str) -> list[str]:
    """The DSL id RULE[k] of a mission rule (k: its place in the mission)."""
    return [f"RULE[{k}]" for k, r in enumerate(getattr(safety, "rules", None) or [], 1) if r.rule.id == rule_id]


def _rule_sentence(rule_id: str, uavs: list[str], t0: float, t1: float, worst: Any, severity: str) -> str:
    who = vehicles(uavs) if uavs else "The swarm"  # the formula stands in the rules table (comparisons read as debris)
    return f"{who} broke the {severity} mission rule {rule_id} at {span(t0, t1)}, robustness {num(worst, 3)}."


def _soft_rules(safety: Any, rng: tuple | None) -> list[VerifiedFinding]:
    """A soft rule's failing runs: warnings with their robustness and intervals (hard ones are violations)."""
    out = []
    for res in getattr(safety, "rules", None) or []:
        if res.rule.severity != "soft":
            continue
        runs = sorted(res.failures, key=lambda f: f[3])[:MAX_RULE_RUNS]  # the worst runs of a large swarm
        for uavs, t0, t1, worst in _concurrent(runs):
            if not _overlaps(t0, t1, rng):
                continue
            sentence = _rule_sentence(res.rule.id, uavs, t0, t1, worst, "soft")
            rec = [f"Recommend reviewing the plan of {vehicles(uavs)} at {span(t0, t1)} against the mission rule "
                   f"{res.rule.id}."]
            out.append(VerifiedFinding("rule:" + res.rule.id, "warning", sentence, t0, t1, list(uavs),
                                       _rule_refs(safety, res.rule.id), rec,
                                       f"rule:{res.rule.id}:{','.join(uavs)}:{t0:.2f}",
                                       0.7 + min(abs(float(worst)), 10.0) / 100.0))
    return out


def _concurrent(runs: list) -> list[tuple[list[str], float, float, float]]:
    """A rule's failing runs that overlap in time as one (vehicles of every run, the span, the lowest robustness):
    one vehicle breaking a pair rule with two neighbours at once is one fact for the panel, not two."""
    merged: list[tuple[list[str], float, float, float]] = []
    for uavs, t0, t1, worst, _n in sorted(runs, key=lambda f: f[1]):
        if merged and t0 <= merged[-1][2]:
            had, a, b, w = merged[-1]
            merged[-1] = (sorted(set(had) | set(uavs)), a, max(b, t1), min(w, worst))
        else:
            merged.append((list(uavs), t0, t1, worst))
    return merged


def _warnings(safety: Any, index: dict, rng: tuple | None) -> list[VerifiedFinding]:
    out = []
    for w in getattr(safety, "warnings", []) or []:
        t_pred = w.get("t_predicted", w["t"])
        if not _overlaps(w["t"], t_pred, rng):
            continue
        uavs = list(w.get("uavs") or [])
        refs = _dsl_refs(index, "RISK", w["t"], t_pred, uavs, "warning")
        verb = "were" if len(uavs) > 1 else "was"
        if w["kind"] == "cpa":
            sentence = (f"At {num(w['t'])} s {vehicles(uavs)} {verb} predicted to pass within {num(w['value'])} m "
                        f"at {num(t_pred)} s (min_separation limit {num(w['limit'])} m).")
        else:
            sentence = (f"At {num(w['t'])} s {vehicles(uavs)} {verb} predicted to leave the geofence within "
                        f"{num(w['value'])} s (prediction horizon {num(w['limit'])} s).")
        out.append(VerifiedFinding("warning:" + w["kind"], "warning", sentence, w["t"], t_pred, uavs, refs,
                                   recommend.for_warning(w), f"warning:{w['kind']}:{','.join(uavs)}:{w['t']:.2f}",
                                   0.8))
    return out


def _margins(safety: Any, index: dict, fraction: float, t_range: tuple[float, float]) -> list[VerifiedFinding]:
    out = []
    violated = {v.constraint for v in getattr(safety, "violations", []) or []}
    for name, m in sorted((getattr(safety, "margins", {}) or {}).items()):
        ratio = m.get("ratio")
        if name in violated or not isinstance(ratio, (int, float)) or ratio < 1.0 - fraction:
            continue
        unit = UNITS.get(name, "")
        refs = _dsl_refs(index, "RISK", None, None, [], f"near_limit {name}")
        worst = f"worst {num(m.get('worst_value'))} {unit}, limit {num(m.get('limit'))} {unit}"
        if ratio > 1.0:  # past the limit, but for less time than a violation must last (attitude_control's hold)
            sentence = f"{name} went past its limit only briefly, too briefly to be a violation ({worst})."
        else:
            sentence = f"{name} came within {num((1.0 - ratio) * 100, 0)} % of its limit without a violation ({worst})."
        out.append(VerifiedFinding("margin:" + name, "warning", sentence, t_range[0], t_range[1], [], refs,
                                   recommend.for_margin(name, m), f"margin:{name}", 0.6 + 0.1 * min(ratio, 1.0)))
    return out


def _events(events: list, index: dict, rng: tuple | None, uav_count: int, hazards: list[VerifiedFinding]
            ) -> list[VerifiedFinding]:
    out = []
    covered = {r for h in hazards for r in h.refs}
    turns = [e for e in events if e.type == "sharp_turn" and _overlaps(e.extra.get("t_from", e.t), e.t_end, rng)]
    swarm = [e for e in turns if len(e.uavs) >= uav_count]
    for e in events:
        if not e.id or e.id in covered or not _overlaps(e.t, e.t_end, rng):
            continue
        t1 = e.t_end if e.t_end is not None else e.t
        if e.type in _WARNING_EVENTS:
            form = _dsl_refs(index, "FORM", e.t, t1, e.uavs) if e.type == "formation_breach" else []
            out.append(VerifiedFinding(e.type, "warning", recommend.event_sentence(e), e.t, t1, list(e.uavs),
                                       [e.id, *form], recommend.for_event(e), f"event:{e.type}:{','.join(e.uavs)}:"
                                       f"{e.t:.2f}", 0.5 + min(float(e.value or 0.0), 100.0) / 1000.0))
        elif e.type == "data_gap":
            out.append(VerifiedFinding("data_gap", "data_quality", recommend.event_sentence(e), e.t, t1, list(e.uavs),
                                       [e.id], recommend.for_event(e), f"event:data_gap:{','.join(e.uavs)}:{e.t:.2f}",
                                       0.4))
    out += _turn_runs([e for e in turns if e not in swarm and e.id not in covered])
    if swarm:
        angles = [float(e.value or 0.0) for e in swarm]
        angle = num(min(angles), 0) if len(swarm) == 1 else f"{num(min(angles), 0)}–{num(max(angles), 0)}"
        sentence = (f"The swarm made {len(swarm)} route turn{'s' if len(swarm) > 1 else ''} of {angle} deg "
                    f"together at "
                    f"{', '.join(num(e.t) for e in swarm)} s (sharp_turn events of the planned route).")
        out.append(VerifiedFinding("route_turns", "info", sentence, min(e.extra.get("t_from", e.t) for e in swarm),
                                   max(e.t_end or e.t for e in swarm), sorted({u for e in swarm for u in e.uavs}),
                                   [e.id for e in swarm], recommend.for_route_turns(swarm), "route_turns", 0.2))
    return out


def _turn_runs(turns: list, gap_s: float = 5.0) -> list[VerifiedFinding]:
    """Sharp turns by part of the swarm: one warning per vehicle set and run of turns less than `gap_s` apart."""
    runs: list[list] = []
    for e in sorted(turns, key=lambda e: (tuple(e.uavs), e.t)):
        last = runs[-1][-1] if runs else None
        if last is not None and last.uavs == e.uavs and e.t - (last.t_end or last.t) <= gap_s:
            runs[-1].append(e)
        else:
            runs.append([e])
    out = []
    for run in runs:
        e0, e1 = run[0], run[-1]
        angles = [float(e.value or 0.0) for e in run]
        t0, t1 = e0.extra.get("t_from", e0.t), e1.t_end or e1.t
        if len(run) == 1:
            sentence = recommend.event_sentence(e0)
        else:
            sentence = (f"{vehicles(e0.uavs)} turned sharply {len(run)} times ({num(min(angles), 0)}–"
                        f"{num(max(angles), 0)} deg) at {', '.join(num(e.t) for e in run)} s, apart from the swarm "
                        f"(sharp_turn {', '.join(e.id for e in run)}).")
        out.append(VerifiedFinding("sharp_turn", "warning", sentence, t0, t1, list(e0.uavs), [e.id for e in run],
                                   recommend.for_turns(run), f"event:sharp_turn:{','.join(e0.uavs)}:{e0.t:.2f}",
                                   0.45 + min(max(angles), 180.0) / 1000.0))
    return out


def _waypoints(index: dict, t_range: tuple[float, float]) -> list[VerifiedFinding]:
    out = []
    for ref, it in index.items():
        vals = getattr(it, "values", {}) or {}
        if it.kind != "WAYPTS" or not vals.get("missed"):
            continue
        u = list(it.uavs)
        miss = vals.get("worst_miss")
        sentence = (f"{vehicles(u)} missed {int(vals['missed'])} of {int(vals.get('total', 0))} waypoints"
                    + (f" (worst miss {num(miss)} m)." if miss is not None else " (not flown)."))
        out.append(VerifiedFinding("waypoint_miss", "warning", sentence, t_range[0], t_range[1], u,
                                   [ref, "coordination.task_completion"], recommend.for_waypoints(u, vals),
                                   f"waypoints:{','.join(u)}", 0.4 + min(float(miss or 0.0), 10.0) / 100.0))
    return out


def _data_quality(safety: Any, rng: tuple | None) -> list[VerifiedFinding]:
    dq = getattr(safety, "data_quality", None)
    out = []
    for f in getattr(dq, "findings", []) or []:
        if not _overlaps(f.t_start, f.t_end, rng):
            continue
        affects = f" (affects {', '.join(f.affects)})" if f.affects else ""
        sentence = f"Recording artefact {f.kind} on {vehicles(f.uavs)} at {span(f.t_start, f.t_end)}{affects}."
        if f.kind == "clock_restart":  # what the report does not cover, said plainly
            sentence = (f"The recording's clock restarted: {f.values['samples']} samples of {vehicles(f.uavs)} "
                        f"from before it ({num(f.values['earlier_span_s'])} s) were not checked; this report covers "
                        f"the last run.")
        elif f.kind == "clock_back":
            sentence = (f"The clock of {vehicles(f.uavs)} went back {num(f.values['back_s'])} s at "
                        f"{span(f.t_start, f.t_end)} while the others flew on: its {f.values['samples']} later samples "
                        f"could not be placed in the flight and were not checked.")
        out.append(VerifiedFinding("data_quality:" + f.kind, "data_quality", sentence, f.t_start, f.t_end,
                                   list(f.uavs), [], recommend.for_data_quality(f),
                                   f"dq:{f.kind}:{','.join(f.uavs)}:{f.t_start:.2f}", 0.4))
    rules: dict[tuple[float, float], list] = {}  # the mission rules one span left unread: one finding
    for n in getattr(dq, "not_evaluable", []) or []:
        t0 = n.t_start if n.t_start is not None else (rng[0] if rng else 0.0)
        t1 = n.t_end if n.t_end is not None else (rng[1] if rng else t0)
        if not _overlaps(t0, t1, rng):
            continue
        if n.constraint.startswith("rule:"):
            rules.setdefault((t0, t1), []).append(n)
            continue
        sentence = f"{n.constraint} could not be checked for {vehicles(n.uavs)} at {span(t0, t1)}: {n.reason}."
        if n.on_ground:
            sentence += " No flight's check is lost there: disarmed, its motors were stopped."
        out.append(VerifiedFinding("not_evaluable:" + n.constraint, "info" if n.on_ground else "data_quality",
                                   sentence, t0, t1, list(n.uavs),
                                   [], recommend.for_not_evaluable(n), f"ne:{n.constraint}:{','.join(n.uavs)}:{t0:.2f}",
                                   0.45))
    for (t0, t1), group in rules.items():
        names = " and ".join(n.constraint for n in group)
        uavs = sorted({u for n in group for u in n.uavs})
        sentence = f"{names} could not be checked for {vehicles(uavs)} at {span(t0, t1)}: {group[0].reason}."
        out.append(VerifiedFinding("not_evaluable:" + group[0].constraint, "data_quality", sentence, t0, t1, uavs,
                                   [], recommend.for_not_evaluable(group[0]), f"ne:rules:{','.join(uavs)}:{t0:.2f}",
                                   0.45))
    return out


def _low_metrics(metrics: Any, t_range: tuple[float, float], taken: set[str], hazard: bool) -> list[VerifiedFinding]:
    """Metrics scoring low that no finding covers; with a hazard found, not the safety metrics (compliance and margin
    score what the violation already states)."""
    out = []
    for cat, group in (getattr(metrics, "details", {}) or {}).items():
        if hazard and cat == "safety":
            continue
        for name, d in (group or {}).items():
            score = d.get("score") if isinstance(d, dict) else None
            ref = f"{cat}.{name}"
            if not isinstance(score, (int, float)) or score != score or score >= LOW_SCORE or ref in taken:
                continue
            unit = f" {d['unit']}" if d.get("unit") and d["unit"] not in ("ratio", "fraction") else ""
            value = f", value {num(d['value'])}{unit}" if isinstance(d.get("value"), (int, float)) else ""
            sentence = (f"Metric {ref} scored {num(score, 2)} over {span(*t_range)}{value}.")
            out.append(VerifiedFinding("low_score", "info", sentence, t_range[0], t_range[1], [], [ref],
                                       recommend.for_metric(cat, name, d, t_range), f"metric:{ref}",
                                       0.3 + (LOW_SCORE - score) / 10.0))
    return out


def build_findings(safety: Any, dsl: Any, metrics: Any, mission: Any = None,
                   t_range: tuple[float, float] | None = None) -> list[VerifiedFinding]:
    """Every verified finding of the flight (or of the segment `t_range`), ranked and numbered F1, F2, ...

    `dsl` supplies the citable ids and the events; `safety` is the whole flight's result (a segment sees the
    violations that overlap it, with their true extent).
    """
    index = dict(getattr(dsl, "index", {}) or {})
    events = list(getattr(dsl, "events", []) or [])
    thresholds = getattr(mission, "thresholds", None)
    fraction = float(getattr(thresholds, "borderline_fraction", 0.1) or 0.1)
    span_ = t_range or _flight_range(safety, dsl, events)
    uav_count = len({u for it in index.values() for u in (getattr(it, "uavs", []) or [])})
    hazards = _violations(safety, index, events, t_range)
    found = hazards + _warnings(safety, index, t_range) + _soft_rules(safety, t_range)
    found += _margins(safety, index, fraction, span_)
    found += _events(events, index, t_range, uav_count, hazards) + _waypoints(index, span_)
    found += autopilot_findings(events, t_range) + _data_quality(safety, t_range)
    found += _low_metrics(metrics, span_, {r for f in found for r in f.refs}, bool(hazards))
    if not found:
        found = [_all_clear(safety, span_)]
    return rank(found)


def _all_clear(safety: Any, t_range: tuple[float, float]) -> VerifiedFinding:
    """The one finding of a segment where nothing was found: the closest constraint and what to keep."""
    sentence, rec = recommend.all_clear(safety, t_range)
    return VerifiedFinding("all_clear", "info", sentence, t_range[0], t_range[1], [], [], [rec], "all_clear", 0.0)


def rank(found: list[VerifiedFinding]) -> list[VerifiedFinding]:
    """Most important first (severity, then weight, then time to the microsecond, then key: two findings of one
    instant rank alike whatever the last bits of its two computations); ids F1.. in that order."""
    out = sorted(found, key=lambda f: (SEVERITY.index(f.severity), -f.weight, round(f.t_start, 6), f.key))
    for i, f in enumerate(out, 1):
        f.id = f"F{i}"
    return out


def _flight_range(safety: Any, dsl: Any, events: list) -> tuple[float, float]:
    sep = getattr(safety, "separation", None)
    t = getattr(sep, "t", None)
    if t is not None and len(t):
        return float(t[0]), float(t[-1])
    times = [x for it in (getattr(dsl, "index", {}) or {}).values() for x in (it.t_start, it.t_end) if x is not None]
    return (min(times), max(times)) if times else (0.0, 0.0)
