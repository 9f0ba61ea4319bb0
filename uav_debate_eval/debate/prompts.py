"""Prompt text for every agent turn; the rules agents build the same messages so transcripts are comparable."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from uav_debate_eval.debate.choices import ASPECTS_FORMAT, choice_format, findings_text, recommendation_lines
from uav_debate_eval.debate.cite import fmt
from uav_debate_eval.debate.evidence import Check
from uav_debate_eval.debate.monitor import Intervention
from uav_debate_eval.debate.personas import Persona
from uav_debate_eval.debate.response import AgentResponse
from uav_debate_eval.debate.router import segment_violations
from uav_debate_eval.findings.admissible import Admissible

RED = "RED team: hunt anomalies, challenge optimistic readings and name the weakest evidence."
BLUE = "BLUE team: give your assessment; accept valid red criticism and refute the rest with data."
COLLAB = ("Collaborative mode: this is not a zero-sum debate. Complement the other experts: add the points they "
          "missed, correct gaps with data, and build one shared, complete assessment.")
FORMAT = ("Answer with JSON only: {\"claim\": one sentence, \"evidence\": 3-5 items {\"id\": a DSL id or metric "
          "name (category.metric) from VALID IDS, \"note\": its exact value with unit}, \"counter\": the strongest "
          "counter-argument and your answer to it, \"summary\": key takeaways and one actionable recommendation "
          "starting with 'Recommend', \"confidence\": 0..1, \"label\": \"safe\" | \"borderline\" | \"risky\"}. "
          "Never invent ids or numbers.")
FORMAT_QUOTED = FORMAT.replace("\"note\": its exact value with unit}",
                               "\"quote\": one fact of that id, word for word, \"note\": why it matters, in words}")


@dataclass
class Turn:
    """Everything one agent sees in one round of one segment."""

    ctx: Any  # engine.SegmentContext
    persona: Persona
    agent: str
    team: str  # red | blue
    lead: bool
    round: int
    layer: int
    mode: str
    vetoed: bool
    valid_ids: list[str]
    metric_refs: list[str]
    issues: str = ""
    previous: list[tuple[str, str, AgentResponse]] = field(default_factory=list)  # (role, team, response)
    own_previous: AgentResponse | None = None
    interventions: list[Intervention] = field(default_factory=list)
    min_evidence: int = 3
    max_evidence: int = 5
    repair: list[Check] = field(default_factory=list)  # invalid citations of the first attempt
    compact: bool = False  # short prompts for small in-process models
    quotes: dict[str, list[str]] | None = None  # evidence quotes exact facts (EvidenceVerifier.quotes) when set
    findings: list = field(default_factory=list)  # the segment's verified findings: agents choose among them
    lean: bool = False  # each fact once (findings, or a compact DSL), the previous round as choices
    admissible: Admissible | None = None  # the choices the segment's facts admit (findings.admissible)
    groups: dict[str, list[str]] = field(default_factory=dict)  # lead id -> ids of one kind and vehicle set
    aspects: list = field(default_factory=list)  # debate.aspects.Aspect the agent is asked about
    excerpt: list[str] = field(default_factory=list)  # DSL lines around the segment's findings under debate
    shared_findings: bool = True  # the findings in the shared prefix (False: each agent's own, in its message)
    completion_cap: int | None = None  # most completion tokens the budget leaves this call


#: With compact prompts, only the category scores and the weakest metrics are shown.
COMPACT_METRICS = 5


def metrics_text(metrics: Any, compact: bool = False) -> str:
    """Category scores, then each metric; compact keeps only the COMPACT_METRICS weakest metrics."""
    lines = [f"{cat}.score = {fmt(score)}" for cat, score in (getattr(metrics, "scores", {}) or {}).items()]
    rows = [(cat, name, d) for cat, group in (getattr(metrics, "details", {}) or {}).items()
            for name, d in (group or {}).items()]
    if compact:
        def weakness(row: tuple[str, str, dict]) -> float:
            score = row[2].get("score")
            return float(score) if isinstance(score, (int, float)) and score == score else 1.0

        rows = sorted(rows, key=weakness)[:COMPACT_METRICS]
    for cat, name, d in rows:
        unit = d.get("unit") or ""
        lines.append(f"{cat}.{name} = {fmt(d.get('value'))} {unit} (score {fmt(d.get('score'))})".rstrip())
    return "\n".join(lines) or "(no metrics)"


def safety_text(ctx: Any, near: float | None = None) -> str:
    """Verifier label, the segment's violations and the margins (only those at least `near` of their limit)."""
    s = ctx.safety
    lines = [f"verifier label: {getattr(s, 'label', 'unknown')}"]
    for v in segment_violations(s, ctx.t_start, ctx.t_end):
        lines.append(f"VIOLATION {v.constraint} t={fmt(v.t_start)}-{fmt(v.t_end)} s uavs {','.join(v.uavs)} "
                     f"worst {fmt(v.worst_value)} limit {fmt(v.limit)}")
    for name, m in (getattr(s, "margins", {}) or {}).items():
        ratio = m.get("ratio")
        if near is not None and not (isinstance(ratio, (int, float)) and ratio >= near):
            continue
        lines.append(f"margin {name}: worst {fmt(m.get('worst_value'))} limit {fmt(m.get('limit'))} "
                     f"ratio {fmt(m.get('ratio'))}")
    return "\n".join(lines)


