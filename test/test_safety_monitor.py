"""Live monitor: veto edges at exact times, hysteresis, predictive warnings, stale data, clock jumps."""

import math

import numpy as np
import pytest
from safety_support import box_mission

from uav_debate_eval.safety.geometry import (
    close_pairs,
    closest_approach,
    cpa_candidates,
    naive_close_pairs,
    nearest_pair,
)
from uav_debate_eval.safety.monitor import SafetyMonitor

MISSION = box_mission("thresholds: {veto_hold_s: 1.0, prediction_horizon_s: 2.0}\n")


def row(t, x, y=0.0, z=2.0, vx=0.0, vy=0.0, vz=0.0):
    return (t, x, y, z, vx, vy, vz)


def run(monitor, steps, positions):
    """positions(t) -> {uav: row}; returns the list of (t, state)."""
    out = []
    for k in range(steps):
        t = k / 10.0
        out.append((t, monitor.update(t, positions(t))))
    return out


def edges(states):
    return [(t, s.veto) for t, s in states if s.changed]


def test_veto_rises_on_the_breaking_sample_and_clears_after_the_hold():
    def pos(t):
        near = 2.0 - 1e-9 <= t <= 2.5 + 1e-9
        return {"a": row(t, 0.0), "b": row(t, 0.3 if near else 2.0), "c": row(t, -3.0)}

    mon = SafetyMonitor(MISSION)
    states = run(mon, 60, pos)
    # last violating sample 2.5, margin restored at 2.6, held 1.0 s -> cleared at 3.6
    assert edges(states) == [(2.0, True), (3.6, False)]
    assert all(s.veto for t, s in states if 2.0 <= t < 3.6 - 1e-9)
    raised = mon.history[0]
    assert raised["event"] == "raised" and raised["t"] == 2.0
    ev = raised["evidence"][0]
    assert (ev["constraint"], ev["uavs"], ev["value"], ev["limit"], ev["t"]) == ("min_separation", ["a", "b"],
                                                                                 pytest.approx(0.3), 0.5, 2.0)
    cleared = mon.history[1]
    assert cleared["event"] == "cleared" and cleared["t"] == pytest.approx(3.6)
    assert cleared["restored_since"] == pytest.approx(2.6)
    assert states[25][1].values["min_separation"]["value"] == pytest.approx(0.3)


