"""The offline check of a mission's rules on the flight's common grid: each rule's robustness at flight time 0, the
vehicles or pairs that set it, the intervals where its body fails, and where the data cannot tell.

- Quantifiers: `each_vehicle` / `each_pair` evaluate every vehicle / pair as a column of one array, a block of
  columns at a time; the rule's robustness is the minimum over them. `swarm` is one column.
- Intervals: for `always[a,b] body` (or `always body`), the steps of its window where `body` fails; for any other
  formula, the span it reads from time 0 (0 .. its horizon) when it fails.
- Pair pruning (exact): a pair whose separation never drops below m (m: a lower bound of its closest approach,
  both vehicles readable at every step) has a robustness of at least L(m), the formula's lower bound when only
  `separation >= m` is known (rules.bounds). Pairs are taken in order of m; the first pair with L(m) no lower
  than the rule's robustness found so far (and its body's lower bound >= 0, so it has no failing interval) ends
  the pass: none of the pairs after it can lower the minimum or add an interval. A formula that does not depend
  on `separation` monotonically gets L = -inf: every pair is evaluated. Pairs with unreadable steps always are.
- Data quality: where a signal cannot be read the evaluator bounds the robustness (evaluator, worlds lo/hi); a rule
  fails only when its upper bound is below zero, holds when its lower bound is not, and is not evaluable between.
"""

from __future__ import annotations

import math

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.quality.updates import true_spans
from uav_debate_eval.rules.bounds import bound, first_radius
from uav_debate_eval.rules.evaluator import INF, Evaluator, steps_of
from uav_debate_eval.rules.near_pairs import PairQueue
from uav_debate_eval.rules.result import RuleResult
from uav_debate_eval.rules.signals import BASIS, Grid
from uav_debate_eval.stl.spec import Rule
from uav_debate_eval.stl.syntax import Formula, Temporal

#: A grid step this close to a sample stamp (seconds) is that sample's instant (grid arithmetic rounds).
STAMP_TOL = 1e-6
#: Columns x steps per evaluated block (bounds the evaluator's temporaries to some tens of MB).
BLOCK_CELLS = 2_000_000


def grid_of(traj: SwarmTrajectory, mission: Mission, quality=None, min_separation: np.ndarray | None = None) -> Grid:
    """The checker's grid with, per check basis, the steps each vehicle can be read at (valid and not excluded)."""
    snaps = traj.resample(max_gap_s=mission.constraints.stale_timeout_s, own_gaps=True)

    def within(lo: float | None, hi: float | None) -> np.ndarray:  # grid steps in a span of sample stamps
        return ((snaps.t >= (-np.inf if lo is None else lo - STAMP_TOL))
                & (snaps.t <= (np.inf if hi is None else hi + STAMP_TOL)))

    estimated = snaps.valid.copy()  # the estimator's own invalid spans, whichever constraints the mission checks
    period = traj.sample_period or 0.0
    for j, u in enumerate(snaps.uav_ids):
        tr = traj.tracks[u]
        # Unsynchronised streams end (or start) a window a sample apart: within one period of its own first or last
        # sample a vehicle reads its edge value (the grid holds it there); a longer silence stays unknown.
        estimated[within(tr.t[0] - period, tr.t[0]) | within(tr.t[-1], tr.t[-1] + period), j] = True
        if tr.est_valid is not None and not tr.est_valid.all():
            for lo, hi in true_spans(tr.t, ~tr.est_valid):
                estimated[within(lo, hi), j] = False
    column = {u: j for j, u in enumerate(snaps.uav_ids)}
    known = {basis: estimated.copy() for basis in sorted(set(BASIS.values()))}
    for ne in quality.not_evaluable if quality is not None else []:
        if ne.constraint in known:
            for u in ne.uavs:
                if u in column:
                    known[ne.constraint][within(ne.t_start, ne.t_end), column[u]] = False
    return Grid(snaps, known, mission.constraints.geofence, min_separation)


def check_rules(traj: SwarmTrajectory, mission: Mission, quality=None, grid: Grid | None = None,
                gap: float | None = None) -> list[RuleResult]:
    """Every rule of the mission on the flight's grid (see the module docstring); `gap`: failing steps of one vehicle
    or pair closer than this are one run (default: two grid steps)."""
    if not mission.rules or not traj.tracks:
        return []
    grid = grid or grid_of(traj, mission, quality)
    return [check_rule(rule, grid, gap) for rule in mission.rules]


