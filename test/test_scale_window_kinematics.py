"""Issue 35: vehicles sampled at the same instants share one stamps array, and a segment window's kinematics are its
flight's inside the window, filtered again only at its edges: the numbers a window smoothed on its own gives."""

from __future__ import annotations

import numpy as np
import pytest

from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.metrics import kinematics
from uav_debate_eval.metrics.kinematics import smooth_tracks
from uav_debate_eval.sim.scenarios import simulate

WINDOW = (7.3, 21.05)


def _columns(traj: SwarmTrajectory, jitter: float = 0.0):
    """The flight's samples as long-format columns (time-major, as a recorder writes them)."""
    rng = np.random.default_rng(3)
    rows = [(tr.t + jitter * rng.uniform(-1, 1, len(tr.t)), np.full(len(tr.t), u), tr.pos, tr.vel)
            for u, tr in traj.tracks.items()]
    t, ids, pos, vel = (np.concatenate(c) for c in zip(*rows, strict=True))
    order = np.argsort(t, kind="stable")
    return t[order], ids[order], pos[order], vel[order]


@pytest.fixture(scope="module")
def sim():
    return simulate("grid", seed=0, n_uavs=12, duration_s=30.0, faults=["near_miss"])


def _read(sim, jitter: float = 0.0) -> SwarmTrajectory:
    t, ids, pos, vel = _columns(sim.traj, jitter)
    return SwarmTrajectory.from_columns(t, ids, pos, vel=vel)


def _alone(window: SwarmTrajectory) -> list:
    """The window's tracks smoothed on their own (no link to the flight: the window's samples only)."""
    tracks = [tr.select(slice(None)) for tr in window.tracks.values()]
    return smooth_tracks(tracks)


def test_vehicles_at_the_same_instants_share_one_stamps_array(sim):
    t, ids, pos, vel = _columns(sim.traj)
    late = ids == "uav3"
    t[late] += 0.01  # one vehicle sampled 10 ms later than the others
    traj = SwarmTrajectory.from_columns(t, ids, pos, vel=vel)
    others = [tr.t for u, tr in traj.tracks.items() if u != "uav3"]
    assert all(s is others[0] for s in others)
    assert traj.tracks["uav3"].t is not others[0]
    with pytest.raises(ValueError, match="read-only"):
        others[0][0] = -1.0  # shared: one vehicle's write would move them all
    assert np.array_equal(traj.tracks["uav3"].t, others[0] + 0.01)
    window = traj.window(*WINDOW)
    cut = [tr.t for u, tr in window.tracks.items() if u != "uav3"]
    assert all(s is cut[0] for s in cut)  # cut once for them all
    assert np.array_equal(cut[0], others[0][(others[0] >= WINDOW[0]) & (others[0] <= WINDOW[1])])


def test_a_windows_kinematics_are_its_flights_inside_and_its_own_at_the_edges(sim, monkeypatch):
    traj = _read(sim)
    flight = smooth_tracks(list(traj.tracks.values()))
    window = traj.window(*WINDOW)
    filtered = []
    real = kinematics._filtered
    monkeypatch.setattr(kinematics, "_filtered", lambda vel, *a, **k: filtered.append(vel.shape) or real(vel, *a, **k))
    taken = smooth_tracks(list(window.tracks.values()))
    assert filtered and all(shape[1] < 50 for shape in filtered)  # only the edges were filtered
    own = _alone(window)
    h = max(kinematics._windows(kinematics.SMOOTH_WINDOW_S, taken[0].dt, len(taken[0].t))) // 2
    for got, want, whole in zip(taken, own, flight, strict=True):
        assert np.array_equal(got.t, want.t) and got.dt == want.dt
        j = int(np.argmin(np.abs(whole.t - got.t[0])))
        for name in ("pos", "vel", "acc", "jerk", "speed", "hspeed"):
            a, b = getattr(got, name), getattr(want, name)
            assert np.array_equal(a[:h], b[:h]) and np.array_equal(a[-h:], b[-h:]), name  # the edges: the window's
            assert np.allclose(a, b, rtol=0, atol=1e-9), name
            assert np.array_equal(a[h:-h], getattr(whole, name)[j + h:j + len(a) - h]), name  # inside: the flight's
        assert not np.array_equal(got.vel[:h], whole.vel[j:j + h])  # the window holds its edge value: not the flight's


@pytest.mark.parametrize("case", ["jittered stamps", "short window"])
def test_a_window_off_its_flights_grid_or_too_short_smooths_its_own(sim, case):
    traj = _read(sim, jitter=0.004 if case == "jittered stamps" else 0.0)
    smooth_tracks(list(traj.tracks.values()))
    window = traj.window(*(WINDOW if case == "jittered stamps" else (10.0, 13.0)))
    for got, want in zip(smooth_tracks(list(window.tracks.values())), _alone(window), strict=True):
        for name in ("t", "pos", "vel", "acc", "jerk"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), name
