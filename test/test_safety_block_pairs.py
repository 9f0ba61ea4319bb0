"""The checker's block pass (one kd-tree per block of steps in which the swarm keeps its shape) gives each step the
per-step pass's results bit for bit, and a tie for the closest pair goes to the first pair in (i, j) order."""

import numpy as np
import pytest
from scipy.spatial import cKDTree

from uav_debate_eval.core.track import Snapshots
from uav_debate_eval.safety import block_pairs, grid_pairs
from uav_debate_eval.safety.geometry import nearest_pair

N, T = 120, 300


def lattice(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 3 m lattice circling together: the swarm keeps its shape, every closest distance is tied many times."""
    side = 11
    base = np.array([[3.0 * (k % side), 3.0 * (k // side), 10.0] for k in range(N)])
    shift = np.stack([5 * np.cos(0.3 * t), 5 * np.sin(0.3 * t), 0 * t], 1)
    vel = np.stack([-1.5 * np.sin(0.3 * t), 1.5 * np.cos(0.3 * t), 0 * t], 1)
    return base[None] + shift[:, None], np.broadcast_to(vel[:, None], (len(t), N, 3)).copy()


def flight(kind: str) -> Snapshots:
    rng = np.random.default_rng(7)
    t = np.arange(T) * 0.1
    valid = np.ones((T, N), dtype=bool)
    if kind == "lattice":
        pos, vel = lattice(t)
    elif kind == "lattice_with_gaps":  # steps where a vehicle has no data are left to the per-step pass
        pos, vel = lattice(t)
        valid[40:45, 7] = False
        valid[200, :] = False
    elif kind == "converging":  # every other vehicle closes in on its neighbour, 0.5 m apart at the end
        pos, vel = lattice(t)
        half = np.arange(N) % 2 == 0
        pos[:, half, 0] += 2.5 * t[:, None] / t[-1]
        vel[:, half, 0] += 2.5 / t[-1]
    elif kind == "overtaking":  # within a block, a pair comes below the limit and becomes the closest one
        pos, vel = lattice(t)
        pos[:, 0, 0] += np.minimum(2.0, 0.2 * t)  # uav0 closes to 1.0 m of uav1 within 10 s
        vel[:, 0, 0] += np.where(t < 10.0, 0.2, 0.0)
        pos[:, 50, 0] += 2.2 * t / 30.0  # uav50 closes on uav51 slowly: below 1.5 m at 20.5 s, closest at 27.3 s
        vel[:, 50, 0] += 2.2 / 30.0
    elif kind == "scattered":  # vehicles flying every which way: blocks stay short or none
        p0, v = rng.uniform(0, 60, (N, 3)), rng.normal(0, 3, (N, 3))
        pos, vel = p0[None] + v[None] * t[:, None, None], np.broadcast_to(v, (T, N, 3)).copy()
    else:  # coincident points: a closest distance of 0
        base = rng.uniform(0, 30, (N, 3))
        base[5], base[17] = base[9], base[40]
        pos, vel = base[None] + 0.0 * t[:, None, None], rng.normal(0, 1, (T, N, 3))
    return Snapshots(t, [f"u{k}" for k in range(N)], np.ascontiguousarray(np.round(pos, 6)), vel, valid)


def passes(snaps: Snapshots, limit, horizon, blocks: bool, monkeypatch) -> tuple:
    if not blocks:
        monkeypatch.setattr(grid_pairs, "pairs_in_blocks", lambda *a: np.zeros(len(a[-1]), dtype=bool))
    else:
        monkeypatch.setattr(grid_pairs, "pairs_in_blocks", block_pairs.pairs_in_blocks)
    d_min, closest, pair_index = np.full(T, np.nan), [None] * T, np.full((T, 2), -1, dtype=int)
    hits, warns = ([], [], []), ([], [], [], [])
    grid_pairs.pairs_sparse(snaps, limit, horizon, d_min, closest, hits, warns, pair_index)

    def rows(parts: tuple) -> list[np.ndarray]:  # sorted by (time, key): the passes list them in other orders
        cols = [np.concatenate(p) if p else np.zeros(0) for p in parts]
        order = np.lexsort((cols[0], cols[1]))
        return [c[order] for c in cols]

    return d_min, closest, pair_index, rows(hits), rows(warns)


KINDS = ["lattice", "lattice_with_gaps", "converging", "overtaking", "scattered", "coincident"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("limit,horizon", [(None, None), (1.5, None), (1.5, 3.0), (3.5, 2.0)])
def test_the_block_pass_equals_the_per_step_pass(kind, limit, horizon, monkeypatch):
    snaps = flight(kind)
    one = passes(snaps, limit, horizon, False, monkeypatch)
    blocked = passes(snaps, limit, horizon, True, monkeypatch)
    np.testing.assert_array_equal(blocked[0], one[0])  # closest distances, bit for bit
    assert blocked[1] == one[1]
    np.testing.assert_array_equal(blocked[2], one[2])
    for mine, theirs in zip(blocked[3] + blocked[4], one[3] + one[4], strict=True):
        np.testing.assert_array_equal(mine, theirs)
    if kind in ("converging", "overtaking") and limit == 1.5:
        assert len(one[3][0]) and (horizon is None or len(one[4][0]))  # violations (and predictions) to compare
    if kind == "overtaking":
        assert tuple(one[2][0]) == (0, 1) and tuple(one[2][-1]) == (50, 51)


def test_a_swarm_keeping_its_shape_is_checked_in_blocks(monkeypatch):
    """The lattice's steps are the block pass's, in few blocks; a step without every vehicle is the per-step pass's."""
    snaps = flight("lattice_with_gaps")
    trees: list[int] = []
    real = block_pairs.cKDTree
    monkeypatch.setattr(block_pairs, "cKDTree", lambda *a, **k: trees.append(1) or real(*a, **k))
    done = block_pairs.pairs_in_blocks(snaps, 1.5, 3.0, np.full(T, np.nan), [None] * T, ([], [], []),
                                       ([], [], [], []), np.full((T, 2), -1, dtype=int), range(T))
    assert not done[40:45].any() and not done[200]
    assert done.sum() == T - 6
    assert len(trees) < T // 10  # one tree per block, not per step


def test_a_tied_closest_pair_is_the_first_in_pair_order():
    """A lattice has many pairs at the closest distance: the pair named is the first in (i, j) order, as the dense
    pass's argmin over all pairs names it, whatever neighbour the kd-tree's query returned."""
    rng = np.random.default_rng(3)
    pos = np.round(lattice(np.zeros(1))[0][0], 6)
    for perm in [np.arange(N)] + [rng.permutation(N) for _ in range(5)]:
        p = pos[perm]
        i, j = np.triu_indices(N, k=1)
        d = np.sqrt(((p[i] - p[j]) ** 2).sum(axis=1))
        first = int(np.argmin(d))
        got = nearest_pair(p, cKDTree(p))
        assert got == (float(d[first]), int(i[first]), int(j[first]))
        assert np.count_nonzero(d == d[first]) > 1  # ties there were


@pytest.mark.parametrize("kind", ["overtaking", "lattice_with_gaps", "scattered"])
def test_the_metrics_close_approach_pass_takes_the_block_pass(kind, monkeypatch):
    """metrics.swarm's kd-tree pass (closest pairs and the pairs within the proximity radius) gives the same
    numbers with the block pass as step by step."""
    from uav_debate_eval.metrics import swarm

    blocked = swarm._sparse_steps(flight(kind), 3.5)
    monkeypatch.setattr(swarm, "pairs_in_blocks", lambda *a: np.zeros(len(a[-1]), dtype=bool))
    one = swarm._sparse_steps(flight(kind), 3.5)
    np.testing.assert_array_equal(blocked[0], one[0])
    np.testing.assert_array_equal(blocked[1], one[1])
    assert blocked[2] == one[2] and len(one[2]) > 20  # every pair with its (step, distance) rows, in step order


@pytest.mark.parametrize("kind", ["overtaking", "scattered"])
def test_blocks_capped_in_pairs_x_steps_give_the_same_results(kind, monkeypatch):
    """With few pair-steps allowed per block (a show's wide prediction radius: many candidates), blocks are cut
    shorter and the predictions go a few steps at a time: the same numbers."""
    snaps = flight(kind)
    one = passes(snaps, 3.5, 2.0, False, monkeypatch)
    monkeypatch.setattr(block_pairs, "MAX_PAIR_STEPS", 2_000)
    capped = passes(snaps, 3.5, 2.0, True, monkeypatch)
    np.testing.assert_array_equal(capped[0], one[0])
    assert capped[1] == one[1]
    for mine, theirs in zip(capped[3] + capped[4], one[3] + one[4], strict=True):
        np.testing.assert_array_equal(mine, theirs)
    assert len(one[4][0])  # predictions to compare
    done = block_pairs.pairs_in_blocks(snaps, 3.5, 2.0, np.full(T, np.nan), [None] * T, ([], [], []),
                                       ([], [], [], []), np.full((T, 2), -1, dtype=int), range(T))
    assert done.all() if kind == "overtaking" else not done.any()  # ~9-step blocks, 4 rows of predictions at once