PANEL = "You sit on a panel of experts that evaluates one segment of a UAV swarm flight from its data."


def role_text(turn: Turn) -> str:
    """Who this agent is in this round: persona, team, lead, and the veto notice."""
    p = turn.persona
    parts = [f"You are the {p.name} ({p.category})." if not turn.shared_findings else
             f"You are the {p.name}. {p.description}"]
    if turn.mode == "collaborative":
        parts.append(COLLAB)
    else:
        parts.append(RED if turn.team == "red" else BLUE)
    if turn.lead and (turn.issues or turn.shared_findings):
        parts.append("You lead this round: address the open issues first.")
    if turn.vetoed and turn.findings:
        parts.append("SAFETY VETO: the verifier's hard-constraint violation makes the mission RISKY; choose the "
                     "findings and recommendations.")
    elif turn.vetoed:
        parts.append("SAFETY VETO: the deterministic safety verifier reports a hard-constraint violation. The "
                     "mission verdict is RISKY whatever the panel concludes; explain the violation and recommend.")
    return "\n".join(parts)


def segment_text(ctx: Any, stage: str, ids: list[str], compact: bool, findings: list | None = None,
                 adm: Admissible | None = None) -> str:
    """A segment's data (DSL, metrics, safety, findings, citable ids); `stage` says where in the debate it is."""
    return "\n\n".join(segment_parts(ctx, stage, ids, compact, findings, adm=adm).values())


#: DSL tags a compact DSL keeps (the header line, scores, risks, data quality, attention lines and events).
COMPACT_DSL_TAGS = ("DSL", "SCORES", "RISK", "RULE", "DQ", "ATTN", "EVENT", "SUMMARY")
#: Margins at least this share of their limit are shown in a lean SAFETY block.
NEAR_LIMIT = 0.8


def compact_dsl(text: str, keep: set[str] | None = None, tags: tuple[str, ...] = COMPACT_DSL_TAGS) -> str:
    """The lines that can matter (`tags`, and the ids in `keep`); the routine lines are counted."""
    lines = text.splitlines()
    kept = [ln for ln in lines if ln.split("[", 1)[0].split(" ", 1)[0] in tags
            or ln.split(" ", 1)[0] in (keep or ())]
    dropped = len(lines) - len(kept)
    return "\n".join(kept + ([f"({dropped} routine lines omitted)"] if dropped else []))


