"""The operators of a formula as streams for the online monitor (rules.monitor): each step's robustness for K
columns becomes final once its inputs are, past-time operators at the step itself, a bounded future operator
[a, b] b steps later. Bounded windows of always/eventually/historically/once cost O(1) per step per column (van
Herk / Gil-Werman blocks); bounded until/since read their b steps (O(b) per step per column).
"""

from __future__ import annotations

import math

import numpy as np

from uav_debate_eval.rules.evaluator import steps_of
from uav_debate_eval.stl.syntax import Binary, Compare, Formula, Logic, Not, Temporal

INF = math.inf


class _Stream:
    """One operator's robustness per step for K columns: `done` steps are final, the last `cap` kept in a ring
    (row = step % cap). `start`: the first step computed (the steps before it are never read for a value decided)."""

    def __init__(self, cap: int, K: int, start: int = 0):
        self.cap, self.done = cap, start
        self.ring = np.zeros((cap, K))

    def put(self, value: np.ndarray) -> None:
        self.ring[self.done % self.cap] = value
        self.done += 1

    def get(self, first: int, last: int, fill: float) -> np.ndarray:
        """Steps first..last (inclusive); steps before 0 are `fill` (the operator's identity)."""
        a, b = first % self.cap, last % self.cap
        if first >= 0 and a <= b and last - first == b - a:  # one piece of the ring: a view
            return self.ring[a:b + 1]
        steps = np.arange(first, last + 1)
        out = self.ring[steps % self.cap]
        if first < 0:
            out[steps < 0] = fill
        return out


class _Sliding:
    """min/max over windows of w consecutive steps of a stream, O(1) per step per column (van Herk / Gil-Werman):
    steps in blocks of w, running maxima from each block's start (prefix) and, once a block is complete, to its end
    (suffix); a window is one block's suffix and the next block's prefix. Steps before 0 are the identity."""

    def __init__(self, w: int, take_min: bool, K: int, start: int = 0):
        self.w, self.cap, self.fed = w, w + 2, start
        self.agg = np.minimum if take_min else np.maximum
        self.fill = INF if take_min else -INF
        self.x, self.prefix, self.suffix = (np.zeros((w + 2, K)) for _ in range(3))

    def feed(self, v: np.ndarray) -> None:
        k, w, cap = self.fed, self.w, self.cap
        self.x[k % cap] = v
        self.prefix[k % cap] = v if k % w == 0 else self.agg(self.prefix[(k - 1) % cap], v)
        if k % w == w - 1:  # a block is complete: its running maxima to its end
            acc = self.x[k % cap].copy()
            self.suffix[k % cap] = acc
            for i in range(k - 1, k - w, -1):
                acc = self.agg(acc, self.x[i % cap])
                self.suffix[i % cap] = acc
        self.fed += 1

    def window(self, s: int) -> np.ndarray:
        """agg over steps s .. s + w - 1 (all fed)."""
        e, cap = s + self.w - 1, self.cap
        if e < 0:
            return np.full(self.x.shape[1], self.fill)
        if s <= 0:
            return self.prefix[e % cap].copy()
        if s % self.w == 0:
            return self.suffix[s % cap].copy()
        return self.agg(self.suffix[s % cap], self.prefix[e % cap])


