"""Clean simulated flights: deterministic per seed, physically limited, and safe with margin."""

import numpy as np
import pytest
from scipy.spatial import cKDTree

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.sim.paths import Bump, Route
from uav_debate_eval.sim.scenarios import SCENARIOS, simulate

CONTROLLER_ACCEL = 2.5  # Plan.limits accel
NAMES = sorted(SCENARIOS)


@pytest.fixture(scope="module")
def clean():
    return {name: simulate(name, seed=3) for name in NAMES}


def _stack(result):
    """(T, N, 3) positions on the shared clock; clean flights have every sample."""
    tracks = list(result.traj.tracks.values())
    return tracks[0].t, np.stack([tr.pos for tr in tracks], axis=1)


def test_registry_names_and_defaults():
    assert NAMES == ["formation", "grid", "surveillance", "swap", "tracking"]
    assert SCENARIOS["formation"].default_uavs == 5
    assert SCENARIOS["formation"].constraints == {"min_separation_m": 0.5, "max_speed_mps": 3.0,
                                                  "max_vertical_speed_mps": 2.0, "stale_timeout_s": 0.5}


def test_same_seed_identical_other_seed_different():
    a, b, c = simulate("formation", seed=1), simulate("formation", seed=1), simulate("formation", seed=2)
    for u in a.traj.uav_ids:
        np.testing.assert_array_equal(a.traj.tracks[u].pos, b.traj.tracks[u].pos)
        np.testing.assert_array_equal(a.traj.tracks[u].vel, b.traj.tracks[u].vel)
        np.testing.assert_array_equal(a.traj.tracks[u].battery_pct, b.traj.tracks[u].battery_pct)
        assert not np.array_equal(a.traj.tracks[u].pos, c.traj.tracks[u].pos)
    t1 = simulate("tracking", seed=1).mission.waypoints["uav1"]
    assert t1 != simulate("tracking", seed=2).mission.waypoints["uav1"]


@pytest.mark.parametrize("name", NAMES)
def test_shape_rate_and_columns(clean, name):
    r = clean[name]
    spec = SCENARIOS[name]
    assert len(r.traj.uav_ids) == spec.default_uavs
    assert r.traj.n_samples == spec.default_uavs * 1201  # 60 s at 20 Hz, both ends included
    tr = r.traj.tracks["uav1"]
    assert tr.t[0] == 0.0 and tr.t[-1] == 60.0
    np.testing.assert_allclose(np.diff(tr.t), 0.05, atol=1e-9)
    assert set(np.unique(tr.link_ok)) == {1.0} and set(np.unique(tr.gps_ok)) == {1.0}
    assert 90.0 < tr.battery_pct[-1] < tr.battery_pct[0] <= 100.0
    assert r.traj.ingest.dropped == {} and r.traj.ingest.gaps == []
    assert [f.kind for f in r.truth if f.kind != "route_turn"] == []


@pytest.mark.parametrize("name", NAMES)
def test_limits_respected_with_margin(clean, name):
    r = clean[name]
    c = r.mission.constraints
    for tr in r.traj.tracks.values():
        assert tr.speed.max() <= 0.9 * c.max_speed_mps
        assert np.abs(tr.vel[:, 2]).max() <= 0.9 * c.max_vertical_speed_mps
        assert np.linalg.norm(tr.acc, axis=1).max() <= CONTROLLER_ACCEL + 0.5
        # no teleporting: the recorded positions agree with the recorded velocities
        step = np.linalg.norm(np.diff(tr.pos, axis=0), axis=1)
        assert step.max() <= 0.05 * c.max_speed_mps
        assert np.diff(tr.t).max() <= 0.5 * c.stale_timeout_s


@pytest.mark.parametrize("name", NAMES)
def test_clean_flight_is_safe_with_margin(clean, name):
    r = clean[name]
    c = r.mission.constraints
    t, pos = _stack(r)
    n = pos.shape[1]
    if n > 1:
        d = np.linalg.norm(pos[:, :, None] - pos[:, None], axis=-1)
        d[:, np.arange(n), np.arange(n)] = np.inf
        # above the proximity warning (2 x min separation) too, not just the hard limit
        assert d.min() >= 1.1 * 2.0 * c.min_separation_m
    lo, hi = np.array(c.geofence.min), np.array(c.geofence.max)
    room = np.minimum(pos - lo, hi - pos).min(axis=(0, 1))
    assert (room >= 0.1 * (hi - lo)).all(), room


