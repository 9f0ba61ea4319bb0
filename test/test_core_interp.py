"""core.interp: np.interp for many vehicles at once gives np.interp's numbers, bit for bit."""

import numpy as np
import pytest

from uav_debate_eval.core.interp import interp_columns, interp_vehicles, same_stamps


def _reference(x, stamps, values):
    return np.stack([np.column_stack([np.interp(x, t, v[:, c]) for c in range(v.shape[1])])
                     for t, v in zip(stamps, values, strict=True)], axis=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_columns_equal_np_interp_inside_outside_and_on_the_stamps(seed):
    rng = np.random.default_rng(seed)
    xp = np.cumsum(rng.uniform(0.05, 0.15, 400))
    x = xp[0] - 0.35 + np.arange(460) * 0.1000000000000005  # a drifting grid: before, inside and after the stamps
    x[[7, 50, 51]] = xp[[3, 40, 41]]  # on stamps
    x[-1] = xp[-1]
    fp = rng.normal(size=(400, 9, 3)) * 50.0
    fp[10:20, 2] = 0.0
    fp[30, 4, 1] = -0.0
    got = interp_columns(x, xp, fp)
    want = np.stack([np.column_stack([np.interp(x, xp, fp[:, v, c]) for c in range(3)]) for v in range(9)], axis=1)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_vehicles_with_their_own_stamps_a_single_sample_and_non_finite_values():
    rng = np.random.default_rng(3)
    base = np.arange(0.0, 30.0, 0.1)
    stamps = [base, base.copy(), base[5:200], np.array([4.0]), base + 0.03, base]
    values = [rng.normal(size=(len(t), 3)) for t in stamps]
    values[5][17, 0] = np.inf
    x = np.arange(-1.0, 31.0, 0.07)
    assert same_stamps(stamps) == [[0, 1, 5], [2], [3], [4]]
    np.testing.assert_array_equal(interp_vehicles(x, stamps, values), _reference(x, stamps, values))


def test_a_swarms_common_grid_is_the_one_np_interp_gives():
    """SwarmTrajectory.resample on a simulated swarm (one stamp array for every vehicle) and on a window, whose steps
    are the flight's: np.interp of the flight's samples at those instants (at an edge step a hair beyond the window's
    last sample that is the flight's value there, not the window's last sample held)."""
    from uav_debate_eval.sim.scenarios import simulate

    traj = simulate("grid", seed=0, n_uavs=70, duration_s=40.0).traj
    stamps = [tr.t for tr in traj.tracks.values()]
    for part in (traj, traj.window(3.05, 27.33)):
        snaps = part.resample()
        np.testing.assert_array_equal(snaps.pos, _reference(snaps.t, stamps, [tr.pos for tr in traj.tracks.values()]))
        np.testing.assert_array_equal(snaps.vel, _reference(snaps.t, stamps, [tr.vel for tr in traj.tracks.values()]))


@pytest.mark.parametrize("window", [None, (3.05, 27.33)])
def test_kinematics_of_tracks_smoothed_together_equal_each_track_alone(window):
    """smooth_tracks interpolates the tracks sharing stamps and grid together and filters them stacked: every
    array equals smooth_kinematics of that track alone (fresh tracks), also for a vehicle with its own stamps."""
    from uav_debate_eval.core import SwarmTrajectory
    from uav_debate_eval.metrics.kinematics import smooth_kinematics, smooth_tracks
    from uav_debate_eval.sim.scenarios import simulate

    traj = simulate("grid", seed=0, n_uavs=70, duration_s=40.0, faults=["sharp_turn"]).traj
    cols = {k: np.concatenate([getattr(tr, k) for tr in traj.tracks.values()]) for k in ("t", "pos", "vel")}
    ids = np.concatenate([[u] * len(tr) for u, tr in traj.tracks.items()])
    own = ids == "uav5"
    cols["t"][own] += 0.013  # one vehicle sampled at its own stamps
    traj = SwarmTrajectory.from_columns(cols["t"], ids, cols["pos"], vel=cols["vel"])
    part = traj if window is None else traj.window(*window)
    together = smooth_tracks(list(part.tracks.values()))
    fresh = part.window(part.t_start, part.t_end)
    for k, tr in zip(together, fresh.tracks.values(), strict=True):
        alone = smooth_kinematics(tr)
        for name in ("t", "pos", "vel", "acc", "jerk"):
            np.testing.assert_array_equal(getattr(k, name), getattr(alone, name))
        assert k.dt == alone.dt


def test_grid_validity_per_stamp_group_equals_each_vehicles_own():
    """resample's validity is computed once per group of vehicles sharing stamps: per vehicle, inside its own time
    range and not inside one of its own silences longer than max_gap_s."""
    from uav_debate_eval.core import SwarmTrajectory
    from uav_debate_eval.sim.scenarios import simulate

    traj = simulate("grid", seed=0, n_uavs=70, duration_s=40.0).traj
    tracks = dict(traj.tracks)
    tracks["uav4"] = tracks["uav4"].select(np.r_[0:100, 112:300])  # a silence of 1.2 s, and an early end
    tracks["uav9"] = tracks["uav9"].select(np.r_[30:len(tracks["uav9"])])  # a late start
    traj = SwarmTrajectory(tracks, traj.ingest)
    for gap in (None, 0.5):
        snaps = traj.resample(max_gap_s=gap)
        for j, tr in enumerate(traj.tracks.values()):
            inside = (snaps.t >= tr.t[0] - 1e-9) & (snaps.t <= tr.t[-1] + 1e-9)
            if gap is not None:
                k = np.clip(np.searchsorted(tr.t, snaps.t, side="right"), 1, len(tr) - 1)
                inside &= (tr.t[k] - tr.t[k - 1]) <= gap
            np.testing.assert_array_equal(snaps.valid[:, j], inside)
        assert not snaps.valid[:, 3].all() and not snaps.valid[:, 8].all() and snaps.valid[:, 0].all()
