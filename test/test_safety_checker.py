"""Offline checker: exact intervals, vehicles and worst values on hand-built 10 Hz trajectories."""

import numpy as np
import pytest
from safety_support import BOX_CONSTRAINTS

from uav_debate_eval.core import SwarmTrajectory
from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.safety.checker import check_trajectory, merge_runs, verdict_label

# The hand-built tracks below teleport between samples (no vehicle can): the plausibility bound is lifted so these
# tests check the interval arithmetic; test_quality_*.py checks how artefacts are told from hazards.
MISSION = BOX_CONSTRAINTS + "thresholds: {max_accel_mps2: 100000}\n"

T = np.arange(101) / 10.0  # 0.0 .. 10.0 s at 10 Hz


def mission(text: str = MISSION):
    return parse_mission(text)


def build(tracks: dict) -> SwarmTrajectory:
    """tracks: uav -> (t, pos (n,3), vel (n,3))."""
    t = np.concatenate([v[0] for v in tracks.values()])
    ids = np.concatenate([[u] * len(v[0]) for u, v in tracks.items()])
    pos = np.concatenate([v[1] for v in tracks.values()])
    vel = np.concatenate([v[2] for v in tracks.values()])
    return SwarmTrajectory.from_columns(t, ids, pos, vel=vel)


def hover(x: float, y: float = 0.0, z: float = 2.0, t: np.ndarray = T):
    pos = np.column_stack([np.full(len(t), x), np.full(len(t), y), np.full(len(t), z)])
    return t, pos, np.zeros_like(pos)


def with_x(t: np.ndarray, x: np.ndarray, y: float = 0.0):
    pos = np.column_stack([x, np.full(len(t), y), np.full(len(t), 2.0)])
    return t, pos, np.zeros_like(pos)


def intervals(result, constraint):
    return [(v.t_start, v.t_end, v.uavs, v.worst_value, v.limit) for v in result.violations
            if v.constraint == constraint]


def test_min_separation_exact_interval_pair_and_veto():
    x2 = np.where((T >= 4.0 - 1e-9) & (T <= 5.0 + 1e-9), 0.3, 2.0)
    r = check_trajectory(build({"uav1": hover(0.0), "uav2": with_x(T, x2), "uav3": hover(-3.0)}), mission())
    assert intervals(r, "min_separation") == [(4.0, 5.0, ["uav1", "uav2"], 0.3, 0.5)]
    assert [v.constraint for v in r.violations] == ["min_separation"]
    # restored at the next sample (5.1) and held 1 s
    assert r.veto_intervals == [(4.0, 6.1)]
    assert r.vetoed and r.label == "risky" and verdict_label(r) == "risky"
    assert r.margins["min_separation"]["worst_value"] == pytest.approx(0.3)
    assert r.margins["min_separation"]["ratio"] == pytest.approx(1.4)
    k = int(np.nanargmin(r.separation.d_min))
    assert r.separation.pairs[k] == ("uav1", "uav2") and r.separation.d_min[k] == pytest.approx(0.3)
    d = r.to_dict()
    assert d["violations"][0]["constraint"] == "min_separation" and d["closest_approach"]["uavs"] == ["uav1", "uav2"]


def test_exceedances_closer_than_the_hold_time_are_one_episode():
    near = ((T > 3.95) & (T < 4.25)) | ((T > 4.35) & (T < 4.65)) | ((T > 5.45) & (T < 5.65)) | (
        (T > 6.75) & (T < 6.85))
    x2 = np.where(near, 0.4, 2.0)
    r = check_trajectory(build({"uav1": hover(0.0), "uav2": with_x(T, x2)}), mission())
    # 4.0-4.2, 4.4-4.6 and 5.5-5.6 lie within the 1 s veto hold of each other: one hazard episode of 8 samples;
    # 6.8 comes 1.2 s after 5.6: a new episode
    assert intervals(r, "min_separation") == [(4.0, 5.6, ["uav1", "uav2"], 0.4, 0.5),
                                              (6.8, 6.8, ["uav1", "uav2"], 0.4, 0.5)]
    assert [v.samples for v in r.violations] == [8, 1]
    assert r.violations[0].to_dict()["samples"] == 8
    assert r.veto_intervals == [(4.0, 6.7), (6.8, 7.9)]


