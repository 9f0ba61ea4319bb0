"""Parked pairs: two real ArduCopter SITL vehicles standing 2 m apart, disarmed, read as a min_separation violation
of a 3-m limit for the whole log. A pair of disarmed vehicles is no pair of the constraint; a disarmed vehicle is
still held to it against an armed one, and a vehicle whose arming is unknown is never parked."""

from __future__ import annotations

import numpy as np
import pytest

from uav_debate_eval.core import SwarmTrajectory
from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.core.records import Event
from uav_debate_eval.safety.checker import check_trajectory

MISSION = parse_mission("constraints: {min_separation_m: 3.0}")


def _pad(arming: dict[str, list[tuple[float, str]]], initial: frozenset = frozenset()) -> SwarmTrajectory:
    """a and b stand 1 m apart for 20 s; a climbs at 1 m/s from 10 s."""
    t = np.arange(0.0, 20.0, 0.1)
    za = np.where(t < 10.0, 0.0, t - 10.0)
    traj = SwarmTrajectory.from_columns(np.concatenate([t, t]), ["a"] * len(t) + ["b"] * len(t),
                                        np.vstack([np.column_stack([0 * t, 0 * t, za]),
                                                   np.column_stack([0 * t + 1.0, 0 * t, 0 * t])]))
    traj.ingest.log_events = [Event("", "autopilot_event", at, [u], extra={"label": label, **(
        {"initial": True} if (u, label) in initial else {})}) for u, changes in arming.items() for at, label in changes]
    return traj


def test_two_disarmed_vehicles_are_no_pair_an_armed_one_is():
    result = check_trajectory(_pad({"a": [(10.0, "ARMED")], "b": [(0.0, "DISARMED")]}), MISSION)
    [v] = result.violations  # a armed beside b (parked) until they are 3 m apart: counted
    assert v.uavs == ["a", "b"] and v.t_start == pytest.approx(10.0, abs=0.11)
    assert v.t_end == pytest.approx(12.8, abs=0.11)
    timeline = result.separation
    before = timeline.t < 9.95
    assert np.isnan(timeline.d_min[before]).all()
    assert all(c is None for c, b in zip(timeline.pairs, before, strict=True) if b)
    assert timeline.d_min[timeline.t > 10.05].min() == pytest.approx(1.0, abs=0.02)
    assert result.notes == ["min_separation: pairs of parked vehicles (disarmed or landed, as their autopilots logged) "
                            "are not held to it (a, b at 0.0-10.0 s); each is held to it against a flying vehicle"]


@pytest.mark.parametrize("log", ["ardupilot", "px4"])
def test_two_vehicles_armed_on_their_pads_are_no_pair_until_one_takes_off(log):
    """A swarm arms on its pads: two vehicles armed side by side and landed by their land detectors (ArduCopter's
    EV LAND_COMPLETE / NOT_LANDED; PX4's vehicle_land_detected, read first as the log starts) are parked; a takes
    off at 10 s and is held to the limit from then on. Before, the pair counted from the arming at 2 s."""
    if log == "ardupilot":
        pad = {u: [(1.0, "LAND_COMPLETE"), (2.0, "ARMED")] for u in "ab"}
        pad["a"].append((10.0, "NOT_LANDED"))
        traj = _pad(pad)
    else:  # the first vehicle_status and vehicle_land_detected read: states, not changes
        pad = {u: [(0.0, "disarmed"), (0.0, "landed"), (2.0, "armed")] for u in "ab"}
        pad["a"].append((10.0, "airborne"))
        traj = _pad(pad, frozenset((u, w) for u in "ab" for w in ("disarmed", "landed")))
    result = check_trajectory(traj, MISSION)
    [v] = result.violations
    assert v.uavs == ["a", "b"] and v.t_start == pytest.approx(10.0, abs=0.11)
    assert np.isnan(result.separation.d_min[result.separation.t < 9.95]).all()
    assert "(a, b at 0.0-10.0 s)" in result.notes[0]


