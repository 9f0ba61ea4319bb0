"""Metrics on flights with known answers: exact scores, renormalised weights, by-how-much penalties."""

import json
import math

import numpy as np
import pytest

from uav_debate_eval.core import SwarmTrajectory
from uav_debate_eval.core.mission import Constraints, Mission
from uav_debate_eval.metrics.compute import compute_metrics, overall
from uav_debate_eval.metrics.scoring import rational

DT = 0.05


def _traj(paths: dict, link_ok: dict | None = None) -> SwarmTrajectory:
    """paths: uav -> (t, pos (n,3)); velocities derived from positions."""
    t, ids, pos, link = [], [], [], []
    for u, (tu, pu) in paths.items():
        t.append(tu)
        ids += [u] * len(tu)
        pos.append(pu)
        link.append(np.ones(len(tu)) if not link_ok or u not in link_ok else link_ok[u])
    return SwarmTrajectory.from_columns(np.concatenate(t), np.array(ids), np.vstack(pos),
                                        link_ok=np.concatenate(link) if link_ok else None)


def _line(offset=(0.0, 0.0, 5.0), v=(2.0, 0.0, 0.0), duration=40.0):
    t = np.arange(0.0, duration + 1e-9, DT)
    return t, np.asarray(offset) + t[:, None] * np.asarray(v)


def _fc(result, name):
    return result.details["flight_control"][name]


def test_constant_speed_line_is_perfect_and_single_vehicle_renormalises_weights():
    traj = _traj({"uav1": _line()})
    mission = Mission(constraints=Constraints(max_speed_mps=10.0))
    r = compute_metrics(traj, mission)
    for name in ("smoothness", "speed_consistency", "altitude_stability", "energy_efficiency"):
        assert _fc(r, name)["score"] == 1.0, name
    assert _fc(r, "smoothness")["value"] == pytest.approx(0.0, abs=1e-9)
    assert r.scores["flight_control"] == 1.0
    assert r.scores["coordination"] is None
    assert r.details["coordination"] == {}
    fc, sf = r.scores["flight_control"], r.scores["safety"]
    assert r.scores["overall"] == pytest.approx((0.35 * fc + 0.25 * sf) / 0.60, abs=1e-12)
    # single vehicle: no pair, so the separation metrics do not apply
    assert r.details["safety"]["separation_margin"]["score"] is None
    json.dumps(r.to_dict())


def test_hover_is_perfect_flight_control():
    t = np.arange(0.0, 30.0, DT)
    traj = _traj({"uav1": (t, np.tile([1.0, 2.0, 3.0], (len(t), 1)))})
    r = compute_metrics(traj, Mission())
    assert r.scores["flight_control"] == 1.0
    assert _fc(r, "energy_efficiency")["value"] == 0.0


def test_speed_changes_lower_speed_consistency_by_the_formula():
    t = np.arange(0.0, 40.0 + 1e-9, DT)
    x = np.where(t < 20, 1.0 * t, 20.0 + 3.0 * (t - 20))  # 1 m/s then 3 m/s
    traj = _traj({"uav1": (t, np.column_stack([x, 0 * t, 0 * t + 5]))})
    d = _fc(compute_metrics(traj, Mission()), "speed_consistency")
    assert d["value"] == pytest.approx(0.5, abs=0.02)  # std 1 / mean 2
    assert d["score"] == pytest.approx(rational(d["value"], 0.25, 0.02), abs=1e-12)
    assert d["score"] < 0.4


def test_overall_renormalises_over_applicable_categories():
    w = {"flight_control": 0.35, "coordination": 0.40, "safety": 0.25}
    assert overall({"flight_control": 1.0, "coordination": None, "safety": 0.4}, w) == pytest.approx(
        (0.35 + 0.1) / 0.6)
    assert overall({"flight_control": 0.5, "coordination": 0.5, "safety": 0.5}, w) == pytest.approx(0.5)
    assert overall({"flight_control": None, "coordination": None, "safety": None}, w) is None


def _formation(z_extra=None, duration=40.0):
    offsets = {"uav1": (0.0, 0.0, 0.0), "uav2": (-3.0, 3.0, 0.0), "uav3": (-3.0, -3.0, 0.0)}
    paths = {}
    for u, o in offsets.items():
        t, p = _line(offset=(o[0], o[1], 5.0), duration=duration)
        if u == "uav3" and z_extra is not None:
            p = p.copy()
            p[:, 2] += z_extra(t)
        paths[u] = (t, p)
    return _traj(paths), Mission(formation_offsets=offsets, formation_tolerance_m=0.5)