def test_max_speed_and_max_vertical_speed():
    t, pos, vel = hover(0.0)
    vel = vel.copy()
    fast = (T > 1.95) & (T < 2.55)
    vel[fast, 0] = 4.0
    climb = (T > 2.95) & (T < 3.25)
    vel[climb, 2] = 2.5
    r = check_trajectory(build({"uav1": (t, pos, vel), "uav2": hover(3.0)}), mission())
    assert intervals(r, "max_speed") == [(2.0, 2.5, ["uav1"], 4.0, 3.0)]
    assert intervals(r, "max_vertical_speed") == [(3.0, 3.2, ["uav1"], 2.5, 2.0)]
    assert r.margins["max_speed"]["worst_value"] == 4.0


def test_geofence_interval_and_time_to_geofence_warning_first():
    x = T * 1.0 - 0.0  # 1 m/s along +x from the centre, leaves the 5 m wall after t = 5
    t, pos, vel = with_x(T, x)
    vel = vel.copy()
    vel[:, 0] = 1.0
    r = check_trajectory(build({"uav1": (t, pos, vel), "uav2": hover(0.0, y=3.0)}), mission())
    assert intervals(r, "geofence") == [(5.1, 10.0, ["uav1"], 5.0, 0.0)]
    warn = [w for w in r.warnings if w["kind"] == "time_to_geofence"]
    assert warn == [{"t": 3.0, "kind": "time_to_geofence", "uavs": ["uav1"], "value": 2.0, "limit": 2.0,
                     "t_predicted": 5.0}]
    assert r.veto_intervals == [(5.1, 10.0)]  # still up when the data ends


def test_predictive_cpa_warning_before_the_violation():
    x1, x2 = -3.0 + T, 3.0 - T  # head-on at 1 m/s each, meet at t = 3
    a, b = with_x(T, x1), with_x(T, x2)
    a[2][:, 0], b[2][:, 0] = 1.0, -1.0
    r = check_trajectory(build({"uav1": a, "uav2": b}), mission())
    assert intervals(r, "min_separation") == [(2.8, 3.2, ["uav1", "uav2"], 0.0, 0.5)]
    cpa = [w for w in r.warnings if w["kind"] == "cpa"]
    assert len(cpa) == 1
    w = cpa[0]
    assert w["t"] == 0.8 and w["uavs"] == ["uav1", "uav2"] and w["t_predicted"] == 2.8
    assert w["value"] == pytest.approx(0.4) and w["limit"] == 0.5
    assert w["t"] < r.violations[0].t_start


def test_stale_gap_and_silent_at_end():
    gap = (T <= 3.0 + 1e-9) | (T >= 4.5 - 1e-9)
    r = check_trajectory(build({"uav1": hover(0.0), "uav2": hover(2.0, t=T[gap]), "uav3": hover(-2.0, t=T[T <= 8.0])}),
                         mission())
    assert intervals(r, "stale_data") == [(3.5, 4.5, ["uav2"], 1.5, 0.5), (8.5, 10.0, ["uav3"], 2.0, 0.5)]
    assert r.veto_intervals == [(3.5, 5.5), (8.5, 10.0)]
    kinds = [f["kind"] for f in r.integrity_faults]
    assert kinds.count("gap") == 1
    # a silent vehicle is not at a known place: no separation data for it inside the gap
    k = int(np.searchsorted(r.separation.t, 4.0 - 1e-9))
    assert r.separation.pairs[k] == ("uav1", "uav3")


def test_without_a_stale_timeout_no_separation_is_interpolated_across_a_silence():
    """Two vehicles parked 0.3 m apart, both logs silent 3-7 s, no stale timeout in the mission (a real pair of
    ArduCopter logs): two violations, not one over the silence the report says holds no data."""
    quiet = (T <= 3.0 + 1e-9) | (T >= 7.0 - 1e-9)
    text = "constraints:\n  min_separation_m: 0.5\nthresholds: {max_accel_mps2: 100000}\n"
    r = check_trajectory(build({"uav1": hover(0.0, t=T[quiet]), "uav2": hover(0.3, t=T[quiet])}), mission(text))
    (a0, b0, *_), (a1, b1, *_) = intervals(r, "min_separation")
    assert (a0, b0, b1) == (0.0, 3.0, 10.0) and 7.0 <= a1 <= 7.1 + 1e-9  # (the grid's step nearest 7.0 s rounds)
    inside = (r.separation.t > 3.0 + 1e-9) & (r.separation.t < 7.0 - 1e-9)
    assert inside.any() and np.isnan(r.separation.d_min[inside]).all()
    # a vehicle logging slower than the others is not silent between its own samples
    slow = T[::10]  # 1 Hz beside 10 Hz
    r = check_trajectory(build({"uav1": hover(0.0), "uav2": hover(0.3, t=slow)}), mission(text))
    (first, last, *_), = intervals(r, "min_separation")
    assert first == 0.0 and last > 9.5


