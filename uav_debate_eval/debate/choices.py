"""Agents choose; the tool writes. An agent's structured answer selects verified findings (by id), endorses or
disputes each with a reason from a closed set, gives a label and a confidence, and picks recommendations among
the findings' candidates; it may add one short note. The claim, summary, evidence and recommendation shown in
the report are composed here from those choices and the findings' own sentences, so even a 135M model can only
make real choices (with `local` every id and reason is a grammar-constrained enum).
"""

from __future__ import annotations

from typing import Any

from uav_debate_eval.debate.llm.structured import CONFIDENCE_STEPS, LABELS, plain_string
from uav_debate_eval.debate.response import AgentResponse

ENDORSE_REASONS = ("confirmed_by_data", "safety_critical", "mission_impact")
DISPUTE_REASONS = ("sensor_artefact", "within_tolerance", "outside_mission_scope", "needs_more_data")
REASONS = ENDORSE_REASONS + DISPUTE_REASONS
MAX_CHOICES = 3
MAX_PICKS = 2
NOTE_MAX = 160
CHOICE_FORMAT = ("Answer with JSON only: {\"findings\": 1-3 items {\"id\": a finding id from FINDINGS, \"stance\": "
                 "\"endorse\" or \"dispute\", \"reason\": why}, most important first, \"label\": \"safe\" | "
                 "\"borderline\" | \"risky\", \"confidence\": 0..1, \"recommendations\": 1-2 ids R.. from FINDINGS, "
                 "\"note\": one short sentence naming a vehicle or finding id, or empty}. Endorse reasons: "
                 + ", ".join(ENDORSE_REASONS) + "; dispute reasons: " + ", ".join(DISPUTE_REASONS) + ".")


def candidates(findings: list) -> dict[str, tuple[str, str]]:
    """Recommendation ids R1.. -> (finding id, text), in finding order."""
    out: dict[str, tuple[str, str]] = {}
    for f in findings:
        for text in f.recommendations:
            out[f"R{len(out) + 1}"] = (f.id, text)
    return out


def findings_text(findings: list) -> str:
    """The FINDINGS block of the prompt: each finding and its candidate recommendations with their ids."""
    recs = candidates(findings)
    lines = []
    for f in findings:
        lines.append(f"{f.id} [{f.severity}] {f.sentence}")
        lines += [f"  {rid}: {text}" for rid, (fid, text) in recs.items() if fid == f.id]
    return "\n".join(lines) or "(no findings)"


def choice_schema(findings: list, note_max: int = NOTE_MAX) -> dict:
    """JSON Schema of one agent's choices: finding ids, reasons and recommendation ids are enums of what exists."""
    ids = [f.id for f in findings]
    recs = list(candidates(findings))
    item = {"anyOf": [
        {"type": "object", "properties": {"id": {"type": "string", "enum": ids},
                                          "stance": {"type": "string", "enum": [stance]},
                                          "reason": {"type": "string", "enum": list(reasons)}},
         "required": ["id", "stance", "reason"], "additionalProperties": False}
        for stance, reasons in (("endorse", ENDORSE_REASONS), ("dispute", DISPUTE_REASONS))]}
    return {
        "type": "object",
        "properties": {
            "findings": {"type": "array", "items": item, "minItems": 1, "maxItems": min(MAX_CHOICES, len(ids))},
            "label": {"type": "string", "enum": list(LABELS)},
            "confidence": {"type": "number", "enum": CONFIDENCE_STEPS},
            "recommendations": {"type": "array", "items": {"type": "string", "enum": recs}, "minItems": 1,
                                "maxItems": min(MAX_PICKS, len(recs))},
            "note": plain_string(0, note_max),
        },
        "required": ["findings", "label", "confidence", "recommendations", "note"],
        "additionalProperties": False,
    }


def choice_answer(response: AgentResponse, findings: list) -> dict:
    """What a model writes for these choices (the tool composes the rest): ids, stances, label, confidence,
    recommendation ids, note."""
    rids = {text: rid for rid, (_, text) in candidates(findings).items()}
    return {"findings": [dict(c) for c in response.choices], "label": response.assessment,
            "confidence": response.confidence, "recommendations": [rids[t] for t in response.picked if t in rids],
            "note": response.note}


def is_choice_answer(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("findings"), list)


def _words(reason: str) -> str:
    return reason.replace("_", " ")