def test_formation_held_perfectly_scores_one():
    traj, mission = _formation()
    d = compute_metrics(traj, mission).details["coordination"]["formation_stability"]
    assert d["score"] == 1.0
    assert d["value"] == pytest.approx(0.0, abs=1e-9)
    assert "offsets" in d["formula"]


def test_formation_with_one_displaced_vehicle_loses_the_expected_amount():
    traj, mission = _formation(lambda t: 1.5 + 0 * t)
    d = compute_metrics(traj, mission).details["coordination"]["formation_stability"]
    # uav3 is 1.5 m off against both partners; the others' lower-median pair error is 0
    e = math.sqrt(1.5**2 / 3)
    assert d["value"] == pytest.approx(e, abs=1e-9)
    assert d["score"] == pytest.approx(1.0 / (1.0 + (e - 0.05) / 0.5), abs=1e-9)


def test_formation_with_a_drifting_vehicle_scores_lower_by_the_drift():
    traj, mission = _formation(lambda t: 3.0 * t / 40.0)  # drifts up to 3 m
    d = compute_metrics(traj, mission).details["coordination"]["formation_stability"]
    e = 3.0 / 3.0  # RMS of a linear 0..3 m drift is 3/sqrt(3); over 3 vehicles / sqrt(3) again
    assert d["value"] == pytest.approx(e, rel=0.01)
    assert d["score"] == pytest.approx(1.0 / (1.0 + (d["value"] - 0.05) / 0.5), abs=1e-12)
    assert d["score"] < 0.4


def test_formation_without_offsets_uses_the_swarms_own_shape():
    traj, _ = _formation()
    d = compute_metrics(traj, Mission()).details["coordination"]["formation_stability"]
    assert d["score"] == 1.0
    assert "median pair distances" in d["formula"]


def test_waypoints_reached_and_missed():
    traj, _ = _formation()
    mission = Mission(waypoints={"uav1": [(0.0, 0.0, 5.0), (40.0, 0.0, 5.0), (40.0, 5.0, 5.0)],
                                 "uav2": [(17.0, 3.0, 5.0)]}, waypoint_tolerance_m=0.5)
    d = compute_metrics(traj, mission).details["coordination"]["task_completion"]
    assert d["score"] == 0.75  # (40, 5, 5) is 5 m off uav1's path
    assert d["value"] == 0.75
    assert compute_metrics(traj, Mission()).details["coordination"]["task_completion"]["score"] is None