class Node:
    """A compiled operator: children, its own stream, and how to compute one step from the children's streams."""

    def __init__(self, f: Formula, dt: float, cap: int, K: int, start: int = 0):
        """`start` > 0: the streams begin at that step (rules.live_tracked replays a pair's last `cap` steps); a
        value of step j then reads only steps from start on once j >= start + past_reach."""
        self.f = f
        self.kids = [Node(c, dt, cap, K, start) for c in _children(f)]
        self.out = _Stream(cap, K, start)
        self.state = np.full(K, -INF if _is(f, ("once", "since")) else INF)
        self.a = self.b = 0
        self.sliding: _Sliding | None = None
        if isinstance(f, Temporal | Binary) and f.hi is not None:
            self.a, self.b = steps_of(f.lo, f.hi, dt)
            if isinstance(f, Temporal) and self.b >= self.a:
                self.sliding = _Sliding(self.b - self.a + 1, f.op in ("always", "historically"), K, start)
        self.delay = delay_steps(f, dt)

    def advance(self, atoms: dict[int, np.ndarray]) -> None:
        """Compute every step that became final (atoms: this tick's comparison values by node id); no step past the
        newest one (a past operator [a, b] with a > 0 could run ahead of the data)."""
        for k in self.kids:
            k.advance(atoms)
        f, out = self.f, self.out
        if isinstance(f, Compare):
            out.put(atoms[id(self)])
            return
        newest = self.newest_step()
        while out.done <= newest:
            j = out.done
            value = self._step(j)
            if value is None:
                return
            out.put(value)

    def _step(self, j: int) -> np.ndarray | None:
        f, kids = self.f, self.kids
        if isinstance(f, Not):
            return -kids[0].out.get(j, j, 0.0)[0] if kids[0].out.done > j else None
        if isinstance(f, Logic):
            left, right = kids[0].out, kids[1].out
            if left.done <= j or right.done <= j:
                return None
            pv, qv = left.get(j, j, 0.0)[0], right.get(j, j, 0.0)[0]
            if f.op == "->":
                return np.maximum(-pv, qv)
            return np.minimum(pv, qv) if f.op == "and" else np.maximum(pv, qv)
        if isinstance(f, Temporal):
            x = kids[0].out
            take_min = f.op in ("always", "historically")
            agg, fill = (np.min, INF) if take_min else (np.max, -INF)
            if f.op in ("historically", "once"):
                if f.hi is None:
                    if x.done <= j:
                        return None
                    v = x.get(j, j, fill)[0]
                    self.state = (np.fmin if take_min else np.fmax)(self.state, v)
                    return self.state.copy()
                if x.done <= j - self.a:
                    return None
                return self._window(x, j - self.b, fill, agg)
            if x.done <= j + self.b:
                return None
            return self._window(x, j + self.a, fill, agg)
        assert isinstance(f, Binary)
        p, q = kids[0].out, kids[1].out
        if f.op == "since":
            if f.hi is None:
                if p.done <= j or q.done <= j:
                    return None
                self.state = np.fmax(q.get(j, j, -INF)[0], np.fmin(p.get(j, j, INF)[0], self.state))
                return self.state.copy()
            if (self.b and p.done <= j) or q.done <= j - self.a:  # since[0, 0] is q alone
                return None
            # min of p over (j - d, j] for d = 0..b, then the best d in [a, b]
            run = np.concatenate([np.full((1, len(p.ring[0])), INF),
                                  np.minimum.accumulate(p.get(j - self.b + 1, j, INF)[::-1], axis=0)]) \
                if self.b else np.full((1, len(p.ring[0])), INF)
            qs = q.get(j - self.b, j - self.a, -INF)[::-1]  # q(j - d) for d = a..b
            return np.max(np.minimum(run[self.a:self.b + 1], qs), axis=0)
        if (self.b and p.done <= j + self.b - 1) or q.done <= j + self.b:  # until[0, 0] is q alone
            return None
        run = np.concatenate([np.full((1, len(p.ring[0])), INF),
                              np.minimum.accumulate(p.get(j, j + self.b - 1, INF), axis=0)]) \
            if self.b else np.full((1, len(p.ring[0])), INF)
        qs = q.get(j + self.a, j + self.b, -INF)
        return np.max(np.minimum(run[self.a:self.b + 1], qs), axis=0)

    def _window(self, x: _Stream, start: int, fill: float, agg) -> np.ndarray:
        """agg of the child's steps start .. start + b - a: the sliding structure, fed every child step in order."""
        sl = self.sliding
        if sl is None:  # an empty window ([a, b] shorter than a step)
            return np.full(x.ring.shape[1], fill)
        while sl.fed <= start + sl.w - 1:  # up to the window's end only: later steps would overwrite its rows
            sl.feed(x.get(sl.fed, sl.fed, fill)[0])
        return sl.window(start)

    def newest_step(self) -> int:
        """The newest step the comparisons (the leaves) have reached (-1 before the first)."""
        node = self
        while node.kids:
            node = node.kids[0]
        return node.out.done - 1

    def extend(self, other: Node) -> None:
        """Append the columns of `other`: the same formula streamed over other columns up to the same step."""
        for mine, theirs in zip(self.kids, other.kids, strict=True):
            mine.extend(theirs)
        if self.out.done != other.out.done:
            raise ValueError(f"streams at steps {self.out.done} and {other.out.done} cannot be joined")
        self.out.ring = np.concatenate([self.out.ring, other.out.ring], axis=1)
        self.state = np.concatenate([self.state, other.state])
        if self.sliding is not None and other.sliding is not None:
            if self.sliding.fed != other.sliding.fed:
                raise ValueError(f"windows fed to {self.sliding.fed} and {other.sliding.fed} cannot be joined")
            for name in ("x", "prefix", "suffix"):
                setattr(self.sliding, name, np.concatenate([getattr(self.sliding, name),
                                                            getattr(other.sliding, name)], axis=1))

    def keep(self, columns: np.ndarray) -> None:
        """Keep only these columns (a mask)."""
        for k in self.kids:
            k.keep(columns)
        self.out.ring = self.out.ring[:, columns]
        self.state = self.state[columns]
        if self.sliding is not None:
            for name in ("x", "prefix", "suffix"):
                setattr(self.sliding, name, getattr(self.sliding, name)[:, columns])

    def lag(self) -> int:
        """The most steps any operator of the tree waits behind the data (an operand no step reads included, e.g.
        the left one of until[0, 0]): a replay must start at least this far back to catch up with every stream."""
        return max([self.delay, *(k.lag() for k in self.kids)])

    def atoms(self) -> list[Node]:
        if isinstance(self.f, Compare):
            return [self]
        return [a for k in self.kids for a in k.atoms()]


