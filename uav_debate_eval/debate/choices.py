"""Agents choose; the tool writes. An agent's structured answer selects verified findings (by id), endorses or
disputes each with a reason from a closed set, gives a label and a confidence, and picks recommendations among
the findings' candidates; it may add one short note. The claim, summary, evidence and recommendation shown in
the report are composed here from those choices and the findings' own sentences, so even a 135M model can only
make real choices (with `local` every id and reason is a grammar-constrained enum).
"""

from __future__ import annotations

from typing import Any

from uav_debate_eval.debate.agenda import expand
from uav_debate_eval.debate.aspects import answer_text as aspect_answer_text
from uav_debate_eval.debate.aspects import evidence as aspect_evidence
from uav_debate_eval.debate.aspects import schema as aspect_schema
from uav_debate_eval.debate.cite import dsl_evidence, metric_evidence
from uav_debate_eval.debate.llm.structured import CONFIDENCE_STEPS, LABELS, plain_string
from uav_debate_eval.debate.response import AgentResponse
from uav_debate_eval.findings.admissible import DISPUTE_REASONS, ENDORSE_REASONS, REASONS, Admissible

__all__ = ["DISPUTE_REASONS", "ENDORSE_REASONS", "REASONS", "choice_format", "choice_schema", "compose",
           "normalise", "response_from_choices"]
MAX_CHOICES = 3
#: Appended to the format when agents are asked about aspects (debate.aspects).
ASPECTS_FORMAT = " With ASPECTS, also \"concerns\": the ids A.. of those that are a concern (the rest read ok)."
MAX_PICKS = 2
NOTE_MAX = 160
EVIDENCE_MAX = 6


def unconstrained(findings: list) -> Admissible:
    """Every label of the agents' schema and every reason for every finding (callers without the segment's facts)."""
    return Admissible(LABELS, {f.id: REASONS for f in findings})


def choice_format(adm: Admissible | None = None) -> str:
    """The answer format; the label is asked only when the facts leave more than one open."""
    label = "" if adm is not None and not adm.label_open else \
        " \"label\": " + " | ".join(f'\"{x}\"' for x in (adm.labels if adm else LABELS)) + ","
    allowed = ("a finding may be disputed only for the reasons listed after it" if adm is not None else
               "dispute reasons: " + ", ".join(DISPUTE_REASONS))
    return ("Answer with JSON only: {\"findings\": 1-3 items {\"id\": a finding id, \"stance\": \"endorse\" or "
            "\"dispute\", \"reason\"}, most important first," + label + " \"confidence\": 0..1, "
            "\"recommendations\": 1-2 ids R.., \"note\": one short sentence naming a vehicle or finding id, or empty}. "
            "Endorse reasons: " + ", ".join(ENDORSE_REASONS) + "; " + allowed + ".")


def candidates(findings: list) -> dict[str, tuple[str, str]]:
    """Recommendation ids R1.. -> (finding id, text), in finding order."""
    out: dict[str, tuple[str, str]] = {}
    for f in findings:
        for text in f.recommendations:
            out[f"R{len(out) + 1}"] = (f.id, text)
    return out


def recommendation_lines(findings: list) -> dict[str, list[str]]:
    """Each finding's candidate recommendations as prompt lines ("  R3: ..."), by finding id, in one pass (a show's
    segment has thousands of findings)."""
    lines: dict[str, list[str]] = {}
    for rid, (fid, text) in candidates(findings).items():
        lines.setdefault(fid, []).append(f"  {rid}: {text}")
    return lines


def findings_text(findings: list, adm: Admissible | None = None) -> str:
    """The FINDINGS block of the prompt: each finding, the reasons it may be disputed for (when the facts are known)
    and its candidate recommendations with their ids."""
    recs = recommendation_lines(findings)
    lines = []
    for f in findings:
        allowed = ""
        if adm is not None:
            dispute = adm.dispute(f.id)
            allowed = f" (dispute only as {', '.join(dispute)})" if dispute else " (endorse only)"
        lines.append(f"{f.id} [{f.severity}] {f.sentence}{allowed}")
        lines += recs.get(f.id, [])
    return "\n".join(lines) or "(no findings)"


