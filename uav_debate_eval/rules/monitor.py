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
- At show size a pair rule reads only the pairs that can matter: an atemporal body those near on each tick
  (rules.live_pairs), a body with bounded temporal operators a tracked set of pairs (rules.live_tracked).
- The grid starts at the first update; an update after several grid steps (a stalled thread) repeats the snapshot
  for the steps missed. A new vehicle restarts the streams (their columns change).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.distance import pdist

from uav_debate_eval.core.mission import Geofence
from uav_debate_eval.core.track import Snapshots
from uav_debate_eval.rules.bounds import first_radius
from uav_debate_eval.rules.evaluator import Evaluator, steps_of
from uav_debate_eval.rules.live_pairs import LIVE_PRUNE_MIN_VEHICLES, atemporal, pruned_values
from uav_debate_eval.rules.live_tracked import TrackedPairs, trackable
from uav_debate_eval.rules.signals import BASIS, Grid
from uav_debate_eval.rules.streams import Node, delay_steps, past_reach, undecidable
from uav_debate_eval.stl.spec import Rule
from uav_debate_eval.stl.syntax import Temporal, signals_of

INF = math.inf


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
    root: Node | None = field(default=None, repr=False)
    window: tuple[int, int | None] = (0, None)  # steps of the top-level always (None: to the end)
    once: bool = False  # decided once at step 0 (not an always)
    prune_from: float = INF  # a pair rule read only where it can matter (rules.live_pairs): the first radius
    evaluated: int = 0  # pairs (or vehicles) evaluated on the newest step
    #: a pruned rule's last (values, columns), kept for a step on the same snapshot (a check between pose arrays)
    last_pruned: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    #: another rule's last atoms (comparison values by node id), for a step on the same snapshot: the verifier checks
    #: at 50 Hz a stream of 10 Hz, and a pair rule with a temporal operator reads every pair (499,500 at 1,000
    #: vehicles, ~50 ms); not reused by a rule that reads the time `t` (its atoms change from step to step)
    last_atoms: dict[int, np.ndarray] | None = field(default=None, repr=False)
    reads_time: bool = False
    reads_separation: bool = False  # a pruned rule then leaves out the pairs of a vehicle not fresh (live_pairs)
    tracked: TrackedPairs | None = field(default=None, repr=False)  # a temporal pair rule's pairs that can matter


