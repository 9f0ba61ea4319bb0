"""The live verifier's per-pose rules without ROS (live.verifier): a breaking pose is checked on arrival, an
unconfirmed pre-check mutes that vehicle for MUTE_S, a bag loop resets on the pose that starts it, and a late
timer cannot hide a silent vehicle (the others' poses run the overdue check)."""

from __future__ import annotations

import numpy as np
import pytest

from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.live.verifier import MUTE_S, LiveVerifier
from uav_debate_eval.safety.health import CheckTimes
from uav_debate_eval.safety.monitor import SafetyMonitor

MISSION = "mission: {name: t, type: formation}\nconstraints: {min_separation_m: 0.5, stale_timeout_s: 60.0}\n"


class Clocks:
    """The check's clock (flight time) and the monotonic clock that paces the periodic check, both by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.mono = 0.0
        self.checks: list = []
        self.warnings: list[str] = []

    def verifier(self, mission_text: str = MISSION, period_s: float = 0.02) -> LiveVerifier:
        mission = parse_mission(mission_text)
        return LiveVerifier(mission, SafetyMonitor(mission), period_s, lambda: self.now, self.checks.append,
                            self.warnings.append, monotonic=lambda: self.mono)


def _feed(v: LiveVerifier, clocks: Clocks, t: float, poses: dict[str, float]) -> None:
    clocks.now = t
    for uav, x in poses.items():
        v.on_pose(uav, t, (x, 0.0, 1.0), None)


def _vetoed_at_102_s(clocks: Clocks) -> LiveVerifier:
    """a, b and c 2 m apart for 2 s, then b 0.3 m from a at 102 s: vetoed."""
    v = clocks.verifier()
    for k in range(20):
        _feed(v, clocks, 100.0 + 0.1 * k, {"a": 0.0, "b": 2.0, "c": -2.0})
    _feed(v, clocks, 102.0, {"b": 0.3})
    assert v.monitor.veto
    return v


def test_a_breaking_pose_is_checked_on_arrival_and_ordinary_poses_run_no_check():
    clocks = Clocks()
    v = clocks.verifier()
    for k in range(20):
        _feed(v, clocks, 100.0 + 0.02 * k, {"a": 0.0, "b": 2.0, "c": -2.0})
    first = len(clocks.checks)
    assert first == 1  # the very first pose runs the first check; the others (new vehicles too) are pre-checked
    assert v.poses_received == 60 and not v.monitor.veto
    _feed(v, clocks, 100.4, {"b": 0.3})
    assert len(clocks.checks) == first + 1 and v.monitor.veto
    assert clocks.checks[-1].changed and {a["constraint"] for a in v.state.active} == {"min_separation"}
    assert v.checked() == ["min_separation", "stale_data"]


def test_an_unconfirmed_pre_check_mutes_that_vehicle_for_mute_s():
    """b flies away from a at 10 m/s: a's pose 0.2 m from b's stored one breaks the pre-check, while the full check
    (b extrapolated to a's stamp) finds them apart."""
    clocks = Clocks()
    v = clocks.verifier()
    clocks.now = 100.0
    v.on_pose("a", 100.0, (0.0, 0.0, 1.0), None)
    v.on_pose("b", 100.0, (2.0, 0.0, 1.0), (10.0, 0.0, 0.0))
    assert len(clocks.checks) == 1 and not v.monitor.veto  # the first pose's check
    clocks.now = 100.0 + MUTE_S / 2
    v.on_pose("a", clocks.now, (1.8, 0.0, 1.0), None)  # breaking on arrival, not confirmed: a is muted
    assert len(clocks.checks) == 2 and not v.monitor.veto
    v.on_pose("a", clocks.now + 0.001, (1.8, 0.0, 1.0), None)  # breaking again, but muted: left to the timer
    assert len(clocks.checks) == 2
    clocks.now = 100.0 + 1.5 * MUTE_S
    v.on_pose("b", clocks.now, (1.9, 0.0, 1.0), (0.0, 0.0, 0.0))  # b (not muted) stops next to a: checked at once
    assert len(clocks.checks) == 3 and v.monitor.veto


def test_stamps_jumping_backwards_reset_the_state_on_the_pose_that_starts_the_new_run():
    clocks = Clocks()
    v = clocks.verifier()
    _feed(v, clocks, 100.0, {"a": 0.0, "b": 2.0})
    _feed(v, clocks, 70.0, {"a": 1.0})  # 30 s back: the bag looped, or a's clock alone restarted
    assert v.swarm.resets == 0 and clocks.warnings == []  # the next vehicle's pose tells
    _feed(v, clocks, 70.0, {"b": 3.0})  # b's went back too: the bag looped; a's pose starts the new run with b's
    assert v.monitor.latest() == {"a": pytest.approx([70.0, 1.0, 0.0, 1.0, np.nan, np.nan, np.nan], nan_ok=True),
                                  "b": pytest.approx([70.0, 3.0, 0.0, 1.0, np.nan, np.nan, np.nan], nan_ok=True)}
    assert clocks.warnings == ["safety verifier: pose stamps jumped backwards (bag loop?): state reset"]


def test_one_vehicle_s_clock_restarting_or_a_pose_stamped_ahead_keeps_a_standing_veto():
    """b is 0.3 m from a (vetoed) when c's companion computer reboots (its stamps from 0.5 s), or when a time-sync
    glitch stamps one pose of c 5 s ahead. Before: either reset the verifier and the veto fell at the next check,
    during the near miss. Now the veto stands; c's rebooted poses are not checked, and the fail-safe says so."""
    for ahead in (5.0, -101.5):
        clocks = Clocks()
        v = _vetoed_at_102_s(clocks)
        first = len(clocks.checks)
        v.on_pose("c", 102.05 + ahead, (-2.0, 0.0, 1.0), None)
        for k in range(1, 20):
            clocks.now = 102.0 + 0.1 * k
            v.on_pose("a", clocks.now, (0.0, 0.0, 1.0), None)
            v.on_pose("c", clocks.now + min(ahead, 0.0), (-2.0, 0.0, 1.0), None)
            v.on_pose("b", clocks.now, (0.3, 0.0, 1.0), None)
            v.check()
        assert all(state.veto for state in clocks.checks[first:]) and v.swarm.resets == 0
        assert "min_separation" in {a["constraint"] for a in v.state.active}
        if ahead > 0:
            assert v.swarm.rejected == {"stray_stamp": 1} and clocks.warnings == [] and not v.health_report.degraded
        else:
            # every rebooted pose of c rejected: the first two waited for a and b to go on, the later ones at once
            assert v.swarm.rejected == {"clock_back": 20} and v.health.lost_total == {"c": 20}
            assert v.health_report.degraded and {a["constraint"] for a in v.state.active} == {
                "min_separation", "verifier_degraded"}
            assert clocks.warnings == ["safety verifier: c's pose stamps went back 101 s while the others' went on "
                                       "(its clock restarted?): its poses cannot be placed on the stream's clock and "
                                       "are not checked"]


def test_an_array_after_a_pause_is_checked_whole_at_once():
    """The whole stream paused 3 s (a ground station's link): the first PoseArray after it is kept and checked at
    once, every vehicle of it (its first pose waits only for the second)."""
    clocks = Clocks()
    v = clocks.verifier()
    uavs = ["a", "b", "c"]
    for k in range(10):
        clocks.now = 100.0 + 0.1 * k
        v.on_poses(clocks.now, uavs, np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 1.0], [-2.0, 0.0, 1.0]]))
    clocks.now = 103.9
    v.on_poses(103.9, uavs, np.array([[0.0, 0.0, 1.0], [0.2, 0.0, 1.0], [-2.0, 0.0, 1.0]]))  # a and b 0.2 m apart
    assert v.monitor.veto and v.swarm.rejected == {} and v.swarm.resets == 0
    assert {u: float(s[0]) for u, s in v.monitor.latest().items()} == {"a": 103.9, "b": 103.9, "c": 103.9}