def test_nan_duplicates_and_out_of_order_give_the_same_result_and_are_reported():
    x2 = np.where((T >= 4.0 - 1e-9) & (T <= 5.0 + 1e-9), 0.3, 2.0)
    clean = {"uav1": hover(0.0), "uav2": with_x(T, x2)}
    t = np.concatenate([v[0] for v in clean.values()])
    ids = np.concatenate([[u] * len(v[0]) for u, v in clean.items()])
    pos = np.concatenate([v[1] for v in clean.values()])
    rng = np.random.default_rng(3)
    order = rng.permutation(len(t))
    t, ids, pos = t[order], ids[order], pos[order]
    t = np.concatenate([t, [4.55, 1.0, np.nan], t[:2]])
    ids = np.concatenate([ids, ["uav1", "uav2", "uav1"], ids[:2]])
    pos = np.concatenate([pos, [[np.nan, 0, 2], [0, np.inf, 2], [0, 0, 2]], pos[:2]])
    r = check_trajectory(SwarmTrajectory.from_columns(t, ids, pos), mission())
    assert intervals(r, "min_separation") == [(4.0, 5.0, ["uav1", "uav2"], 0.3, 0.5)]
    faults = {f["kind"]: f for f in r.integrity_faults}
    assert faults["dropped_nan"]["count"] == 3
    assert faults["dropped_duplicate"]["count"] == 2
    assert faults["out_of_order"]["count"] > 0
    # the 1.7 m step at 4.0 and back at 5.1 is impossible at 5 x max_speed: two position jumps
    jumps = [(f["uavs"], f["t"]) for f in r.integrity_faults if f["kind"] == "position_jump"]
    assert jumps == [(["uav2"], 4.0), (["uav2"], 5.1)]


@pytest.mark.parametrize(("distance", "speed", "label"), [
    (0.54, 0.0, "borderline"),  # 0.54 m is within 10 % of 0.5 m
    (0.60, 0.0, "safe"),
    (2.00, 2.8, "borderline"),  # 2.8 m/s is within 10 % of 3 m/s
    (2.00, 2.5, "safe"),
    (0.45, 0.0, "risky"),
])
def test_label_rule(distance, speed, label):
    a = hover(0.0)
    b = hover(distance)
    a[2][:, 1] = speed  # a moves along y in the velocity column only
    r = check_trajectory(build({"uav1": a, "uav2": b}), mission())
    assert r.label == label
    assert r.vetoed == (label == "risky")


def test_unchecked_constraints_and_empty_trajectory():
    r = check_trajectory(build({"uav1": hover(0.0), "uav2": hover(0.1)}), parse_mission("mission: {name: x}"))
    assert r.violations == [] and r.label == "inconclusive" and r.margins == {}  # CONTRACT §3: nothing checked
    empty = check_trajectory(SwarmTrajectory({}), mission())
    assert empty.label == "safe" and not empty.vetoed


def test_merge_runs_groups_by_key_and_gap():
    key = np.array([1, 0, 1, 1, 0])
    t = np.array([0.0, 0.0, 0.1, 0.5, 0.1])
    v = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert merge_runs(key, t, v, gap=0.2) == [(0, 0.0, 0.1, 5.0, 0.1, 2), (1, 0.0, 0.1, 3.0, 0.1, 2),
                                              (1, 0.5, 0.5, 4.0, 0.5, 1)]