class RuleMonitor:
    """The mission rules online: call :meth:`update` with each snapshot; returns the failures newly decided."""

    def __init__(self, rules: list[Rule], period_s: float = 0.02, geofence: Geofence | None = None):
        self.rules, self.dt, self.geofence = list(rules), float(period_s), geofence
        self.ids: list[str] = []
        self.t0: float | None = None
        self.step = 0  # grid steps taken
        self.restarts = 0
        self.states: list[LiveRule] = []
        self._last_pos: np.ndarray | None = None
        self._last_vel = np.zeros((0, 3))
        self._last_fresh = np.zeros(0, dtype=bool)
        self._history: deque[Grid] = deque(maxlen=1)  # the last steps' snapshots (live_tracked replays them)

    def _build(self, ids: list[str]) -> None:
        self.ids = list(ids)
        N = len(ids)
        self.states = []
        history = 1
        for rule in self.rules:
            f = rule.formula
            top = f if isinstance(f, Temporal) and f.op == "always" else None
            body = top.arg if top is not None else f
            if undecidable(body):
                self.states.append(LiveRule(rule, False, "an unbounded future operator: decided offline only"))
                continue
            K = N if rule.over == "each_vehicle" else N * (N - 1) // 2 if rule.over == "each_pair" else 1
            if K == 0:  # a pair rule with one vehicle: nothing to judge until a second one appears
                self.states.append(LiveRule(rule, True, "fewer than two vehicles"))
                continue
            horizon = delay_steps(body, self.dt)
            cap = horizon + past_reach(body, self.dt) + 2
            large = rule.over == "each_pair" and N >= LIVE_PRUNE_MIN_VEHICLES
            prune = large and atemporal(body)
            radius = first_radius(body) if large else INF
            tracked = None
            if large and not prune and top is not None and trackable(body, radius):
                tracked = TrackedPairs(body, self.dt, cap, N, radius)
                history = max(history, tracked.history_steps)
            # a pruned rule is decided from the pairs read on each tick: its streams only count the steps (one column;
            # K = 499,500 columns at 1,000 vehicles took ~1 s to allocate on each new vehicle at a show's start)
            root = tracked.root if tracked is not None else Node(body, self.dt, cap, 1 if prune else K)
            window: tuple[int, int | None] = (0, None)
            if top is not None and top.hi is not None:
                window = steps_of(top.lo, top.hi, self.dt)
            names = {s.name for s in signals_of(body)}
            self.states.append(LiveRule(rule, True, "", root.delay * self.dt, root=root, window=window,
                                        once=top is None, prune_from=radius if prune else INF,
                                        reads_time="t" in names, reads_separation="separation" in names,
                                        tracked=tracked))
        self._pairs = np.triu_indices(N, k=1)
        self._history = deque(maxlen=history)

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
        # the caller passes the very same position array while its snapshot stands (safety.monitor reuses it)
        same = (pos is self._last_pos and np.array_equal(vel, self._last_vel)
                and np.array_equal(fresh, self._last_fresh))
        while self.t0 + self.step * self.dt <= now + 1e-9:
            if grid is None:
                grid = self._grid(pos, vel, fresh)
            self._history.append(grid)
            failures += self._advance(grid, same)
            same = True  # the steps missed by a late update repeat this snapshot
            self.step += 1
        self._last_pos, self._last_vel, self._last_fresh = pos, vel.copy(), fresh.copy()
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

    def _advance(self, grid: Grid, same: bool = False) -> list[RuleFailure]:
        """One grid step; `same`: the snapshot is the previous step's (a pruned rule's pairs are read again only
        when it changed)."""
        out: list[RuleFailure] = []
        pairs: dict[str, np.ndarray] = {}
        for st in self.states:
            if not st.live or st.root is None:
                continue
            if st.tracked is not None:
                for j, values, cols in st.tracked.step(self.step, grid, self._history, same, st.reads_time):
                    out += self._decided(st, j, values, cols)
                st.evaluated = len(st.tracked.keys)
                continue
            if not math.isinf(st.prune_from):
                if not same or st.last_pruned is None:
                    st.last_pruned = self._pruned(st, grid)
                values, cols = st.last_pruned
                st.root.out.done += 1  # the step, decided from these pairs alone (no stream reads it: atemporal)
                out += self._decided(st, st.root.out.done - 1, values, cols)
                continue
            K = st.root.out.ring.shape[1]
            st.evaluated = K
            if same and st.last_atoms is not None and not st.reads_time:
                atoms = st.last_atoms  # the same snapshot: the same comparison values (the streams copy them)
            else:
                ev = Evaluator(self._signal(st.rule, grid, pairs), (1, K), self.dt)
                atoms = {}
                for node in st.root.atoms():
                    with np.errstate(invalid="ignore"):
                        atoms[id(node)] = ev.rob(node.f)[0]
                st.last_atoms = atoms
            before = st.root.out.done
            st.root.advance(atoms)
            for j in range(before, st.root.out.done):
                out += self._decided(st, j)
        return out

    def _pruned(self, st: LiveRule, grid: Grid) -> tuple[np.ndarray, np.ndarray]:
        """An atemporal pair rule's step on the pairs that can matter (rules.live_pairs): (values, their columns)."""
        assert st.root is not None
        body = st.root.f

        def evaluate(first: np.ndarray, second: np.ndarray) -> np.ndarray:
            with np.errstate(invalid="ignore"):
                return Evaluator(grid.pair_values(first, second), (1, len(first)), self.dt).rob(body)[0]

        values, cols = pruned_values(body, st.prune_from, grid.snaps.pos[0], grid.snaps.valid[0], evaluate,
                                     st.reads_separation)
        st.evaluated = len(cols)
        return values, cols

    def _decided(self, st: LiveRule, j: int, value: np.ndarray | None = None,
                 cols: np.ndarray | None = None) -> list[RuleFailure]:
        """Step j's outcome from its stream (or from `value` at columns `cols`, the pairs a pruned rule read)."""
        assert st.root is not None and self.t0 is not None
        if st.once and j > 0:
            return []
        lo, hi = st.window
        if not st.once and (j < lo or (hi is not None and j > hi)):
            return []
        if value is None:
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
        named = bad[:50] if cols is None else cols[bad[:50]]
        st.failing = RuleFailure(st.rule, t, self._names(st.rule, named), float(value[worst]), len(bad),
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
