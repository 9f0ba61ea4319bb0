"""LLM judge synthesis (paper: "a judge synthesis, or a jury majority in L3 with the judge as tie-breaker").

After a segment's last round, one more call to the panel's model reads the experts' final positions and writes
the segment's verdict: a label, a short synthesis, 1-3 recommendations and the DSL ids it rests on. The schema
bounds what it may say: the label is an enum of the labels it may choose from (the panel's final labels, or
the jury's tied ones), ids are an enum of ids that exist, and free text cannot contain ids. If the call fails,
the deterministic vote of `judge.judge` stands and the failure is recorded; the veto override comes after
either way, so the judge can never make a vetoed segment anything but `risky`.

When the segment has verified findings (agents choose), the judge chooses too: the findings its verdict rests
on and the recommendations among their candidates (enums of what exists), plus an optional short summary that
the engine puts through the quality gate; the tool writes the rest from those choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from uav_debate_eval.debate.llm.base import ChatRequest
from uav_debate_eval.debate.llm.structured import plain_string
from uav_debate_eval.debate.prompts import chosen_text, segment_parts, segment_text
from uav_debate_eval.debate.response import AgentResponse

JUDGE = ("You are the JUDGE of a panel of UAV flight experts. Read their final positions on one segment of a "
         "swarm flight and write the panel's verdict: weigh the evidence, not the number of voices; side with "
         "the position the data supports; name what the experts agreed on and what stays open.")
JUDGE_FORMAT = ("Answer with JSON only: {\"label\": one of ALLOWED LABELS, \"summary\": two sentences of "
                "synthesis, \"recommendations\": 1-3 actionable recommendations, each starting with 'Recommend', "
                "\"evidence\": 1-3 ids from "
                "VALID IDS that the verdict rests on}. Never invent ids or numbers.")
SUMMARY_MAX = 200
RECOMMENDATION_MAX = 120
#: An actionable recommendation: starts with "Recommend", then id-free plain text.
RECOMMENDATION = {"type": "string", "pattern": "^Recommend" + plain_string(5, RECOMMENDATION_MAX - 9)["pattern"][1:]}


@dataclass
class Synthesis:
    """The judge's verdict on one segment; `by` is "llm", or "vote" when the deterministic vote stands."""

    label: str | None
    by: str
    summary: str = ""
    recommendations: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # finding ids the verdict rests on (choices)
    note: str = ""  # the judge's own sentence when it chose (shown only if it passes the quality gate)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None

    def to_dict(self) -> dict:
        return {"label": self.label, "by": self.by, "summary": self.summary,
                "recommendations": list(self.recommendations), "evidence": list(self.evidence),
                "findings": list(self.findings), "note": self.note,
                "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
                "error": self.error}


def judge_schema(labels: list[str], valid_ids: list[str]) -> dict:
    """JSON Schema of the judge's answer: `label` limited to `labels`, evidence ids to `valid_ids`."""
    ids = list(dict.fromkeys(valid_ids))
    evidence: dict[str, Any] = ({"type": "array", "items": {"type": "string", "enum": ids}, "minItems": 1,
                                 "maxItems": 3} if ids else {"type": "array", "maxItems": 0})
    return {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": list(dict.fromkeys(labels))},
            "summary": plain_string(10, SUMMARY_MAX),
            "recommendations": {"type": "array", "items": RECOMMENDATION, "minItems": 1, "maxItems": 3},
            "evidence": evidence,
        },
        "required": ["label", "summary", "recommendations", "evidence"],
        "additionalProperties": False,
    }


JUDGE_CHOICE_FORMAT = ("Answer with JSON only: {\"label\": one of ALLOWED LABELS, \"findings\": 1-3 finding ids "
                       "from FINDINGS the verdict rests on, most important first, \"recommendations\": 1-2 ids R.. "
                       "from FINDINGS, \"summary\": one short sentence naming a vehicle or finding id, or empty}.")


def judge_choice_schema(labels: list[str], findings: list) -> dict:
    """The judge's choices: label among `labels`, finding ids and recommendation ids as enums of what exists."""
    from uav_debate_eval.debate.choices import candidates

    ids, recs = [f.id for f in findings], list(candidates(findings))
    return {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": list(dict.fromkeys(labels))},
            "findings": {"type": "array", "items": {"type": "string", "enum": ids}, "minItems": 1,
                         "maxItems": min(3, len(ids))},
            "recommendations": {"type": "array", "items": {"type": "string", "enum": recs}, "minItems": 1,
                                "maxItems": min(2, len(recs))},
            "summary": plain_string(0, SUMMARY_MAX),
        },
        "required": ["label", "findings", "recommendations", "summary"],
        "additionalProperties": False,
    }