def test_link_loss_lowers_communication_quality_by_its_share():
    t, p1 = _line(offset=(0.0, 0.0, 5.0))
    _, p2 = _line(offset=(0.0, 5.0, 5.0))
    link = np.ones(len(t))
    link[: len(t) // 4] = 0.0  # a quarter of uav2's samples without link
    share = 1.0 - (len(t) // 4) / len(t)
    good = compute_metrics(_traj({"uav1": (t, p1), "uav2": (t, p2)}), Mission())
    bad = compute_metrics(_traj({"uav1": (t, p1), "uav2": (t, p2)}, link_ok={"uav2": link}), Mission())
    assert good.details["coordination"]["communication_quality"]["score"] == 1.0
    d = bad.details["coordination"]["communication_quality"]
    assert d["score"] == pytest.approx((1.0 + share) / 2, abs=1e-12)
    assert d["value"] == pytest.approx((1.0 + share) / 2, abs=1e-12)


def test_data_gap_lowers_communication_quality_by_the_lost_time():
    t, p1 = _line(offset=(0.0, 0.0, 5.0))
    _, p2 = _line(offset=(0.0, 5.0, 5.0))
    keep = (t < 10.0) | (t > 14.0)  # uav2 silent for ~4 s of 40
    traj = _traj({"uav1": (t, p1), "uav2": (t[keep], p2[keep])})
    gap = traj.ingest.gaps[0].duration
    d = compute_metrics(traj, Mission()).details["coordination"]["communication_quality"]
    assert d["value"] == pytest.approx((1.0 + (1.0 - gap / 40.0)) / 2, abs=1e-9)


def _turner(t_turn: float):
    t = np.arange(0.0, 40.0 + 1e-9, DT)
    before = t <= t_turn
    x = np.where(before, 2 * t, 2 * t_turn)
    y = np.where(before, 0 * t, 2 * (t - t_turn))
    return t, np.column_stack([x, y, 0 * t + 5])


def test_coordination_delay_measures_the_lag_between_manoeuvres():
    t, p1 = _turner(20.0)
    _, p2 = _turner(21.0)
    p2 = p2 + [0.0, -10.0, 0.0]
    d = compute_metrics(_traj({"uav1": (t, p1), "uav2": (t, p2)}), Mission()).details["coordination"]
    assert d["coordination_delay"]["value"] == pytest.approx(1.0, abs=DT / 2)
    assert d["coordination_delay"]["score"] == pytest.approx(1.0 / (1.0 + 0.9), abs=0.03)
    # straight lines: no manoeuvre, no lag to measure
    t, a = _line()
    _, b = _line(offset=(0.0, 5.0, 5.0))
    same = compute_metrics(_traj({"uav1": (t, a), "uav2": (t, b)}), Mission()).details["coordination"]
    assert same["coordination_delay"]["score"] is None


def test_close_pass_scores_separation_margin_and_response():
    t = np.arange(0.0, 40.0 + 1e-9, DT)
    hover = np.tile([0.0, 0.0, 5.0], (len(t), 1))
    passing = np.column_stack([t - 20.0, 0 * t + 0.8, 0 * t + 5.0])  # closest 0.8 m at t = 20
    mission = Mission(constraints=Constraints(min_separation_m=0.5))  # warning distance 1.0 m
    r = compute_metrics(_traj({"uav1": (t, hover), "uav2": (t, passing)}), mission)
    s = r.details["safety"]
    assert s["separation_margin"]["value"] == pytest.approx(0.8, abs=1e-9)
    assert s["separation_margin"]["score"] == pytest.approx((0.8 - 0.5) / (1.0 - 0.5), abs=1e-9)
    # inside 1.0 m while |t - 20| < 0.6 s: onset ~19.45 s, closest at 20 s
    assert s["emergency_response"]["value"] == pytest.approx(0.55, abs=DT + 1e-9)
    assert s["proximity_exposure"]["value"] == pytest.approx(1.15 / 40.0, abs=2 * DT / 40)
    assert s["constraint_compliance"]["score"] == 1.0
    assert 0.0 <= r.scores["safety"] <= 1.0


def test_violations_lower_constraint_compliance():
    t = np.arange(0.0, 40.0 + 1e-9, DT)
    hover = np.tile([0.0, 0.0, 5.0], (len(t), 1))
    passing = np.column_stack([t - 20.0, 0 * t + 0.3, 0 * t + 5.0])  # 0.3 m < 0.5 m limit
    mission = Mission(constraints=Constraints(min_separation_m=0.5))
    s = compute_metrics(_traj({"uav1": (t, hover), "uav2": (t, passing)}), mission).details["safety"]
    assert s["constraint_compliance"]["value"] == 1
    assert s["constraint_compliance"]["score"] == 0.5
    assert s["separation_margin"]["score"] == 0.0
    assert s["envelope_margin"]["score"] == 0.0


def test_scores_are_in_unit_interval_and_deterministic():
    traj, mission = _formation(lambda t: np.sin(t))
    a = compute_metrics(traj, mission).to_dict()
    b = compute_metrics(traj, mission).to_dict()
    assert a == b
    for cat, v in a["scores"].items():
        assert v is None or 0.0 <= v <= 1.0, cat
    for metrics in a["details"].values():
        for d in metrics.values():
            assert set(d) == {"score", "value", "unit", "formula"}
            assert d["score"] is None or 0.0 <= d["score"] <= 1.0


def test_a_whole_flight_safety_result_is_not_used_for_a_window():
    t = np.arange(0.0, 40.0 + 1e-9, DT)
    hover = np.tile([0.0, 0.0, 5.0], (len(t), 1))
    passing = np.column_stack([t - 20.0, 0 * t + 0.3, 0 * t + 5.0])  # violation around 20 s
    traj = _traj({"uav1": (t, hover), "uav2": (t, passing)})
    mission = Mission(constraints=Constraints(min_separation_m=0.5))
    from uav_debate_eval.metrics.compute import run_checker

    whole = run_checker(traj, mission)
    window = traj.window(30.0, 40.0)
    a = compute_metrics(window, mission, whole).to_dict()
    b = compute_metrics(window, mission).to_dict()
    assert a == b
    assert a["details"]["safety"]["constraint_compliance"]["score"] == 1.0
    assert a["details"]["safety"]["separation_margin"]["value"] == pytest.approx(math.hypot(10.0, 0.3), abs=1e-6)


@pytest.mark.parametrize("nominal", [False, True])
def test_formation_errors_do_not_depend_on_the_block_of_steps(monkeypatch, nominal):
    """Formation errors are computed per block of grid steps (the yaw sums too): any block size gives the same
    numbers, bit for bit, as one block over the whole grid, with the offsets reference and the swarm's own shape."""
    from uav_debate_eval.metrics import swarm
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("grid", seed=5, n_uavs=40, duration_s=60.0, faults=["near_miss", "telemetry_dropout"])
    if nominal:
        sim.mission.formation_offsets = {}
    got = {}
    for size in (7, 64, 100_000):
        monkeypatch.setattr(swarm, "FORMATION_BLOCK_STEPS", size)
        snap = sim.traj.window(sim.traj.t_start, sim.traj.t_end).resample(max_gap_s=0.5)  # nothing cached
        got[size] = swarm._formation_error(snap, sim.mission)
    assert got[7][1] == ("nominal" if nominal else "offsets")
    assert np.isfinite(got[7][0]).sum() > 0.9 * got[7][0].size and (got[7][0] > 0).any()
    for size in (64, 100_000):
        np.testing.assert_array_equal(got[size][0], got[7][0])


def test_waypoint_distances_of_all_waypoints_at_once_equal_one_waypoint_at_a_time():
    from uav_debate_eval.metrics.coordination import waypoint_status
    from uav_debate_eval.metrics.vec import norm
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("tracking", seed=1)
    status = waypoint_status(sim.traj, sim.mission)
    assert sum(len(s) for s in status.values()) >= 3
    for u, pts in sim.mission.waypoints.items():
        tr = sim.traj.tracks[u]
        one_by_one = [float(np.min(norm(tr.pos - np.asarray(p, dtype=float)))) for p in pts]
        assert [d for _, d in status[u]] == one_by_one
        assert [r for r, _ in status[u]] == [d <= sim.mission.waypoint_tolerance_m for d in one_by_one]


@pytest.mark.parametrize("block_samples", [1, 700, 10**9])
def test_waypoint_distances_of_vehicles_taken_together_equal_each_vehicle_alone(monkeypatch, block_samples):
    """Vehicles with equally many samples and waypoints are taken a block at a time: every closest distance is the
    one vehicle's alone, bit for bit, whatever the block (vehicles of other lengths, other waypoint counts, without
    samples or without waypoints included)."""
    from uav_debate_eval.metrics import coordination
    from uav_debate_eval.metrics.vec import norm
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("grid", seed=3, n_uavs=12, duration_s=30.0, faults=["near_miss"])
    names = list(sim.traj.tracks)
    traj = sim.traj.window(0.0, 30.0)
    traj.tracks[names[0]] = traj.tracks[names[0]].slice(0.0, 12.3)  # another length
    rng = np.random.default_rng(0)
    waypoints = {u: [tuple(p) for p in rng.uniform(-20, 20, size=(2 + i % 3, 3))] for i, u in enumerate(names)}
    waypoints["ghost"], waypoints[names[1]] = [(0.0, 0.0, 5.0)], []
    mission = Mission(waypoints=waypoints, waypoint_tolerance_m=6.0)
    monkeypatch.setattr(coordination, "WAYPOINT_BLOCK_SAMPLES", block_samples)
    status = coordination._waypoint_status(traj, mission)
    assert status["ghost"] == [(False, np.inf)] and status[names[1]] == []
    reached = 0
    for u in names[2:] + names[:1]:
        pos = traj.tracks[u].pos
        alone = [float(np.min(norm(pos - np.asarray(p, dtype=float)))) for p in waypoints[u]]
        assert [d for _, d in status[u]] == alone
        reached += sum(r for r, _ in status[u])
    assert 0 < reached < sum(len(p) for p in waypoints.values())


def test_rate_regularity_of_tracks_taken_together_equals_each_track_alone():
    """communication_quality takes the interval statistics of gap-free tracks of one length as rows of one array:
    the same coefficient of variation as np.std / np.mean of each track's own intervals."""
    from uav_debate_eval.core import SwarmTrajectory
    from uav_debate_eval.metrics.coordination import _regular_rates
    from uav_debate_eval.sim.scenarios import simulate

    traj = simulate("grid", seed=4, n_uavs=70, duration_s=40.0).traj
    rng = np.random.default_rng(2)
    tracks = {}
    for u, tr in traj.tracks.items():  # jittered stamps: every track's intervals differ
        t = tr.t + np.concatenate([[0.0], rng.uniform(-0.01, 0.01, len(tr) - 2), [0.0]])
        tracks[u] = tr.select(slice(None))
        tracks[u].t = t
    tracks["uav7"] = tracks["uav7"].select(np.r_[0:50, 60:len(tracks["uav7"])])  # a gap: its own intervals
    traj = SwarmTrajectory(tracks, traj.ingest)
    rates = _regular_rates(list(traj.tracks.values()), 0.5)
    assert id(traj.tracks["uav7"]) not in rates and len(rates) == 69
    for tr in traj.tracks.values():
        if id(tr) in rates:
            d = np.diff(tr.t)
            assert rates[id(tr)] == float(np.std(d) / np.mean(d))
