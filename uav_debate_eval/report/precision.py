"""The precision a report's numbers mean something at, applied once, where a report leaves the tool.

Scores and other dimensionless figures carry 4 decimals; metres, m/s, degrees and seconds 3 (a millimetre, a
millisecond). The computation keeps full precision; `rounded` is called by every writer of report.json,
report.md, report.html and the live report topic, so the files show the same numbers, and the last bits that
differ between machines (OpenBLAS picks its kernel by CPU) do not reach them. `decimals` also gives the golden
tests their tolerance: one unit in the last place kept.
"""

from __future__ import annotations

from typing import Any

SCORE_DECIMALS = 4
PHYSICAL_DECIMALS = 3

#: keys whose numbers are metres, m/s, degrees or seconds although their names carry no unit suffix
_PHYSICAL_KEYS = frozenset({
    "t", "t0", "value", "limit", "worst", "worst_value", "d_min", "err_max", "err_rms", "min", "max", "len", "v",
    "tol", "worst_miss", "veto_intervals", "intervals", "hdg", "turn", "robustness", "x", "y", "z", "vx", "vy", "vz",
    "position", "offset", "offset_m", "distance", "margin",
})
_PHYSICAL_SUFFIXES = ("_s", "_m", "_mps", "_deg", "_hz")


def decimals(key: str | None) -> int:
    """Decimals kept for a number stored under `key` (the nearest dict key above it)."""
    if key is None:
        return SCORE_DECIMALS
    if key in _PHYSICAL_KEYS or key.startswith("t_") or key.endswith(_PHYSICAL_SUFFIXES):
        return PHYSICAL_DECIMALS
    return SCORE_DECIMALS


def rounded(obj: Any, key: str | None = None) -> Any:
    """A copy of a report (any JSON-like value) with every float rounded by `decimals` of its key."""
    if isinstance(obj, float):
        value = round(obj, decimals(key))
        return 0.0 if value == 0 else value  # no "-0.0" in a report
    if isinstance(obj, dict):
        return {k: rounded(v, k) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [rounded(v, key) for v in obj]
    return obj
