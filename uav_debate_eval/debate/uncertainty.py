"""Debate-collapse indicators from the per-role label/confidence sequences of one segment.

Per role j over rounds 0..R-1 (roles seen in consecutive rounds only):
  F = label changes / transitions;  M = mean |conf_r - conf_r-1|;  U_intra = lambda F + (1 - lambda) M.
Per round: D_r = share of role pairs with different labels; U_inter = mean_r D_r.
Final round: H = label entropy / log(3); D_final = D of the last round; LOO = share of roles whose
removal changes the majority label. U_sys = mean(H, D_final, LOO).
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations
from typing import Any

import numpy as np

from uav_debate_eval.debate.response import LABELS, SEVERITY


def majority(labels: list[str]) -> str | None:
    """Most frequent label; a tie goes to the more severe label (zero-trust)."""
    if not labels:
        return None
    counts = Counter(labels)
    return max(counts, key=lambda k: (counts[k], SEVERITY[k]))


def disagreement(labels: list[str]) -> float:
    pairs = list(combinations(labels, 2))
    return sum(a != b for a, b in pairs) / len(pairs) if pairs else 0.0


def uncertainty(rounds: list[dict[str, tuple[str, float]]], lam: float = 0.5) -> dict[str, Any]:
    """`rounds[r][role] = (label, confidence)`."""
    flips, revisions, transitions = 0, [], 0
    for prev, cur in zip(rounds, rounds[1:], strict=False):
        for role in cur.keys() & prev.keys():
            transitions += 1
            flips += cur[role][0] != prev[role][0]
            revisions.append(abs(cur[role][1] - prev[role][1]))
    f = flips / transitions if transitions else 0.0
    m = float(np.mean(revisions)) if revisions else 0.0
    d = [disagreement([lab for lab, _ in r.values()]) for r in rounds]
    final = [lab for lab, _ in rounds[-1].values()] if rounds else []
    counts = Counter(final)
    h = -sum(c / len(final) * math.log(c / len(final)) for c in counts.values()) / math.log(len(LABELS)) \
        if final else 0.0
    base = majority(final)
    loo = sum(majority(final[:i] + final[i + 1:]) != base for i in range(len(final))) / len(final) \
        if len(final) > 1 else 0.0
    final_d = d[-1] if d else 0.0
    return {"flip_rate": f, "belief_revision": m, "u_intra": lam * f + (1 - lam) * m,
            "disagreement": d, "u_inter": float(np.mean(d)) if d else 0.0, "entropy": h,
            "final_disagreement": final_d, "loo_instability": loo, "u_sys": (h + final_d + loo) / 3.0}
