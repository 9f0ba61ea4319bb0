"""The structured agent response (CLAIM, EVIDENCE, COUNTER, SUMMARY, CONFIDENCE) and its completeness."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from uav_debate_eval.debate.llm.structured import normalise_evidence

LABELS = ("safe", "borderline", "risky")
#: `inconclusive` (admissible only where a checked constraint could not be evaluated) ranks between borderline and
#: risky, as in the verdict: no violation, but the data cannot show the flight safe.
SEVERITY = {"safe": 0, "borderline": 1, "inconclusive": 2, "risky": 3}
#: Score implied by a label when a model gives no score (score-gap convergence needs one).
LABEL_SCORE = {"safe": 1.0, "borderline": 0.5, "inconclusive": 0.5, "risky": 0.0}


@dataclass
class AgentResponse:
    """One agent's turn. `assessment` is its label for the segment, `score` its quality estimate in 0..1."""

    claim: str
    evidence: list[str] = field(default_factory=list)
    counter: str = ""
    summary: str = ""
    recommendation: str = ""
    confidence: float = 0.5
    assessment: str = "borderline"
    score: float | None = None
    choices: list[dict] = field(default_factory=list)  # [{id, stance, reason}] over the segment's findings
    picked: list[str] = field(default_factory=list)  # recommendation texts chosen among the candidates
    note: str = ""  # the model's own free text (shown only where it passes the quality gate)
    aspects: list[dict] = field(default_factory=list)  # [{id, stance}] over the aspects it was asked about

    @property
    def effective_score(self) -> float:
        return self.score if self.score is not None else LABEL_SCORE[self.assessment]

    def completeness(self) -> float:
        """Evidence-chain completeness indicator: share of claim, evidence, reasoning, confidence present."""
        parts = (bool(self.claim.strip()), bool(self.evidence), bool((self.counter + self.summary).strip()),
                 0.0 <= self.confidence <= 1.0)
        return sum(parts) / 4.0

    def text(self) -> str:
        """Everything the agent said, for keyword and coverage analysis."""
        return " ".join([self.claim, *self.evidence, self.counter, self.summary, self.recommendation])

    def to_dict(self) -> dict:
        d = {"claim": self.claim, "evidence": list(self.evidence), "counter": self.counter,
             "summary": self.summary, "recommendation": self.recommendation,
             "confidence": self.confidence, "label": self.assessment, "score": self.score}
        if self.choices:
            d.update(findings=[dict(c) for c in self.choices], recommendations=list(self.picked), note=self.note)
        if self.aspects:
            d["aspects"] = [dict(a) for a in self.aspects]
        return d


def severest(labels: list[str]) -> str:
    return max(labels, key=SEVERITY.__getitem__) if labels else "safe"


def infer_label(text: str) -> str:
    """Fallback label when a model gave none: the severest word it used."""
    low = text.lower()
    if re.search(r"\b(risky|unsafe|violat\w*|collision|dangerous)\b", low):
        return "risky"
    if re.search(r"\b(borderline|marginal|caution|near|close to)\b", low):
        return "borderline"
    return "safe"


def _number(value: object, default: float) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default
    return min(1.0, max(0.0, x)) if x == x else default


def from_data(data: dict) -> AgentResponse:
    """Normalise a parsed structured answer (any key case, evidence as strings or {id, text}) into a response."""
    d = {str(k).lower(): v for k, v in data.items()}
    evidence = d.get("evidence") or []
    if isinstance(evidence, str):
        evidence = [e for e in re.split(r"\n+|;\s*", evidence) if e.strip()]
    evidence = normalise_evidence(evidence)
    claim = str(d.get("claim") or "").strip()
    summary = str(d.get("summary") or "").strip()
    recommendation = str(d.get("recommendation") or "").strip()
    if not recommendation:
        m = re.search(r"(recommend[^.]*\.?)", summary, re.IGNORECASE)
        recommendation = m.group(1).strip() if m else ""
    label = str(d.get("assessment") or d.get("label") or "").strip().lower()
    if label not in LABELS:
        label = infer_label(claim + " " + summary)
    score = d.get("score")
    return AgentResponse(
        claim=claim,
        evidence=evidence,
        counter=str(d.get("counter") or "").strip(),
        summary=summary,
        recommendation=recommendation,
        confidence=_number(d.get("confidence"), 0.5),
        assessment=label,
        score=None if score is None else _number(score, 0.5),
    )
