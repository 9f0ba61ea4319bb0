"""The pairs a per-pair rule must read, nearest first, without visiting every pair of a large swarm (pair pruning).

Each pair's closest approach is bounded from below by m: the distance at every PAIR_STRIDE-th grid step (and the
last) less how far the two vehicles can move in the PAIR_STRIDE // 2 + 1 steps to the nearest such step (each one's
largest step on the grid). rules.check takes pairs in order of m until the formula's bound at m can no longer lower
the rule's robustness. `PairQueue.within(R)` lists the pairs with m < R (and the pairs with an unreadable step,
m = -inf, first) in that same order, found through a k-d tree per sampled step: a pair with m < R is closer than
R + 2 * (largest reach) at some sampled step. A larger R extends the list; R = inf is every pair. For a small swarm
(or positions a tree cannot hold) every pair is listed at once, as before.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial import cKDTree

#: Grid steps between the distances that bound each pair's closest approach from below.
PAIR_STRIDE = 8
#: From this many vehicles on, pairs are found radius by radius (below, listing every pair costs less).
TREE_MIN_VEHICLES = 200
#: Candidate pairs measured per block (the (steps, pairs, 3) differences stay some tens of MB).
BLOCK_PAIRS = 20_000


class PairQueue:
    """The flight's pairs (first < second, np.triu_indices order) sorted by the lower bound m of their approach."""

    def __init__(self, pos: np.ndarray, readable: np.ndarray):
        T, N = pos.shape[:2]
        self.n = N
        rows = np.unique(np.append(np.arange(0, T, PAIR_STRIDE), T - 1)) if T else np.zeros(0, int)
        self.sampled = pos[rows]
        step = np.zeros(N) if T < 2 else np.nanmax(np.sqrt(np.einsum("tnk,tnk->tn", np.diff(pos, axis=0),
                                                                      np.diff(pos, axis=0))), axis=0)
        self.reach = step * (PAIR_STRIDE // 2 + 1)
        self.readable = readable
        finite = bool(np.isfinite(self.sampled[:, readable]).all()) and bool(np.isfinite(self.reach).all())
        self.by_tree = TREE_MIN_VEHICLES <= N and finite and len(rows) > 0
        self._lists: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def within(self, radius: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first, second, m) of the pairs with m < radius, sorted by (m, pair index); every pair for radius inf."""
        if radius not in self._lists:  # rules of one grid ask for the same radii
            self._lists[radius] = self._within(radius)
        return self._lists[radius]

    def _within(self, radius: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.by_tree or math.isinf(radius):
            first, second = np.triu_indices(self.n, k=1)
        else:
            first, second = self._near(radius)
        m = self._closest(first, second)
        if self.by_tree and not math.isinf(radius):
            keep = m < radius
            first, second, m = first[keep], second[keep], m[keep]
        index = first * self.n - first * (first + 1) // 2 + (second - first - 1)  # the pair's place in triu order
        order = np.lexsort((index, m))
        return first[order], second[order], m[order]

    def _near(self, radius: float) -> tuple[np.ndarray, np.ndarray]:
        """Pairs closer than radius + 2 * (largest reach) at some sampled step, and every pair of an unreadable
        vehicle (a superset of the pairs with m < radius)."""
        N = self.n
        reach = float(self.reach[self.readable].max()) if self.readable.any() else 0.0
        r = radius + 2 * reach
        cols = np.flatnonzero(self.readable)
        keys = []
        for row in self.sampled:
            found = cKDTree(row[cols]).query_pairs(r, output_type="ndarray")
            a, b = cols[found[:, 0]], cols[found[:, 1]]
            keys.append(np.minimum(a, b) * N + np.maximum(a, b))
        for u in np.flatnonzero(~self.readable):  # evaluated first, whatever their distance
            other = np.delete(np.arange(N), u)
            keys.append(np.minimum(u, other) * N + np.maximum(u, other))
        key = np.unique(np.concatenate(keys)) if keys else np.zeros(0, int)
        return key // N, key % N

    def _closest(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """m per pair (0 at least; -inf for a pair with an unreadable step)."""
        out = np.empty(len(first))
        for s in range(0, len(first), BLOCK_PAIRS):
            i, j = first[s:s + BLOCK_PAIRS], second[s:s + BLOCK_PAIRS]
            d = self.sampled[:, j] - self.sampled[:, i]
            near = np.sqrt(np.einsum("tpk,tpk->tp", d, d).min(axis=0)) - self.reach[i] - self.reach[j]
            out[s:s + BLOCK_PAIRS] = np.where(self.readable[i] & self.readable[j], np.maximum(near, 0.0), -np.inf)
        return out
