"""End of a flight: every vehicle going quiet together closes it (no stale veto); one vehicle going quiet
while the others report is still stale data and vetoes."""

import pytest
from safety_support import box_mission

from uav_debate_eval.safety.monitor import SafetyMonitor

MISSION = box_mission("thresholds: {veto_hold_s: 1.0}\n")  # stale_timeout_s 0.5


def row(t, x, y=0.0, z=2.0):
    return (t, x, y, z, 0.0, 0.0, 0.0)


def fly(mon, t_end_of, t_stop=5.0, dt=0.1):
    """Three vehicles 2 m apart; vehicle u reports until t_end_of[u], the clock runs to t_stop."""
    states, last = [], {}
    for k in range(int(t_stop / dt) + 1):
        t = k * dt
        for i, uav in enumerate(("a", "b", "c")):
            if t <= t_end_of[uav] + 1e-9:
                last[uav] = row(t, 2.0 * i)
        states.append(mon.update(t, dict(last)))
    return states


def test_every_vehicle_quiet_together_ends_the_flight_without_a_veto():
    states = fly(SafetyMonitor(MISSION), {"a": 3.0, "b": 3.0, "c": 2.95})
    assert not any(s.veto for s in states)
    assert states[-1].ended == ["a", "b", "c"] and states[-1].stale == []
    assert states[0].ended == []


def test_one_vehicle_quiet_mid_flight_still_vetoes():
    states = fly(SafetyMonitor(MISSION), {"a": 5.0, "b": 2.0, "c": 5.0})
    first = next(s for s in states if s.veto)
    assert first.t == pytest.approx(2.6) and first.stale == ["b"] and first.ended == []
    assert [a["constraint"] for a in first.active] == ["stale_data"]


def test_a_vehicle_silent_long_before_the_end_stays_stale_when_the_rest_stop():
    states = fly(SafetyMonitor(MISSION), {"a": 4.0, "b": 1.0, "c": 4.0}, t_stop=6.0)
    assert states[-1].veto and states[-1].stale == ["b"] and states[-1].ended == ["a", "c"]


def test_without_close_on_quiet_only_the_announced_end_closes():
    strict = fly(SafetyMonitor(MISSION, close_on_quiet=False), {"a": 3.0, "b": 3.0, "c": 3.0})
    assert strict[-1].veto and strict[-1].stale == ["a", "b", "c"]
    mon = SafetyMonitor(MISSION, close_on_quiet=False)
    mon.end_flight()
    announced = fly(mon, {"a": 3.0, "b": 3.0, "c": 3.0})
    assert not any(s.veto for s in announced) and announced[-1].ended == ["a", "b", "c"]


def test_status_rows_say_the_flight_is_over_and_name_a_stale_vehicle():
    from uav_debate_eval.safety.status import ERROR, OK, status_rows

    limits = {"min_separation": 0.5, "stale_data": 0.5}
    ended = fly(SafetyMonitor(MISSION), {"a": 3.0, "b": 3.0, "c": 3.0})[-1]
    rows = {r.name: r for r in status_rows(ended, limits, {"vehicles": "3"})}
    assert list(rows) == ["safety/min_separation", "safety/stale_data", "safety/veto"]
    assert rows["safety/stale_data"].level == OK
    assert rows["safety/stale_data"].message == "flight over: 3 vehicles went quiet together"
    assert rows["safety/veto"].values == {"snapshot_policy": ended.snapshot_policy, "vehicles": "3"}
    stale = next(s for s in fly(SafetyMonitor(MISSION), {"a": 5.0, "b": 2.0, "c": 5.0}) if s.veto)
    row = {r.name: r for r in status_rows(stale, limits, {})}["safety/stale_data"]
    assert row.level == ERROR and row.values["uavs"] == "b" and row.values["limit"] == "0.5"
    assert row.message == "violated by b: 0.600 s (limit 0.5)"


def test_a_configured_vehicle_never_heard_from_is_named_once_the_others_reported_past_the_timeout():
    from uav_debate_eval.safety.status import WARN, status_rows, unheard_vehicles

    expected = ["a", "b", "c", "d"]
    assert unheard_vehicles(expected, {"a", "b", "c"}, 0.4, 0.5) == []  # still within the timeout: joining
    assert unheard_vehicles(expected, {"a", "b", "c"}, 0.6, 0.5) == ["d"]
    assert unheard_vehicles(expected, {"a", "b", "c"}, 60.0, None) == []  # stale data not checked
    state = fly(SafetyMonitor(MISSION), {"a": 5.0, "b": 5.0, "c": 5.0})[-1]
    assert not state.veto  # not a veto: the verifier cannot tell a vehicle that is not flying
    rows = {r.name: r for r in status_rows(state, {"stale_data": 0.5}, {}, ["d"])}
    assert rows["safety/unheard"].level == WARN and rows["safety/unheard"].values["uavs"] == "d"
    assert rows["safety/unheard"].message.startswith("d: configured but no pose received yet")
    assert "safety/unheard" not in {r.name for r in status_rows(state, {"stale_data": 0.5}, {}, [])}