def test_checker_separation_equals_naive_on_random_swarms():
    rng = np.random.default_rng(7)
    n, steps = 40, 30
    t = np.repeat(np.arange(steps) / 10.0, n)
    ids = np.tile([f"u{k}" for k in range(n)], steps)
    pos = rng.uniform(-4, 4, size=(steps * n, 3))
    traj = SwarmTrajectory.from_columns(t, ids, pos, vel=np.zeros_like(pos))
    r = check_trajectory(traj, parse_mission("constraints: {min_separation_m: 0.6}"))
    P = pos.reshape(steps, n, 3)
    expected = set()
    for s in range(steps):
        d = np.linalg.norm(P[s][:, None] - P[s][None], axis=-1)
        d[np.tril_indices(n)] = np.inf
        assert r.separation.d_min[s] == pytest.approx(d.min())
        for i, j in zip(*np.nonzero(d < 0.6), strict=True):
            expected.add((s / 10.0, tuple(sorted((f"u{i}", f"u{j}")))))
    got = set()
    for v in r.violations:
        for s in range(steps):
            if v.t_start - 1e-9 <= s / 10.0 <= v.t_end + 1e-9:
                got.add((s / 10.0, tuple(v.uavs)))
    # every naive (time, pair) hit lies in an interval of that pair and every interval starts/ends on a hit
    assert expected <= got
    for v in r.violations:
        assert (v.t_start, tuple(v.uavs)) in expected and (v.t_end, tuple(v.uavs)) in expected


def test_dense_block_path_equals_per_step_kdtree_path(monkeypatch):
    """Small swarms take the all-pairs block path; it must give exactly what the kd-tree loop gives."""
    from uav_debate_eval.safety import checker
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("formation", seed=3, faults=["near_miss", "overspeed", "telemetry_dropout"])
    dense = checker.check_trajectory(sim.traj, sim.mission)
    monkeypatch.setattr(checker, "DENSE_MAX_VEHICLES", 0)
    sparse = checker.check_trajectory(sim.traj, sim.mission)
    assert [v.constraint for v in dense.violations].count("min_separation") >= 1
    assert dense.to_dict() == sparse.to_dict()
    np.testing.assert_array_equal(dense.separation.d_min, sparse.separation.d_min)
    assert list(dense.separation.pairs) == list(sparse.separation.pairs)


@pytest.mark.parametrize("spec", [("formation", {}), ("grid", {"n_uavs": 80, "duration_s": 50.0})])
def test_without_predictions_only_the_warnings_go(spec):
    """predict=False (a segment window's metrics) leaves out the CPA and geofence warnings and nothing else."""
    from uav_debate_eval.sim.scenarios import simulate

    name, overrides = spec
    sim = simulate(name, seed=0, faults=["near_miss", "overspeed"], **overrides)
    full = check_trajectory(sim.traj, sim.mission)
    lean = check_trajectory(sim.traj, sim.mission, predict=False)
    assert full.warnings and not lean.warnings
    a, b = full.to_dict(), lean.to_dict()
    a.pop("warnings"), b.pop("warnings")
    assert a == b
    np.testing.assert_array_equal(full.separation.d_min, lean.separation.d_min)
    assert full.separation.pairs == lean.separation.pairs and full.integrity_faults == lean.integrity_faults


def test_a_large_grid_checked_in_two_halves_equals_one_pass(monkeypatch, tmp_path):
    """The kd-tree pass of a large grid runs its second half in a forked child: the same result, also when the
    child is lost (the second half is then checked here)."""
    import os

    from uav_debate_eval.safety import grid_pairs
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("grid", seed=0, n_uavs=80, duration_s=50.0, faults=["near_miss", "overspeed"])
    one = check_trajectory(sim.traj, sim.mission)
    assert one.violations and one.warnings
    monkeypatch.setattr(grid_pairs, "SPLIT_MIN_VEHICLE_STEPS", 0)
    real = grid_pairs._second_half
    seen = tmp_path / "pid"
    monkeypatch.setattr(grid_pairs, "_second_half", lambda *a: seen.write_text(str(os.getpid())) and real(*a))
    two = check_trajectory(sim.traj, sim.mission)
    assert int(seen.read_text()) != os.getpid()  # the second half ran in a child
    monkeypatch.setattr(grid_pairs, "_second_half", lambda *a: os._exit(3))
    lost = check_trajectory(sim.traj, sim.mission)
    for other in (two, lost):
        assert other.to_dict() == one.to_dict()
        np.testing.assert_array_equal(other.separation.d_min, one.separation.d_min)
        assert other.separation.pairs == one.separation.pairs
        np.testing.assert_array_equal(other.nearest.pair_index, one.nearest.pair_index)