def test_a_landed_vehicle_is_held_to_the_limit_against_a_flying_one():
    """b stands landed (armed) while a, armed and airborne by its land detector, hovers 1 m beside it: a pair."""
    [v] = check_trajectory(_pad({"a": [(0.0, "ARMED"), (0.5, "NOT_LANDED")], "b": [(0.0, "ARMED"),
                                                                                   (0.5, "LAND_COMPLETE")]}),
                           MISSION).violations
    assert v.t_start == pytest.approx(0.0) and v.uavs == ["a", "b"]


@pytest.mark.parametrize("arming", [{}, {"a": [(10.0, "ARMED")]}])
def test_a_vehicle_whose_arming_is_unknown_is_never_parked(arming):
    [v] = check_trajectory(_pad(arming), MISSION).violations
    assert v.t_start == pytest.approx(0.0)  # from the first sample: nothing says b was disarmed


def test_a_parked_show_grid_through_the_kd_tree_pass():
    """70 vehicles (past the dense pass's 64) on a 1-m grid line, disarmed; v0 is armed at 10 s and climbs."""
    t = np.arange(0.0, 20.0, 0.1)
    n = 70
    cols = [np.column_stack([0 * t + float(j), 0 * t, np.where((t >= 10.0) & (j == 0), t - 10.0, 0.0)])
            for j in range(n)]
    traj = SwarmTrajectory.from_columns(np.tile(t, n), np.repeat([f"v{j:02d}" for j in range(n)], len(t)),
                                        np.vstack(cols))
    traj.ingest.log_events = [Event("", "autopilot_event", 0.0, [f"v{j:02d}"], extra={"label": "DISARMED"})
                              for j in range(n)]
    traj.ingest.log_events.append(Event("", "autopilot_event", 10.0, ["v00"], extra={"label": "ARMED"}))
    result = check_trajectory(traj, MISSION)
    assert {tuple(v.uavs) for v in result.violations} == {("v00", "v01"), ("v00", "v02")}
    assert np.isnan(result.separation.d_min[result.separation.t < 9.95]).all()
    assert result.separation.pairs[-1] == ("v00", "v01")


def test_the_live_monitor_parks_the_same_pairs():
    """Live, as offline: PX4's vehicle_status arming reaches the monitor (PoseInput.on_arming)."""
    from uav_debate_eval.safety.monitor import SafetyMonitor

    monitor = SafetyMonitor(MISSION)
    monitor.set_armed("b", False)  # before its first pose
    for k in range(30):
        t = 9.0 + 0.1 * k
        if k == 10:
            monitor.set_armed("a", False)
        if k == 20:
            monitor.set_armed("a", True)
        state = monitor.update(t, {"a": (t, 0.0, 0.0, 0.0), "b": (t, 1.0, 0.0, 0.0)})
        parked = 10 <= k < 20
        assert bool(state.active) != parked, (k, state.active)  # broken until both are disarmed, again once a arms
        assert monitor.would_violate("a", (t, 0.0, 0.0, 0.0)) != parked


def test_arming_read_before_the_first_pose_holds_through_the_verifiers_start():
    """The autopilots' states come first (MAVROS latches its state; PX4's vehicle_status may beat the first pose),
    and the live verifier resets its monitor at a run's first pose: the arming is no sample and survives it. It was
    lost there, and a swarm standing disarmed on its pads was vetoed from its first poses (the pre-check of a
    vehicle not tracked yet read its arming from the slot it did not have either)."""
    from uav_debate_eval.live.verifier import LiveVerifier
    from uav_debate_eval.safety.monitor import SafetyMonitor

    monitor = SafetyMonitor(MISSION)
    clock = [100.0]
    verifier = LiveVerifier(MISSION, monitor, 0.05, lambda: clock[0], lambda state: None, lambda text: None)
    monitor.set_armed("a", False)
    monitor.set_armed("b", False)
    for k in range(40):
        clock[0] = t = 100.0 + 0.05 * k
        verifier.on_pose("a", t, (0.0, 0.0, 0.0), None)
        verifier.on_pose("b", t, (1.0, 0.0, 0.0), None)
        if k == 30:
            monitor.set_armed("b", True)
        assert monitor.veto == (k > 30), k