def judge_messages(ctx: Any, layer: int, positions: list[tuple[str, AgentResponse]], labels: list[str],
                   valid_ids: list[str], vetoed: bool, compact: bool, findings: list | None = None,
                   lean: bool = False, adm: Any = None) -> list[dict[str, str]]:
    """System: the judge's role and format. User: the segment's data and each expert's final position. Lean: the
    segment data as the agents saw it (no id list when findings carry the ids, margins near a limit) and each
    position as its choices, not the composed text."""
    veto = ("\nSAFETY VETO: the deterministic safety verifier reports a hard-constraint violation in this flight; "
            "the mission is RISKY whatever you conclude. Explain it and recommend." if vetoed else "")
    stage = f"layer L{layer}, final verdict"
    if lean and findings:
        data = "\n\n".join(segment_parts(ctx, stage, valid_ids, compact, findings, True, adm=adm).values())
    else:
        data = segment_text(ctx, stage, valid_ids, compact, findings)
    panel = "\n".join(f"- {role}: label {r.assessment}, confidence {r.confidence:.2f}" +
                      (f"; {chosen_text(r)}" if lean and r.choices else
                       f". Claim: {r.claim} Summary: {r.summary}") for role, r in positions)
    return [{"role": "system", "content": JUDGE + veto + "\n" + (JUDGE_CHOICE_FORMAT if findings else JUDGE_FORMAT)},
            {"role": "user", "content": f"{data}\n\nPANEL FINAL POSITIONS:\n{panel}\n\n"
                                        f"ALLOWED LABELS: {', '.join(labels)}"}]


def judge_request(ctx: Any, layer: int, positions: list[tuple[str, AgentResponse]], labels: list[str],
                  valid_ids: list[str], vetoed: bool, compact: bool, temperature: float, max_tokens: int,
                  seed: int, findings: list | None = None, lean: bool = False, adm: Any = None) -> ChatRequest:
    # The schema bounds the answer's length; a smaller token budget could cut it mid-JSON (a token is >= 1 char).
    longest_id = max(map(len, valid_ids), default=0)
    bound = SUMMARY_MAX + 3 * RECOMMENDATION_MAX + 3 * (longest_id + 4) + 100
    schema = judge_choice_schema(labels, findings) if findings else judge_schema(labels, valid_ids)
    messages = judge_messages(ctx, layer, positions, labels, valid_ids, vetoed, compact, findings, lean, adm)
    return ChatRequest(messages=messages, agent="judge", json_schema=schema, valid_ids=valid_ids,
                       temperature=temperature, max_tokens=max(max_tokens, bound), seed=seed)


def from_answer(data: dict | None, labels: list[str], valid_ids: list[str],
                findings: list | None = None) -> tuple[Synthesis | None, str]:
    """Check an answer against what the judge may say (servers without constrained output can still stray)."""
    if not isinstance(data, dict):
        return None, "unparseable judge answer"
    label = data.get("label")
    if label not in labels:
        return None, f"judge label {label!r} not among {labels}"
    if findings and isinstance(data.get("findings"), list):
        return _from_choices(data, label, valid_ids, findings)
    summary = str(data.get("summary") or "").strip()
    recs = [str(x).strip() for x in (data.get("recommendations") or []) if str(x).strip()]
    evidence = [str(x) for x in (data.get("evidence") or [])]
    unknown = [x for x in evidence if x not in set(valid_ids)]
    if unknown:
        return None, f"judge cites unknown ids {unknown}"
    if not summary:
        return None, "judge gave no summary"
    return Synthesis(label, "llm", summary[:SUMMARY_MAX], recs[:3], evidence[:3]), ""


def _from_choices(data: dict, label: str, valid_ids: list[str], findings: list) -> tuple[Synthesis | None, str]:
    """The judge's choices: the findings it rests on (their references become its evidence), the picked
    candidates as its recommendations, and its summary composed by the tool (its own sentence is added by the
    engine only if it passes the quality gate)."""
    from uav_debate_eval.debate.choices import candidates

    by_id = {f.id: f for f in findings}
    chosen = [i for i in dict.fromkeys(str(x) for x in data["findings"]) if i in by_id]
    if not chosen:
        return None, f"judge chose no finding among {list(by_id)}"
    recs = candidates(findings)
    picked = [recs[r][1] for r in dict.fromkeys(str(x) for x in data.get("recommendations") or []) if r in recs]
    valid = set(valid_ids)
    evidence = list(dict.fromkeys(r for i in chosen for r in by_id[i].refs if r in valid))[:3]
    rest = f" and {', '.join(chosen[1:])}" if len(chosen) > 1 else ""
    summary = f"The judge rates it {label}, resting on {chosen[0]}{rest}: {by_id[chosen[0]].sentence}"
    own = str(data.get("summary") or "").strip()
    return Synthesis(label, "llm", summary, picked[:3], evidence, findings=chosen, note=own), ""
