"""The checker's pass over the common grid: each step's closest pair, the pairs below the separation limit and the
CPA predictions. Up to DENSE_MAX_VEHICLES (safety.checker) all pairs of a block of steps at once with numpy,
above it a kd-tree per block of steps in which the swarm keeps its shape (safety.block_pairs), else per
step; a large grid's second half in a forked child (uav_debate_eval.runner.forked). A segment
window's grid is its flight's steps within it, so its check takes the flight's results for the steps it shares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from uav_debate_eval.core.track import Snapshots
from uav_debate_eval.safety.block_pairs import pairs_in_blocks
from uav_debate_eval.safety.geometry import (
    close_pairs,
    closest_approach,
    cpa_candidates,
    nearest_pair,
    step_speed_bounds,
)

#: Pairs x steps per dense block (bounds memory to a few tens of MB).
DENSE_BLOCK = 400_000
#: From this many vehicle-steps on, the kd-tree pass over the grid runs its second half in a forked child.
SPLIT_MIN_VEHICLE_STEPS = 300_000


@dataclass
class GridPairs:
    """The kd-tree pass's results per step of a grid: each step's closest pair and distance, and the pairs below the
    limit (a key i * N + j of vehicle indexes, the step's time, the distance). Each step's results depend on that
    step's positions and valid vehicles only (the closest pair is the one the query of every point finds, whatever
    the previous step's pair), so a window on the same grid may take them over for the steps it shares."""

    snaps: Snapshots
    pair_index: np.ndarray  # (T, 2)
    d_min: np.ndarray  # (T,)
    closest: list
    limit: float | None
    hits: tuple[np.ndarray, np.ndarray, np.ndarray]  # keys, times, distances


def pairs_shared(snaps: Snapshots, flight: GridPairs | None, limit: float | None, d_min: np.ndarray, closest: list,
                 hits: tuple[list, list, list], pair_index: np.ndarray) -> bool:
    """:func:`pairs_sparse` without predictions for a window of the flight's grid: the steps whose positions and valid
    vehicles are the flight's take the flight's results, the others (e.g. where a data gap begins at the window's
    edge) are computed. False (nothing done) when the window is not on the flight's grid with its vehicles."""
    if flight is None or (limit is not None and flight.limit != limit):
        return False
    a = snaps.first_row_in(flight.snaps)
    if a is None:
        return False
    b = a + len(snaps.t)
    same = (flight.snaps.valid[a:b] == snaps.valid).all(axis=1)
    rows = np.flatnonzero(same)
    d_min[rows] = flight.d_min[a + rows]
    pair_index[rows] = flight.pair_index[a + rows]
    for r in rows.tolist():
        closest[r] = flight.closest[a + r]
    if limit is not None:
        keys, t, dist = flight.hits
        step = np.searchsorted(flight.snaps.t, t) - a  # the times are the grid's own values
        take = (step >= 0) & (step < len(same))
        take[take] = same[step[take]]
        hits[0].append(keys[take])
        hits[1].append(t[take])
        hits[2].append(dist[take])
    edges = np.flatnonzero(np.diff(np.concatenate([[1], same.view(np.int8), [1]])))  # runs of steps not shared
    for start, stop in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        pairs_sparse(snaps, limit, None, d_min, closest, hits, ([], [], [], []), pair_index, range(start, stop))
    return True


def pairs_sparse_halves(snaps: Snapshots, limit: float | None, horizon: float | None, d_min: np.ndarray,
                        closest: list, hits: tuple[list, list, list], warns: tuple[list, list, list, list],
                        pair_index: np.ndarray) -> None:
    """:func:`pairs_sparse` over every step, the second half of a large grid in a forked child (the steps are
    independent; the child's rows follow this process's, so the lists are the ones one loop makes)."""
    from uav_debate_eval.runner.forked import Forked, can_fork, cores

    T, N = snaps.valid.shape
    mid = T // 2
    if T * N < SPLIT_MIN_VEHICLE_STEPS or cores() < 2 or not can_fork():
        pairs_sparse(snaps, limit, horizon, d_min, closest, hits, warns, pair_index)
        return
    with Forked(_second_half, snaps, limit, horizon, mid) as child:
        pairs_sparse(snaps, limit, horizon, d_min, closest, hits, warns, pair_index, range(mid))
        try:
            theirs = child.result()
        except Exception:  # noqa: BLE001 - the second half is checked here instead
            theirs = None
    if theirs is None:
        pairs_sparse(snaps, limit, horizon, d_min, closest, hits, warns, pair_index, range(mid, T))
        return
    d_min[mid:], closest[mid:], pair_index[mid:] = theirs[0], theirs[1], theirs[2]
    for mine, more in zip((*hits, *warns), (*theirs[3], *theirs[4]), strict=True):
        mine.extend(more)


def _second_half(_inbox, snaps: Snapshots, limit: float | None, horizon: float | None, mid: int) -> tuple:
    T = len(snaps.t)
    d_min, closest, pair_index = np.full(T, np.nan), [None] * T, np.full((T, 2), -1, dtype=int)
    hits: tuple[list, list, list] = ([], [], [])
    warns: tuple[list, list, list, list] = ([], [], [], [])
    pairs_sparse(snaps, limit, horizon, d_min, closest, hits, warns, pair_index, range(mid, T))
    return d_min[mid:], closest[mid:], pair_index[mid:], hits, warns


def pairs_sparse(snaps: Snapshots, limit: float | None, horizon: float | None, d_min: np.ndarray, closest: list,
                 hits: tuple[list, list, list], warns: tuple[list, list, list, list], pair_index: np.ndarray,
                 steps: range | None = None) -> None:
    """Per time step (all, or `steps`): kd-tree nearest pair (also as vehicle indexes in pair_index), close pairs
    below the limit, CPA candidates."""
    ids, (hv, ht, hd), (wk, wt, wd, wtp) = snaps.uav_ids, hits, warns
    T, N = snaps.valid.shape
    where = np.full(N, -1)  # a vehicle's row in this step's points (-1: not valid)
    last: tuple[int, int] | None = None  # the previous step's closest pair (vehicle indexes)
    # steps with every vehicle valid use the grid row itself
    everyone, full = np.arange(N), np.asarray(snaps.valid.all(axis=1))
    span = range(T) if steps is None else steps
    done = pairs_in_blocks(snaps, limit, horizon, d_min, closest, hits, warns, pair_index, span)
    if done.all():
        return
    speeds = None if limit is None or horizon is None else step_speed_bounds(snaps.vel[span.start:span.stop],
                                                                             snaps.valid[span.start:span.stop])
    for s in span:
        if done[s - span.start]:
            continue
        if full[s] and N >= 2:
            idx, p, known = everyone, snaps.pos[s], last
        else:
            idx = np.flatnonzero(snaps.valid[s])
            if len(idx) < 2:
                continue
            p = snaps.pos[s, idx]
            where[:] = -1
            where[idx] = np.arange(len(idx))
            known = None if last is None or min(where[last[0]], where[last[1]]) < 0 else (where[last[0]],
                                                                                          where[last[1]])
        tree = cKDTree(p)
        d, a, b = nearest_pair(p, tree, known)
        last = int(idx[a]), int(idx[b])
        d_min[s] = d
        closest[s] = (ids[idx[a]], ids[idx[b]])
        pair_index[s] = idx[a], idx[b]
        if limit is None:
            continue
        t = float(snaps.t[s])
        if d < limit:
            i, j, dist = close_pairs(p, limit, tree)
            key = idx[i] * N + idx[j]
            bad = dist < limit
            hv.append(key[bad])
            ht.append(np.full(int(bad.sum()), t))
            hd.append(dist[bad])
        if horizon is None or speeds is None:  # no predictions asked for
            continue
        v = snaps.vel[s] if idx is everyone else snaps.vel[s, idx]
        i, j, dist = cpa_candidates(p, v, limit, horizon, relative=True, vmax=float(speeds[s - span.start]))
        ok = dist >= limit
        if ok.any():
            tc, dc = closest_approach(p[j[ok]] - p[i[ok]], v[j[ok]] - v[i[ok]], horizon)
            warn = dc < limit
            if warn.any():
                wk.append((idx[i] * N + idx[j])[ok][warn])
                wt.append(np.full(int(warn.sum()), t))
                wd.append(dc[warn])
                wtp.append(t + tc[warn])


def pairs_dense(snaps: Snapshots, limit: float | None, horizon: float | None, d_min: np.ndarray, closest: list,
                hits: tuple[list, list, list], warns: tuple[list, list, list, list]) -> None:
    """The same results as :func:`pairs_sparse`, computed for all pairs of a block of steps at once."""
    ids, (hv, ht, hd), (wk, wt, wd, wtp) = snaps.uav_ids, hits, warns
    T, N = snaps.valid.shape
    if N < 2:
        return
    i, j = np.triu_indices(N, k=1)
    keys = i * N + j
    pair_names = [(ids[a], ids[b]) for a, b in zip(i, j, strict=True)]
    step = max(1, DENSE_BLOCK // len(i))
    for s0 in range(0, T, step):
        sl = slice(s0, min(T, s0 + step))
        valid = snaps.valid[sl][:, i] & snaps.valid[sl][:, j]
        dp = snaps.pos[sl][:, j] - snaps.pos[sl][:, i]
        dist = np.where(valid, np.sqrt((dp * dp).sum(axis=2)), np.inf)
        best = np.argmin(dist, axis=1)
        rows = np.flatnonzero(valid.any(axis=1))
        d_min[s0 + rows] = dist[rows, best[rows]]
        for r, b in zip((s0 + rows).tolist(), best[rows].tolist(), strict=True):
            closest[r] = pair_names[b]
        if limit is None:
            continue
        t = np.broadcast_to(snaps.t[sl][:, None], dist.shape)
        bad = dist < limit
        if bad.any():
            hv.append(np.broadcast_to(keys, dist.shape)[bad])
            ht.append(t[bad])
            hd.append(dist[bad])
        if horizon is None:
            continue
        dv = snaps.vel[sl][:, j] - snaps.vel[sl][:, i]
        # Sound pruning: within the horizon a pair closes in by at most |dv| H, so pairs further apart than
        # limit + |dv| H (with a relative 1e-9 against rounding) cannot be predicted below the limit.
        reach = np.sqrt(np.einsum("spk,spk->sp", dv, dv)) * horizon
        ok = valid & (dist >= limit) & (dist <= (limit + reach) * (1.0 + 1e-9))
        if ok.any():
            tc, dc = closest_approach(dp[ok], dv[ok], horizon)
            warn = dc < limit
            if warn.any():
                wk.append(np.broadcast_to(keys, dist.shape)[ok][warn])
                wt.append(t[ok][warn])
                wd.append(dc[warn])
                wtp.append(t[ok][warn] + tc[warn])