def test_a_vehicle_on_a_clock_seconds_behind_is_checked_not_a_bag_loop():
    """A companion computer 2 s behind the others (no common time): before, each of its poses "jumped back" from
    the newest stamp and reset the verifier, 50 times in 5 s, and the veto never rose for a pair 0.2 m apart."""
    clocks = Clocks()
    v = clocks.verifier()
    raised_at = None
    for k in range(50):
        t = 100.0 + 0.1 * k
        clocks.now = t
        v.on_pose("a", t, (0.0, 0.0, 1.0), None)
        v.on_pose("d", t - 2.0, (0.2 if k >= 30 else 5.0, 0.0, 1.0), None)
        if raised_at is None and v.monitor.veto:
            raised_at = t
    assert v.swarm.resets == 0 and clocks.warnings == []
    assert raised_at == pytest.approx(103.1) and v.monitor.veto  # d came close at 103.0: vetoed at a's next pose
    assert {a["constraint"] for a in v.state.active} == {"min_separation"}


def test_a_lone_pose_stamped_far_ahead_is_a_stray_not_the_end_of_the_flight():
    clocks = Clocks()
    v = _vetoed_at_102_s(clocks)
    v.on_pose("c", 102.05 + 1e6, (-2.0, 0.0, 1.0), None)  # a flipped bit in the stamp
    for k in range(1, 10):
        _feed(v, clocks, 102.0 + 0.1 * k, {"a": 0.0, "b": 0.3, "c": -2.0})
    assert v.swarm.resets == 0 and v.swarm.rejected == {"stray_stamp": 1} and clocks.warnings == []
    assert v.monitor.veto and v.swarm.rings["c"].last_t == pytest.approx(102.9)
    assert v.monitor.latest()["c"][0] == pytest.approx(102.9)


