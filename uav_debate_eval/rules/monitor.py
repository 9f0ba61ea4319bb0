"""The mission rules online (CONTRACT.md §2a, live): every rule evaluated step by step on a fixed grid of the live
clock, for every vehicle / pair / the swarm at once, with rtamt's discrete-time semantics (rules.evaluator).

- Each operator is a stream: a step's value is final once its inputs are. Past-time operators are final at the
  step itself (exact at each sample); a bounded future operator [a, b] is final b steps later, so a formula is
  decided with a delay equal to its horizon (`delay_s`, stated in the verifier's status).
- `always[a,b] body` / `always body` (the usual rule) is monitored as its body at every step of its window: a
  step whose body is below zero is a failure of the rule at that step, reported once decided. Any other formula
  is decided once, at flight time 0 plus its horizon.
- Unbounded future operators inside the body (`eventually p` without bounds, `until` without bounds) cannot be
  decided before the flight ends: such a rule is checked offline only (`live` False, the reason in `why`).
- A vehicle without a fresh pose has unknown signals (NaN): a comparison over it is unknown and never fails; the
  running past operators without bounds skip unknown steps.
- The grid starts at the first update; an update after several grid steps (a stalled thread) repeats the snapshot
  for the steps missed. A new vehicle restarts the streams (their columns change).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.distance import pdist

from uav_debate_eval.core.mission import Geofence
from uav_debate_eval.core.trajectory import Snapshots
from uav_debate_eval.rules.evaluator import Evaluator, steps_of
from uav_debate_eval.rules.signals import BASIS, Grid
from uav_debate_eval.rules.spec import Rule
from uav_debate_eval.rules.syntax import Binary, Compare, Formula, Logic, Not, Temporal

INF = math.inf


class _Stream:
    """One operator's robustness per step for K columns: `done` steps are final, the last `cap` kept in a ring."""

    def __init__(self, cap: int, K: int):
        self.cap, self.done = cap, 0
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

    def __init__(self, w: int, take_min: bool, K: int):
        self.w, self.cap, self.fed = w, w + 2, 0
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


class _Node:
    """A compiled operator: children, its own stream, and how to compute one step from the children's streams."""

    def __init__(self, f: Formula, dt: float, cap: int, K: int):
        self.f = f
        self.kids = [_Node(c, dt, cap, K) for c in _children(f)]
        self.out = _Stream(cap, K)
        self.state = np.full(K, -INF if _is(f, ("once", "since")) else INF)
        self.a = self.b = 0
        self.sliding: _Sliding | None = None
        if isinstance(f, Temporal | Binary) and f.hi is not None:
            self.a, self.b = steps_of(f.lo, f.hi, dt)
            if isinstance(f, Temporal) and self.b >= self.a:
                self.sliding = _Sliding(self.b - self.a + 1, f.op in ("always", "historically"), K)
        self.delay = _delay_steps(f, dt)

    def advance(self, atoms: dict[int, np.ndarray]) -> None:
        """Compute every step that became final (atoms: this tick's comparison values by node id); no step past the
        newest one (a past operator [a, b] with a > 0 could run ahead of the data)."""
        for k in self.kids:
            k.advance(atoms)
        f, out = self.f, self.out
        if isinstance(f, Compare):
            out.put(atoms[id(self)])
            return
        newest = self._newest()
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

    def _newest(self) -> int:
        node = self
        while node.kids:
            node = node.kids[0]
        return node.out.done - 1

    def atoms(self) -> list[_Node]:
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


def _past_reach(f: Formula, dt: float) -> int:
    """How many steps back a formula reads (bounded past operators; unbounded ones keep a running state)."""
    kids = max((_past_reach(c, dt) for c in _children(f)), default=0)
    if isinstance(f, Temporal | Binary) and f.op in ("historically", "once", "since") and f.hi is not None:
        return kids + steps_of(f.lo, f.hi, dt)[1]
    return kids


