"""The pairs a live per-pair rule reads on one tick: only those that can matter (rules.monitor, issue 35).

A pair rule whose body has no temporal operator (`always (p)`, the usual form) is decided at each step from that
step alone, so on each tick only two things count: the pairs where the body fails and the lowest value over the
pairs. The body's lower bound L(d) when the separation is known to be at least d (rules.bounds) grows with d; the
pairs closer than a radius R (a k-d tree on this tick's positions) are evaluated, every other pair has a body of at
least L(R). If L(R) >= 0 and L(R) is no lower than the lowest value evaluated, no other pair can fail or lower the
minimum, and those pairs are not stored at all (the monitor decides the step from the pairs evaluated);
otherwise R doubles (at last: every pair). Pairs with a vehicle without a fresh pose (its position and velocity
unknown: NaN) are evaluated too, unless the body reads the separation: an atemporal body's value is NaN as soon as
one of its atoms is (differences, min and max all carry NaN through), so such a pair can neither fail nor set the
minimum (not so the closing speed, which the signals give as 0 where the separation is not positive). With
per-vehicle topics on a loaded machine hundreds of vehicles can be a tick late at once, and their pairs with every
other vehicle (~N/2 each) had cost the verifier's check 50-100 ms.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial import cKDTree

from uav_debate_eval.rules.bounds import bound
from uav_debate_eval.stl.syntax import Compare, Formula, Logic, Not

INF = math.inf
#: From this many vehicles on a live pair rule is pruned (below, evaluating every pair costs less than the tree).
LIVE_PRUNE_MIN_VEHICLES = 50


def atemporal(f: Formula) -> bool:
    """Whether the formula reads only the current step (no temporal operator)."""
    if isinstance(f, Compare):
        return True
    if isinstance(f, Not):
        return atemporal(f.arg)
    if isinstance(f, Logic):
        return atemporal(f.left) and atemporal(f.right)
    return False


def pair_index(first: np.ndarray, second: np.ndarray, n: int) -> np.ndarray:
    """The place of pairs (first < second) in np.triu_indices(n, 1) order."""
    return first * n - first * (first + 1) // 2 + (second - first - 1)


def pruned_values(body: Formula, radius: float, pos: np.ndarray, fresh: np.ndarray, evaluate,
                  known_only: bool) -> tuple[np.ndarray, np.ndarray]:
    """(values, columns): the body's value on this tick for the pairs that can matter and their places in
    np.triu_indices order (ascending); every other pair's value is at least the lowest of these and not negative,
    or unknown. `evaluate(first, second)` gives the body's values for those pairs. `known_only`: the body reads the
    separation, so the pairs with a vehicle not fresh are unknown (NaN) and left out."""
    n = len(pos)
    live = np.flatnonzero(fresh)
    stale = np.zeros(0, dtype=int) if known_only else np.flatnonzero(~fresh)
    # one query per build: an unbalanced, non-compacted tree builds faster and queries as fast (safety.geometry)
    tree = cKDTree(pos[live], balanced_tree=False, compact_nodes=False) if len(live) else None
    while True:
        if math.isinf(radius) or tree is None:  # every pair (that can be known)
            if known_only:
                i, j = np.triu_indices(len(live), k=1)
                first, second = live[i], live[j]
            else:
                first, second = np.triu_indices(n, k=1)
            return evaluate(first, second), pair_index(first, second, n)
        found = tree.query_pairs(radius, output_type="ndarray")
        a, b = live[found[:, 0]], live[found[:, 1]]
        keys = [np.minimum(a, b) * n + np.maximum(a, b)]
        for u in stale:
            other = np.delete(np.arange(n), u)
            keys.append(np.minimum(u, other) * n + np.maximum(u, other))
        # (first, second) in lexicographic order: triu order (the tree lists each pair once; stale ones repeat)
        key = np.unique(np.concatenate(keys)) if len(stale) else np.sort(keys[0])
        first, second = key // n, key % n
        values = evaluate(first, second)
        finite = values[np.isfinite(values)]
        floor = bound(body, {"separation": (radius, INF)})[0]
        if floor >= 0 and len(finite) and floor >= finite.min():
            return values, pair_index(first, second, n)
        radius = INF if 4 * len(first) > n * n else 2 * radius
