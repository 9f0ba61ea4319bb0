"""Verdict: judge synthesis per segment (jury majority in L3), then the deterministic veto override.

Label rules (CONTRACT §3): the verifier decides. Any hard-constraint violation => `risky`, whatever the
panel says; a panel label other than `risky` against a veto is recorded `overridden`. Without a violation
the verifier's borderline rule (a quantity within 10 % of its limit) gives `borderline`, else `safe`;
the panel's label is reported next to it (`panel_label`) and can only raise `safe` to `borderline` when
DebateConfig.panel_may_raise is set (never to `risky`: that needs a violation).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from uav_debate_eval.debate.response import SEVERITY, AgentResponse, severest


@dataclass
class Verdict:
    label: str
    summary: str
    recommendations: list[str]
    overridden: bool
    panel_label: str | None
    vetoed: bool = False
    verifier_label: str = "safe"
    low_confidence: bool = False

    def to_dict(self) -> dict:
        return {"label": self.label, "vetoed": self.vetoed, "summary": self.summary,
                "recommendations": self.recommendations, "overridden": self.overridden,
                "panel_label": self.panel_label, "verifier_label": self.verifier_label,
                "low_confidence": self.low_confidence}


def judge(responses: list[AgentResponse]) -> str | None:
    """Confidence-weighted vote over the final responses; a tie goes to the more severe label."""
    if not responses:
        return None
    weight: dict[str, float] = {}
    for r in responses:
        weight[r.assessment] = weight.get(r.assessment, 0.0) + r.confidence
    return max(weight, key=lambda k: (round(weight[k], 9), SEVERITY[k]))


def jury(responses: list[AgentResponse]) -> tuple[str | None, str]:
    """Majority of the final labels; the judge breaks a tie. Returns (label, how)."""
    if not responses:
        return None, "none"
    counts = Counter(r.assessment for r in responses)
    top = max(counts.values())
    tied = [k for k, c in counts.items() if c == top]
    if len(tied) == 1:
        return tied[0], "jury"
    j = judge([r for r in responses if r.assessment in tied])
    return j, "jury+judge"


def jury_candidates(responses: list[AgentResponse]) -> list[str]:
    """The labels the jury leaves open: its majority label, or every label tied for the majority."""
    counts = Counter(r.assessment for r in responses)
    top = max(counts.values(), default=0)
    return [k for k, c in counts.items() if c == top]


def verifier_label(safeties: list[Any]) -> tuple[str, bool]:
    """(label, vetoed) over all segments' SafetyResults: risky iff any violation (or veto)."""
    vetoed = any(bool(getattr(s, "violations", None)) or bool(getattr(s, "vetoed", False)) for s in safeties)
    if vetoed:
        return "risky", True
    labels = [getattr(s, "label", "safe") for s in safeties]
    return ("borderline" if "borderline" in labels else "safe"), False


def final_label(verifier: str, vetoed: bool, panel: str | None, panel_may_raise: bool) -> tuple[str, bool]:
    """(label, overridden)."""
    if vetoed:
        return "risky", panel is not None and panel != "risky"
    if panel_may_raise and verifier == "safe" and panel in ("borderline", "risky"):
        return "borderline", False
    return verifier, False


def mission_panel_label(segment_labels: list[str | None]) -> str | None:
    labels = [x for x in segment_labels if x is not None]
    return severest(labels) if labels else None
