"""The quality gate on every model-written sentence: only grounded, readable English reaches a report.

A sentence passes when it (1) names something of this flight: a vehicle, a constraint, a metric, an event type,
a DSL id, a finding id or the segment; (2) reads as English prose (mostly words, at least one English function
word once it is longer than a few words); (3) carries no template debris (braces, tag words such as
SCORES_SUPPED, half-French "Recommendez"); (4) repeats no sentence already kept; (5) is not truncated (ends
with . ! or ?, not on a dangling word or a cut-off token). Failing sentences are struck with their reason;
the caller counts them in the report and keeps them in the transcript.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uav_debate_eval.core.records import CONSTRAINT_NAMES

REASONS = ("ungrounded", "not_english", "template_debris", "repeated", "truncated")
#: Also counted as struck by the engine: free text citing an id or number the data does not hold.
QUOTE_REASON = "invalid_citation"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CAPS_TAG = re.compile(r"\b[A-Z]{2,}_[A-Z_]{2,}\b")
_DEBRIS = re.compile(r"[{}<>|\\]|\[[\s:;,.]*\]|\bRecommendez\b|\b(?:SUMMARY|CLAIM|EVIDENCE|COUNTER|"
                     r"LABEL|CONFIDENCE)\s*:|([^\w\s])\1{2,}|\b(\w+)(?:\W+\2\b){2,}", re.IGNORECASE)
_FUNCTION_WORDS = frozenset({
    "a", "an", "the", "of", "and", "or", "but", "is", "are", "was", "were", "be", "been", "has", "have", "had",
    "in", "on", "at", "to", "for", "with", "by", "from", "no", "not", "as", "it", "its", "this", "that", "these",
    "those", "than", "then", "so", "if", "when", "while", "because", "which", "who", "during", "above", "below",
    "within", "without", "between", "after", "before", "over", "under", "into", "out", "more", "less", "all",
    "each", "both", "any", "some", "one", "two"})
_DANGLING = frozenset({"a", "an", "the", "of", "and", "or", "to", "for", "with", "by", "from", "in", "on", "at", "as",
                       "is", "are", "was", "were", "than", "that"})
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
#: Words that name a constraint or a kind of quantity in plain English.
DOMAIN_WORDS = ("separation", "geofence", "speed", "vertical", "altitude", "telemetry", "stale", "formation",
                "waypoint", "proximity", "collision", "sharp turn", "link")


@dataclass
class Gated:
    """The sentences of one text that passed, and those struck with their reason."""

    kept: str
    struck: list[tuple[str, str]] = field(default_factory=list)


def flight_names(ctx: Any = None, findings: list | None = None, extra: list[str] | tuple[str, ...] = ()) -> set[str]:
    """Lower-case names a grounded sentence may use: vehicles, constraints, metrics, events, ids of this flight."""
    names: set[str] = {c for c in CONSTRAINT_NAMES} | {c.replace("_", " ") for c in CONSTRAINT_NAMES}
    names |= set(DOMAIN_WORDS)
    names |= {str(x) for x in extra}
    if ctx is not None:
        names.add(str(getattr(ctx, "segment_id", "")))
        index = getattr(getattr(ctx, "dsl", None), "index", {}) or {}
        for ref, it in index.items():
            names.add(ref)
            names |= {str(u) for u in (getattr(it, "uavs", []) or [])}
        for e in getattr(getattr(ctx, "dsl", None), "events", []) or []:
            names |= {e.id, e.type, e.type.replace("_", " "), *map(str, e.uavs)}
        for cat, group in (getattr(getattr(ctx, "metrics", None), "details", {}) or {}).items():
            for m in group or {}:
                names |= {f"{cat}.{m}", m, m.replace("_", " ")}
        for v in getattr(getattr(ctx, "safety", None), "violations", []) or []:
            names |= set(map(str, v.uavs))
    for f in findings or []:
        d = f if isinstance(f, dict) else f.to_dict()
        names |= {d["id"], *map(str, d["uavs"]), *map(str, d["refs"])}
    return {n.lower() for n in names if n and len(n) > 1}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


def _grounded(sentence: str, names: set[str]) -> bool:
    low = sentence.lower()
    return any(n in low and re.search(r"(?<![a-z0-9_])" + re.escape(n) + r"(?![a-z0-9_])", low) for n in names)


def _english(sentence: str) -> bool:
    tokens = sentence.split()
    words = _WORD.findall(sentence)
    if not tokens or len(words) < 0.5 * len(tokens):
        return False
    if len(words) >= 5 and not any(w.lower() in _FUNCTION_WORDS for w in words):
        return False
    letters = sum(ch.isalpha() for ch in sentence)
    return letters >= 0.5 * len(sentence.replace(" ", "")) and all(ord(ch) < 0x2500 for ch in sentence)


def _truncated(sentence: str) -> bool:
    s = sentence.rstrip()
    if not s.endswith((".", "!", "?")):
        return True
    words = _WORD.findall(s)
    last = words[-1].lower() if words else ""
    return last in _DANGLING or bool(re.search(r"(?:\b\w-|\s-)\.?$", s))


def has_debris(sentence: str) -> bool:
    """Template debris: braces, empty brackets ("data[:]"), tag words, half-French, runs of punctuation."""
    return bool(_DEBRIS.search(sentence) or _CAPS_TAG.search(sentence))


def reason(sentence: str, names: set[str], seen: set[str]) -> str | None:
    """Why `sentence` fails the gate (one of REASONS), or None when it passes."""
    if has_debris(sentence):
        return "template_debris"
    if _truncated(sentence):
        return "truncated"
    if not _english(sentence):
        return "not_english"
    if " ".join(sentence.lower().split()) in seen:
        return "repeated"
    if not _grounded(sentence, names):
        return "ungrounded"
    return None


def gate(text: str, names: set[str], seen: set[str] | None = None) -> Gated:
    """Keep the sentences of `text` that pass; `seen` (normalised sentences already kept) grows with them."""
    seen = seen if seen is not None else set()
    kept, struck = [], []
    for s in sentences(text):
        why = reason(s, names, seen)
        if why is None:
            kept.append(s)
            seen.add(" ".join(s.lower().split()))
        else:
            struck.append((s, why))
    return Gated(" ".join(kept), struck)


def count(struck: list[tuple[str, str]]) -> dict:
    """The report's struck block: {count, reasons: {reason: n}}."""
    return {"count": len(struck), "reasons": dict(Counter(r for _, r in struck))}
