"""Options of compare-flights that the command line needs at start-up (no numpy, no LLM code)."""

from __future__ import annotations

from dataclasses import dataclass

#: Common axes of the figures (compare.align).
MODES = ("phase", "takeoff", "progress")
PROTOCOLS = ("more", "samre")


@dataclass
class ProtocolConfig:
    protocol: str = "more"
    advocates: int = 3  # MORE: advocates per flight
    jury: bool = False
    max_rounds: int = 4  # SAMRE round budget
    token_budget: int = 24000  # SAMRE: prompt + completion tokens of the whole debate
    eps: float = 0.5  # SAMRE: score-gap convergence (total of 3 categories, 1-10 each)
    compact: bool = False  # short evidence for small local models
    temperature: float = 0.2
    max_tokens: int = 700
    seed: int = 0
    call_timeout_s: float = 600.0