def test_a_clock_moving_far_forward_is_kept_from_its_first_pose_of_an_array():
    """A simulation resumed 200 s later: the first PoseArray on the new clock waits for the second, then both are
    kept; a lone array stamped far ahead stays a stray."""
    clocks = Clocks()
    v = clocks.verifier()
    uavs = ["a", "b"]
    for k in range(10):
        clocks.now = 100.0 + 0.1 * k
        v.on_poses(clocks.now, uavs, np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 1.0]]))
    clocks.now = 5000.0
    v.on_poses(5000.0, uavs, np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 1.0]]))  # lone: the stream goes on at 101 s
    clocks.now = 101.0
    v.on_poses(101.0, uavs, np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 1.0]]))
    assert v.swarm.rejected == {"stray_stamp": 2} and v.swarm.rings["a"].last_t == pytest.approx(101.0)
    for k in range(5):
        clocks.now = 300.0 + 0.1 * k
        v.on_poses(clocks.now, uavs, np.array([[0.0, 0.0, 1.0], [0.2 * k, 0.0, 1.0]]))
    assert v.swarm.rejected == {"stray_stamp": 2} and v.swarm.resets == 0  # the first array at 300 s kept
    assert v.swarm.rings["a"].last_t == pytest.approx(300.4)
    assert v.monitor.veto  # b reached a at the new clock


def test_the_others_poses_run_the_overdue_check_and_a_silent_vehicle_is_vetoed():
    clocks = Clocks()
    v = clocks.verifier(MISSION.replace("60.0", "1.0"))
    raised_at = None
    for k in range(60):  # 3 s at 20 Hz; a goes silent after 1 s; no periodic check runs at all
        t = 100.0 + 0.05 * k
        clocks.mono += 0.05  # each step's first pose finds the 20 ms check overdue
        _feed(v, clocks, t, {u: x for u, x in (("a", 0.0), ("b", 5.0), ("c", -5.0)) if u != "a" or t < 101.0})
        if raised_at is None and v.monitor.veto:
            raised_at = t
    stale = [a for a in v.state.active if a["constraint"] == "stale_data"]
    assert stale and stale[0]["uavs"] == ["a"]
    assert raised_at == pytest.approx(102.0)  # a's last pose at 100.95 s: stale past 101.95 s


def test_status_names_a_vehicle_never_heard_once_the_others_reported_past_the_timeout():
    clocks = Clocks()
    v = clocks.verifier(MISSION.replace("60.0", "0.5"))
    assert v.status(["a", "b", "c"]) == []  # before the first check
    for k in range(11):
        _feed(v, clocks, 100.0 + 0.1 * k, {"a": 0.0, "b": 3.0})
    v.check()
    rows = {r.name: r for r in v.status(["a", "b", "c"])}
    assert rows["safety/unheard"].values["uavs"] == "c" and not v.state.veto


def test_check_times_are_summarised_by_nearest_rank_and_shown_on_the_verifier_row():
    times = CheckTimes(window=100)
    assert times.summary() is None
    for k in range(1, 201):  # the window keeps the last 100: 101..200 ms wall, a tenth of it CPU
        times.add(k / 1000.0, k / 10000.0)
    assert times.summary() == pytest.approx((150.0, 199.0, 19.9))
    clocks = Clocks()
    v = clocks.verifier()
    for k in range(5):
        clocks.mono += 0.05
        _feed(v, clocks, 100.0 + 0.05 * k, {"a": 0.0, "b": 2.0})
    row = next(r for r in v.status(["a", "b"]) if r.name == "safety/verifier")
    p50, p99, cpu = (float(row.values[k]) for k in ("check_ms_p50", "check_ms_p99", "check_cpu_ms_p99"))
    assert 0.0 < p50 <= p99 and cpu >= 0.0