def _undecidable(f: Formula) -> bool:
    """An unbounded future operator: its value is known only at the end of the flight."""
    if isinstance(f, Temporal | Binary) and f.op in ("always", "eventually", "until") and f.hi is None:
        return True
    return any(_undecidable(c) for c in _children(f))


@dataclass
class RuleFailure:
    """A rule's body failed at step time `t` (decided `delay_s` later) for these vehicles / pairs."""

    rule: Rule
    t: float
    uavs: list[str]
    value: float
    count: int
    delay_s: float


@dataclass
class LiveRule:
    """One rule's online state: its stream tree and what it reports."""

    rule: Rule
    live: bool
    why: str = ""
    delay_s: float = 0.0
    robustness: float | None = None  # the newest decided value (min over the columns)
    decided_t: float | None = None  # the step time it belongs to
    failed: bool = False  # a decided failure so far
    failing: RuleFailure | None = None  # the newest decided step's failure (None: it held)
    root: _Node | None = field(default=None, repr=False)
    window: tuple[int, int | None] = (0, None)  # steps of the top-level always (None: to the end)
    once: bool = False  # decided once at step 0 (not an always)


class RuleMonitor:
    """The mission rules online: call :meth:`update` with each snapshot; returns the failures newly decided."""

    def __init__(self, rules: list[Rule], period_s: float = 0.02, geofence: Geofence | None = None):
        self.rules, self.dt, self.geofence = list(rules), float(period_s), geofence
        self.ids: list[str] = []
        self.t0: float | None = None
        self.step = 0  # grid steps taken
        self.restarts = 0
        self.states: list[LiveRule] = []

    def _build(self, ids: list[str]) -> None:
        self.ids = list(ids)
        N = len(ids)
        self.states = []
        for rule in self.rules:
            f = rule.formula
            top = f if isinstance(f, Temporal) and f.op == "always" else None
            body = top.arg if top is not None else f
            if _undecidable(body):
                self.states.append(LiveRule(rule, False, "an unbounded future operator: decided offline only"))
                continue
            K = N if rule.over == "each_vehicle" else N * (N - 1) // 2 if rule.over == "each_pair" else 1
            if K == 0:  # a pair rule with one vehicle: nothing to judge until a second one appears
                self.states.append(LiveRule(rule, True, "fewer than two vehicles"))
                continue
            horizon = _delay_steps(body, self.dt)
            cap = horizon + _past_reach(body, self.dt) + 2
            root = _Node(body, self.dt, cap, K)
            window: tuple[int, int | None] = (0, None)
            if top is not None and top.hi is not None:
                window = steps_of(top.lo, top.hi, self.dt)
            self.states.append(LiveRule(rule, True, "", root.delay * self.dt, root=root, window=window,
                                        once=top is None))
        self._pairs = np.triu_indices(N, k=1)

    def update(self, now: float, ids: list[str], pos: np.ndarray, vel: np.ndarray, fresh: np.ndarray
               ) -> list[RuleFailure]:
        """One snapshot (vehicles `ids` in a fixed order, their positions, velocities and whether each is fresh)
        at clock `now`; advances every grid step up to `now` and returns the failures decided meanwhile."""
        if not self.rules or not ids:
            return []
        if self.t0 is None or now < self.t0 + (self.step - 1) * self.dt - 1e-9:  # first update, or a clock reset
            self.t0, self.step = now, 0
            self._build(ids)
        elif ids != self.ids:  # a new vehicle: new columns
            self.restarts += 1
            self.t0, self.step = now, 0
            self._build(ids)
        failures: list[RuleFailure] = []
        grid = None
        while self.t0 + self.step * self.dt <= now + 1e-9:
            if grid is None:
                grid = self._grid(pos, vel, fresh)
            failures += self._advance(grid)
            self.step += 1
        return failures

    def _grid(self, pos: np.ndarray, vel: np.ndarray, fresh: np.ndarray) -> Grid:
        p = np.where(fresh[:, None], pos, np.nan)[None]
        v = np.where(fresh[:, None], vel, np.nan)[None]
        t = np.array([self.t0 + self.step * self.dt]) if self.t0 is not None else np.zeros(1)
        snaps = Snapshots(t, self.ids, p, v, fresh[None].copy())
        return Grid(snaps, {basis: snaps.valid for basis in set(BASIS.values())}, self.geofence)

    def _signal(self, rule: Rule, grid: Grid, pairs: dict):
        """The rule's signals on this tick's grid; `pairs`: the pair signals of this tick (every pair rule reads
        the same columns, so each signal is computed once per tick)."""
        first, second = self._pairs

        def fetch(name: str):
            if rule.over == "each_vehicle":
                values, _ = grid.vehicle(name)
            elif rule.over == "swarm":
                values, unknown = grid.swarm(name)
                if unknown is not None:
                    values = np.where(unknown, np.nan, values)
            else:
                if name not in pairs:
                    pairs[name] = pdist(grid.snaps.pos[0])[None] if name == "separation" else \
                        grid.pair(name, first, second)[0]
                values = pairs[name]
            return values, None
        return fetch

    def _advance(self, grid: Grid) -> list[RuleFailure]:
        out: list[RuleFailure] = []
        pairs: dict[str, np.ndarray] = {}
        for st in self.states:
            if not st.live or st.root is None:
                continue
            fetch = self._signal(st.rule, grid, pairs)
            K = st.root.out.ring.shape[1]
            ev = Evaluator(fetch, (1, K), self.dt)
            atoms = {}
            for node in st.root.atoms():
                with np.errstate(invalid="ignore"):
                    atoms[id(node)] = ev.rob(node.f)[0]
            before = st.root.out.done
            st.root.advance(atoms)
            for j in range(before, st.root.out.done):
                out += self._decided(st, j)
        return out

    def _decided(self, st: LiveRule, j: int) -> list[RuleFailure]:
        assert st.root is not None and self.t0 is not None
        if st.once and j > 0:
            return []
        lo, hi = st.window
        if not st.once and (j < lo or (hi is not None and j > hi)):
            return []
        value = st.root.out.get(j, j, 0.0)[0]
        t = self.t0 + j * self.dt
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(value < 0)
        finite = value[np.isfinite(value)]
        st.robustness = float(finite.min()) if len(finite) else None
        st.decided_t = t
        st.failing = None
        if not len(bad):
            return []
        st.failed = True
        worst = bad[np.argmin(value[bad])]
        st.failing = RuleFailure(st.rule, t, self._names(st.rule, bad[:50]), float(value[worst]), len(bad),
                                 st.delay_s)
        return [st.failing]

    def failing(self) -> list[RuleFailure]:
        """The rules whose newest decided step failed (a veto stays up while they do)."""
        return [st.failing for st in self.states if st.failing is not None]

    def _names(self, rule: Rule, cols: np.ndarray) -> list[str]:
        if rule.over == "each_vehicle":
            return sorted(self.ids[c] for c in cols.tolist())
        if rule.over == "swarm":
            return []
        first, second = self._pairs
        return sorted({self.ids[k] for c in cols.tolist() for k in (first[c], second[c])})

    def status(self) -> list[dict]:
        """One row per rule for the verifier's status: live or not (why), the decision delay, the newest value."""
        return [{"rule": st.rule.id, "severity": st.rule.severity, "live": st.live, "why": st.why,
                 "delay_s": st.delay_s, "robustness": st.robustness, "decided_t": st.decided_t,
                 "failed": st.failed, "failing": st.failing is not None} for st in self.states] if self.states else \
            [{"rule": r.id, "severity": r.severity, "live": True, "why": "", "delay_s": None, "robustness": None,
              "decided_t": None, "failed": False, "failing": False} for r in self.rules]


def _delay_steps(f: Formula, dt: float) -> int:
    """Steps from a step to the tick its value is final: a future operator [a, b] waits b steps more than its
    operands, a past one [a, b] a steps less (it reads them a steps back), never less than 0."""
    delays = [_delay_steps(c, dt) for c in _children(f)]
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