def normalise(data: dict, findings: list) -> tuple[list[dict], list[str]]:
    """(choices, picked recommendation texts) keeping only ids that exist, each finding once, reasons in the set."""
    known = {f.id for f in findings}
    recs = candidates(findings)
    choices, seen = [], set()
    for c in data.get("findings") or []:
        if not isinstance(c, dict) or c.get("id") not in known or c["id"] in seen:
            continue
        reason = str(c.get("reason") or "")
        stance = "dispute" if reason in DISPUTE_REASONS else "endorse" if reason in ENDORSE_REASONS else \
            ("dispute" if c.get("stance") == "dispute" else "endorse")
        if reason not in REASONS:
            reason = "needs_more_data" if stance == "dispute" else "confirmed_by_data"
        seen.add(c["id"])
        choices.append({"id": c["id"], "stance": stance, "reason": reason})
    picked = list(dict.fromkeys(recs[r][1] for r in data.get("recommendations") or [] if r in recs))
    return choices, picked


def compose(who: str, segment: str, label: str, choices: list[dict], picked: list[str], findings: list,
            ctx: Any = None) -> dict[str, Any]:
    """The tool's own claim, summary, counter, recommendation and evidence for a set of choices."""
    by_id = {f.id: f for f in findings}
    endorsed = [c for c in choices if c["stance"] == "endorse"]
    disputed = [c for c in choices if c["stance"] == "dispute"]
    if endorsed:
        claim = f"{who} rates {segment} {label}: {by_id[endorsed[0]['id']].sentence}"
    elif disputed:
        c = disputed[0]
        claim = f"{who} rates {segment} {label} and disputes {c['id']} as {_words(c['reason'])}."
    else:
        claim = f"{who} rates {segment} {label} without choosing a finding."
    parts = []
    if endorsed:
        parts.append(f"endorses {', '.join(c['id'] for c in endorsed)}")
    if disputed:
        parts.append("disputes " + ", ".join(f"{c['id']} ({_words(c['reason'])})" for c in disputed))
    first_rec = next((by_id[c["id"]].recommendations[0] for c in endorsed if by_id[c["id"]].recommendations), "")
    recommendation = picked[0] if picked else first_rec
    summary = f"{who} {' and '.join(parts) or 'chose no finding'} on {segment}." + \
        (f" {recommendation}" if recommendation else "")
    if disputed:
        c = disputed[0]
        counter = f"{c['id']} is disputed as {_words(c['reason'])}: {by_id[c['id']].sentence}"
    else:
        counter = f"No finding of {segment} is disputed; {len(endorsed)} endorsed."
    return {"claim": claim, "summary": summary, "counter": counter, "recommendation": recommendation,
            "evidence": evidence_for(choices, by_id, ctx)}


def evidence_for(choices: list[dict], by_id: dict, ctx: Any, limit: int = 5) -> list[str]:
    """The chosen findings' references as citable evidence lines of this segment (DSL lines, metric values)."""
    from uav_debate_eval.debate.rules import dsl_evidence, metric_evidence

    index = getattr(getattr(ctx, "dsl", None), "index", {}) or {}
    details = getattr(getattr(ctx, "metrics", None), "details", {}) or {}
    out: list[str] = []
    for c in choices:
        for ref in by_id[c["id"]].refs:
            cat, _, name = ref.partition(".")
            if ref in index:
                out.append(dsl_evidence(index[ref]))
            elif name and isinstance((details.get(cat) or {}).get(name), dict):
                out.append(metric_evidence(cat, name, details[cat][name]))
    return list(dict.fromkeys(out))[:limit]


def response_from_choices(data: dict, findings: list, who: str, ctx: Any) -> AgentResponse:
    """An AgentResponse whose text the tool composed from the model's choices; the model's note rides along."""
    choices, picked = normalise(data, findings)
    label = str(data.get("label") or "").lower()
    if label not in LABELS:
        label = "borderline"
    try:
        confidence = min(1.0, max(0.0, float(data.get("confidence", 0.5))))
    except (TypeError, ValueError):
        confidence = 0.5
    text = compose(who, getattr(ctx, "segment_id", "the segment"), label, choices, picked, findings, ctx)
    return AgentResponse(claim=text["claim"], evidence=text["evidence"], counter=text["counter"],
                         summary=text["summary"], recommendation=text["recommendation"], confidence=confidence,
                         assessment=label, choices=choices, picked=picked, note=str(data.get("note") or "").strip())


def endorsed_ids(response: AgentResponse) -> set[str]:
    return {c["id"] for c in getattr(response, "choices", []) or [] if c["stance"] == "endorse"}