def test_no_chatter_when_the_margin_oscillates_around_the_limit():
    def pos(t):
        k = round(t * 10)
        d = 0.45 if (10 <= k <= 50 and (k // 3) % 2 == 0) else 0.55  # flips every 0.3 s between 1.0 and 5.0 s
        return {"a": row(t, 0.0), "b": row(t, d)}

    states = run(SafetyMonitor(MISSION), 80, pos)
    e = edges(states)
    assert len(e) == 2 and e[0][1] is True and e[1][1] is False
    last_violation = max(t for t, s in states if s.active)
    assert e[0][0] == pytest.approx(1.2)  # first k in 10..50 with (k // 3) even
    assert e[1][0] == pytest.approx(last_violation + 0.1 + 1.0)


def test_hold_time_is_configurable():
    def pos(t):
        return {"a": row(t, 0.0), "b": row(t, 0.3 if t < 0.05 else 2.0)}

    assert edges(run(SafetyMonitor(MISSION, hold_s=0.3), 10, pos)) == [(0.0, True), (pytest.approx(0.4), False)]


def test_cpa_warning_precedes_the_veto():
    def pos(t):
        return {"a": row(t, -3.0 + t, vx=1.0), "b": row(t, 3.0 - t, vx=-1.0)}

    states = run(SafetyMonitor(MISSION), 40, pos)
    first_warning = next(t for t, s in states if any(w["kind"] == "cpa" for w in s.warnings))
    first_veto = next(t for t, s in states if s.veto)
    assert first_warning == pytest.approx(0.8) and first_veto == pytest.approx(2.8)
    w = next(w for w in states[8][1].warnings if w["kind"] == "cpa")
    assert w["uavs"] == ["a", "b"] and w["t_predicted"] == pytest.approx(2.8) and w["value"] == pytest.approx(0.4)
    assert not states[8][1].veto  # warnings never veto


def test_speed_from_the_last_two_samples_when_velocity_is_missing():
    nan = math.nan
    mon = SafetyMonitor(MISSION)
    s0 = mon.update(0.0, {"a": (0.0, 0.0, 0.0, 2.0, nan, nan, nan), "b": row(0.0, 3.0)})
    assert not s0.veto
    s1 = mon.update(0.1, {"a": (0.1, 0.4, 0.0, 2.0, nan, nan, nan), "b": row(0.1, 3.0)})  # 4 m/s
    assert s1.veto and s1.changed
    assert [(a["constraint"], a["uavs"], a["value"]) for a in s1.active] == [("max_speed", ["a"], pytest.approx(4.0))]
    s2 = mon.update(0.1, {"a": (0.1, 0.4, 0.0, 2.0, nan, nan, nan), "b": row(0.1, 3.0)})  # same stamp: unchanged
    assert s2.active and not s2.changed


def test_vertical_speed_and_geofence_with_time_to_geofence_warning():
    mon = SafetyMonitor(MISSION)
    s = mon.update(0.0, {"a": row(0.0, 0.0, vz=2.5), "b": row(0.0, 3.5, vx=1.0)})
    assert [(a["constraint"], a["uavs"]) for a in s.active] == [("max_vertical_speed", ["a"])]
    ttg = [w for w in s.warnings if w["kind"] == "time_to_geofence"]
    # a climbs 2.5 m/s from z = 2 to the 4 m ceiling in 0.8 s; b reaches x = 5 in 1.5 s
    assert [(w["uavs"], w["value"]) for w in ttg] == [(["a"], pytest.approx(0.8)), (["b"], pytest.approx(1.5))]
    s = mon.update(0.1, {"a": row(0.1, 0.0), "b": row(0.1, 5.2, vx=1.0)})
    assert [(a["constraint"], a["uavs"], a["value"]) for a in s.active] == [("geofence", ["b"], pytest.approx(0.2))]


def test_stale_vehicle_is_a_violation_and_leaves_the_pair_check():
    mon = SafetyMonitor(MISSION)
    mon.update(0.0, {"a": row(0.0, 0.0), "b": row(0.0, 0.3)})
    s = mon.update(0.5, {"a": row(0.5, 0.0), "b": row(0.0, 0.3)})  # b silent exactly 0.5 s: not yet stale
    assert [a["constraint"] for a in s.active] == ["min_separation"]
    s = mon.update(0.6, {"a": row(0.6, 0.0), "b": row(0.0, 0.3)})
    assert [(a["constraint"], a["uavs"], a["value"]) for a in s.active] == [("stale_data", ["b"], pytest.approx(0.6))]
    assert s.stale == ["b"]


def test_different_stamps_are_extrapolated_to_the_newest():
    mon = SafetyMonitor(MISSION)
    # b's sample is 0.05 s older and b moves towards a at 2 m/s: 0.1 m closer at a's stamp
    s = mon.update(1.0, {"a": row(1.0, 0.0), "b": row(0.95, 0.62, vx=-2.0)})
    assert not s.active  # 0.62 - 0.1 = 0.52 m
    mon = SafetyMonitor(MISSION)
    s = mon.update(1.0, {"a": row(1.0, 0.0), "b": row(0.95, 0.58, vx=-2.0)})
    assert [(a["constraint"], a["value"]) for a in s.active] == [("min_separation", pytest.approx(0.48))]
    assert "extrapolate" in s.snapshot_policy
    # extrapolation is capped at 0.1 s: a 2 s old sample moves at most 0.2 m
    mon = SafetyMonitor(MISSION, max_extrapolation_s=0.1)
    mon2 = mon.update(2.0, {"a": row(2.0, 0.0), "b": row(1.6, 0.9, vx=-2.0)})
    assert mon2.values["min_separation"]["value"] == pytest.approx(0.7)


def test_clock_jump_backwards_resets_once():
    mon = SafetyMonitor(MISSION)
    s = mon.update(5.0, {"a": row(5.0, 0.0), "b": row(5.0, 0.3)})
    assert s.veto
    s = mon.update(0.0, {"a": row(0.0, 0.0), "b": row(0.0, 2.0)})
    assert s.clock_reset and s.changed and not s.veto and mon.resets == 1
    s = mon.update(0.1, {"a": row(0.1, 0.0), "b": row(0.1, 2.0)})
    assert not s.clock_reset and mon.resets == 1
    assert [h["event"] for h in mon.history] == ["raised", "clock_reset"]


def test_would_violate_pre_check_and_bounded_history():
    mon = SafetyMonitor(MISSION, history=4)
    mon.update(0.0, {"a": row(0.0, 0.0), "b": row(0.0, 2.0)})
    assert not mon.would_violate("b", row(0.02, 1.0))
    assert mon.would_violate("b", row(0.02, 0.4))
    assert mon.would_violate("b", row(0.02, 2.0, vx=3.5))
    assert mon.would_violate("b", (0.1, 2.5, 0.0, 2.0))  # 0.5 m in 0.1 s from its last sample = 5 m/s
    for k in range(40):  # violated every 4th tick, restored 1.2 s before the next: raise + clear per cycle
        t = 1.0 + k * 0.6
        mon.update(t, {"a": row(t, 0.0), "b": row(t, 0.3 if k % 4 == 0 else 2.0)})
    assert len(mon.history) == 4
    assert [h["event"] for h in mon.history] == ["raised", "cleared"] * 2


def test_kdtree_pairs_equal_naive_on_random_swarms():
    rng = np.random.default_rng(11)
    for n, r in [(2, 1.0), (50, 0.8), (500, 0.5), (2000, 0.3)]:
        pos = rng.uniform(0, 20, size=(n, 3))
        i, j, d = close_pairs(pos, r)
        ni, nj, nd = naive_close_pairs(pos, r)
        assert sorted(zip(i.tolist(), j.tolist(), strict=True)) == sorted(zip(ni.tolist(), nj.tolist(), strict=True))
        assert np.allclose(np.sort(d), np.sort(nd))
        dist, a, b = nearest_pair(pos)
        full = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
        full[np.diag_indices(n)] = np.inf
        assert dist == pytest.approx(full.min()) and full[a, b] == pytest.approx(full.min())


def test_monitor_separation_equals_naive_on_a_random_swarm():
    rng = np.random.default_rng(5)
    pos = rng.uniform(0, 15, size=(300, 3))
    latest = {f"u{k}": (0.0, *p, 0.0, 0.0, 0.0) for k, p in enumerate(pos)}
    s = SafetyMonitor(MISSION).update(0.0, latest)
    ni, nj, nd = naive_close_pairs(pos, 0.5)
    sep = [a for a in s.active if a["constraint"] == "min_separation"]
    if len(nd):
        assert sep[0]["count"] == int((nd < 0.5).sum()) and sep[0]["value"] == pytest.approx(nd.min())
        assert sep[0]["uavs"] == sorted({f"u{k}" for k in np.concatenate([ni, nj])})
    else:
        assert not sep


def test_closest_approach_formula():
    t, d = closest_approach(np.array([[4.0, 0, 0], [4.0, 1.0, 0]]), np.array([[-2.0, 0, 0], [0.0, 0, 0]]), 1.0)
    assert t.tolist() == [1.0, 0.0] and d.tolist() == pytest.approx([2.0, math.hypot(4.0, 1.0)])


def test_cpa_candidates_never_miss_a_predicted_conflict():
    rng = np.random.default_rng(2)
    pos = rng.uniform(0, 30, size=(400, 3))
    vel = rng.uniform(-2, 2, size=(400, 3))
    i, j = np.triu_indices(400, k=1)
    _, d = closest_approach(pos[j] - pos[i], vel[j] - vel[i], 2.0)
    truth = set(zip(i[d < 0.5].tolist(), j[d < 0.5].tolist(), strict=True))
    ci, cj, cd = cpa_candidates(pos, vel, 0.5, 2.0)
    assert truth and truth <= set(zip(ci.tolist(), cj.tolist(), strict=True))
    assert np.allclose(cd, np.linalg.norm(pos[ci] - pos[cj], axis=1))
    assert len(ci) < len(i) / 20  # and it prunes


def test_prediction_period_keeps_the_veto_per_update_and_mixed_rows():
    mon = SafetyMonitor(MISSION, predict_period_s=0.5)

    def pos(t):
        return {"a": (t, -3.0 + t, 0.0, 2.0), "b": row(t, 3.0 - t, vx=-1.0)}  # a without velocity

    states = run(mon, 40, pos)
    warned = [t for t, s in states if any(w["kind"] == "cpa" for w in s.warnings)]
    # predictions refresh at 0.0, 0.5, 1.0 ...: a's velocity is known from its 2nd sample, first warning at 1.0
    assert warned[0] == pytest.approx(1.0)
    assert next(t for t, s in states if s.veto) == pytest.approx(2.8)  # the veto itself is checked every update


def test_a_position_jump_is_not_extrapolated_through_the_other_vehicle():
    mon = SafetyMonitor(MISSION)
    mon.update(0.0, {"a": row(0.0, 0.0), "b": (0.0, 3.0, 0.0, 2.0)})
    # b teleports to 0.3 m from a (135 m/s implied); a's sample is 6 ms newer than b's
    s = mon.update(0.026, {"a": row(0.026, 0.0), "b": (0.02, 0.3, 0.0, 2.0)})
    got = {a["constraint"]: a for a in s.active}
    assert set(got) == {"min_separation", "max_speed"}
    assert got["min_separation"]["value"] == pytest.approx(0.3 - 3.0 * 0.006)
    assert got["max_speed"]["value"] == pytest.approx(135.0)


def test_relative_cpa_candidates_keep_every_conflict_and_prune_a_swarm_moving_together():
    """Velocities relative to their bounding-box centre bound |dv| too: same conflicts, far fewer candidates when
    everyone flies the same way (the offline checker's case)."""
    rng = np.random.default_rng(5)
    pos = rng.uniform(0, 30, size=(400, 3))
    vel = np.array([3.0, 1.0, 0.0]) + rng.uniform(-0.2, 0.2, size=(400, 3))
    vel[:10] = rng.uniform(-3, 3, size=(10, 3))  # a few stray vehicles
    i, j = np.triu_indices(400, k=1)
    _, d = closest_approach(pos[j] - pos[i], vel[j] - vel[i], 2.0)
    now = np.linalg.norm(pos[j] - pos[i], axis=1)
    must = set(zip(i[(d < 0.5) | (now < 0.5)].tolist(), j[(d < 0.5) | (now < 0.5)].tolist(), strict=True))
    ci, cj, _ = cpa_candidates(pos, vel, 0.5, 2.0)
    ri, rj, rd = cpa_candidates(pos, vel, 0.5, 2.0, relative=True)
    found = set(zip(ri.tolist(), rj.tolist(), strict=True))
    assert must and must <= found <= set(zip(ci.tolist(), cj.tolist(), strict=True))
    assert np.allclose(rd, np.linalg.norm(pos[ri] - pos[rj], axis=1))
    together = np.array([3.0, 1.0, 0.0]) + rng.uniform(-0.2, 0.2, size=(400, 3))
    assert len(cpa_candidates(pos, together, 0.5, 2.0, relative=True)[0]) < len(
        cpa_candidates(pos, together, 0.5, 2.0)[0]) / 5
