"""The one mapping from a raw quantity to a 0..1 score, and the detail record every metric returns.

Most metrics are "lower is better" quantities x >= 0 mapped with the rational form

    score = 1 / (1 + max(0, x - floor) / ref)

`floor` is a noise floor (below it the flight is perfect, so exact answers such as "a
constant-speed line has smoothness 1" hold despite floating point and sensor noise) and `ref`
is the excess over the floor at which the score halves. The form never saturates, so two bad
flights can still be told apart.
"""

from __future__ import annotations


def rational(x: float, ref: float, floor: float = 0.0) -> float:
    """1 / (1 + max(0, x - floor) / ref): 1 up to the floor, 0.5 at floor + ref, -> 0 as x grows."""
    return 1.0 / (1.0 + max(0.0, x - floor) / ref)


def clip01(x: float) -> float:
    return min(1.0, max(0.0, x))


def detail(score: float | None, value: float | None, unit: str, formula: str) -> dict:
    """A metric's record: {"score", "value", "unit", "formula"} (score None = not applicable)."""
    return {
        "score": None if score is None else float(score),
        "value": None if value is None else float(value),
        "unit": unit,
        "formula": formula,
    }


def mean_score(details: dict[str, dict]) -> float | None:
    """Mean of the applicable metric scores of one category, None when none applies."""
    vals = [d["score"] for d in details.values() if d["score"] is not None]
    return sum(vals) / len(vals) if vals else None
