"""The checker's pass over blocks of grid steps in which the swarm keeps its shape: one kd-tree per block, not one
per step (issue 35).

Distances do not change when every vehicle moves by the same vector. Over a block of steps, let `drift` bound the
largest distance a vehicle moves relative to the swarm's common motion (half the diagonal of the box of the
vehicles' displacements since the block's first step: each lies within that distance of the box's centre).
A pair's distance then changes by at most 2 drift within the block, so the pairs of the block's first step within
r + 2 drift hold every pair that comes within r at any of its steps. One kd-tree query gives those candidates, and
numpy computes their distances at every step of the block at once:
- the closest pair of a step is closer than the first step's closest pair will be there (d0 + 2 drift), so the
  candidates within d0 + 4 drift hold it and every pair tied with it;
- the pairs below the separation limit (candidates within limit + 2 drift);
- the CPA predictions: the same bound on the mid-horizon positions (geometry.cpa_candidates' sound pruning), each
  step's own radius applied to the candidates.
Each step's results are those of the per-step pass (grid_pairs.pairs_sparse), with the same floats: the tree's and
numpy's squared distances of three coordinates add in the same order. The closest pair is named by the rule of
geometry.first_partner (the first pair in (i, j) order at the minimum), which the argmin over the candidates in
(i, j) order gives. A flight whose vehicles move apart quickly gets short blocks (a block stops growing when its
drift would let too many candidates in); steps where some vehicle has no data are left to the per-step pass.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from uav_debate_eval.core.track import Snapshots
from uav_debate_eval.safety.geometry import _pair_indices, closest_approach, step_speed_bounds

#: The block's drift may be at most this fraction of the radius it widens (d0 or the limit): a block of a swarm
#: moving together spans many steps, one whose vehicles move apart is cut short.
DRIFT_SHARE = 0.25
MAX_BLOCK = 256
#: A block shorter than this is not worth its kd-tree: those steps go to the per-step pass (SKIP of them at a time
#: before the next try), as do the steps of a flight whose vehicles move apart quickly.
MIN_BLOCK = 4
SKIP = 8
#: Candidate pairs x steps of one block (bounds its arrays to tens of MB).
MAX_PAIR_STEPS = 400_000
#: Relative spare on every radius, against the rounding of the bounds themselves.
SPARE = 1e-9


def pairs_in_blocks(snaps: Snapshots, limit: float | None, horizon: float | None, d_min: np.ndarray,
                    closest: list, hits: tuple[list, list, list], warns: tuple[list, list, list, list],
                    pair_index: np.ndarray, steps: range) -> np.ndarray:
    """The results of every step of `steps` at which all vehicles have data (and finite velocities when predicting),
    block by block; returns the mask (over `steps`) of the steps done."""
    T, N = snaps.valid.shape
    done = np.zeros(len(steps), dtype=bool)
    if N < 2 or not len(steps):
        return done
    rows = slice(steps.start, steps.stop)
    usable = snaps.valid[rows].all(axis=1)
    if horizon is not None and limit is not None:
        usable &= np.isfinite(snaps.vel[rows]).all(axis=(1, 2))
    edges = np.flatnonzero(np.diff(np.concatenate([[0], usable.view(np.int8), [0]])))
    size, skip = 16, SKIP
    for start, stop in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        s = steps.start + start
        while s < steps.start + stop:
            n = min(size, steps.start + stop - s)
            taken = _block(snaps, s, n, limit, horizon, d_min, closest, hits, warns, pair_index)
            if taken:
                done[s - steps.start:s - steps.start + taken] = True
                s += taken
                size = min(MAX_BLOCK, size * 2) if taken == n else max(MIN_BLOCK, taken)
                skip = SKIP
            else:  # the swarm changes shape too fast here (or the block would be too large): per step, for
                s += skip  # longer each time it fails again
                size, skip = 16, min(MAX_BLOCK, skip * 2)
    return done


def _drift(pos: np.ndarray) -> np.ndarray:
    """(B,) a bound on the largest move of a vehicle relative to the swarm's common motion from the block's first
    step up to each step (non-decreasing): half the diagonal of the box of the vehicles' displacements, whose
    centre serves as the common motion (every displacement lies within that distance of it)."""
    total = np.zeros(len(pos))
    for axis in range(3):  # one coordinate at a time: contiguous reductions, 10x faster than over (B, N, 3)
        rel = pos[:, :, axis] - pos[0, :, axis]
        half = (rel.max(axis=1) - rel.min(axis=1)) / 2.0
        total += half * half
    return np.sqrt(np.maximum.accumulate(total))


def _block(snaps: Snapshots, s0: int, n: int, limit: float | None, horizon: float | None, d_min: np.ndarray,
           closest: list, hits: tuple[list, list, list], warns: tuple[list, list, list, list],
           pair_index: np.ndarray) -> int:
    """Steps s0 .. s0 + k of one block (k <= n, shortened to keep the drift small); returns k (0: no block of at
    least MIN_BLOCK steps here)."""
    ids, N = snaps.uav_ids, snaps.valid.shape[1]
    pos = snaps.pos[s0:s0 + n]
    drift = _drift(pos)
    first = cKDTree(pos[0], balanced_tree=False, compact_nodes=False)
    d0 = float(first.query(pos[0], k=2)[0][:, 1].min())
    widened = max(d0, limit or 0.0)
    n = int(np.searchsorted(drift, DRIFT_SHARE * widened, side="right"))  # the steps within the share
    if n < min(MIN_BLOCK, len(pos)):
        return 0
    per = None
    if limit is not None and horizon is not None:  # the predictions' sub-blocks must be worth it too
        speeds = step_speed_bounds(snaps.vel[s0:s0 + n], snaps.valid[s0:s0 + n])
        radius = (limit + speeds * horizon) * (1.0 + SPARE)
        mid = pos[:n] + snaps.vel[s0:s0 + n] * (horizon / 2.0)
        per = _cpa_rows(mid, radius)
        if per < min(MIN_BLOCK, n):
            return 0
    pos, grow = pos[:n], 2.0 * float(drift[n - 1])
    reach = max(d0 + 2.0 * grow, (limit or 0.0) + grow) * (1.0 + SPARE) + 1e-12
    i, j = _pair_indices(pos[0], reach, first)
    if len(i) * n > MAX_PAIR_STEPS:
        n = MAX_PAIR_STEPS // max(len(i), 1)
        if n < MIN_BLOCK:
            return 0
        pos = pos[:n]
    order = np.lexsort((j, i))  # (i, j) order: the argmin takes the first pair at the minimum
    i, j = i[order], j[order]
    dp = pos[:, i] - pos[:, j]
    dist = np.sqrt((dp * dp).sum(axis=2))  # (n, pairs)
    best = np.argmin(dist, axis=1)
    steps = np.arange(n)
    d_min[s0:s0 + n] = dist[steps, best]
    a, b = i[best], j[best]
    pair_index[s0:s0 + n, 0], pair_index[s0:s0 + n, 1] = a, b
    for row, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        closest[s0 + row] = (ids[x], ids[y])
    if limit is None:
        return n
    t = snaps.t[s0:s0 + n]
    rows, cols = np.nonzero(dist < limit)
    if len(rows):
        hits[0].append(i[cols] * N + j[cols])
        hits[1].append(t[rows])
        hits[2].append(dist[rows, cols])
    if horizon is not None and per is not None:
        _predictions(snaps, s0, n, limit, horizon, t, warns, mid[:n], radius[:n], min(per, n))
    return n


def _predictions(snaps: Snapshots, s0: int, n: int, limit: float, horizon: float, t: np.ndarray,
                 warns: tuple[list, list, list, list], mid: np.ndarray, radius: np.ndarray, per: int) -> None:
    """The CPA warnings of the block's steps: geometry.cpa_candidates' pairs of each step (`mid`: the mid-horizon
    positions, `radius`: each step's search radius; `per` steps share one candidate query), then closest_approach."""
    N = snaps.valid.shape[1]
    pos, vel = snaps.pos[s0:s0 + n], snaps.vel[s0:s0 + n]
    for a in range(0, n, per):
        q = mid[a:min(n, a + per)]
        grow = 2.0 * float(_drift(q)[-1])
        i, j = _pair_indices(q[0], (float(radius[a:a + len(q)].max()) + grow) * (1.0 + SPARE) + 1e-12)
        if not len(i):
            continue
        rows_at_once = max(1, MAX_PAIR_STEPS // len(i))  # a wide radius (fast vehicles) has many candidates
        for b in range(a, a + len(q), rows_at_once):
            sl = slice(b, min(a + len(q), b + rows_at_once))
            dq = mid[sl][:, j] - mid[sl][:, i]
            near = np.sqrt((dq * dq).sum(axis=2)) <= radius[sl, None]  # each step's own candidates
            dp = pos[sl][:, j] - pos[sl][:, i]
            now = np.sqrt((dp * dp).sum(axis=2))
            rows, cols = np.nonzero(near & (now >= limit))
            if not len(rows):
                continue
            dv = vel[sl][rows, j[cols]] - vel[sl][rows, i[cols]]
            tc, dc = closest_approach(dp[rows, cols], dv, horizon)
            warn = dc < limit
            if warn.any():
                warns[0].append((i[cols] * N + j[cols])[warn])
                warns[1].append(t[sl][rows][warn])
                warns[2].append(dc[warn])
                warns[3].append(t[sl][rows][warn] + tc[warn])


def _cpa_rows(mid: np.ndarray, radius: np.ndarray) -> int:
    """Steps per CPA sub-block: as many as keep the mid-horizon drift within DRIFT_SHARE of the radius."""
    drift = _drift(mid)
    return max(1, int(np.searchsorted(drift, DRIFT_SHARE * float(np.nanmin(radius)), side="right")))
