"""Interval bounds of a formula's robustness when its signals are only known to lie in intervals: what lets a
per-pair rule skip the pairs that never came close (rules.check).

Every operator is monotone (negation swaps the ends), so the robustness of any trace whose signals stay inside the
boxes lies inside the bound. A temporal window that may hold no step (a lower bound above 0, e.g. near the end of
the flight) contributes its identity (+inf for always/historically, -inf for eventually/once), as in rtamt.
"""

from __future__ import annotations

import math

from uav_debate_eval.stl.syntax import Binary, Compare, Expr, Formula, Logic, Not, Num, Signal, Temporal

Box = dict[str, tuple[float, float]]
INF = math.inf


def _expr(e: Expr, box: Box) -> tuple[float, float]:
    if isinstance(e, Num):
        return e.value, e.value
    if isinstance(e, Signal):
        return box.get(e.name, (-INF, INF))
    lo, hi = _expr(e.left, box)
    if e.op == "neg":
        return -hi, -lo
    if e.op == "abs":
        if lo >= 0:
            return lo, hi
        if hi <= 0:
            return -hi, -lo
        return 0.0, max(-lo, hi)
    assert e.right is not None
    rlo, rhi = _expr(e.right, box)
    if e.op == "+":
        return lo + rlo, hi + rhi
    if e.op == "-":
        return lo - rhi, hi - rlo
    k = lo  # a number times an expression: `left` is the number
    return (k * rlo, k * rhi) if k >= 0 else (k * rhi, k * rlo)


def bound(f: Formula, box: Box) -> tuple[float, float]:
    """(lowest, highest) robustness the formula can take at any step when each signal stays inside its box."""
    if isinstance(f, Compare):
        (llo, lhi), (rlo, rhi) = _expr(f.left, box), _expr(f.right, box)
        return (llo - rhi, lhi - rlo) if f.op in (">", ">=") else (rlo - lhi, rhi - llo)
    if isinstance(f, Not):
        lo, hi = bound(f.arg, box)
        return -hi, -lo
    if isinstance(f, Logic):
        (alo, ahi), (blo, bhi) = bound(f.left, box), bound(f.right, box)
        if f.op == "->":
            alo, ahi = -ahi, -alo
        if f.op == "and":
            return min(alo, blo), min(ahi, bhi)
        return max(alo, blo), max(ahi, bhi)
    may_be_empty = f.hi is not None and f.lo > 0
    if isinstance(f, Temporal):
        lo, hi = bound(f.arg, box)
        if f.op in ("always", "historically"):
            return lo, INF if may_be_empty else hi
        return -INF if may_be_empty else lo, hi
    assert isinstance(f, Binary)
    qlo, qhi = bound(f.right, box)  # every term is at most q's value; with d = 0 in the window, at least it
    return -INF if may_be_empty else qlo, qhi


def first_radius(f: Formula) -> float:
    """The smallest power-of-two separation (from 1 m) at which the formula's lower bound is not negative (inf: none):
    where the search for the pairs that can matter starts (rules.near_pairs offline, rules.live_pairs live)."""
    m = 1.0
    while m < 1e6:
        if bound(f, {"separation": (m, INF)})[0] >= 0:
            return m
        m *= 2
    return INF