@pytest.mark.parametrize("disarmed", [True, False])
def test_a_parked_vehicle_falling_silent_is_no_stale_data(disarmed):
    """A PX4 swarm's vehicle lands, disarms and its bridge stops: its silence lost no flight, offline and live."""
    from uav_debate_eval.safety.monitor import SafetyMonitor

    mission = parse_mission("constraints: {stale_timeout_s: 1.0}")
    t = np.arange(0.0, 20.0, 0.1)
    ta = t[t < 12.0]
    traj = SwarmTrajectory.from_columns(np.concatenate([ta, t]), ["a"] * len(ta) + ["b"] * len(t),
                                        np.vstack([np.column_stack([0 * ta, 0 * ta, 0 * ta]),
                                                   np.column_stack([0 * t + 5.0, 0 * t, 0 * t + 2.0])]))
    if disarmed:
        traj.ingest.log_events = [Event("", "autopilot_event", 10.0, ["a"], extra={"label": "disarmed"})]
    result = check_trajectory(traj, mission)
    stale = [v for v in result.violations if v.constraint == "stale_data"]
    assert bool(stale) != disarmed
    assert (result.margins["stale_data"]["worst_value"] < 1.0) == disarmed
    monitor = SafetyMonitor(mission)
    if disarmed:
        monitor.set_armed("a", False)
    live_stale = False
    for now in t:  # pose by pose (the dict form forgets a vehicle missing from it)
        monitor.observe("b", (now, 5.0, 0.0, 2.0))
        if now < 12.0:
            monitor.observe("a", (now, 0.0, 0.0, 0.0))
        live_stale |= any(a["constraint"] == "stale_data" for a in monitor.update(now).active)
    assert live_stale != disarmed


def test_a_first_state_read_says_nothing_of_before():
    """A status message or heartbeat read first (`initial`) is the state then, no change: before it, unknown, so the
    pair counts; a logged change (ArduPilot's EV) says the opposite held before it."""
    traj = _pad({})
    traj.ingest.log_events = [Event("", "autopilot_event", 1.0, [u], extra={"label": "DISARMED", "initial": True})
                              for u in ("a", "b")]
    [v] = check_trajectory(traj, MISSION).violations
    assert v.t_start == pytest.approx(0.0) and v.t_end == pytest.approx(0.9, abs=0.11)  # then parked until a flies


def test_the_live_monitor_parks_vehicles_armed_on_their_pads():
    """Live as offline: two vehicles armed 1 m apart and landed by their land detectors are no pair (no veto, and
    the pre-check lets their poses pass); a takes off (airborne): the pair counts again. A landed vehicle that is
    armed is no disarmed one: its silence is stale data as before (offline: safety.checker)."""
    from uav_debate_eval.safety.monitor import SafetyMonitor

    monitor = SafetyMonitor(parse_mission("constraints: {min_separation_m: 3.0, stale_timeout_s: 1.0}"))
    for uav in ("a", "b"):
        monitor.set_armed(uav, True)
        monitor.set_landed(uav, True)
    for k in range(30):
        t = 9.0 + 0.1 * k
        if k == 20:
            monitor.set_landed("a", False)
        state = monitor.update(t, {"a": (t, 0.0, 0.0, 0.0), "b": (t, 1.0, 0.0, 0.0)})
        assert bool(state.active) == (k >= 20), (k, state.active)
        assert monitor.would_violate("b", (t, 1.0, 0.0, 0.0)) == (k >= 20)
    monitor.set_landed("a", True)
    for k in range(30):  # b falls silent, landed and armed: stale once past the timeout
        t = 12.0 + 0.1 * k
        monitor.observe("a", (t, 0.0, 0.0, 0.0))
        active = {a["constraint"] for a in monitor.update(t).active}
        assert ("stale_data" in active) == (t - 11.9 > 1.0 + 1e-9), (t, active)
