"""Issue 15: the metrics' kd-tree pass over a large swarm takes each step's closest pair from the safety checker
when both ran on the same grid, and builds trees only where a pair comes within the radius; same results."""

from __future__ import annotations

import numpy as np
import pytest

from uav_debate_eval.metrics import swarm
from uav_debate_eval.safety import block_pairs
from uav_debate_eval.safety.checker import check_trajectory
from uav_debate_eval.sim.scenarios import simulate


@pytest.fixture(scope="module")
def grid():
    sim = simulate("grid", seed=0, n_uavs=80, duration_s=30.0, faults=["near_miss"])
    return sim.traj, sim.mission


def test_checker_pairs_give_the_same_pass_with_fewer_trees(grid, monkeypatch):
    traj, mission = grid
    safety = check_trajectory(traj, mission)
    assert safety.nearest is not None  # 80 vehicles: the kd-tree pass
    radius = mission.thresholds.proximity(mission.constraints)
    alone = swarm._snapshots(traj)
    shared = swarm._snapshots(traj)
    swarm.adopt_checker_pairs(shared, safety)
    assert "_checker_pairs" in shared.__dict__

    built = []
    real = swarm.cKDTree
    monkeypatch.setattr(swarm, "cKDTree", lambda *a, **k: built.append(1) or real(*a, **k))
    monkeypatch.setattr(block_pairs, "cKDTree", lambda *a, **k: built.append(1) or real(*a, **k))
    d0, p0, h0 = swarm._sparse_steps(alone, radius)
    trees_alone = len(built)
    d1, p1, h1 = swarm._sparse_steps(shared, radius)
    trees_shared = len(built) - trees_alone
    assert np.array_equal(d0, d1) and np.array_equal(p0, p1) and h0 == h1
    assert h0  # the near miss is inside the radius
    near = int((d0 <= radius * (1 + 1e-9)).sum())
    # a kd-tree per block of steps in which the swarm keeps its shape (safety.block_pairs); with the checker's
    # pairs, blocks only over the steps where a pair comes within the radius
    assert trees_shared < trees_alone < len(alone.t) // 4 and near < len(alone.t) // 2


def test_a_different_grid_is_not_adopted(grid):
    traj, mission = grid
    safety = check_trajectory(traj, mission)
    other = traj.resample(dt=0.2)
    swarm.adopt_checker_pairs(other, safety)
    assert "_checker_pairs" not in other.__dict__


def test_nearest_is_not_pickled(grid):
    import pickle

    traj, mission = grid
    safety = check_trajectory(traj, mission)
    back = pickle.loads(pickle.dumps(safety))
    assert back.nearest is None and back.separation.pairs == safety.separation.pairs


def test_resample_interpolates_a_grid_once_per_step(grid):
    """The checker and the metrics resample the same flight at the same step with different gap rules: one
    interpolation (read-only arrays), a validity of its own per call, values as a fresh trajectory gives."""
    from uav_debate_eval.core.trajectory import SwarmTrajectory

    traj, _ = grid
    a = traj.resample(max_gap_s=0.5)
    b = traj.resample(max_gap_s=0.01)
    assert a.pos is b.pos and a.vel is b.vel and not a.pos.flags.writeable
    assert a.valid is not b.valid and a.valid.sum() > b.valid.sum()
    a.valid[:] = False  # the checker narrows its own validity in place
    fresh = SwarmTrajectory(dict(traj.tracks), traj.ingest).resample(max_gap_s=0.5)
    np.testing.assert_array_equal(fresh.pos, b.pos)
    assert fresh.valid.any() and not a.valid.any()
    assert traj.resample(dt=0.2).pos is not a.pos


def test_tracks_smoothed_together_equal_one_at_a_time():
    """smooth_tracks filters the tracks of one grid as a stack: the same numbers as smooth_kinematics per track,
    also for tracks of other lengths and a track too short to filter, and it fills the same cache."""
    from uav_debate_eval.metrics import kinematics as kin

    sim = simulate("formation", seed=0, faults=["near_miss"])
    tracks = list(sim.traj.tracks.values())
    tracks[1] = tracks[1].slice(0.0, 20.0)  # another grid length
    tracks[2] = tracks[2].slice(0.0, 0.0)  # one sample
    alone = [kin._smooth(tr.select(slice(None)), kin.SMOOTH_WINDOW_S, None) for tr in tracks]
    together = kin.smooth_tracks(tracks)
    for a, b, tr in zip(alone, together, tracks, strict=True):
        for field in ("t", "pos", "vel", "acc", "jerk"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        assert a.dt == b.dt and kin.smooth_kinematics(tr) is b