def _children(f: Formula) -> list[Formula]:
    if isinstance(f, Compare):
        return []
    if isinstance(f, Not | Temporal):
        return [f.arg]
    return [f.left, f.right]


def _is(f: Formula, ops: tuple[str, ...]) -> bool:
    return isinstance(f, Temporal | Binary) and f.op in ops


def past_reach(f: Formula, dt: float) -> int:
    """How many steps back a formula reads (bounded past operators; unbounded ones keep a running state)."""
    kids = max((past_reach(c, dt) for c in _children(f)), default=0)
    if isinstance(f, Temporal | Binary) and f.op in ("historically", "once", "since") and f.hi is not None:
        return kids + steps_of(f.lo, f.hi, dt)[1]
    return kids


def unbounded_past(f: Formula) -> bool:
    """A past operator without bounds (historically, once, since): its value keeps the whole flight's steps."""
    if isinstance(f, Temporal | Binary) and f.op in ("historically", "once", "since") and f.hi is None:
        return True
    return any(unbounded_past(c) for c in _children(f))


def undecidable(f: Formula) -> bool:
    """An unbounded future operator: its value is known only at the end of the flight."""
    if isinstance(f, Temporal | Binary) and f.op in ("always", "eventually", "until") and f.hi is None:
        return True
    return any(undecidable(c) for c in _children(f))


def delay_steps(f: Formula, dt: float) -> int:
    """Steps from a step to the tick its value is final: a future operator [a, b] waits b steps more than its
    operands, a past one [a, b] a steps less (it reads them a steps back), never less than 0."""
    delays = [delay_steps(c, dt) for c in _children(f)]
    kids = max(delays, default=0)
    if not isinstance(f, Temporal | Binary) or f.hi is None:
        return kids
    a, b = steps_of(f.lo, f.hi, dt)
    if f.op == "until":  # p is read up to b - 1 steps ahead, q up to b
        return max(delays[0] + b - 1, delays[1] + b) if b else delays[1]
    if f.op in ("always", "eventually"):
        return kids + b
    if f.op == "since":  # p is read up to the step itself (unless b = 0: q alone), q from a steps back
        return max(delays[0] if b else 0, delays[1] - a, 0)
    return max(kids - a, 0)