def _alternatives(findings: list, adm: Admissible) -> list[dict]:
    """One schema alternative per (stance, admissible reasons), its ids the findings that admit exactly those."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for f in findings:
        for stance, reasons in (("endorse", adm.endorse(f.id)), ("dispute", adm.dispute(f.id))):
            if reasons:
                groups.setdefault((stance, reasons), []).append(f.id)
    return [{"type": "object", "properties": {"id": {"type": "string", "enum": ids},
                                              "stance": {"type": "string", "enum": [stance]},
                                              "reason": {"type": "string", "enum": list(reasons)}},
             "required": ["id", "stance", "reason"], "additionalProperties": False}
            for (stance, reasons), ids in groups.items()]


def choice_schema(findings: list, adm: Admissible | None = None, note_max: int = NOTE_MAX,
                  aspect_items: list | None = None) -> dict:
    """JSON Schema of one agent's choices: finding ids, the reasons each admits, the open labels and recommendation
    ids are enums (a grammar for `local`, a schema and its post-check for `openai`); no label when one is left."""
    adm = adm or unconstrained(findings)
    recs = list(candidates(findings))
    props: dict[str, Any] = {
        "findings": {"type": "array", "items": {"anyOf": _alternatives(findings, adm)}, "minItems": 1,
                     "maxItems": min(MAX_CHOICES, len(findings))}}
    if adm.label_open:
        props["label"] = {"type": "string", "enum": list(adm.labels)}
    props.update({
        "confidence": {"type": "number", "enum": CONFIDENCE_STEPS},
        "recommendations": {"type": "array", "items": {"type": "string", "enum": recs}, "minItems": 1,
                            "maxItems": min(MAX_PICKS, len(recs))}})
    required = list(props)
    if aspect_items:  # optional: an answer without it reads every aspect ok
        props["concerns"] = aspect_schema(aspect_items)
    # the free text last and optional: llama.cpp's grammar emits the required properties first, then the optional
    # ones in this order, so an answer cut at the token cap while the model still writes its note has made every
    # choice and named its concerns (structured.close_cut_note)
    props["note"] = plain_string(0, note_max)
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def choice_answer(response: AgentResponse, findings: list, adm: Admissible | None = None) -> dict:
    """What a model writes for these choices (the tool composes the rest): ids, stances, the label when it is
    asked, confidence, recommendation ids, note."""
    rids = {text: rid for rid, (_, text) in candidates(findings).items()}
    label = {"label": response.assessment} if adm is None or adm.label_open else {}
    aspects = {"concerns": [a["id"] for a in response.aspects if a["stance"] == "concern"]} \
        if response.aspects else {}
    return {"findings": [dict(c) for c in response.choices], **label, "confidence": response.confidence,
            "recommendations": [rids[t] for t in response.picked if t in rids], "note": response.note, **aspects}


def is_choice_answer(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("findings"), list)


def _words(reason: str) -> str:
    return reason.replace("_", " ")


def normalise(data: dict, findings: list, adm: Admissible | None = None) -> tuple[list[dict], list[str], int]:
    """(choices, picked recommendation texts, inadmissible choices dropped): each finding once, each choice one the
    facts admit (its stance follows its reason); a choice of an unknown id or reason, or one the facts rule out, is
    dropped and counted."""
    adm = adm or unconstrained(findings)
    recs = candidates(findings)
    choices: list[dict] = []
    seen: set[str] = set()
    dropped = 0
    for c in data.get("findings") or []:
        if not isinstance(c, dict) or c.get("id") in seen:
            continue
        reason = str(c.get("reason") or "")
        choice = {"id": str(c.get("id")), "stance": "dispute" if reason in DISPUTE_REASONS else "endorse",
                  "reason": reason}
        if not adm.allows(choice):
            dropped += 1
            continue
        seen.add(choice["id"])
        choices.append(choice)
    picked = list(dict.fromkeys(recs[r][1] for r in data.get("recommendations") or [] if r in recs))
    return choices, picked, dropped


def label_of(data: dict, adm: Admissible) -> tuple[str, int]:
    """(label, 1 if the answer's own label was inadmissible and replaced by the verifier's else 0)."""
    label = str(data.get("label") or "").lower()
    if adm.allows_label(label):
        return label, 0
    fixed = adm.labels[0] if not adm.label_open else adm.verifier_label
    return fixed, int(bool(label))


def _claim(who: str, segment: str, label: str, endorsed: list[dict], disputed: list[dict], by_id: dict) -> str:
    """The agent's claim: its label and the finding it rests on. A finding at or above warning level never follows
    a "safe" (that would read as if the hazard were safe): the claim then says what keeps the segment safe."""
    if endorsed:
        f = by_id[endorsed[0]["id"]]
        if label == "safe" and f.severity in ("hazard", "warning"):
            ids = ", ".join(c["id"] for c in endorsed)
            return f"{who} rates {segment} safe: no hard limit was crossed; it confirms {ids} as below a hard limit."
        return f"{who} rates {segment} {label}, resting on {f.id}: {f.sentence}"
    if disputed:
        c = disputed[0]
        return f"{who} rates {segment} {label} and disputes {c['id']} as {_words(c['reason'])}."
    return f"{who} rates {segment} {label} without choosing a finding."


def compose(who: str, segment: str, label: str, choices: list[dict], picked: list[str], findings: list,
            ctx: Any = None) -> dict[str, Any]:
    """The tool's own claim, summary, counter, recommendation and evidence for a set of (admissible) choices."""
    by_id = {f.id: f for f in findings}
    endorsed = [c for c in choices if c["stance"] == "endorse"]
    disputed = [c for c in choices if c["stance"] == "dispute"]
    parts = []
    if endorsed:
        parts.append(f"endorses {', '.join(c['id'] for c in endorsed)}")
    if disputed:
        parts.append("disputes " + ", ".join(f"{c['id']} as {_words(c['reason'])}" for c in disputed))
    first_rec = next((by_id[c["id"]].recommendations[0] for c in endorsed if by_id[c["id"]].recommendations), "")
    recommendation = picked[0] if picked else first_rec
    summary = f"{who} {' and '.join(parts) or 'chose no finding'} on {segment}." + \
        (f" {recommendation}" if recommendation else "")
    if disputed:
        c = disputed[0]
        f = by_id[c["id"]]
        stands = " The verifier's violation stands." if f.severity == "hazard" else ""
        counter = f"{c['id']} is disputed as {_words(c['reason'])}. It reads: {f.sentence}{stands}"
    else:
        counter = f"No finding of {segment} is disputed; {len(endorsed)} endorsed."
    return {"claim": _claim(who, segment, label, endorsed, disputed, by_id), "summary": summary, "counter": counter,
            "recommendation": recommendation, "evidence": evidence_for(choices, by_id, ctx)}


