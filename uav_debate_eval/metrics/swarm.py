"""Swarm geometry on a common time grid: separation, close-approach intervals, formation error.

Shared by the coordination/safety metrics and by the DSL events so that a score and the event
that explains it are computed from the same numbers. Pairwise work uses a kd-tree per block of grid steps in
which the swarm keeps its shape (safety.block_pairs; per step where it does not), so a 1000-vehicle grid swarm
stays tractable; the grid is at most
MAX_STEPS long (coarser than the samples for very long flights).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from uav_debate_eval.core.memo import Deferred, memo, memo_hit, remember
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.track import Snapshots
from uav_debate_eval.core.trajectory import GAP_FACTOR, MIN_GAP_S, SwarmTrajectory
from uav_debate_eval.metrics.kinematics import runs
from uav_debate_eval.metrics.vec import nanmedian0, norm
from uav_debate_eval.safety.block_pairs import pairs_in_blocks
from uav_debate_eval.safety.geometry import close_pairs, nearest_pair

#: Longest common grid used for pairwise geometry.
MAX_STEPS = 12_000
#: Up to this many vehicles the nominal-shape reference uses all pairs, above it k nearest neighbours.
ALL_PAIRS_MAX_N = 30
NEIGHBOURS_K = 6
#: The nominal pair distances are medians over at most this many evenly spaced grid steps.
NOMINAL_STEPS = 2000


def snapshots(traj: SwarmTrajectory) -> Snapshots:
    """Every vehicle on one grid (sample period, capped at MAX_STEPS); data gaps are invalid.

    Cached on the trajectory: the metrics, events, mission segments and DSL of one flight or window share it.
    """
    return memo(traj, ("snapshots", tuple(traj.tracks)), tuple(traj.tracks.values()), lambda: _snapshots(traj))


def _snapshots(traj: SwarmTrajectory) -> Snapshots:
    dt = max(traj.sample_period or 0.1, traj.duration / (MAX_STEPS - 1) if traj.duration > 0 else 0.0)
    gap = max(MIN_GAP_S, GAP_FACTOR * (traj.sample_period or 0.0))
    snap = traj.resample(dt=dt, max_gap_s=gap)
    flight = traj.flight
    if flight is not None and memo_hit(flight, ("snapshots", tuple(flight.tracks)), tuple(flight.tracks.values())):
        whole = snapshots(flight)  # a window on its flight's grid: its steps are rows of the flight's snapshots
        a = snap.first_row_in(whole)
        if a is not None:
            snap.__dict__["_flight_rows"] = (whole, a)
    return snap


@dataclass
class CloseApproach:
    """A contiguous interval with one pair closer than a radius."""

    i: int
    j: int
    t_start: float
    t_end: float
    d_min: float
    t_min: float  # when the pair was closest: separation starts increasing after this


@dataclass
class Separation:
    t: np.ndarray  # (T,)
    d_min: np.ndarray  # (T,) closest pair distance (inf when fewer than two valid vehicles)
    pair: np.ndarray  # (T, 2) indices of that pair (-1 when none)


#: Up to this many vehicles all pair distances are computed at once (vectorised over time).
DENSE_MAX_N = 60


def _dense(snap: Snapshots) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pair indices and distances (T, P), inf where either vehicle is invalid (cached: separation and
    close approaches both need them)."""
    return memo(snap, "dense", (), lambda: _dense_pairs(snap))


def _dense_pairs(snap: Snapshots) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ii, jj = np.triu_indices(len(snap.uav_ids), k=1)
    d = norm(snap.pos[:, ii] - snap.pos[:, jj])
    d[~(snap.valid[:, ii] & snap.valid[:, jj])] = np.inf
    return ii, jj, d


def separation(snap: Snapshots) -> Separation:
    """Closest-pair distance per grid step (all pairs for small swarms, else kd-trees); cached."""
    return memo(snap, "separation", (), lambda: _separation(snap))


