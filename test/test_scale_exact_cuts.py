"""Issue 15 round 2: CPU cuts that must leave every number as it was (each compared with the former formula)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.ndimage import median_filter

from uav_debate_eval.core.trajectory import SwarmTrajectory, VehicleCodes
from uav_debate_eval.metrics.flight import _stacked_values, vehicle_values
from uav_debate_eval.metrics.kinematics import smooth_tracks
from uav_debate_eval.metrics.vec import norm
from uav_debate_eval.quality import jumps


def _excursions_per_column(t: np.ndarray, pos: np.ndarray, a_max: float) -> list[jumps.Excursion]:
    """The former excursions(): one 1-D median filter per coordinate and np.linalg.norm."""
    w = jumps.WINDOW
    n = len(t)
    if n < 2 * w + 1:
        return []
    med = np.column_stack([median_filter(pos[:, k], size=2 * w + 1, mode="nearest") for k in range(3)])
    dev = np.linalg.norm(pos - med, axis=1)
    dt = float(np.median(np.diff(t)))
    noise = 6.0 * 1.4826 * float(np.median(dev))
    allowed = 0.5 * a_max * (w * dt) ** 2 + max(jumps.NOISE_FLOOR_M, noise)
    flagged = dev > allowed
    flagged[:1] = flagged[-1:] = False
    out = []
    edges = np.diff(np.concatenate([[0], flagged.astype(np.int8), [0]]))
    for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1, strict=True):
        before, after = a - 1, b + 1
        if after >= n or t[after] - t[before] > jumps.MAX_EXCURSION_S + 2 * dt:
            continue
        dist = float(dev[a:b + 1].max())
        step = np.linalg.norm(pos[a] - pos[before]) / max(float(t[a] - t[before]), 1e-6)
        out.append(jumps.Excursion(int(a), int(b), float(t[a]), float(t[after]), dist, float(step)))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_excursions_equal_the_per_column_filter(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(7, 400))
    t = np.cumsum(rng.uniform(0.05, 0.15, n))
    pos = np.cumsum(rng.normal(scale=0.05, size=(n, 3)), axis=0)
    pos[rng.random(n) < 0.1] = pos[0]  # repeated values: ties in the medians
    for i in rng.choice(np.arange(1, n - 1), size=min(4, n - 2), replace=False):
        pos[i] += rng.normal(scale=3.0, size=3)  # one-frame glitches
    got, want = jumps.excursions(t, pos, 5.0), _excursions_per_column(t, pos, 5.0)
    assert got == want
    assert seed != 0 or got  # the glitches are found, not only matched


@pytest.mark.parametrize("shape", [(7, 1, 3), (8, 3, 3), (50, 5, 3), (1200, 64, 3)])
def test_the_median_network_equals_scipy_s_rank_filter(shape):
    """jumps.rolling_median (a median-of-7 sorting network) gives scipy's numbers exactly, ties and ends included."""
    x = np.random.default_rng(len(shape) + shape[0]).normal(size=shape)
    x[::3] = np.round(x[::3], 1)  # ties
    x[:, :, 1] = np.floor(x[:, :, 1])  # many ties
    assert np.array_equal(jumps.rolling_median(x), median_filter(x, size=7, axes=(0,), mode="nearest"))


def test_excursions_of_many_tracks_equal_each_track_alone():
    """Tracks stacked by length (blocks, lengths shared and not, too short to filter) give each track's own list."""
    rng = np.random.default_rng(7)
    tracks = []
    for k, n in enumerate([50] * (jumps.TRACK_BLOCK + 5) + [6, 7, 120, 120, 33]):
        t = np.cumsum(rng.uniform(0.05, 0.15, n))
        pos = np.cumsum(rng.normal(scale=0.05, size=(n, 3)), axis=0)
        for i in rng.choice(np.arange(1, n - 1), size=min(3, n - 2), replace=False):
            pos[i] += rng.normal(scale=3.0, size=3)
        tracks.append((t, pos, 2.0 + k % 5))
    got = jumps.excursions_of(tracks)
    assert got == [_excursions_per_column(t, pos, a) for t, pos, a in tracks]
    assert sum(map(bool, got)) > len(tracks) // 2  # glitches found, not only matched


def test_excursions_find_a_glitch_and_leave_a_step():
    t = np.arange(50) * 0.1
    pos = np.zeros((50, 3))
    pos[20] = [4.0, 0.0, 0.0]  # out and back in one frame
    pos[35:] += [0.0, 0.0, 6.0]  # a step that stays
    found = jumps.excursions(t, pos, 5.0)
    assert [(e.first, e.last) for e in found] == [(20, 20)]
    assert found[0].distance_m == pytest.approx(4.0)


@pytest.mark.parametrize("n_names", [300, 70_000])
def test_vehicle_codes_past_16_bits_group_as_strings_do(n_names):
    """Codes sorted as 16-bit keys (up to 65,536 names) or as they are (more) give the trajectory the strings give,
    with rows out of time order inside a vehicle and names absent from the kept rows."""
    rng = np.random.default_rng(n_names)
    names = np.array([f"uav{i}" for i in range(n_names)])
    rows = 2 * n_names
    codes = rng.integers(0, n_names, rows)
    t = np.round(rng.uniform(0, 10, rows), 2)
    pos = rng.normal(size=(rows, 3))
    by_codes = SwarmTrajectory.from_columns(t, VehicleCodes(names, codes), pos)
    by_strings = SwarmTrajectory.from_columns(t, names[codes], pos)
    assert by_codes.uav_ids == by_strings.uav_ids
    assert len(by_codes.uav_ids) == len(np.unique(codes)) < n_names
    assert by_codes.ingest.to_dict() == by_strings.ingest.to_dict()
    assert by_codes.ingest.out_of_order > 0
    for u in by_codes.uav_ids:
        np.testing.assert_array_equal(by_codes.tracks[u].t, by_strings.tracks[u].t)
        np.testing.assert_array_equal(by_codes.tracks[u].pos, by_strings.tracks[u].pos)


def test_stacked_flight_values_equal_the_stacked_norm_form():
    """Norms row by row, then stacked, give the values the norm of the (vehicles, steps, 3) stack gave."""
    from uav_debate_eval.sim.scenarios import simulate

    traj = simulate("grid", seed=1, n_uavs=9, duration_s=40.0, rate_hz=10.0, faults=["overspeed"]).traj
    kins = smooth_tracks(list(traj.tracks.values()))
    stacked = _stacked_values(kins)
    jerk = norm(np.stack([k.jerk for k in kins]))
    smoothness = np.sqrt(np.mean(jerk * jerk, axis=-1))
    assert [v["smoothness"] for v in stacked] == smoothness.tolist()
    assert len(set(smoothness.tolist())) > 1
    work = norm(np.stack([k.acc for k in kins]))
    assert [v["energy_efficiency"] > 0 for v in stacked] == [True] * len(kins)
    np.testing.assert_array_equal(np.stack([norm(k.acc) for k in kins]), work)
    one = vehicle_values(kins[0])
    assert set(one) == set(stacked[0])
