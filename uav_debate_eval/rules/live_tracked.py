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
  lower than the lowest tracked value decided, or R doubles and the pairs within it over the kept steps are tracked
  too: no other pair can fail or lower the rule's robustness;
- a pair not within AHEAD * R for `cap` steps is dropped (every value it still has to give reads only such steps);
- pairs within AHEAD * R are tracked ahead, a batch every BATCH_STEPS steps, so the replays stay few while a show
  changes shape (a pair inside R and not yet tracked is taken at once).
Past operators without bounds keep the whole flight and are not tracked (their rules read every pair).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.spatial import cKDTree

from uav_debate_eval.rules.bounds import bound
from uav_debate_eval.rules.evaluator import Evaluator
from uav_debate_eval.rules.signals import Grid
from uav_debate_eval.rules.streams import Node
from uav_debate_eval.stl.syntax import Formula

INF = math.inf
#: Steps between the batches that track the pairs within AHEAD * R ahead of need (1 s of the verifier's 50 Hz check).
BATCH_STEPS = 50
#: The lookahead radius as a multiple of R: pairs closing in are taken on in batches before they are within R.
AHEAD = 1.5
#: Past this radius (m) every pair is tracked.
MAX_RADIUS = 1e6


class TrackedPairs:
    """One temporal pair rule's streams over the pairs that can matter; `step` advances them one grid step."""

    def __init__(self, body: Formula, dt: float, cap: int, n: int, radius: float):
        self.body, self.dt, self.cap, self.n, self.radius = body, dt, cap, n, radius
        self.keys = np.zeros(0, dtype=np.int64)  # tracked pairs as first * n + second, in the streams' column order
        self.order = np.zeros(0, dtype=np.intp)  # the columns in pair order (ascending keys: triu order)
        self.last_near = np.zeros(0, dtype=np.int64)  # the step each was last within AHEAD * R
        self.root = Node(body, dt, cap, 0)
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
        """Step j's values over the tracked pairs, R grown until no other pair can fail or lower the minimum."""
        while True:
            values = self.root.out.get(j, j, 0.0)[0][self.order]
            finite = values[np.isfinite(values)]
            floor = bound(self.body, {"separation": (self.radius, INF)})[0]
            if (floor >= 0 and len(finite) and floor >= finite.min()) or math.isinf(self.radius):
                return values
            self.radius = 2 * self.radius if 2 * self.radius < MAX_RADIUS else INF
            seen = {id(g): g for g in history}.values()  # a late update repeats one snapshot
            found = np.unique(np.concatenate([_within(g, self.radius)[0] for g in seen]))
            self._take(found[~np.isin(found, self.keys)], list(history), k)  # replayed up to this step
            self._near = None

    def _take(self, keys: np.ndarray, grids: list[Grid], k: int) -> None:
        """Track `keys` (none tracked yet): their streams replayed over `grids` (the snapshots of the steps up to
        the newest one computed) and appended to the others' columns."""
        if not len(keys):
            return
        tree = Node(self.body, self.dt, self.cap, len(keys), _newest_step(self.root) - len(grids) + 1)
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
        first, second = ranked // self.n, ranked % self.n
        return first * self.n - first * (first + 1) // 2 + (second - first - 1)


def _newest_step(root: Node) -> int:
    """The newest step the streams have comparisons of (-1 before the first)."""
    node = root
    while node.kids:
        node = node.kids[0]
    return node.out.done - 1


def _within(grid: Grid, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """(keys ascending, distances) of the pairs of vehicles with a fresh pose closer than `radius` on this snapshot
    (every such pair for an infinite radius)."""
    pos, fresh = grid.snaps.pos[0], grid.snaps.valid[0]
    n = len(pos)
    live = np.flatnonzero(fresh)
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


def _atoms(root: Node, grid: Grid, first: np.ndarray, second: np.ndarray, dt: float) -> dict[int, np.ndarray]:
    """The comparisons of the tree's leaves on this snapshot for the pairs (first, second)."""
    signals: dict[str, np.ndarray] = {}

    def fetch(name: str):  # each signal once (a body compares the separation more than once)
        if name not in signals:
            signals[name] = grid.pair(name, first, second)[0]
        return signals[name], None

    ev = Evaluator(fetch, (1, len(first)), dt)
    with np.errstate(invalid="ignore"):
        return {id(node): ev.rob(node.f)[0] for node in root.atoms()}
