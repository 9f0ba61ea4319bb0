"""Consensus measures over one round (C_score, C_semantic, C_priority, C_concern, C_overall) and text similarity.

Sim(a, b) is the word-level longest-common-subsequence ratio 2 * LCS(a, b) / (|a| + |b|) on lower-cased
word tokens (1.0 for two empty texts); "mean pairwise" over fewer than two agents is 1.0 (nobody disagrees).
"""

from __future__ import annotations

import re
from itertools import combinations

import numpy as np

from uav_debate_eval.debate.response import AgentResponse

WEIGHTS = {"score": 0.25, "semantic": 0.30, "priority": 0.25, "concern": 0.20}
_WORD = re.compile(r"[a-z0-9_]+(?:\.[a-z0-9_]+)*")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def lcs_len(a: list[str], b: list[str]) -> int:
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def similarity(a: str, b: str) -> float:
    """Sim(a, b) = 2 LCS / (|a| + |b|) over word tokens."""
    wa, wb = words(a), words(b)
    if not wa and not wb:
        return 1.0
    return 2.0 * lcs_len(wa, wb) / (len(wa) + len(wb))


def mean_pairwise(texts: list[str]) -> float:
    pairs = list(combinations(texts, 2))
    return float(np.mean([similarity(a, b) for a, b in pairs])) if pairs else 1.0


def concern_overlap(responses: list[AgentResponse]) -> float:
    """C_concern = |intersection of evidence word sets| / |union| across agents."""
    sets = [set(words(" ".join(r.evidence))) for r in responses]
    union = set().union(*sets) if sets else set()
    if len(sets) < 2:
        return 1.0
    return len(set.intersection(*sets)) / len(union) if union else 1.0


def findings_agreement(responses: list[AgentResponse]) -> float | None:
    """C_findings: mean pairwise Jaccard of the findings the agents endorsed (None when nobody chose any)."""
    sets = [{c["id"] for c in r.choices if c["stance"] == "endorse"} for r in responses if r.choices]
    if not sets:
        return None
    pairs = list(combinations(sets, 2))
    if not pairs:
        return 1.0
    return float(np.mean([len(a & b) / len(a | b) if a | b else 1.0 for a, b in pairs]))


def consensus(responses: list[AgentResponse]) -> dict[str, float]:
    """All four components and C_overall = 0.25 C_score + 0.30 C_semantic + 0.25 C_priority + 0.20 C_concern.

    When agents chose findings, agreement on them (C_findings) is a fifth signal: C_overall = 0.8 x the above
    + 0.2 C_findings. Without choices C_findings is reported as 1.0 and C_overall is unchanged."""
    conf = [r.confidence for r in responses]
    c = {
        "score": float(1.0 - np.std(conf)) if conf else 1.0,
        "semantic": mean_pairwise([r.summary for r in responses]),
        "priority": mean_pairwise([r.claim for r in responses]),
        "concern": concern_overlap(responses),
    }
    c["overall"] = float(sum(WEIGHTS[k] * c[k] for k in WEIGHTS))
    agree = findings_agreement(responses)
    c["findings"] = 1.0 if agree is None else agree
    if agree is not None:
        c["overall"] = 0.8 * c["overall"] + 0.2 * agree
    return c


def round_text(responses: dict[str, AgentResponse]) -> str:
    """S_r: the round's claims and summaries in role order, compared between rounds for early stop / novelty."""
    return " ".join(f"{responses[k].claim} {responses[k].summary}" for k in sorted(responses))