def segment_parts(ctx: Any, stage: str, ids: list[str], compact: bool, findings: list | None = None,
                  lean: bool = False, adm: Admissible | None = None) -> dict[str, str]:
    """The segment's data by prompt part (header, dsl, metrics, safety, findings, valid_ids). Lean with findings:
    the findings state every fact once (their DSL lines, violations, margins and low metrics are not repeated), so
    the DSL is its header line, the metrics the category scores and the safety block the verifier's label. Lean
    without findings: a compact DSL, the weakest metrics and the margins near a limit."""
    dsl = str(getattr(ctx.dsl, "text", ""))
    if lean and findings:
        header = dsl.splitlines()[0] if dsl else ""
        scores = getattr(ctx.metrics, "scores", {}) or {}
        parts = {"header": f"SEGMENT {ctx.segment_id} t={fmt(ctx.t_start)}-{fmt(ctx.t_end)} s, {stage}.",
                 "dsl": "DSL: " + header,
                 "metrics": "SCORES: " + ", ".join(f"{k} {fmt(v)}" for k, v in scores.items()),
                 "safety": f"VERIFIER: {getattr(ctx.safety, 'label', 'unknown')}",
                 "findings": "FINDINGS (verified by the tool; choose among them):\n" + findings_text(findings, adm)}
        return parts
    if lean and findings is not None:
        dsl = compact_dsl(dsl, None, COMPACT_DSL_TAGS)
    parts = {"header": f"SEGMENT {ctx.segment_id} t={fmt(ctx.t_start)}-{fmt(ctx.t_end)} s, {stage}.",
             "dsl": "DSL:\n" + dsl,
             "metrics": "METRICS:\n" + metrics_text(ctx.metrics, compact or lean),
             "safety": "SAFETY:\n" + safety_text(ctx, NEAR_LIMIT if lean else None)}
    if findings:
        parts["findings"] = "FINDINGS (verified by the tool; choose among them):\n" + findings_text(findings, adm)
    parts["valid_ids"] = "VALID IDS: " + ", ".join(ids)
    return parts


def grouped_text(findings: list, groups: dict[str, list[str]], adm: Admissible | None) -> str:
    """The FINDINGS block with the findings of one kind and vehicle set on one line (all their ids, the lead's
    sentence, the others' times) and the lead's candidate recommendations."""
    from uav_debate_eval.findings.text import span

    recs = recommendation_lines(findings)
    by_id = {f.id: f for f in findings}
    lines = []
    for lead, ids in groups.items():
        f = by_id[lead]
        allowed = ""
        if adm is not None:
            dispute = adm.dispute(f.id)
            allowed = f" (dispute only as {', '.join(dispute)})" if dispute else " (endorse only)"
        more = [by_id[i] for i in ids[1:]]
        also = f" Also at {', '.join(span(g.t_start, g.t_end) for g in more)}." if more else ""
        lines.append(f"{', '.join(ids)} [{f.severity}] {f.sentence}{also}{allowed}")
        lines += recs.get(f.id, [])[:1]  # the lead's first
    return "\n".join(lines) or "(no findings)"


def own_parts(turn: Turn) -> dict[str, str]:
    """What only this agent is asked about: its findings (grouped) and its aspects."""
    parts = {"findings": "FINDINGS you are asked about (verified by the tool):\n"
             + grouped_text(turn.findings, turn.groups or {f.id: [f.id] for f in turn.findings}, turn.admissible)}
    if turn.aspects:
        parts["aspects"] = "ASPECTS you report on (name the concerns):\n" + "\n".join(a.line() for a in turn.aspects)
    return parts


def _stage(turn: Turn) -> str:
    return f"round {turn.round + 1}, layer L{turn.layer}"


def evidence_parts(turn: Turn) -> dict[str, str]:
    """The segment's data by part, the same for every agent of a round (and, as a shared prefix, of every round:
    the round is then named in the agent's own message)."""
    stage = "debated by the panel" if turn.compact or turn.lean else _stage(turn)
    if turn.lean and turn.findings and not turn.shared_findings:
        return shared_parts(turn.ctx, stage, turn.excerpt)
    return segment_parts(turn.ctx, stage, turn.valid_ids + turn.metric_refs, turn.compact, turn.findings,
                         turn.lean, turn.admissible)


def shared_parts(ctx: Any, stage: str, excerpt: list[str]) -> dict[str, str]:
    """What every agent of the segment shares (the cached prefix): where it is, the verifier's label and scores, and
    the DSL lines around the findings under debate."""
    scores = getattr(ctx.metrics, "scores", {}) or {}
    parts = {"header": f"SEGMENT {ctx.segment_id} t={fmt(ctx.t_start)}-{fmt(ctx.t_end)} s, {stage}. "
                       f"VERIFIER: {getattr(ctx.safety, 'label', 'unknown')}. SCORES: "
                       + ", ".join(f"{k} {fmt(v)}" for k, v in scores.items())}
    if excerpt:
        parts["dsl"] = "DSL:\n" + "\n".join(excerpt)
    return parts


def evidence_text(turn: Turn) -> str:
    return "\n\n".join(evidence_parts(turn).values())


def answer_format(turn: Turn) -> str:
    """Choices among the findings when the segment has them; else the free-text response (quoted or not)."""
    if turn.findings:
        return choice_format(turn.admissible) + (ASPECTS_FORMAT if not turn.shared_findings else "")
    return FORMAT_QUOTED if turn.quotes else FORMAT


