"""A live pair rule with a temporal operator, streamed only on the pairs that can matter (rules.monitor, issue 35).

live_pairs decides an atemporal body from each tick's near pairs alone. A temporal body's value at step j reads the
pair's signals over steps j - P .. j + D (its past reach and its horizon), so its streams must run step by step on
every pair that can matter: 499,500 columns at 1,000 vehicles (~40 ms a pose array) when they ran on every pair.
Here they run on a tracked set of pairs:
- a pair within the radius R at a step is tracked from that step on, its streams replayed over the monitor's last
  `cap` steps (cap >= D + P + 2): every value still to be decided reads only replayed steps, so it is the value the
  streams of every pair would give (the same comparisons, step by step);
- a pair never within R over a value's steps has a body of at least L(R) (rules.bounds: separation >= R), or an
  unknown one (a vehicle without a fresh pose: NaN, which every bounded operator carries through). L(R) >= 0 and no
  lower than the lowest tracked value decided, or R grows to the radius whose floor is (one jump, the pairs within
  it over the kept steps taken on): no other pair can fail or lower the rule's robustness. R starts where the floor
  reaches the highest value the closest pair can have, and halves while a quarter of it would still do;
- when no tracked value is known (an outage), the nearest pairs of vehicles with a pose at every step whose
  separation and own signals the value reads are taken on first (only their values can be known); while most
  vehicles are unknown, R stays and only such pairs are taken on (a radius set by a few vehicles far apart would
  hold about every pair);
- a pair not within AHEAD * R for `cap` steps is dropped (every value it still has to give reads only such steps);
- pairs within AHEAD * R are tracked ahead, a batch every BATCH_STEPS steps, so the replays stay few while a show
  changes shape (a pair inside R and not yet tracked is taken at once).
Past operators without bounds keep the whole flight, and a floor that levels off with the separation cannot rule out
the far pairs: such rules read every pair (`trackable`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.spatial import cKDTree

from uav_debate_eval.rules.bounds import bound
from uav_debate_eval.rules.evaluator import Evaluator, steps_of
from uav_debate_eval.rules.live_pairs import pair_index
from uav_debate_eval.rules.signals import Grid
from uav_debate_eval.rules.streams import Node, unbounded_past
from uav_debate_eval.stl.syntax import Binary, Compare, Formula, Logic, Not, Temporal, signals_of

INF = math.inf
#: Steps between the batches that track the pairs within AHEAD * R ahead of need (1 s of the verifier's 50 Hz check).
BATCH_STEPS = 50
#: The lookahead radius as a multiple of R: pairs closing in are taken on in batches before they are within R.
AHEAD = 1.5
#: R grows only while most vehicles can have known values and the pairs within its lookahead are at most this many
#: per vehicle (a radius set by a few vehicles known far apart in an outage would hold ~every pair: the pairs that
#: can be known alone are taken on then).
MAX_PAIRS_PER_VEHICLE = 16
#: Up to this many vehicles whose values can be known, their pairs' distances over the kept snapshots are computed
#: at once (an outage's few), not through a k-d tree per snapshot.
FEW_VEHICLES = 200
#: Past this radius (m) every pair is tracked.
MAX_RADIUS = 1e6


def trackable(body: Formula, radius: float) -> bool:
    """Whether a pair rule's body (with `radius` its first radius) can be streamed on the tracked pairs: no past
    operator without bounds (it keeps the whole flight) and a floor that keeps growing with the separation (a
    floor that levels off cannot rule out the far pairs as the minimum: every pair is read)."""
    return not unbounded_past(body) and not math.isinf(radius) and bound(
        body, {"separation": (2 * MAX_RADIUS, INF)})[0] > bound(body, {"separation": (MAX_RADIUS, INF)})[0]


class TrackedPairs:
    """One temporal pair rule's streams over the pairs that can matter; `step` advances them one grid step."""

    def __init__(self, body: Formula, dt: float, cap: int, n: int, radius: float):
        self.body, self.dt, self.cap, self.n, self.radius = body, dt, cap, n, radius
        self.first_radius = radius
        self.keys = np.zeros(0, dtype=np.int64)  # tracked pairs as first * n + second, in the streams' column order
        self.order = np.zeros(0, dtype=np.intp)  # the columns in pair order (ascending keys: triu order)
        self.last_near = np.zeros(0, dtype=np.int64)  # the step each was last within AHEAD * R
        self.root = Node(body, dt, cap, 0)
        #: the snapshots a replay needs: `cap`, and enough for every operator to catch up (one whose value no step
        #: reads may wait longer than the horizon: the left operand of until[0, 0])
        self.history_steps = max(cap, self.root.lag() + 2)
        # the offsets of the steps whose poses a value needs to be known: both vehicles' (the separation), the first
        # one's (a.*), the second one's (b.*)
        self.reads = tuple(reads(body, dt, role) for role in ("separation", "a.", "b."))
        self.replays = 0  # streams replayed for pairs taken on (a figure for the benchmark)
        self._batch_step = -BATCH_STEPS
        self._drop_step = 0
        self._near: tuple[np.ndarray, np.ndarray] | None = None  # this snapshot's pairs within AHEAD * R, distances
        self._atoms: dict[int, np.ndarray] | None = None

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        return self.keys // self.n, self.keys % self.n

    def step(self, k: int, grid: Grid, history: Sequence[Grid], same: bool, reads_time: bool
             ) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Grid step k (its snapshot `grid`, the last of `history`, the monitor's last `cap` steps); `same`: the
        snapshot is the previous step's. Returns (step, values, their pairs' places in triu order,
        ascending) of the steps decided."""
        if k == 0:
            self._start_radius(grid)
        if not same or self._near is None:
            self._near = _within(grid, AHEAD * self.radius)
        near, dist = self._near
        ranked = self.keys[self.order]
        at = np.minimum(np.searchsorted(ranked, near), max(len(ranked) - 1, 0))
        tracked = (ranked[at] == near) if len(ranked) else np.zeros(len(near), dtype=bool)
        self.last_near[self.order[at[tracked]]] = k
        new = near[~tracked]
        if (dist[~tracked] < self.radius).any() or (len(new) and k - self._batch_step >= BATCH_STEPS):
            self._take(new, list(history)[:-1], k)  # replayed up to the step before this one
            self._batch_step = k
        if k - self._drop_step >= self.cap:
            self._drop(k)
        if not (same and self._atoms is not None and not reads_time):
            self._atoms = _atoms(self.root, grid, *self.pairs, self.dt)
        before = self.root.out.done
        self.root.advance(self._atoms)
        return [(j, self._exact(j, k, history), self._columns()) for j in range(before, self.root.out.done)]

    def _exact(self, j: int, k: int, history: Sequence[Grid]) -> np.ndarray:
        """Step j's values over the tracked pairs, once no other pair can fail or lower the minimum: pairs taken on
        until the floor beyond a radius r is no lower than the lowest value (and not negative)."""
        values = self._values(j)
        finite = values[np.isfinite(values)]
        if len(finite) and self._floor(self.radius) >= max(0.0, finite.min()):
            self._shrink(max(0.0, finite.min()))
            return values
        if math.isinf(self.radius):
            return values
        known = self._knowable(j, k, history)
        if not known[0].any() or not known[1].any() or (known[0] | known[1]).sum() < 2:  # no pair can be known
            return values
        while not len(finite):  # first the nearest pairs whose value can be known, until one is
            seed = self._nearest(known, history)
            if not len(seed):
                return values
            self._take(seed, list(history), k)
            values = self._values(j)
            finite = values[np.isfinite(values)]
        # the radius whose floor the values ask for, at once (a sparse swarm: one replay, not one a doubling)
        radius = 2 * self.radius
        while radius < MAX_RADIUS and self._floor(radius) < max(0.0, finite.min()):
            radius *= 2
        radius = radius if radius < MAX_RADIUS else INF
        most = min(known[0].sum(), known[1].sum()) >= self.n / 2
        if most and _pair_count(history[-1], AHEAD * radius) <= MAX_PAIRS_PER_VEHICLE * self.n:
            self.radius = radius  # R grows (with the lookahead's pairs)
            found = _within_any(history, AHEAD * radius)
            self._near, self._batch_step = None, k
        else:  # most vehicles unknown at step j (an outage), or a radius holding ~every pair: only the pairs that
            # can be known are taken on, R unchanged
            found = _within_any(history, radius, known)
        self._take(found[~np.isin(found, self.keys)], list(history), k)  # (the minimum can only fall: r holds)
        return self._values(j)

    def _start_radius(self, grid: Grid) -> None:
        """R at the first step, from the closest pair (distance d): where the floor reaches the highest value a pair
        d apart can have, no farther pair can be the minimum. Pairs taken on now cost no replay; found by growing R
        at the first decided step, each would replay the kept steps (~0.2 s at 1,000 vehicles)."""
        pos = grid.snaps.pos[0][grid.snaps.valid[0]]
        if len(pos) < 2:
            return
        closest = float(cKDTree(pos).query(pos, k=2)[0][:, 1].min())
        highest = bound(self.body, {"separation": (closest, closest)})[1]
        radius = self.radius
        while radius < MAX_RADIUS and self._floor(radius) < max(0.0, highest):
            radius *= 2
        if radius < MAX_RADIUS and _pair_count(grid, AHEAD * radius) <= MAX_PAIRS_PER_VEHICLE * self.n:
            self.radius = radius

    def _shrink(self, lowest: float) -> None:
        """Halve R while a quarter of it would still hold the lowest value (R follows a show that closes up again;
        the factor two left spares a replay for every small change)."""
        while self.radius / 2 >= self.first_radius and self._floor(self.radius / 4) >= lowest:
            self.radius /= 2
            self._near = None

    def _values(self, j: int) -> np.ndarray:
        return self.root.out.get(j, j, 0.0)[0][self.order]

    def _knowable(self, j: int, k: int, history: Sequence[Grid]) -> tuple[np.ndarray, np.ndarray]:
        """(as first, as second vehicle of a pair) the vehicles with a fresh pose at every step whose separation and
        own signals step j's value reads: only their pairs can have a known value."""
        fresh = []
        for offsets in self.reads:
            ok = np.ones(self.n, dtype=bool)
            for lo, hi in offsets:
                for step in range(j + lo, j + hi + 1):
                    if k - len(history) < step <= k:
                        ok &= history[len(history) - 1 - (k - step)].snaps.valid[0]
            fresh.append(ok)
        return fresh[0] & fresh[1], fresh[0] & fresh[2]

    def _nearest(self, known: tuple[np.ndarray, np.ndarray], history: Sequence[Grid]) -> np.ndarray:
        """The untracked pairs of `known` vehicles nearest over the kept steps (radius doubling from R)."""
        radius = self.radius
        while True:
            found = _within_any(history, radius, known)
            found = found[~np.isin(found, self.keys)]
            if len(found) or math.isinf(radius):
                return found
            radius = 2 * radius if 2 * radius < MAX_RADIUS else INF

    def _floor(self, radius: float) -> float:
        """The lowest value of the body for a pair at least `radius` apart."""
        return bound(self.body, {"separation": (radius, INF)})[0]

    def _take(self, keys: np.ndarray, grids: list[Grid], k: int) -> None:
        """Track `keys` (none tracked yet): their streams replayed over `grids` (the snapshots of the steps up to
        the newest one computed) and appended to the others' columns."""
        if not len(keys):
            return
        tree = Node(self.body, self.dt, self.cap, len(keys), self.root.newest_step() - len(grids) + 1)
        first, second = keys // self.n, keys % self.n
        for g in grids:
            tree.advance(_atoms(tree, g, first, second, self.dt))
        self.root.extend(tree)
        self.keys = np.concatenate([self.keys, keys])
        self.order = np.argsort(self.keys)
        self.last_near = np.concatenate([self.last_near, np.full(len(keys), k, dtype=np.int64)])
        self.replays += len(keys)
        self._atoms = None

    def _drop(self, k: int) -> None:
        """Let go of the pairs not within AHEAD * R for `cap` steps."""
        self._drop_step = k
        keep = self.last_near > k - self.cap
        if not keep.all():
            self.root.keep(keep)
            self.keys, self.last_near = self.keys[keep], self.last_near[keep]
            self.order = np.argsort(self.keys)
            self._atoms = None

    def _columns(self) -> np.ndarray:
        """The tracked pairs' places in np.triu_indices order, ascending (the order of the values decided)."""
        ranked = self.keys[self.order]
        return pair_index(ranked // self.n, ranked % self.n, self.n)


def _within(grid: Grid, radius: float, among: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(keys ascending, distances) of the pairs of vehicles with a fresh pose (and in `among`, a mask) closer than
    `radius` on this snapshot (every such pair for an infinite radius)."""
    pos, fresh = grid.snaps.pos[0], grid.snaps.valid[0]
    n = len(pos)
    live = np.flatnonzero(fresh if among is None else fresh & among)
    if math.isinf(radius):
        i, j = np.triu_indices(len(live), k=1)
        a, b = live[i], live[j]
    elif len(live) > 1:
        found = cKDTree(pos[live], balanced_tree=False, compact_nodes=False).query_pairs(radius, output_type="ndarray")
        a, b = np.minimum(live[found[:, 0]], live[found[:, 1]]), np.maximum(live[found[:, 0]], live[found[:, 1]])
    else:
        a = b = np.zeros(0, dtype=np.int64)
    keys = a.astype(np.int64) * n + b
    order = np.argsort(keys)
    return keys[order], np.sqrt(((pos[b] - pos[a]) ** 2).sum(axis=1))[order]


def _pair_count(grid: Grid, radius: float) -> int:
    """How many pairs of vehicles with a fresh pose are closer than `radius` on this snapshot (counted, not listed)."""
    pos = grid.snaps.pos[0][grid.snaps.valid[0]]
    if math.isinf(radius):
        return len(pos) * (len(pos) - 1) // 2
    tree = cKDTree(pos, balanced_tree=False, compact_nodes=False)
    return (int(tree.count_neighbors(tree, radius)) - len(pos)) // 2


def _within_any(history: Sequence[Grid], radius: float, known: tuple[np.ndarray, np.ndarray] | None = None
                ) -> np.ndarray:
    """The keys of the pairs closer than `radius` on any of the kept snapshots (a late update repeats one); with
    `known`, only those whose first vehicle is in known[0] and second in known[1]."""
    seen = list({id(g): g for g in history}.values())
    if known is None:
        return np.unique(np.concatenate([_within(g, radius)[0] for g in seen]))
    n, among = len(known[0]), np.flatnonzero(known[0] | known[1])
    if len(among) <= FEW_VEHICLES:  # an outage's few vehicles: their pairs' distances on every snapshot at once
        i, j = np.triu_indices(len(among), k=1)
        pos = np.stack([np.where(g.snaps.valid[0][among, None], g.snaps.pos[0][among], np.nan) for g in seen])
        with np.errstate(invalid="ignore"):
            closest = np.fmin.reduce(np.sqrt(((pos[:, j] - pos[:, i]) ** 2).sum(axis=2)), axis=0)
        near = ~np.isnan(closest) & (closest <= radius)
        keys = among[i[near]].astype(np.int64) * n + among[j[near]]
    else:
        keys = np.unique(np.concatenate([_within(g, radius, known[0] | known[1])[0] for g in seen]))
    return keys[known[0][keys // n] & known[1][keys % n]]


def reads(f: Formula, dt: float, role: str) -> list[tuple[int, int]]:
    """The step offsets (lo, hi) from a step at which its value reads a comparison of the separation (role
    "separation") or of the first or second vehicle's own signals ("a.", "b."): every operator reads each step of
    its windows and carries an unknown (NaN) operand through, so a pair's value is known only if the poses are
    there at all of them."""
    if isinstance(f, Compare):
        names = [s.name for s in signals_of(f)]
        hit = "separation" in names if role == "separation" else any(n.startswith(role) for n in names)
        return [(0, 0)] if hit else []
    if isinstance(f, Not):
        return reads(f.arg, dt, role)
    if isinstance(f, Logic):
        return reads(f.left, dt, role) + reads(f.right, dt, role)
    a, b = steps_of(f.lo, f.hi, dt) if f.hi is not None else (0, 0)
    if isinstance(f, Temporal):
        if b < a:  # an empty window reads nothing
            return []
        past = f.op in ("historically", "once")
        return [(lo - b, hi - a) if past else (lo + a, hi + b) for lo, hi in reads(f.arg, dt, role)]
    assert isinstance(f, Binary)
    p, q = reads(f.left, dt, role), reads(f.right, dt, role)
    if f.op == "since":  # p over (j - b, j], q over [j - b, j - a]
        return [(lo - b + 1, hi) for lo, hi in p if b] + [(lo - b, hi - a) for lo, hi in q]
    return [(lo, hi + b - 1) for lo, hi in p if b] + [(lo + a, hi + b) for lo, hi in q]  # until


def _atoms(root: Node, grid: Grid, first: np.ndarray, second: np.ndarray, dt: float) -> dict[int, np.ndarray]:
    """The comparisons of the tree's leaves on this snapshot for the pairs (first, second)."""
    ev = Evaluator(grid.pair_values(first, second), (1, len(first)), dt)
    with np.errstate(invalid="ignore"):
        return {id(node): ev.rob(node.f)[0] for node in root.atoms()}
