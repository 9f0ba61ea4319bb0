"""Red/blue team assignment and role rotation (round-robin and adaptive)."""

from __future__ import annotations

import math

from uav_debate_eval.debate.personas import Persona


def n_red(n: int, fraction: float = 0.4) -> int:
    """N_red = max(1, floor(N * fraction))."""
    return max(1, math.floor(n * fraction + 1e-9))


def red_indices(n: int, r: int, fraction: float = 0.4) -> set[int]:
    """Agents on the red team in round r: {(i + r) mod N : 0 <= i < N_red}."""
    return {(i + r) % n for i in range(n_red(n, fraction))}


def rotation_shift(r: int, personas: list[Persona], issues: str | None) -> int:
    """Adaptive rotation: the lead (agent 0) becomes the persona most relevant to last round's issues.

    A first round, no keyword hit, or a tie that includes the round-robin persona fall back to round-robin
    (shift r); other ties go to the first persona in panel order.
    """
    if not issues:
        return r % len(personas)
    scores = [p.relevance(issues) for p in personas]
    best = max(scores)
    if best == 0:
        return r % len(personas)
    candidates = [j for j, s in enumerate(scores) if s == best]
    return r % len(personas) if r % len(personas) in candidates else candidates[0]


def roles(personas: list[Persona], shift: int) -> list[Persona]:
    """rho(i, r) = a_((i + shift) mod N); round-robin uses shift = r."""
    n = len(personas)
    return [personas[(i + shift) % n] for i in range(n)]
