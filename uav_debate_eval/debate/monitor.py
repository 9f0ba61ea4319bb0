"""Meta-cognitive monitor: per-round quality Q_evidence, Q_coverage, Q_coherence, Q_novelty and interventions.

Q_overall = min of the four. Every component below tau_Q triggers its matching intervention for the next
round: evidence -> request_evidence, coverage -> missing_aspects, coherence and novelty -> break_circularity
(both mean the panel is going round in circles). Q_novelty < novelty_min suggests termination.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from uav_debate_eval.debate.consensus import similarity, words

#: Domain aspects of Q_coverage with the keywords that count as mentioning them.
ASPECTS: dict[str, tuple[str, ...]] = {
    "trajectory": ("trajectory", "tracking", "path", "waypoint", "deviation", "heading", "turn", "jerk",
                   "smooth", "altitude", "flight_control"),
    "coordination": ("coordination", "formation", "cohesion", "spacing", "swarm", "group", "synchron",
                     "link", "neighbour"),
    "safety": ("safety", "separation", "collision", "geofence", "violation", "margin", "risk", "proximity",
               "veto", "limit", "stale"),
    "efficiency": ("efficiency", "energy", "battery", "duration", "time", "distance", "speed", "effort"),
}

INTERVENTIONS = {
    "request_evidence": "Request evidence: cite at least 3 SEG/EVENT ids from the DSL index with their exact values.",
    "missing_aspects": "Address the missing aspects: {aspects}.",
    "break_circularity": "Break circularity: argue against your previous position and test it against the data.",
}
_MATCH = {"evidence": "request_evidence", "coverage": "missing_aspects", "coherence": "break_circularity",
          "novelty": "break_circularity"}


def aspects_in(text: str) -> set[str]:
    tokens = " ".join(words(text))
    return {a for a, kws in ASPECTS.items() if any(k in tokens for k in kws)}


@dataclass
class Intervention:
    kind: str  # request_evidence | missing_aspects | break_circularity
    text: str
    aspects: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text, "aspects": self.aspects}


@dataclass
class Quality:
    evidence: float
    coverage: float
    coherence: float
    novelty: float
    missing: list[str]
    interventions: list[Intervention]
    suggest_stop: bool

    @property
    def overall(self) -> float:
        return min(self.evidence, self.coverage, self.coherence, self.novelty)

    def to_dict(self) -> dict:
        return {"evidence": self.evidence, "coverage": self.coverage, "coherence": self.coherence,
                "novelty": self.novelty, "overall": self.overall, "missing_aspects": self.missing,
                "interventions": [i.to_dict() for i in self.interventions], "suggest_stop": self.suggest_stop}


def assess(q_ev: list[float], claims: list[str], evidence: list[str], texts: list[str], round_text: str,
           previous_round_text: str | None, tau_q: float = 0.7, novelty_min: float = 0.3) -> Quality:
    """Score one round. `q_ev`, `claims`, `evidence` (joined per agent), `texts` are per responding agent."""
    q_evidence = float(np.mean(q_ev)) if q_ev else 0.0
    covered = aspects_in(" ".join(texts))
    missing = [a for a in ASPECTS if a not in covered]
    q_coverage = len(covered) / len(ASPECTS)
    sims = [min(0.5, similarity(c, e)) for c, e in zip(claims, evidence, strict=True)]
    q_coherence = 1.0 - float(np.mean(sims)) if sims else 1.0
    q_novelty = 1.0 if previous_round_text is None else 1.0 - similarity(round_text, previous_round_text)
    q = {"evidence": q_evidence, "coverage": q_coverage, "coherence": q_coherence, "novelty": q_novelty}
    kinds: list[str] = []
    for name in sorted(q, key=q.__getitem__):  # worst deficit first
        if q[name] < tau_q and _MATCH[name] not in kinds:
            kinds.append(_MATCH[name])
    interventions = [Intervention(k, INTERVENTIONS[k].format(aspects=", ".join(missing)),
                                  missing if k == "missing_aspects" else []) for k in kinds]
    return Quality(q_evidence, q_coverage, q_coherence, q_novelty, missing, interventions,
                   suggest_stop=q_novelty < novelty_min)