def test_nearest_pair_from_a_known_pair_equals_the_query_of_every_point():
    """The known-pair shortcut queries only the points with a neighbour within the known pair's distance: the same
    distance and pair, bit for bit, also with ties (a regular grid) and coincident points."""
    from scipy.spatial import cKDTree

    from uav_debate_eval.safety.geometry import nearest_pair

    rng = np.random.default_rng(4)
    grid = np.stack(np.meshgrid(np.arange(12.0), np.arange(12.0), [5.0]), axis=-1).reshape(-1, 3) * 1.7
    cases = [rng.uniform(0, 30, size=(n, 3)) for n in (2, 3, 40, 700)] + [grid, np.vstack([grid, grid[[5, 77]]])]
    for pos in cases:
        tree = cKDTree(pos)
        full = nearest_pair(pos, tree)
        for known in [(0, 1), (len(pos) - 1, 0), (full[1], full[2]), tuple(rng.choice(len(pos), 2, replace=False))]:
            got = nearest_pair(pos, tree, (int(known[0]), int(known[1])))
            assert got == full and type(got[0]) is float


def test_the_grid_pass_with_the_previous_steps_pair_equals_a_full_query_per_step(monkeypatch):
    """pairs_sparse hands each step the previous step's closest pair; without it every point is queried."""
    from uav_debate_eval.safety import geometry, grid_pairs
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("grid", seed=1, n_uavs=80, duration_s=60.0, faults=["near_miss", "overspeed", "telemetry_dropout"])
    fast = check_trajectory(sim.traj, sim.mission)
    assert any(v.constraint == "min_separation" for v in fast.violations)
    monkeypatch.setattr(grid_pairs, "nearest_pair", lambda pos, tree=None, known=None: geometry.nearest_pair(pos, tree))
    slow = check_trajectory(sim.traj, sim.mission)
    assert fast.to_dict() == slow.to_dict()
    np.testing.assert_array_equal(fast.separation.d_min, slow.separation.d_min)
    assert fast.separation.pairs == slow.separation.pairs
    np.testing.assert_array_equal(fast.nearest.pair_index, slow.nearest.pair_index)


def test_the_samples_end_to_end_give_each_vehicles_trusted_rows_and_worst_values():
    """The checker runs its per-vehicle checks over every vehicle's samples end to end: the trusted rows are
    Assessment.trusted of each track, the worst values the loop over the vehicles, the jumps those of each track."""
    from uav_debate_eval.quality.assessment import assess
    from uav_debate_eval.quality.jumps import NOISE_FLOOR_M
    from uav_debate_eval.safety.checker import JUMP_FACTOR, _integrity
    from uav_debate_eval.safety.samples import Samples
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("formation", seed=3, faults=["near_miss", "overspeed", "geofence_exit"])
    traj = sim.traj
    n = len(next(iter(traj.tracks.values())))
    valid = np.ones(traj.n_samples, dtype=bool)
    valid[n + 40:n + 90] = False  # the second vehicle's estimator is invalid for 50 samples
    cols = {k: np.concatenate([getattr(tr, k) for tr in traj.tracks.values()]) for k in ("t", "pos", "vel")}
    ids = np.concatenate([[u] * len(tr) for u, tr in traj.tracks.items()])
    pos = cols["pos"].copy()
    pos[2 * n + 30:3 * n] += 6.0  # a position step that persists on the third vehicle
    traj = SwarmTrajectory.from_columns(cols["t"], ids, pos, vel=cols["vel"], est_valid=valid)
    quality = assess(traj, sim.mission)
    assert quality.not_evaluable
    rows = Samples.of(quality.traj)
    for name in ("max_speed", "geofence", "min_separation"):
        ok = rows.trusted(quality, name)
        np.testing.assert_array_equal(ok, np.concatenate([quality.trusted(name, tr)
                                                          for tr in quality.traj.tracks.values()]))
        assert not ok.all()
        speed = np.linalg.norm(rows.vel, axis=1)
        worst = 0.0
        for tr in quality.traj.tracks.values():
            mask = quality.trusted(name, tr)
            if mask.any():
                worst = max(worst, float(tr.speed[mask].max()))
        assert rows.fold_max(speed, ok, 0.0) == worst
    faults = _integrity(quality.traj, rows, sim.mission)
    jumps = [f for f in faults if f["kind"] == "position_jump"]
    jump = JUMP_FACTOR * sim.mission.constraints.max_speed_mps
    expected = []
    for u, tr in quality.traj.tracks.items():
        step = np.linalg.norm(np.diff(tr.pos, axis=0), axis=1)
        implied = step / np.diff(tr.t)
        expected += [(u, float(tr.t[i + 1]), float(implied[i]))
                     for i in np.flatnonzero((implied > jump) & (step > NOISE_FLOOR_M))]
    assert jumps and [(f["uavs"][0], f["t"], f["value"]) for f in jumps] == expected