def evidence_for(choices: list[dict], by_id: dict, ctx: Any, limit: int = 5) -> list[str]:
    """The chosen findings' references as citable evidence lines of this segment (DSL lines, metric values)."""
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


def response_from_choices(data: dict, findings: list, who: str, ctx: Any, adm: Admissible | None = None,
                          groups: dict[str, list[str]] | None = None,
                          aspect_items: list | None = None) -> tuple[AgentResponse, int]:
    """(an AgentResponse whose text the tool composed from the model's admissible choices, inadmissible choices
    dropped); a choice on a grouped finding applies to its group; the model's note rides along."""
    adm = adm or unconstrained(findings)
    choices, picked, dropped = normalise(data, findings, adm)
    choices = expand(choices, groups or {}, adm)
    concerns = {str(x) for x in data.get("concerns") or []}
    answered = [{"id": a.id, "stance": "concern" if a.id in concerns else "ok"} for a in aspect_items or []]
    label, wrong_label = label_of(data, adm)
    try:
        confidence = min(1.0, max(0.0, float(data.get("confidence", 0.5))))
    except (TypeError, ValueError):
        confidence = 0.5
    text = compose(who, getattr(ctx, "segment_id", "the segment"), label, choices, picked, findings, ctx)
    response = AgentResponse(claim=text["claim"], evidence=text["evidence"], counter=text["counter"],
                             summary=text["summary"], recommendation=text["recommendation"], confidence=confidence,
                             assessment=label, choices=choices, picked=picked,
                             note=str(data.get("note") or "").strip())
    with_aspects(response, answered, aspect_items or [])
    return response, dropped + wrong_label


def with_aspects(response: AgentResponse, answered: list[dict], aspect_items: list) -> None:
    """Add the agent's aspect answers: the tool's sentence to its summary, the metric facts to its evidence."""
    if not answered:
        return
    response.aspects = answered
    response.summary = f"{response.summary} {aspect_answer_text(answered, aspect_items)}".strip()
    facts = aspect_evidence(answered, aspect_items)
    response.evidence = list(dict.fromkeys([*response.evidence, *facts]))[:EVIDENCE_MAX]


def endorsed_ids(response: AgentResponse) -> set[str]:
    return {c["id"] for c in getattr(response, "choices", []) or [] if c["stance"] == "endorse"}
