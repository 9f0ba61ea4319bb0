"""What of the panel's text reaches the report: model-written sentences pass the quality gate (the rest is struck
and counted on the segment), text composed from choices is the tool's, and a segment's recommendations come
from the candidates the panel picked."""

from __future__ import annotations

from typing import Any

from uav_debate_eval.debate import choices as choosing
from uav_debate_eval.debate import gate as quality
from uav_debate_eval.debate.evidence import EvidenceVerifier
from uav_debate_eval.debate.prompts import Turn
from uav_debate_eval.debate.response import AgentResponse


def shown_text(resp: AgentResponse, turn: Turn, verifier: EvidenceVerifier, seg: Any) -> dict:
    """What of a model's text reaches the report: sentences that pass the quality gate (and cite only what
    resolves); the rest is struck and counted. Text the tool composed from choices is not model text."""
    names = quality.flight_names(turn.ctx, seg.findings)
    seen: set[str] = set()
    shown: dict[str, str] = {}
    fields = ("note",) if resp.choices else ("claim", "summary", "counter", "recommendation")
    for key in fields:
        gated = quality.gate(getattr(resp, key), names, seen)
        kept, struck = [], list(gated.struck)
        for sentence in quality.sentences(gated.kept):
            check = verifier.check(sentence)
            if check.cites and not check.valid:  # quote verification: free text cites only what resolves
                struck.append((sentence, quality.QUOTE_REASON))
            else:
                kept.append(sentence)
        shown[key] = " ".join(kept)
        seg.struck += struck
    if not resp.choices:
        fallback = choosing.compose(turn.persona.name, turn.ctx.segment_id, resp.assessment, [], [],
                                    seg.findings, turn.ctx)
        for key in ("claim", "summary", "counter"):
            shown[key] = shown[key] or fallback[key]
    elif shown["note"]:
        shown["summary"] = f"{resp.summary} {shown['note']}"
    return shown


def gate_judge(seg: Any, ctx: Any) -> None:
    """The judge writes free text: its summary and recommendations pass the same gate as the agents'."""
    names = quality.flight_names(ctx, seg.findings)
    seen: set[str] = set()
    if seg.judge.findings:  # it chose: the summary is the tool's, only its own note is model text
        note = quality.gate(seg.judge.note, names, seen)
        seg.struck += note.struck
        seg.judge.note = note.kept
        seg.judge.summary = f"{seg.judge.summary} {note.kept}".strip()
        return
    summary = quality.gate(seg.judge.summary, names, seen)
    seg.struck += summary.struck
    seg.judge.summary = summary.kept
    recs = []
    for text in seg.judge.recommendations:
        gated = quality.gate(text, names, seen)
        seg.struck += gated.struck
        if gated.kept:
            recs.append(gated.kept)
    seg.judge.recommendations = recs


def segment_recommendations(records: list, findings: list) -> list[str]:
    """The segment's recommendations: candidates the panel picked (most votes first, weighted by confidence),
    then the first candidate of each endorsed finding, then the text of responses without choices that
    passed the gate; with nothing chosen, the top finding's first candidate."""
    votes: dict[str, float] = {}
    for x in records:
        for text in x.response.picked:
            votes[text] = votes.get(text, 0.0) + x.response.confidence
    out = sorted(votes, key=lambda t: -votes[t])
    by_id = {f.id: f for f in findings}
    endorsed = [i for x in records for i in choosing.endorsed_ids(x.response)]
    ranked = sorted(dict.fromkeys(endorsed), key=lambda i: [f.id for f in findings].index(i) if i in by_id else 99)
    out += [by_id[i].recommendations[0] for i in ranked if i in by_id and by_id[i].recommendations]
    for x in sorted(records, key=lambda r: -r.response.confidence):
        if not x.response.choices:
            text = x.shown.get("recommendation", x.response.recommendation) if x.shown else x.response.recommendation
            if text:
                out.append(text)
    if not out and findings and findings[0].recommendations:
        out.append(findings[0].recommendations[0])
    return list(dict.fromkeys(out))