def chosen_text(r: AgentResponse) -> str:
    """The stance on each chosen finding, e.g. "endorse F1 safety_critical, dispute F2 within_tolerance"."""
    return ", ".join(f"{c['stance']} {c['id']} {c['reason']}" for c in r.choices) or "no finding"


def choices_line(r: AgentResponse) -> str:
    """An answer as its structured choices: label, confidence, stance on each finding."""
    return f"{r.assessment} {r.confidence:.2f}; {chosen_text(r)}"


def previous_text(turn: Turn) -> str:
    """The previous round as this agent sees it (its visible neighbours); lean: their choices, not their text."""
    seen = turn.previous
    if not seen:
        return ""
    if turn.lean:
        lines = [f"- {role} ({team}): " + (choices_line(r) if r.choices else f"{r.assessment} {r.confidence:.2f}; "
                                             + r.claim) for role, team, r in seen]
    else:
        lines = [f"- {role} ({team}): {r.claim}" + ("" if turn.compact else f" | {r.summary}")
                 for role, team, r in seen]
    return "PREVIOUS ROUND:\n" + "\n".join(lines)


def round_text(turn: Turn) -> str:
    """What happened so far: the previous round, open issues, the moderator's interventions."""
    parts = [previous_text(turn)]
    if turn.issues:
        parts.append("OPEN ISSUES: " + turn.issues)
    if turn.interventions:
        parts.append("MODERATOR:\n" + "\n".join(i.text for i in turn.interventions))
    return "\n\n".join(x for x in parts if x)


def system_message(turn: Turn) -> str:
    """Full prompts: the role. Compact and lean prompts: the shared data, so a local model's KV cache (or a
    server's prompt cache) reuses the whole prefix across the agents of a round and only processes each agent's
    short role message."""
    if turn.compact or turn.lean:
        return "\n\n".join([PANEL, answer_format(turn), evidence_text(turn)])
    return "\n".join([role_text(turn), answer_format(turn)])


def user_message(turn: Turn) -> str:
    if turn.compact or turn.lean:
        own = list(own_parts(turn).values()) if turn.lean and turn.findings and not turn.shared_findings else []
        return "\n\n".join(x for x in (role_text(turn), f"This is {_stage(turn)}.", *own, round_text(turn)) if x)
    return "\n\n".join(x for x in (evidence_text(turn), round_text(turn)) if x)


def repair_message(turn: Turn) -> str:
    bad = "\n".join(f"- {c.item!r}: {c.reason()}" for c in turn.repair)
    return ("Some evidence could not be verified against the data:\n" + bad +
            "\nRewrite your answer citing only VALID IDS with their exact values. "
            + answer_format(turn))


def part_tokens(turn: Turn, previous_answer: AgentResponse | None = None) -> dict[str, int]:
    """Estimated prompt tokens by part: role (who the agent is and the answer format), the segment data (header,
    dsl, metrics, safety, findings, valid_ids), previous (the previous round, open issues, moderator), repair; and
    `shared`, the prefix every agent of the round sends identically (a KV / prompt cache reuses it)."""
    from uav_debate_eval.dsl.tokens import count_tokens

    parts = {"role": count_tokens(role_text(turn)) + count_tokens(answer_format(turn))
             + (count_tokens(PANEL) + count_tokens(f"This is {_stage(turn)}.") if turn.compact or turn.lean else 0)}
    parts.update({k: count_tokens(v) for k, v in evidence_parts(turn).items()})
    if turn.lean and turn.findings and not turn.shared_findings:
        parts.update({k: count_tokens(v) for k, v in own_parts(turn).items()})
    parts["previous"] = count_tokens(round_text(turn))
    parts["repair"] = 0
    if turn.repair and previous_answer is not None:
        parts["repair"] = count_tokens(json.dumps(previous_answer.to_dict())) + count_tokens(repair_message(turn))
    parts["shared"] = count_tokens(system_message(turn)) if turn.compact or turn.lean else 0
    return parts


def messages(turn: Turn, previous_answer: AgentResponse | None = None) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": system_message(turn)}, {"role": "user", "content": user_message(turn)}]
    if turn.repair and previous_answer is not None:
        msgs += [{"role": "assistant", "content": json.dumps(previous_answer.to_dict())},
                 {"role": "user", "content": repair_message(turn)}]
    return msgs