def test_an_array_is_stored_whole_and_checked_once():
    clocks = Clocks()
    v = clocks.verifier()
    clocks.now = 100.0
    v.on_poses(100.0, ["a", "b", "c"], np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 1.0], [-2.0, 0.0, 1.0]]))
    assert len(clocks.checks) == 1 and not v.monitor.veto and v.poses_received == 3
    clocks.now = 100.1
    v.on_poses(100.1, ["a", "b", "c"], np.array([[0.0, 0.0, 1.0], [0.3, 0.0, 1.0], [np.nan, 0.0, 1.0]]))
    assert len(clocks.checks) == 2 and v.monitor.veto  # one check for the whole array: the near miss a-b
    assert v.state.active[0]["uavs"] == ["a", "b"] and v.swarm.rejected == {"nan": 1}
    v.on_poses(100.1, ["a", "b"], np.array([[0.0, 0.0, 1.0], [0.3, 0.0, 1.0]]))  # the same stamps again
    assert len(clocks.checks) == 2 and v.swarm.rejected == {"nan": 1, "duplicate": 2}  # nothing new: no check


def test_a_pose_no_flight_reaches_is_neither_stored_nor_checked():
    """A coordinate of 1e300 m in an array (a flipped exponent bit) is what ingest drops (out_of_range): the monitor
    never sees it, so it breaks no geofence live that the recorded flight would not."""
    mission = MISSION.replace("stale_timeout_s: 60.0}", "stale_timeout_s: 60.0, geofence: {min: [-50, -50, 0], "
                              "max: [50, 50, 20]}}")
    clocks = Clocks()
    v = clocks.verifier(mission)
    for k in range(3):
        clocks.now = 100.0 + 0.1 * k
        v.on_poses(clocks.now, ["a", "b"], np.array([[0.0, 0.0, 1.0], [2.0 + 0.1 * k, 0.0, 1.0]]))
    clocks.now = 100.3
    v.on_poses(100.3, ["a", "b"], np.array([[0.0, 0.0, 1.0], [1e300, 0.0, 1.0]]))
    clocks.now = 100.4
    v.on_poses(100.4, ["a", "b"], np.array([[0.0, 0.0, 1.0], [2.4, 0.0, 1.0]]))
    assert v.swarm.rejected == {"out_of_range": 1}
    assert not any(s.veto for s in clocks.checks)


def test_a_measured_velocity_no_flight_reaches_is_not_extrapolated():
    """An Odometry twist of 1e300 m/s (a flipped exponent bit) was extrapolated into the monitor's prediction: its
    k-d tree raised ValueError inside the pose callback. The monitor takes that sample's velocity from the positions
    instead; the tape keeps what was recorded (the flight report finds it as a velocity_spike, as a replay does)."""
    mission = MISSION.replace("stale_timeout_s: 60.0}", "stale_timeout_s: 60.0, max_speed_mps: 10.0}")
    clocks = Clocks()
    v = clocks.verifier(mission)
    for k in range(30):
        clocks.now = 100.0 + 0.1 * k
        v.on_pose("a", clocks.now, (0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
        v.on_pose("b", clocks.now, (2.0 + 0.1 * k, 0.0, 1.0), (1e300 if k == 20 else 1.0, 0.0, 0.0))
        v.check()
        if k == 20:
            assert v.swarm.rings["b"].latest()[4] == 1e300  # taped as recorded
    assert not any(s.veto for s in clocks.checks)


def test_a_sparse_vehicle_on_a_clock_ahead_is_checked():
    """c joins reporting every 2 s on a clock 3 s ahead of a's and b's (its companion computer without a time sync),
    0.3 m from a. Before, each of its poses waited as a stamp ahead, was dropped when the others went on, and c was
    never checked. Now its second pose as far ahead confirms both: checked, vetoed."""
    clocks = Clocks()
    v = clocks.verifier()
    for k in range(80):
        _feed(v, clocks, 100.0 + 0.1 * k, {"a": 0.0, "b": 2.0})
        if k % 20 == 5:
            v.on_pose("c", clocks.now + 3.0, (0.3, 0.0, 1.0), None)
            if k == 5:
                assert not v.monitor.veto and v.swarm.rejected == {}  # its first waits
    assert v.monitor.veto and {a["constraint"] for a in v.state.active} == {"min_separation"}
    assert v.swarm.rejected == {} and len(v.swarm.rings["c"]) == 4
    assert clocks.warnings == []
