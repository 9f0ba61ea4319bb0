"""Issue 15: a segment window is evaluated on its flight's grid, and its check takes the flight checker's per-step
results for the steps it shares; the steps it does not share (a gap at its edge) are computed, with the same result."""

from __future__ import annotations

import numpy as np
import pytest

from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.metrics.compute import compute_metrics
from uav_debate_eval.quality.assessment import assess
from uav_debate_eval.safety import grid_pairs
from uav_debate_eval.safety.checker import check_trajectory
from uav_debate_eval.sim.scenarios import simulate

WINDOW = (9.0, 19.0)


@pytest.fixture(scope="module")
def flight():
    """80 vehicles (the kd-tree path) with a near miss, uav2 silent for 0.2 s across the window's start (within the
    stale timeout and the metrics' gap limit: the flight interpolates across it, the window has no uav2 before its
    first sample)."""
    sim = simulate("grid", seed=0, n_uavs=80, duration_s=30.0, faults=["near_miss"])
    tracks = dict(sim.traj.tracks)
    tr = tracks["uav2"]
    tracks["uav2"] = tr.select(~((tr.t > 8.97) & (tr.t < 9.13)))
    traj = SwarmTrajectory(tracks, sim.traj.ingest, sim.traj.name, sim.traj.t0)
    quality = assess(traj, sim.mission)
    return quality.traj, sim.mission, check_trajectory(quality.traj, sim.mission, quality=quality)


def test_a_window_is_on_the_flights_grid(flight):
    traj, _, _ = flight
    window = traj.window(*WINDOW)
    assert window.flight is traj and window.sample_period == traj.sample_period
    own, whole = window.resample(max_gap_s=0.5), traj.resample(max_gap_s=0.5)
    a = int(np.searchsorted(whole.t, window.t_start - 1e-9))
    assert own.t[0] >= window.t_start - 1e-9 and len(own.t) > 50
    np.testing.assert_array_equal(own.t, whole.t[a:a + len(own.t)])  # the same instants, bit for bit
    np.testing.assert_array_equal(own.pos, whole.pos[a:a + len(own.t)])


def test_a_windows_check_takes_the_flights_steps_and_computes_the_others(flight, monkeypatch):
    traj, mission, safety = flight
    window = traj.window(*WINDOW)
    alone = check_trajectory(window, mission, predict=False)
    computed: list[int] = []
    real = grid_pairs.pairs_sparse

    def counting(snaps, *args):
        computed.extend(args[-1])  # the steps (pairs_shared passes them positionally)
        return real(snaps, *args)

    monkeypatch.setattr(grid_pairs, "pairs_sparse", counting)
    shared = check_trajectory(window, mission, predict=False, flight=safety)
    steps = len(shared.separation.t)
    assert 0 < len(computed) < steps // 4  # the steps where uav2's gap differs at the edge, not the whole window
    assert shared.to_dict() == alone.to_dict()
    assert any(v.constraint == "min_separation" for v in shared.violations)  # close pairs were taken over too
    np.testing.assert_array_equal(shared.separation.d_min, alone.separation.d_min)
    assert shared.separation.pairs == alone.separation.pairs
    np.testing.assert_array_equal(shared.nearest.pair_index, alone.nearest.pair_index)
    assert compute_metrics(window, mission, safety).to_dict() == compute_metrics(window, mission).to_dict()


def test_a_window_with_other_vehicles_is_checked_on_its_own(flight):
    traj, mission, safety = flight
    fewer = SwarmTrajectory({u: tr for u, tr in traj.tracks.items() if u != "uav5"}, flight=traj)
    window = fewer.window(*WINDOW)
    result = check_trajectory(window, mission, predict=False, flight=safety)
    assert result.to_dict() == check_trajectory(window, mission, predict=False).to_dict()


def test_a_windows_formation_errors_are_the_flights_rows_and_its_own_at_the_edge(flight):
    """Offsets-reference formation errors are per step: a window on the flight's grid takes the flight's rows where
    its valid vehicles are the flight's, and computes the others (uav2's gap at its start); the same numbers as the
    window computed alone."""
    from dataclasses import replace

    from uav_debate_eval.metrics import swarm

    traj, mission, _ = flight
    whole = swarm.snapshots(traj)
    err, ref = swarm.formation_error(whole, mission)
    assert ref == "offsets"
    snap = swarm.snapshots(traj.window(*WINDOW))
    assert snap.__dict__["_flight_rows"][0] is whole
    alone = replace(snap)  # the same arrays, without the link to the flight
    assert "_flight_rows" not in alone.__dict__
    left = swarm._flights_rows(snap, mission, np.full(snap.valid.shape, np.nan))
    assert left is not None and 0 < len(left) < len(snap.t) // 4  # the edge steps are computed, the rest taken
    got, want = swarm.formation_error(snap, mission)[0], swarm._formation_error(alone, mission)[0]
    np.testing.assert_array_equal(got, want)