def test_motion_capture_in_bursts_makes_no_position_jump():
    """Real VRPN bags (a PX4 quadrotor's /mavros/vision_pose/pose): 566 of 3,204 poses under 3 ms after the one before,
    steps of 2 cm at most: each read as a 'position jump' of up to 469 m/s ('moved 0.00 m in 0.000 s'), 502 integrity
    faults beside a correct 2.4 m/s max speed. A step beyond the position noise still is one (a marker swap); a
    burst's step is measured over the vehicle's period, as live."""
    from uav_debate_eval.core.mission_file import parse_mission
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.safety.checker import _integrity
    from uav_debate_eval.safety.samples import Samples

    t = np.sort(np.concatenate([np.arange(0.0, 20.0, 0.02), np.arange(0.0, 20.0, 0.1) + 0.0005]))  # bursts
    noise = np.random.default_rng(0).normal(0.0, 0.005, (len(t), 3))  # 5 mm of marker noise
    pos = np.column_stack([0.5 * t, np.zeros(len(t)), np.ones(len(t))]) + noise  # 0.5 m/s
    mission = parse_mission("constraints: {max_speed_mps: 4.0}")
    implied = np.linalg.norm(np.diff(pos, axis=0), axis=1) / np.diff(t)
    assert (implied > 20.0).sum() > 50  # what the noise implies between poses 0.5 ms apart
    traj = SwarmTrajectory.from_columns(t, ["drone"] * len(t), pos)
    assert not [f for f in _integrity(traj, Samples.of(traj), mission) if f["kind"] == "position_jump"]
    pos[600:603, 1] += 1.0  # three poses of another marker, 1 m away
    traj = SwarmTrajectory.from_columns(t, ["drone"] * len(t), pos)
    jumps = [f for f in _integrity(traj, Samples.of(traj), mission) if f["kind"] == "position_jump"]
    assert [f["t"] for f in jumps] == pytest.approx([t[600], t[603]])
    # a vehicle at 8 m/s (a jump: 5 x its 10 m/s limit), 100 Hz, every 5th pose delivered late,
    # stamped 1 ms before the next: 8-cm steps in 1 ms are no jump, as the live monitor takes them (safety.periods)
    k = np.arange(600)
    late = np.where(k % 5 == 2, k * 0.01 + 0.009, k * 0.01)
    fast = SwarmTrajectory.from_columns(late, ["v"] * len(k), np.column_stack([8.0 * k * 0.01, 0 * k, 0 * k + 2.0]))
    fast_mission = parse_mission("constraints: {max_speed_mps: 10.0}")
    assert not [f for f in _integrity(fast, Samples.of(fast), fast_mission) if f["kind"] == "position_jump"]


