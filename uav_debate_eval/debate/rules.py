"""Deterministic rule-based experts: the same structured response as an LLM, built from metrics and the DSL.

Each persona's bias decides what it looks at and how severe it is:
- precision (flight control): a metric whose score is more than `deviation_threshold` (5 %) below ideal is a defect;
- cohesion (coordination): group statistics (mean, spread, weakest) of the coordination metrics, a
  coordination metric more than 10 % below ideal or a proximity event is a defect;
- zero_trust (safety): any violation is risky; any margin within `envelope_fraction` (10 %) of its limit or any
  predictive warning is a risk;
- neutral: the worst metric of every category.
A violation in the segment makes every persona's assessment `risky`. Red agents escalate `safe` to `borderline`
when they found a defect and lower the score by 0.1; blue agents answer the red criticism of the previous round;
interventions add evidence (request_evidence, missing_aspects) or make the agent argue against its last position.
Every number printed in evidence is a value of the DSL item or metric it cites, so quote verification passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uav_debate_eval.debate.agenda import BIAS_KINDS, expand, finding_kind
from uav_debate_eval.debate.aspects import rules_answers
from uav_debate_eval.debate.choices import with_aspects
from uav_debate_eval.debate.cite import dsl_evidence, metric_evidence
from uav_debate_eval.debate.monitor import ASPECTS
from uav_debate_eval.debate.prompts import Turn
from uav_debate_eval.debate.response import AgentResponse
from uav_debate_eval.debate.router import segment_violations

_ASPECT_CATEGORY = {"trajectory": "flight_control", "coordination": "coordination", "safety": "safety"}
_ESCALATE = {"safe": "borderline", "borderline": "borderline", "risky": "risky"}


def _rows(metrics: Any, cat: str) -> list[tuple[str, str, dict]]:
    """(category, metric, detail) with a score, worst first."""
    rows = [(cat, n, d) for n, d in ((getattr(metrics, "details", {}) or {}).get(cat) or {}).items()
            if isinstance(d, dict) and isinstance(d.get("score"), (int, float))]
    return sorted(rows, key=lambda r: (r[2]["score"], r[1]))


_ANOMALY_KINDS = ("risk", "event", "attn", "violation", "warning")


def _items(turn: Turn) -> list[Any]:
    """DSL items of the segment: anomalies (risk / event / attention lines) relevant to the persona first, then by
    relevance, then in time order."""
    index = getattr(turn.ctx.dsl, "index", {}) or {}
    p = turn.persona

    def key(it: Any) -> tuple:
        text = f"{it.kind} {getattr(it, 'text', '')} {' '.join(map(str, (getattr(it, 'values', {}) or {})))}"
        rel = p.relevance(text)
        anomaly = str(it.kind).lower() in _ANOMALY_KINDS
        return (-(anomaly and rel > 0), -rel, it.t_start if it.t_start is not None else 0.0, it.id)

    return sorted(index.values(), key=key)


def _margin_risks(turn: Turn) -> list[str]:
    """Constraints whose worst value used at least (1 - envelope_fraction) of the limit (ratio = worst / limit)."""
    margins = getattr(turn.ctx.safety, "margins", {}) or {}
    edge = 1.0 - turn.persona.envelope_fraction
    return sorted(n for n, m in margins.items() if isinstance(m.get("ratio"), (int, float)) and m["ratio"] >= edge)


class _Findings:
    def __init__(self) -> None:
        self.metric_rows: list[tuple[str, str, dict]] = []
        self.defects: list[str] = []
        self.headline = ""
        self.score: float | None = None


def _analyse(turn: Turn, violations: list) -> _Findings:
    p, metrics = turn.persona, turn.ctx.metrics
    scores = getattr(metrics, "scores", {}) or {}
    f = _Findings()
    if p.bias == "precision":
        f.metric_rows = _rows(metrics, "flight_control")
        f.defects = [n for _, n, d in f.metric_rows if 1.0 - d["score"] > p.deviation_threshold]
        f.headline = (f"{len(f.defects)} of {len(f.metric_rows)} flight-control metrics deviate more than "
                      f"{p.deviation_threshold:.0%} from ideal")
        f.score = scores.get("flight_control")
    elif p.bias == "cohesion":
        f.metric_rows = _rows(metrics, "coordination")
        s = np.array([d["score"] for _, _, d in f.metric_rows]) if f.metric_rows else np.zeros(0)
        f.defects = [n for _, n, d in f.metric_rows if 1.0 - d["score"] > 0.10]
        if s.size:
            f.headline = (f"coordination metrics have group mean score {s.mean():.2f}, spread {s.std():.2f}, "
                          f"weakest {f.metric_rows[0][1]}")
        else:
            f.headline = "no coordination metrics for this segment"
        f.score = scores.get("coordination")
    elif p.bias == "zero_trust":
        f.metric_rows = _rows(metrics, "safety")
        near = _margin_risks(turn)
        warn = getattr(turn.ctx.safety, "warnings", []) or []
        f.defects = [v.constraint for v in violations] + [f"{n} margin" for n in near] + \
            (["predictive warnings"] if warn else [])
        margins = sorted(getattr(turn.ctx.safety, "margins", {}) or {})
        f.headline = (f"{len(violations)} violations, {len(near)} constraints within "
                      f"{p.envelope_fraction:.0%} of their limit, {len(warn)} predictive warnings"
                      + (f" (checked {', '.join(margins)})" if margins else ""))
        f.score = scores.get("safety")
    else:
        rows = [r for c in ("flight_control", "coordination", "safety") for r in _rows(metrics, c)[:1]]
        f.metric_rows = sorted(rows, key=lambda r: (r[2]["score"], r[1]))
        f.defects = [n for _, n, d in f.metric_rows if 1.0 - d["score"] > p.deviation_threshold]
        f.headline = f"the weakest metrics are {', '.join(n for _, n, _ in f.metric_rows) or 'none'}"
        f.score = scores.get("overall")
    return f


def _aspect_rows(metrics: Any, aspects: list[str]) -> list[tuple[str, str, dict]]:
    out = []
    for a in aspects:
        cat = _ASPECT_CATEGORY.get(a)
        if cat:
            out += _rows(metrics, cat)[:1]
        else:
            out += [r for c in ("flight_control", "coordination", "safety") for r in _rows(metrics, c)
                    if any(k in r[1] for k in ASPECTS[a])][:1]
    return out


def rules_response(turn: Turn) -> AgentResponse:
    """The deterministic answer of `turn.persona` in its current team and round."""
    ctx, p = turn.ctx, turn.persona
    violations = segment_violations(ctx.safety, ctx.t_start, ctx.t_end)
    f = _analyse(turn, violations)
    label = "risky" if violations else "borderline" if f.defects else "safe"
    adm = turn.admissible

    items = _items(turn)
    kinds = [i.kind for i in turn.interventions]
    n_dsl = turn.min_evidence if "request_evidence" in kinds else 2
    rows = list(f.metric_rows[:max(1, turn.max_evidence - n_dsl)])
    if "missing_aspects" in kinds:
        for i in turn.interventions:
            rows += [r for r in _aspect_rows(ctx.metrics, i.aspects) if r not in rows]
    if turn.mode == "collaborative" and turn.previous:
        said = " ".join(r.text() for _, _, r in turn.previous)
        missing = [a for a, kws in ASPECTS.items() if not any(k in said.lower() for k in kws)]
        rows += [r for r in _aspect_rows(ctx.metrics, missing) if r not in rows]
    evidence = ([dsl_evidence(it) for it in items[:n_dsl]] + [metric_evidence(*r) for r in rows])[:turn.max_evidence]

    score = f.score
    confidence = 0.6 + 0.1 * min(3, len(evidence)) / 3 + (0.15 if violations else 0.0)
    worst = f.defects[0] if f.defects else None
    seg = ctx.segment_id
    if turn.team == "red" and turn.mode == "adversarial":
        if worst:
            label = _ESCALATE[label]
            claim = f"Challenge for {seg}: the assessment is optimistic, {f.headline}, worst {worst}."
        else:
            claim = f"Challenge for {seg}: no anomaly found, {f.headline}."
        score = None if score is None else max(0.0, score - 0.1)
        confidence -= 0.1
        counter = ("Blue's assessment rests on averages; the worst case decides." if worst
                   else "The evidence does not support a more severe finding.")
    else:
        claim = f"{p.name} on {seg}: {label}, {f.headline}" + (f", worst {worst}." if worst else ".")
        counter = _answer_red(turn, label)
    if adm is not None and not adm.allows_label(label):  # the facts decide (a veto without a violation here)
        label = adm.labels[0] if not adm.label_open else adm.verifier_label
    if "break_circularity" in kinds and turn.own_previous is not None:
        claim = f"Against my previous position ({turn.own_previous.assessment}): {claim}"
        confidence -= 0.1
    if violations:
        v = violations[0]
        rec = f"Recommend enforcing {v.constraint} for {', '.join(v.uavs)} before the next flight."
    elif worst:
        rec = f"Recommend improving {worst} ({p.category}) before the next flight."
    else:
        rec = f"Recommend keeping the current {p.category} settings and monitoring {seg}."
    choices, picked = rules_choices(turn)
    rec = picked[0] if picked else rec
    # the lead names the open issues by the findings it takes up (the issues' own text is the prompt's)
    lead = (f" Leading on the open issues of {seg} with {', '.join(c['id'] for c in choices) or 'the data'}."
            if turn.lead and turn.issues else "")
    summary = f"{p.name}: {label} for {seg}; {f.headline}.{lead} {rec}"
    response = AgentResponse(claim=claim, evidence=evidence, counter=counter, summary=summary, recommendation=rec,
                             confidence=round(min(0.95, max(0.05, confidence)), 3), assessment=label,
                             score=None if score is None else round(float(score), 4), choices=choices, picked=picked)
    with_aspects(response, rules_answers(turn.aspects), turn.aspects)
    return response


_STANCE = {"hazard": ("endorse", "safety_critical"), "warning": ("endorse", "confirmed_by_data"),
           "data_quality": ("endorse", "confirmed_by_data"), "info": ("endorse", "mission_impact")}


def _stance(f: Any, adm: Any) -> tuple[str, str]:
    """Endorse by severity; the whole swarm's route turns are disputed as within tolerance. Only what the facts
    admit (findings.admissible): otherwise the first endorse reason they allow."""
    stance, reason = ("dispute", "within_tolerance") if f.kind == "route_turns" else _STANCE[f.severity]
    if adm is None or adm.allows({"id": f.id, "stance": stance, "reason": reason}):
        return stance, reason
    return "endorse", adm.endorse(f.id)[0]


def rules_choices(turn: Turn, limit: int = 3) -> tuple[list[dict], list[str]]:
    """The persona's choices among the segment's findings: the most important it looks at, with `_stance`. Picks
    each chosen finding's first recommendation (at most two)."""
    findings = list(turn.findings or [])
    kinds = BIAS_KINDS.get(turn.persona.bias)
    mine = [f for f in findings if kinds is None or finding_kind(f).startswith(kinds)]
    if kinds is None:  # the generalist: the top finding of every severity
        mine = [next(f for f in findings if f.severity == s) for s in dict.fromkeys(f.severity for f in findings)]
    chosen = (mine or findings[:1])[:limit]
    choices = []
    for f in chosen:
        stance, reason = _stance(f, turn.admissible)
        choices.append({"id": f.id, "stance": stance, "reason": reason})
    picked = [f.recommendations[0] for f, c in zip(chosen, choices, strict=True)
              if c["stance"] == "endorse" and f.recommendations][:2]
    return expand(choices, turn.groups, turn.admissible), picked


def _answer_red(turn: Turn, label: str) -> str:
    reds = [(role, r) for role, team, r in turn.previous if team == "red"]
    if turn.mode == "collaborative":
        others = ", ".join(role for role, _, _ in turn.previous) or "the panel"
        return f"Complementing {others} with the {turn.persona.category} view."
    if not reds:
        return "No red-team criticism yet."
    role, r = reds[0]
    if r.assessment == label or (label != "safe" and r.assessment != "safe"):
        return f"Acknowledged {role}'s criticism: the data supports {r.assessment}."
    return f"Refuted {role}'s criticism with data: the cited metrics support {label}."