def _separation(snap: Snapshots) -> Separation:
    T, N = snap.valid.shape
    d_min = np.full(T, np.inf)
    pair = np.full((T, 2), -1, dtype=int)
    if 2 <= N <= DENSE_MAX_N:
        ii, jj, d = _dense(snap)
        a = np.argmin(d, axis=1)
        d_min = d[np.arange(T), a]
        has = np.isfinite(d_min)
        pair[has] = np.column_stack([ii[a], jj[a]])[has]
        return Separation(snap.t, d_min, pair)
    cached = [v for k, v in snap.__dict__.get("_memo", {}).items() if isinstance(k, tuple) and k[0] == "sparse_pass"]
    if cached:  # a close-approach pass already built every step's kd-tree and kept the closest pairs
        d_min, pair, _ = cached[0][1]
        return Separation(snap.t, d_min, pair)
    for k in range(T):
        idx = np.flatnonzero(snap.valid[k])
        if len(idx) < 2:
            continue
        d_min[k], a, b = nearest_pair(snap.pos[k, idx])
        pair[k] = idx[a], idx[b]
    return Separation(snap.t, d_min, pair)


def _sparse_pass(snap: Snapshots, radius: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """One kd-tree pass (per block of steps, safety.block_pairs, else per step) for both the closest pair (as
    _separation) and the pairs closer than `radius` (as close_approaches): (d_min, pair, hits); cached, so
    separation() reuses it."""
    return memo(snap, ("sparse_pass", radius), (), lambda: _sparse_steps(snap, radius))


def adopt_checker_pairs(snap: Snapshots, safety) -> None:
    """Let the kd-tree pass over `snap` take each step's closest pair from the safety checker when the checker ran
    its kd-tree pass over the very same grid (same times, positions and validity: then its closest pair is the
    one this pass would find: the same distances, the same rule for ties). Steps whose closest pair is beyond a radius
    have no pair within it either, so the pass only builds trees where something comes close."""
    nearest = getattr(safety, "nearest", None)
    if nearest is None or "_checker_pairs" in snap.__dict__:
        return
    grid, pair_index = nearest.snaps, nearest.pair_index
    if grid is snap or (np.array_equal(grid.t, snap.t) and grid.uav_ids == snap.uav_ids
                        and np.array_equal(grid.valid, snap.valid)
                        and (grid.pos is snap.pos or np.array_equal(grid.pos, snap.pos))):
        d_min = np.where(np.isfinite(safety.separation.d_min), safety.separation.d_min, np.inf)
        snap.__dict__["_checker_pairs"] = (d_min, pair_index)


#: A step whose closest pair (the checker's kd-tree distance) is beyond radius * (1 + this) has no pair within
#: the radius; the margin covers the last-bit differences between the tree's and numpy's distance arithmetic.
_BEYOND = 1e-9


def _sparse_steps(snap: Snapshots, radius: float) -> tuple[np.ndarray, np.ndarray, dict]:
    T, N = snap.valid.shape
    d_min = np.full(T, np.inf)
    pair = np.full((T, 2), -1, dtype=int)
    known = snap.__dict__.get("_checker_pairs")
    todo = np.ones(T, dtype=bool)
    if known is not None:  # the steps where nothing comes within the radius are the checker's
        far = known[0] > radius * (1.0 + _BEYOND)
        d_min[far], pair[far] = known[0][far], known[1][far]
        todo = ~far & np.isfinite(known[0])
    keys: list[np.ndarray] = []  # pairs within the radius: key i * N + j, the step's time, the distance
    times: list[np.ndarray] = []
    dists: list[np.ndarray] = []
    names: list = [None] * T  # the block pass names the closest pairs too (unused here)
    for a, b in runs(todo):  # blocks of steps in which the swarm keeps its shape, as the checker does
        done = pairs_in_blocks(snap, radius, None, d_min, names, (keys, times, dists), ([], [], [], []), pair,
                               range(a, b))
        todo[a:b] &= ~done
    for k in np.flatnonzero(todo).tolist():
        idx = np.flatnonzero(snap.valid[k])
        if len(idx) < 2:
            continue
        p = snap.pos[k, idx]
        tree = cKDTree(p)
        d_min[k], a, b = nearest_pair(p, tree)
        pair[k] = idx[a], idx[b]
        i, j, dist = close_pairs(p, radius, tree)
        below = dist < radius
        keys.append(idx[i[below]] * N + idx[j[below]])
        times.append(np.full(int(below.sum()), snap.t[k]))
        dists.append(dist[below])
    return d_min, pair, _hits_by_pair(snap, keys, times, dists)


def _hits_by_pair(snap: Snapshots, keys: list, times: list, dists: list) -> dict[tuple[int, int], list]:
    """{(i, j): [(step, distance), ...] in step order} from the passes' (key, time, distance) arrays."""
    if not keys:
        return {}
    N = len(snap.uav_ids)
    key, dist = np.concatenate(keys).astype(int), np.concatenate(dists)
    step = np.searchsorted(snap.t, np.concatenate(times))  # the grid's own times
    order = np.lexsort((step, key))
    key, step, dist = key[order], step[order], dist[order]
    cuts = np.flatnonzero(np.diff(key)) + 1
    hits: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for a, b in zip(np.concatenate([[0], cuts]).tolist(), np.concatenate([cuts, [len(key)]]).tolist(), strict=True):
        if a < b:
            i, j = divmod(int(key[a]), N)
            hits[(i, j)] = list(zip(step[a:b].tolist(), dist[a:b].tolist(), strict=True))
    return hits


def close_approaches(snap: Snapshots, radius: float, merge_s: float = 0.5) -> list[CloseApproach]:
    """Per pair, intervals with distance < radius (gaps shorter than merge_s are bridged); cached (the
    metrics and the events ask for the same radius)."""
    return list(memo(snap, ("close_approaches", radius, merge_s), (), lambda: _close_approaches(snap, radius, merge_s)))


def _close_approaches(snap: Snapshots, radius: float, merge_s: float) -> list[CloseApproach]:
    hits: dict[tuple[int, int], list[tuple[int, float]]] = {}
    N = len(snap.uav_ids)
    if 2 <= N <= DENSE_MAX_N:
        ii, jj, d = _dense(snap)
        for p in np.flatnonzero((d < radius).any(axis=0)):
            ks = np.flatnonzero(d[:, p] < radius)
            hits[(int(ii[p]), int(jj[p]))] = list(zip(ks.tolist(), d[ks, p].tolist(), strict=True))
    elif N > DENSE_MAX_N:
        hits = _sparse_pass(snap, radius)[2]
    out: list[CloseApproach] = []
    dt = float(snap.t[1] - snap.t[0]) if len(snap.t) > 1 else 0.0
    gap_steps = max(1, int(round(merge_s / dt))) if dt > 0 else 1
    for (i, j), rows in sorted(hits.items()):
        ks = np.array([r[0] for r in rows])
        ds = np.array([r[1] for r in rows])
        breaks = np.flatnonzero(np.diff(ks) > gap_steps) + 1
        for seg_k, seg_d in zip(np.split(ks, breaks), np.split(ds, breaks), strict=True):
            m = int(np.argmin(seg_d))
            out.append(CloseApproach(i, j, float(snap.t[seg_k[0]]), float(snap.t[seg_k[-1]]),
                                     float(seg_d[m]), float(snap.t[seg_k[m]])))
    out.sort(key=lambda c: (c.t_start, c.i, c.j))
    return out


def formation_reference(mission: Mission, uav_ids: list[str]) -> str | None:
    """'offsets' when the mission gives offsets for >= 2 flown vehicles, 'nominal' for >= 2 vehicles, else None."""
    if len([u for u in uav_ids if u in mission.formation_offsets]) >= 2:
        return "offsets"
    return "nominal" if len(uav_ids) >= 2 else None


def formation_error(snap: Snapshots, mission: Mission) -> tuple[np.ndarray, str | None]:
    """Per-vehicle formation error (T, N) in metres (NaN where invalid or not part of the reference).

    Each vehicle is compared with its partners (all others up to 30 vehicles, else its 6 nearest
    in the reference layout) and its error is the LOWER MEDIAN over partners of the pair error,
    so one stray vehicle is blamed alone instead of smearing its error over the swarm (as a
    centroid fit would); with two vehicles both carry the pair error.
    offsets: pair error = |(p_i - p_j) - R (o_i - o_j)| where R is the yaw that best aligns the
    offsets with the positions (2-D Kabsch on centred coordinates), so a formation turning as a
    rigid body has zero error.
    nominal (no offsets): pair error = |d_ij(t) - median over time of d_ij|, the swarm's own shape.
    Cached on the snapshots for this mission (metrics, events and the DSL's FORM lines share it).
    """
    return memo(snap, "formation_error", (mission,), lambda: _formation_error(snap, mission))


def defer_formation_error(snap: Snapshots, mission: Mission, fetch) -> None:
    """formation_error(snap, mission) will be fetch() (computed by another process; None: computed here)."""
    remember(snap, "formation_error", (mission,), Deferred(fetch))


def _formation_error(snap: Snapshots, mission: Mission) -> tuple[np.ndarray, str | None]:
    T, N = snap.valid.shape
    err = np.full((T, N), np.nan)
    ref = formation_reference(mission, snap.uav_ids)
    if ref is None:
        return err, None
    if ref == "offsets":
        cols = np.array([j for j, u in enumerate(snap.uav_ids) if u in mission.formation_offsets])
        off = np.array([mission.formation_offsets[snap.uav_ids[j]] for j in cols], dtype=float)
        every = len(cols) == N  # then cols is 0..N-1: the grid itself, not a copy
        p, valid = (snap.pos, snap.valid) if every else (snap.pos[:, cols], snap.valid[:, cols])
        todo = _flights_rows(snap, mission, err)
        if todo is None:
            err[:, cols] = _offset_errors(p, valid, off)
        elif len(todo):
            err[np.ix_(todo, cols)] = _offset_errors(p[todo], valid[todo], off)
        return err, ref
    k0 = _reference_step(snap)
    partners = _partners(snap.pos[k0])
    has = (partners >= 0)[None]

    def pair_distances(sel) -> tuple[np.ndarray, np.ndarray]:
        d = _partner_norms(snap.pos[sel], partners)
        return d, snap.valid[sel][:, :, None] & snap.valid[sel][:, partners] & has

    stride = max(1, T // NOMINAL_STEPS)
    d, ok = pair_distances(slice(0, T, stride))
    with np.errstate(all="ignore"):
        nominal = np.nan_to_num(nanmedian0(np.where(ok, d, np.nan)))
    for a, b in _chunks(T):
        d, ok = pair_distances(slice(a, b))
        err[a:b] = _lower_median(np.abs(d - nominal[None]), ok, snap.valid[a:b])
    return err, ref


def _offset_errors(p: np.ndarray, valid: np.ndarray, off: np.ndarray) -> np.ndarray:
    """The offsets reference's error (T, M) of each step of positions p (T, M, 3): every number is one step's own
    (the yaw, the partners' distances and their median use that step's positions and valid vehicles only)."""
    cos, sin = _yaw_aligned(p, valid, off)
    partners = _partners(off)
    err = np.empty(valid.shape)
    for a, b in _chunks(len(p)):
        pair = _partner_norms(p[a:b], partners, _rotated(off, cos[a:b], sin[a:b]))
        ok = valid[a:b, :, None] & valid[a:b, partners] & (partners >= 0)[None]
        err[a:b] = _lower_median(pair, ok, valid[a:b])
    return err


def _flights_rows(snap: Snapshots, mission: Mission, err: np.ndarray) -> np.ndarray | None:
    """For a window on its flight's grid whose flight has its offsets-reference errors (computed, or on their way
    from another process): those errors copied into `err` for every step whose valid vehicles are the flight's,
    and the steps left to compute (a data gap at the window's edge); None when there is nothing to take over."""
    link = snap.__dict__.get("_flight_rows")
    if link is None or not memo_hit(link[0], "formation_error", (mission,)):
        return None
    whole, a = link
    flight_err, ref = formation_error(whole, mission)
    if ref != "offsets":
        return None
    rows = slice(a, a + len(snap.t))
    same = (whole.valid[rows] == snap.valid).all(axis=1)
    err[same] = flight_err[rows][same]
    return np.flatnonzero(~same)


def _partner_norms(p: np.ndarray, partners: np.ndarray, o: np.ndarray | None = None) -> np.ndarray:
    """|(p_i - p_j) - (o_i - o_j)| (without o: |p_i - p_j|) for every vehicle i and partner j, (T, M, K).

    When the partners are all the others, each unordered pair is computed once: the value is symmetric
    and negating a difference is exact, so this is bit-identical to the direct form at half the cost.
    """
    m = p.shape[1]
    if not 2 <= m <= ALL_PAIRS_MAX_N:
        return _nearest_norms(p if o is None else p - o, partners)
    ii, jj = np.triu_indices(m, k=1)
    rel = p[:, ii] - p[:, jj]
    d = norm(rel if o is None else rel - (o[:, ii] - o[:, jj]))
    pair = np.zeros((m, m), dtype=int)
    pair[ii, jj] = pair[jj, ii] = np.arange(len(ii))
    return d[:, pair[np.arange(m)[:, None], partners]]


def _nearest_norms(q: np.ndarray, partners: np.ndarray) -> np.ndarray:
    """|q_i - q_j| for every vehicle i and partner j (T, M, K), q = p - o: a few partners per vehicle (a large swarm).

    One component plane (T, M) at a time, one partner column at a time, in place: the sum of squares in vec.norm's
    order. Subtracting the offsets once per vehicle (not per pair) moves a value by an ulp or so at most.
    """
    planes = [np.ascontiguousarray(q[..., c]) for c in range(q.shape[-1])]
    out = np.empty(q.shape[:2] + partners.shape[1:])
    acc = np.empty(q.shape[:2])
    diff = np.empty(q.shape[:2])
    for k in range(partners.shape[1]):
        j = partners[:, k]
        acc.fill(0.0)
        for plane in planes:
            np.take(plane, j, axis=1, out=diff)
            np.subtract(plane, diff, out=diff)
            np.multiply(diff, diff, out=diff)
            np.add(acc, diff, out=acc)
        np.sqrt(acc, out=out[:, :, k])
    return out


#: Grid steps per block of the formation errors: every value is computed per (step, vehicle), so the block size
#: changes no number; a block of a 1,000-vehicle swarm's (steps, vehicles, 3) arrays then stays within the CPU cache.
FORMATION_BLOCK_STEPS = 64


def _chunks(T: int) -> list[tuple[int, int]]:
    size = FORMATION_BLOCK_STEPS
    return [(a, min(a + size, T)) for a in range(0, T, size)]


def _yaw_aligned(p: np.ndarray, valid: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (T, 1) of the yaw per step that best maps centred offsets onto centred positions (only the
    horizontal components enter; per block of steps, each step's sums over the vehicles are its own row's)."""
    w = valid.astype(float)
    n = np.maximum(w.sum(axis=1), 1)[:, None]
    cp = (p * w[..., None]).sum(axis=1) / n
    co = (off[None] * w[..., None]).sum(axis=1) / n
    cross, dot = np.empty(len(p)), np.empty(len(p))
    for a, b in _chunks(len(p)):
        px, py = p[a:b, :, 0] - cp[a:b, None, 0], p[a:b, :, 1] - cp[a:b, None, 1]
        ox, oy = off[None, :, 0] - co[a:b, None, 0], off[None, :, 1] - co[a:b, None, 1]
        cross[a:b] = ((ox * py - oy * px) * w[a:b]).sum(axis=1)
        dot[a:b] = ((ox * px + oy * py) * w[a:b]).sum(axis=1)
    th = np.arctan2(cross, dot)
    return np.cos(th)[:, None], np.sin(th)[:, None]


def _rotated(off: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The offsets (M, 3) turned by each step's yaw (cos c, sin s of shape (T, 1)) about the vertical: (T, M, 3)."""
    o = np.broadcast_to(off[None], (len(c), *off.shape))
    return np.stack([c * o[..., 0] - s * o[..., 1], s * o[..., 0] + c * o[..., 1], o[..., 2]], axis=-1)


def _partners(layout: np.ndarray) -> np.ndarray:
    """(M, K) partner indices: all others up to ALL_PAIRS_MAX_N vehicles, else the K nearest in `layout`."""
    m = len(layout)
    if m <= ALL_PAIRS_MAX_N:
        return np.array([[j for j in range(m) if j != i] for i in range(m)], dtype=int).reshape(m, max(m - 1, 0))
    _, nn = cKDTree(layout).query(layout, k=NEIGHBOURS_K + 1)
    return nn[:, 1:].astype(int)


def _lower_median(pair: np.ndarray, ok: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Lower median over the last axis of the valid pair errors; NaN where none is valid."""
    x = np.sort(np.where(ok, pair, np.inf), axis=-1)
    m = ok.sum(axis=-1)
    k = np.maximum(m - 1, 0) // 2
    out = np.take_along_axis(x, k[..., None], axis=-1)[..., 0] if x.shape[-1] else np.full(m.shape, np.inf)
    out = np.where((m > 0) & valid, out, np.nan)
    return out


def _reference_step(snap: Snapshots) -> int:
    full = np.flatnonzero(snap.valid.all(axis=1))
    return int(full[0]) if len(full) else int(np.argmax(snap.valid.sum(axis=1)))


def breach_intervals(t: np.ndarray, err: np.ndarray, tolerance: float, min_s: float = 0.5) -> list[tuple[int, int]]:
    """Index runs [i0, i1) where err > tolerance for at least min_s."""
    dt = float(t[1] - t[0]) if len(t) > 1 else 0.0
    return [(a, b) for a, b in runs(np.nan_to_num(err, nan=-np.inf) > tolerance) if (b - a) * dt >= min_s]
