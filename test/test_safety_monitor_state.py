"""The monitor's slot arrays: per-pose observe() equals the dict form of update(), vehicles joining late,
going stale and rejoining, restarts, clock resets, and the pruning shortcuts of the tick."""

import math

import numpy as np
import pytest
from safety_support import box_mission

from uav_debate_eval.safety.geometry import closest_approach, cpa_candidates, time_to_box_exit
from uav_debate_eval.safety.monitor import SafetyMonitor

MISSION = box_mission("thresholds: {veto_hold_s: 0.3, prediction_horizon_s: 2.0}\n")
NAN = math.nan


def row(t, x, y=0.0, z=2.0, vx=0.0, vy=0.0, vz=0.0):
    return (t, x, y, z, vx, vy, vz)


def comparable(state):
    return (state.veto, state.changed, state.active, sorted(state.warnings, key=lambda w: (w["kind"], w["uavs"])),
            state.values, state.stale, state.clock_reset)


def random_flight(seed: int, steps: int = 60):
    """Ticks of (t, poses): late joiners, silences (stale, then back), samples without velocity, jumps."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    pos = np.column_stack([rng.uniform(-4, 4, (n, 2)), rng.uniform(0.5, 3.5, n)])
    vel = rng.normal(0, 1.5, (n, 3))
    no_vel = rng.random(n) < 0.3
    joins = rng.integers(0, 20, n) * (rng.random(n) < 0.3)
    silences = {k: (s, s + int(rng.integers(3, 20))) for k in range(n) if rng.random() < 0.3
                for s in [int(rng.integers(5, 40))]}
    out = []
    for s in range(steps):
        t = s * 0.05
        poses = []
        for k in range(n):
            if s < joins[k] or (k in silences and silences[k][0] <= s < silences[k][1]):
                continue
            tk = t - float(rng.uniform(0.0, 0.04))
            p = pos[k] + vel[k] * tk + (rng.uniform(-0.5, 0.5, 3) if rng.random() < 0.03 else 0.0)
            poses.append((f"u{k}", (tk, *p) if no_vel[k] else (tk, *p, *vel[k])))
        out.append((t, poses))
    return out


@pytest.mark.parametrize("predict_period", [0.0, 0.1])
def test_observe_per_pose_equals_the_dict_form(predict_period):
    raised = 0
    for seed in range(15):
        by_dict = SafetyMonitor(MISSION, predict_period_s=predict_period)
        by_pose = SafetyMonitor(MISSION, predict_period_s=predict_period)
        latest = {}
        for t, poses in random_flight(seed):
            for u, sample in poses:
                latest[u] = sample
                by_pose.observe(u, sample)
            a, b = by_dict.update(t, dict(latest)), by_pose.update(t)
            assert comparable(a) == comparable(b), (seed, t)
        assert list(by_dict.history) == list(by_pose.history)
        raised += len(by_dict.history)
    assert raised > 10  # the flights do break constraints


def test_vehicle_added_after_start_and_array_growth():
    mon = SafetyMonitor(MISSION)
    mon.observe("a", row(0.0, 0.0))
    assert not mon.update(0.0).active
    for k in range(40):  # past the first allocation (16 slots), 0.6 m apart or more
        mon.observe(f"n{k}", row(0.1, -4.0 + (k % 8), y=1.5 + 0.6 * (k // 8)))
    mon.observe("late", row(0.1, 0.3))
    s = mon.update(0.1)
    assert [a["constraint"] for a in s.active] == ["min_separation"]
    assert (s.active[0]["pairs"], s.active[0]["value"]) == ([["a", "late"]], pytest.approx(0.3))
    assert len(mon.latest()) == 42 and list(mon.latest())[:2] == ["a", "n0"]


def test_stale_vehicle_leaves_the_checks_and_rejoins_with_its_last_sample():
    mon = SafetyMonitor(MISSION)
    mon.observe("a", row(0.0, 0.0))
    mon.observe("b", (0.0, 0.3, 0.0, 2.0))  # no velocity
    assert [a["constraint"] for a in mon.update(0.0).active] == ["min_separation"]
    mon.observe("a", row(0.6, 0.0))
    s = mon.update(0.6)  # b silent 0.6 s: stale, and its position no longer counts
    assert [(a["constraint"], a["uavs"]) for a in s.active] == [("stale_data", ["b"])]
    assert s.stale == ["b"] and "min_separation" not in s.values
    mon.observe("a", row(1.0, 0.0))
    mon.observe("b", (1.0, 2.3, 0.0, 2.0))  # back, 2 m further after 1 s: 2 m/s from its last sample
    s = mon.update(1.0)
    assert not s.stale and [a["constraint"] for a in s.active] == []
    assert s.values["max_speed"]["value"] == pytest.approx(2.0)
    assert s.values["stale_data"]["value"] == 0.0


def test_observe_keeps_the_newest_sample_but_takes_a_restart():
    mon = SafetyMonitor(MISSION)
    mon.observe("a", row(5.0, 0.0))
    mon.observe("a", row(5.0, 1.0))  # same stamp: ignored
    mon.observe("a", row(4.8, 1.0))  # late sample: ignored
    assert mon.latest()["a"][1] == 0.0
    mon.observe("a", row(1.0, 2.0))  # far older than clock_jump_s: the vehicle restarted
    assert mon.latest()["a"][:2].tolist() == [1.0, 2.0]


def test_dict_form_forgets_vehicles_left_out_and_their_history():
    mon = SafetyMonitor(MISSION)
    mon.update(0.0, {"a": row(0.0, 0.0), "b": (0.0, 3.0, 0.0, 2.0)})
    s = mon.update(0.1, {"a": row(0.1, 0.0)})
    assert list(mon.latest()) == ["a"] and not s.stale  # gone, not stale
    assert not mon.would_violate("b", (0.2, 3.0, 0.0, 2.0))  # untracked again: judged on this one sample
    assert mon.would_violate("b", (0.2, 0.3, 0.0, 2.0))  # ... which can still be too close
    s = mon.update(0.2, {"a": row(0.2, 0.0), "b": (0.2, 4.0, 0.0, 2.0)})
    assert s.values["max_speed"]["value"] == 0.0  # 1 m in 0.2 s, but the earlier sample was forgotten


def test_clock_reset_keeps_only_observed_samples_of_the_new_run():
    mon = SafetyMonitor(MISSION)
    mon.observe("a", row(5.0, 0.0))
    mon.observe("b", row(5.0, 0.3))
    assert mon.update(5.0).veto
    mon.observe("c", row(0.05, 3.0))  # the restarted source's first sample arrives before the check
    s = mon.update(0.1)
    assert s.clock_reset and s.changed and not s.veto and mon.resets == 1
    assert list(mon.latest()) == ["c"]
    assert not mon.update(0.2).clock_reset


def test_separation_evidence_order_is_deterministic():
    latest = {u: row(0.0, x) for u, x in (("d", 0.0), ("c", 0.25), ("b", 2.0), ("a", 2.25), ("e", 4.0), ("f", 4.125))}
    s = SafetyMonitor(MISSION).update(0.0, latest)
    assert [a["constraint"] for a in s.active] == ["min_separation"]
    sep = s.active[0]
    assert sep["pairs"] == [["e", "f"], ["c", "d"], ["a", "b"]]  # 0.125 m first, then the two 0.25 m pairs by slot
    assert sep["uavs"] == ["a", "b", "c", "d", "e", "f"] and sep["count"] == 3


def test_time_to_geofence_pruning_matches_the_full_computation():
    rng = np.random.default_rng(4)
    fence = MISSION.constraints.geofence
    for _ in range(30):
        n = 60
        pos = np.column_stack([rng.uniform(-6, 6, (n, 2)), rng.uniform(-0.5, 4.5, n)])
        vel = rng.normal(0, 2.0, (n, 3)) * (rng.random((n, 1)) < 0.8)
        latest = {f"u{k:02d}": (0.0, *pos[k], *vel[k]) for k in range(n)}
        got = [(w["uavs"][0], w["value"]) for w in SafetyMonitor(MISSION).update(0.0, latest).warnings
               if w["kind"] == "time_to_geofence"]
        tte = time_to_box_exit(pos, vel, fence)
        want = [(f"u{k:02d}", float(tte[k])) for k in range(n)
                if fence.outside_distance(pos[k]) <= 0 and tte[k] <= 2.0]
        assert got == want


def test_one_query_finds_every_violating_pair_and_every_predicted_conflict():
    rng = np.random.default_rng(9)
    for _ in range(20):
        n = 300
        pos = rng.uniform(0, 12, (n, 3))
        vel = rng.uniform(-2, 2, (n, 3))
        vel[:20] = [2.0, 0.0, 0.0]  # head-on pairs at the top speed: the bound is tight for them
        vel[20:40] = [-2.0, 0.0, 0.0]
        pos[20:40] = pos[:20] + [0.5 - 1e-12, 0.0, 0.0]
        ci, cj, cd = cpa_candidates(pos, vel, 0.5, 2.0)
        found = set(zip(ci.tolist(), cj.tolist(), strict=True))
        i, j = np.triu_indices(n, k=1)
        now = np.linalg.norm(pos[j] - pos[i], axis=1)
        _, ahead = closest_approach(pos[j] - pos[i], vel[j] - vel[i], 2.0)
        must = (now < 0.5) | (ahead < 0.5)
        assert set(zip(i[must].tolist(), j[must].tolist(), strict=True)) <= found
