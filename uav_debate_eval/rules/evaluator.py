"""Robustness of a formula at every grid step for many vehicles or pairs at once: arrays (steps, columns).

rtamt's discrete-time offline semantics (rtamt 0.4, `StlDiscreteTimeOfflineAstVisitor`), step by step:
- `e1 >= e2`, `e1 > e2`: e1 - e2; `e1 <= e2`, `e1 < e2`: e2 - e1; `not`: minus; `and`/`or`: min/max;
  `p -> q`: max(-p, q).
- `always[a,b] p` at i: min of p over steps i+a .. i+b that exist (+inf when none); `eventually`: max (-inf);
  `historically[a,b]`/`once[a,b]`: over steps i-b .. i-a that exist. Without bounds: to the end / from the start.
- `p until[a,b] q` at i: max over d in [a,b] of min(q(i+d), min of p over i .. i+d-1); past the end q = -inf.
  `p since[a,b] q` at i: max over d in [a,b] of min(q(i-d), min of p over i-d+1 .. i); before the start q = -inf.
- Bounds in seconds become steps: the steps k with k*dt inside [a, b] (ceil(a/dt) .. floor(b/dt)).

Bounded always/eventually/historically/once are sliding-window minima/maxima (scipy.ndimage's filters: O(n) per
column whatever the window); bounded until/since take one vectorised pass per step of their window (O(n*b)); the
unbounded forms are running minima/maxima or one pass over the steps.

Data the quality pass excludes: each comparison has a mask of steps it cannot read. `world="lo"` fills them with the
value that makes the whole formula smallest (-inf where the comparison counts positively, +inf under a negation),
`"hi"` the largest; the true robustness lies between, so a formula is violated when even its `hi` is below zero
and satisfied when its `lo` is not.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.ndimage import maximum_filter1d, minimum_filter1d

from uav_debate_eval.stl.syntax import Binary, Compare, Expr, Formula, Logic, Not, Num, Signal, Temporal

INF = math.inf
#: (values (steps, columns), unknown steps (steps, columns) or None) of a signal by name
SignalFn = Callable[[str], tuple[np.ndarray, np.ndarray | None]]


def steps_of(lo: float, hi: float, dt: float) -> tuple[int, int]:
    """The grid steps k with k*dt inside [lo, hi] seconds (a tolerance of 1e-9 steps against rounding)."""
    return max(0, math.ceil(lo / dt - 1e-9)), math.floor(hi / dt + 1e-9)


class Evaluator:
    """Evaluates formulas on one block of columns; `shape` is (steps, columns)."""

    def __init__(self, signal: SignalFn, shape: tuple[int, int], dt: float, world: str = "exact"):
        self.signal, self.shape, self.dt, self.world = signal, shape, dt, world

    def expr(self, e: Expr) -> tuple[np.ndarray | float, np.ndarray | None]:
        """Values and the unknown mask (None: all known)."""
        if isinstance(e, Num):
            return e.value, None
        if isinstance(e, Signal):
            return self.signal(e.name)
        a, ua = self.expr(e.left)
        if e.op == "abs":
            return np.abs(a), ua
        if e.op == "neg":
            return -a, ua
        assert e.right is not None
        b, ub = self.expr(e.right)
        unknown = ua if ub is None else ub if ua is None else ua | ub
        if e.op == "+":
            return a + b, unknown
        if e.op == "-":
            return a - b, unknown
        return a * b, unknown

    def rob(self, f: Formula, positive: bool = True) -> np.ndarray:
        """The robustness at every step, (steps, columns). `positive`: the formula counts positively in the rule."""
        if isinstance(f, Compare):
            left, ul = self.expr(f.left)
            right, ur = self.expr(f.right)
            diff = (left - right) if f.op in (">", ">=") else (right - left)
            # a new array from the subtraction (copied only when the comparison reads numbers alone)
            out = diff if isinstance(diff, np.ndarray) and diff.shape == self.shape else \
                np.array(np.broadcast_to(diff, self.shape), dtype=float)
            unknown = ul if ur is None else ur if ul is None else ul | ur
            if unknown is not None and self.world != "exact":
                out[unknown] = -INF if (self.world == "lo") == positive else INF
            return out
        if isinstance(f, Not):
            return -self.rob(f.arg, not positive)
        if isinstance(f, Logic):
            if f.op == "->":
                return np.maximum(-self.rob(f.left, not positive), self.rob(f.right, positive))
            combine = np.minimum if f.op == "and" else np.maximum
            return combine(self.rob(f.left, positive), self.rob(f.right, positive))
        if isinstance(f, Temporal):
            return self.temporal(f, self.rob(f.arg, positive))
        return self.binary(f, self.rob(f.left, positive), self.rob(f.right, positive))

    def temporal(self, f: Temporal, x: np.ndarray) -> np.ndarray:
        take_min = f.op in ("always", "historically")
        past = f.op in ("historically", "once")
        if f.hi is None:
            acc = np.minimum.accumulate if take_min else np.maximum.accumulate
            return acc(x, axis=0) if past else acc(x[::-1], axis=0)[::-1]
        a, b = steps_of(f.lo, f.hi, self.dt)
        return window(x, a, b, take_min, past)

    def binary(self, f: Binary, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        T = len(p)
        if f.hi is None:  # one pass: out[i] = max(q[i], min(p[i], out[i -/+ 1]))
            out = np.empty_like(q)
            order = range(T) if f.op == "since" else range(T - 1, -1, -1)
            prev = np.full(q.shape[1:], -INF)
            for i in order:
                prev = np.maximum(q[i], np.minimum(p[i], prev))
                out[i] = prev
            return out
        a, b = steps_of(f.lo, f.hi, self.dt)
        out = np.full_like(q, -INF)
        run = np.full_like(p, INF)  # min of p over the steps strictly between i and i -/+ d (since: excluding i - d)
        for d in range(min(b, T - 1) + 1):
            n = T - d
            if f.op == "until":  # rows 0..n-1 read q[d:], p[d:]
                if d >= a:
                    np.maximum(out[:n], np.minimum(run[:n], q[d:]), out=out[:n])
                np.minimum(run[:n], p[d:], out=run[:n])
            else:  # rows d..T-1 read q[:n], p[:n]; p[i - d] joins the run after q[i - d] was read
                if d >= a:
                    np.maximum(out[d:], np.minimum(run[d:], q[:n]), out=out[d:])
                np.minimum(run[d:], p[:n] if d else p, out=run[d:])
        return out


def window(x: np.ndarray, a: int, b: int, take_min: bool, past: bool) -> np.ndarray:
    """min/max of x over steps i+a..i+b (past: i-b..i-a) that exist, per column; the identity (+/-inf) when none.
    scipy's running filters are O(n) in the window length (van Herk / Gil-Werman)."""
    T = len(x)
    fill = INF if take_min else -INF
    out = np.full_like(x, fill)
    width = b - a + 1
    if width <= 0 or a >= T:
        return out
    filt = minimum_filter1d if take_min else maximum_filter1d
    if past:  # out[i] = agg(x[i-b .. i-a]): a window that ends at row i - a
        src = x[:T - a]
        m = src if width == 1 else filt(src, width, axis=0, mode="constant", cval=fill, origin=(width - 1) // 2)
        out[a:] = m
    else:  # out[i] = agg(x[i+a .. i+b]): a window that starts at row i + a
        src = x[a:]
        m = src if width == 1 else filt(src, width, axis=0, mode="constant", cval=fill, origin=-(width // 2))
        out[:T - a] = m
    return out