@pytest.mark.parametrize("name", NAMES)
def test_mission_references_are_flown(clean, name):
    r = clean[name]
    m = r.mission
    assert m.uavs == r.traj.uav_ids
    for u, points in m.waypoints.items():
        pos = r.traj.tracks[u].pos
        reach = [np.linalg.norm(pos - np.array(p), axis=1).min() for p in points]
        assert max(reach) <= m.waypoint_tolerance_m, (u, reach)
    if m.formation_offsets:
        ids = r.traj.uav_ids
        _, pos = _stack(r)
        off = np.array([m.formation_offsets[u] for u in ids])
        err = (pos - pos.mean(axis=1, keepdims=True)) - (off - off.mean(axis=0))
        assert np.linalg.norm(err, axis=2).max() <= m.formation_tolerance_m


def test_route_corners_are_listed_as_sharp_turns(clean):
    turns = [f for f in clean["formation"].truth if f.kind == "route_turn"]
    assert len(turns) == 3
    tr = clean["formation"].traj.tracks["uav1"]
    for f in turns:
        assert f.expect_event == "sharp_turn" and f.expect_constraint is None
        assert f.detail["heading_change_deg"] == pytest.approx(90.0, abs=1.0)
        inside = (tr.t >= f.t_start) & (tr.t <= f.t_end)
        change = np.degrees(tr.heading[inside][-1] - tr.heading[inside][0])
        assert abs(change) == pytest.approx(90.0, abs=10.0)
    grid_turns = [f for f in clean["grid"].truth if f.kind == "route_turn"]
    assert [round(f.detail["heading_change_deg"]) for f in grid_turns] == [45]
    assert all(f.detail["heading_change_deg"] > 30 for r in clean.values() for f in r.truth)


def test_large_grid_stays_separated():
    r = simulate("grid", n_uavs=200, duration_s=20, rate_hz=5)
    assert len(r.traj.uav_ids) == 200
    _, pos = _stack(r)
    c = r.mission.constraints
    worst = min(cKDTree(p).query(p, k=2)[0][:, 1].min() for p in pos)
    assert worst >= 1.1 * 2.0 * c.min_separation_m
    assert max(tr.speed.max() for tr in r.traj.tracks.values()) <= 0.9 * c.max_speed_mps


def test_ticks_replay_in_time_order():
    r = simulate("formation", n_uavs=3, duration_s=12, faults=["telemetry_dropout@4"])
    ticks = list(r.ticks())
    times = [t for t, _ in ticks]
    assert times == sorted(times) and len(times) == 241
    drop = next(f for f in r.truth if f.kind == "telemetry_dropout")
    for t, batch in ticks:
        names = [u for u, *_ in batch]
        silent = drop.t_start < t < drop.t_end
        assert (drop.uavs[0] not in names) == silent
        for u, pos, vel, link in batch:
            k = np.searchsorted(r.traj.tracks[u].t, t)
            np.testing.assert_array_equal(pos, r.traj.tracks[u].pos[k])
            assert pos.shape == (3,) and vel.shape == (3,) and link is True
    assert sum(len(b) for _, b in ticks) == r.traj.n_samples


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "nope"}, "unknown scenario 'nope'"),
    ({"name": "formation", "n_uavs": 9}, r"takes 3-5 vehicle\(s\)"),
    ({"name": "tracking", "n_uavs": 2}, "takes exactly 1 vehicle"),
    ({"name": "grid", "rate_hz": 0}, "rate must be"),
    ({"name": "grid", "duration_s": 5}, "duration must be"),
])
def test_bad_arguments_are_input_errors(kwargs, message):
    with pytest.raises(InputError, match=message):
        simulate(**kwargs)



def test_route_fillets_and_speed_profile():
    route = Route(np.array([(0, 0, 5), (10, 0, 5), (10, 10, 5)], dtype=float), speed=2.0, radius=2.0, t_start=1.0)
    assert route.length == pytest.approx(16.0 + np.pi, abs=2e-3)  # 2 x (10 - 2) straight + quarter circle r=2
    assert route.t_end - route.t_start == pytest.approx(route.length / 2.0 + 2.0 / 0.5)
    (corner,) = route.corners
    assert corner.angle_deg == pytest.approx(90.0)
    assert corner.t_out - corner.t_in == pytest.approx(np.pi / 2.0, abs=0.01)  # arc length pi at 2 m/s
    t = np.linspace(0.0, route.t_end + 1.0, 2001)
    pos = np.array([route.at(x)[0] for x in t])
    vel = np.array([route.at(x)[1] for x in t])
    np.testing.assert_allclose(np.gradient(pos, t, axis=0)[1:-1], vel[1:-1], atol=0.05)
    assert np.linalg.norm(vel, axis=1).max() == pytest.approx(2.0)
    np.testing.assert_allclose(pos[-1], (10, 10, 5))
    bump = Bump(2.0, 1.0, 0.5, 2.0)
    assert [bump(x)[0] for x in (2.0, 2.5, 3.2, 4.5, 5.5)] == [0.0, 0.5, 1.0, 0.5, 0.0]
    assert bump(2.5)[1] == pytest.approx(1.5) and bump(4.5)[1] == pytest.approx(-0.75)