def _split(f: Formula) -> tuple[Formula, bool]:
    """(body, stripped): `always[a,b] body` reads its body over a window of steps."""
    if isinstance(f, Temporal) and f.op == "always":
        return f.arg, True
    return f, False


def check_rule(rule: Rule, grid: Grid, gap: float | None = None) -> RuleResult:
    T, N = grid.snaps.valid.shape
    ids = grid.snaps.uav_ids
    dt = grid.dt
    body, stripped = _split(rule.formula)
    if stripped:
        top = rule.formula
        assert isinstance(top, Temporal)
        a, b = (0, T - 1) if top.hi is None else steps_of(top.lo, top.hi, dt)
    else:
        horizon = rule.horizon_s
        a, b = 0, (T - 1 if horizon is None else min(T - 1, int(round(horizon / dt))))
    b = min(b, T - 1)
    acc = _Accumulator(T)

    def run(columns: np.ndarray, signal, names) -> None:
        step = max(1, BLOCK_CELLS // max(T, 1))
        for s in range(0, len(columns), step):
            cols = columns[s:s + step]
            lo, hi, v_lo, v_hi = _evaluate(body, signal, cols, T, dt, stripped, a, b)
            acc.add(lo, hi, v_lo, v_hi, [names(c) for c in cols.tolist()])

    if rule.over == "each_vehicle":
        run(np.arange(N), lambda name, cols: _cols(grid.vehicle(name), cols), lambda c: [ids[c]])
        columns = N
    elif rule.over == "swarm":
        run(np.arange(1), lambda name, cols: grid.swarm(name), lambda c: [])
        columns = 1
    else:
        columns = N * (N - 1) // 2
        _each_pair(rule, body, stripped, grid, acc, run)
    return acc.result(rule, grid, columns, a, b, stripped, gap)


def _cols(signal: tuple[np.ndarray, np.ndarray | None], cols: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    values, unknown = signal
    return values[:, cols], None if unknown is None else unknown[:, cols]


def _each_pair(rule: Rule, body: Formula, stripped: bool, grid: Grid, acc: _Accumulator, run) -> None:
    """Evaluate the pairs nearest first until the rest cannot matter (see the module docstring), listing them a
    radius at a time (rules.near_pairs): the radius grows only while the pairs beyond it might still matter."""
    ids = grid.snaps.uav_ids
    queue = grid._cache.get("pair_queue")  # the grid's rules share it (and the pair lists it made)
    if queue is None:
        queue = grid._cache["pair_queue"] = PairQueue(grid.snaps.pos,
                                                      np.asarray(grid.readable("min_separation").all(axis=0)))
    radius = first_radius(rule.formula) if queue.by_tree else INF
    start = 0
    while True:
        first, second, closest = queue.within(radius)
        order = np.arange(len(first))

        def pair_signal(name, cols, first=first, second=second):
            return grid.pair(name, first[cols], second[cols])

        def pair_names(c, first=first, second=second):
            return sorted((ids[first[c]], ids[second[c]]))

        while start < len(order):
            stop = _stop(rule.formula, body, stripped, closest, order, start, acc.hi_min)
            if stop == start:
                return
            stop = min(stop, start + max(64, start))  # doubling batches: the minimum found so far prunes more
            run(order[start:stop], pair_signal, pair_names)
            start = stop
        if math.isinf(radius) or _stop(rule.formula, body, stripped, np.array([radius]), order[:1], 0,
                                       acc.hi_min) == 0:
            return  # every pair beyond the radius is at least `radius` apart: none can matter
        radius = INF if 4 * len(first) > len(ids) ** 2 else 2 * radius


def _stop(formula: Formula, body: Formula, stripped: bool, closest: np.ndarray, order: np.ndarray, start: int,
          found: float) -> int:
    """The first pair from `start` on that cannot lower the rule's robustness below `found` nor fail its body: pairs
    are sorted by closest approach and the bounds grow with it, so a binary search finds it."""

    def prunable(m: float) -> bool:
        if not np.isfinite(m):
            return m == np.inf
        box = {"separation": (float(m), INF)}
        if stripped and bound(body, box)[0] < 0:
            return False
        return bound(formula, box)[0] >= found

    lo, hi = start, len(order)
    if prunable(float(closest[start])):
        return start
    while lo < hi:  # invariant: closest[lo - 1] not prunable
        mid = (lo + hi) // 2
        if prunable(float(closest[mid])):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _evaluate(body: Formula, signal, cols: np.ndarray, T: int, dt: float, stripped: bool, a: int, b: int):
    """(body lo, body hi, value lo, value hi) of a block of columns: value = the rule at step 0."""
    shape = (T, len(cols))
    unknown_seen = []

    def fetch(name):
        values, unknown = signal(name, cols)
        if unknown is not None and unknown.any():
            unknown_seen.append(name)
            return values, unknown
        return values, None

    hi = Evaluator(fetch, shape, dt, "hi").rob(body)
    lo = Evaluator(fetch, shape, dt, "lo").rob(body) if unknown_seen else hi
    if stripped:
        if a > b or a >= T:
            v_hi = v_lo = np.full(len(cols), INF)
        else:
            v_hi, v_lo = hi[a:b + 1].min(axis=0), lo[a:b + 1].min(axis=0)
    else:
        v_hi, v_lo = hi[0], lo[0]
    return lo, hi, v_lo, v_hi


class _Accumulator:
    """Folds blocks of columns into the rule's minimum, worst columns, failing runs and the timeline."""

    def __init__(self, T: int):
        self.hi_min, self.lo_min = INF, INF
        self.worst: list[str] = []
        self.timeline = np.full(T, INF)
        self.fail_keys: list[np.ndarray] = []
        self.fail_steps: list[np.ndarray] = []
        self.fail_values: list[np.ndarray] = []
        self.unknown_keys: list[np.ndarray] = []
        self.unknown_steps: list[np.ndarray] = []
        self.names: list[list[str]] = []

    def add(self, lo, hi, v_lo, v_hi, names: list[list[str]]) -> None:
        base = len(self.names)
        self.names.extend(names)
        k = int(np.argmin(v_hi))
        if v_hi[k] < self.hi_min:
            self.hi_min, self.worst = float(v_hi[k]), names[k]
        self.lo_min = min(self.lo_min, float(v_lo.min()))
        np.minimum(self.timeline, hi.min(axis=1), out=self.timeline)
        step, col = np.nonzero(hi < 0)
        self.fail_keys.append(col + base)
        self.fail_steps.append(step)
        self.fail_values.append(hi[step, col])
        if lo is not hi:
            step, col = np.nonzero((lo < 0) & (hi >= 0))
            self.unknown_keys.append(col + base)
            self.unknown_steps.append(step)

    def result(self, rule: Rule, grid: Grid, columns: int, a: int, b: int, stripped: bool,
               gap: float | None) -> RuleResult:
        from uav_debate_eval.safety.runs import merge_runs

        t = grid.t
        dt = grid.dt
        gap = gap if gap is not None else 2.0 * dt + 1e-9
        if self.hi_min < 0:
            satisfied, robustness = False, self.hi_min
        elif self.lo_min >= 0:
            satisfied, robustness = True, self.lo_min
        else:
            satisfied, robustness = None, None
        failures, unknown = [], []
        inside = slice(a, b + 1) if stripped else slice(0, 1)
        keys, steps, values = (np.concatenate(x) if x else np.zeros(0, int) for x in
                               (self.fail_keys, self.fail_steps, self.fail_values))
        if satisfied is False:
            keep = (steps >= inside.start) & (steps < inside.stop)
            for key, t0, t1, w, _, n in merge_runs(keys[keep], t[steps[keep]], values[keep], gap, worst="min"):
                if not stripped:  # the formula read from time 0 fails: the span it reads
                    t1 = float(t[min(b, len(t) - 1)])
                failures.append((self.names[key], t0, t1, w, n))
        if self.unknown_keys:
            uk, us = np.concatenate(self.unknown_keys), np.concatenate(self.unknown_steps)
            keep = (us >= inside.start) & (us < inside.stop)
            for key, t0, t1, _, _, _ in merge_runs(uk[keep], t[us[keep]], np.zeros(int(keep.sum())), gap):
                unknown.append((self.names[key], t0, float(t[min(b, len(t) - 1)]) if not stripped else t1))
        return RuleResult(rule, satisfied, robustness, self.worst if robustness is not None else [],
                          _union([(f[1], f[2]) for f in failures]), failures, unknown, (t, self.timeline),
                          len(self.names), columns)


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(x, y) for x, y in out]