def test_fence_distances_folded_per_axis_equal_numpys_max_over_the_axes():
    """outside_distance and fence_ratio fold their per-axis values with np.maximum: the numbers of the max over the
    last axis, for points inside, outside and exactly on the walls."""
    from uav_debate_eval.core.mission import Geofence
    from uav_debate_eval.safety.geometry import fence_ratio

    fence = Geofence((-40.0, -30.0, 0.0), (40.0, 30.0, 25.0))
    rng = np.random.default_rng(8)
    pos = rng.uniform(-60, 60, size=(5000, 3))
    pos[:100, 0], pos[100:200, 2] = 40.0, 0.0  # on a wall
    lo, hi = np.array(fence.min), np.array(fence.max)
    np.testing.assert_array_equal(fence.outside_distance(pos),
                                  np.max(np.concatenate([lo - pos, pos - hi], axis=-1), axis=-1))
    centre, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    np.testing.assert_array_equal(fence_ratio(pos, fence), (np.abs(pos - centre) / half).max(axis=-1))
    assert fence.outside_distance(pos.reshape(50, 100, 3)).shape == (50, 100)


def test_pointwise_quantities_over_blocks_of_samples_equal_one_call(monkeypatch):
    from uav_debate_eval.safety import samples
    from uav_debate_eval.safety.geometry import time_to_box_exit
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("formation", seed=3, faults=["geofence_exit"])
    rows = samples.Samples.of(sim.traj)
    fence = sim.mission.constraints.geofence
    whole = time_to_box_exit(rows.pos, rows.vel, fence)
    monkeypatch.setattr(samples, "POINTWISE_BLOCK", 97)
    np.testing.assert_array_equal(rows.pointwise(lambda pos, vel: time_to_box_exit(pos, vel, fence)), whole)
    np.testing.assert_array_equal(rows.pointwise(lambda pos, _vel: fence.outside_distance(pos)),
                                  fence.outside_distance(rows.pos))
    assert len(rows.t) > 10 * 97


def test_cpa_speed_bounds_of_all_steps_at_once_change_no_warning(monkeypatch):
    """The grid pass takes each step's speed bound for the CPA candidate search from step_speed_bounds; the
    candidates' own bound (computed per step) gives the same warnings, and the bounds agree to rounding."""
    from uav_debate_eval.safety import geometry, grid_pairs
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("grid", seed=1, n_uavs=80, duration_s=60.0, faults=["near_miss", "overspeed", "telemetry_dropout"])
    fast = check_trajectory(sim.traj, sim.mission)
    assert any(w["kind"] == "cpa" for w in fast.warnings)
    snaps = sim.traj.resample(max_gap_s=sim.mission.constraints.stale_timeout_s)
    bounds = geometry.step_speed_bounds(snaps.vel, snaps.valid)
    for s in range(0, len(snaps.t), 7):
        v = snaps.vel[s, snaps.valid[s]]
        dev = v - (v.min(axis=0) + v.max(axis=0)) / 2.0
        own = min(np.sqrt(np.einsum("ij,ij->i", v, v).max()), np.sqrt(np.einsum("ij,ij->i", dev, dev).max()))
        assert bounds[s] == pytest.approx(own, rel=1e-12)
    real = geometry.cpa_candidates
    monkeypatch.setattr(grid_pairs, "cpa_candidates", lambda *a, vmax=None, **k: real(*a, **k))
    slow = check_trajectory(sim.traj, sim.mission)
    assert fast.to_dict() == slow.to_dict()


def test_step_speed_bounds_of_fully_valid_blocks_are_the_masked_formulas_bit_for_bit():
    """A block of steps with every vehicle valid takes the per-component path; it must give the masked formula's
    floats exactly (the bound decides which pairs are CPA candidates)."""
    from uav_debate_eval.safety import geometry

    rng = np.random.default_rng(7)
    vel = rng.normal(scale=3.0, size=(700, 90, 3))
    valid = np.ones((700, 90), dtype=bool)
    valid[300:310, 4] = False  # the second block of 256 takes the masked path

    def masked(v, ok):
        ok = ok[..., None]
        lo, hi = np.where(ok, v, np.inf).min(axis=1), np.where(ok, v, -np.inf).max(axis=1)
        dev = v - ((lo + hi) / 2.0)[:, None]
        own = np.where(ok[..., 0], (v * v).sum(axis=2), -np.inf).max(axis=1)
        rel = np.where(ok[..., 0], (dev * dev).sum(axis=2), -np.inf).max(axis=1)
        return np.sqrt(np.minimum(own, rel))

    got = geometry.step_speed_bounds(vel, valid)
    want = np.concatenate([masked(vel[a:a + 256], valid[a:a + 256]) for a in range(0, 700, 256)])
    np.testing.assert_array_equal(got, want)
