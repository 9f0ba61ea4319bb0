"""The live verifier under field conditions (issue 32): it checks in the stream's time, so a stream stamped behind
its clock is still verified; it counts the poses it never processed; and when it cannot vouch for the swarm it
raises the fail-safe veto `verifier_degraded` until it has caught up.

The first test is the deterministic reproduction of the miss seen under load: the demo's simulator, started late
(waiting for subscribers), stamped its flight 2.5 s behind the verifier's clock; every vehicle then looked silent
longer than the 0.5 s stale timeout, the monitor took the flight for over, and the 0.23-m near miss was never
checked (no veto, while the segment's own evaluation called it risky).
"""

from __future__ import annotations

import random

from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.live.verifier import LiveVerifier
from uav_debate_eval.safety.health import DEGRADED
from uav_debate_eval.safety.monitor import SafetyMonitor
from uav_debate_eval.safety.status import ERROR, WARN

MISSION = ("mission: {name: t, type: formation}\n"
           "constraints: {min_separation_m: 0.5, stale_timeout_s: 0.5}\n"
           "thresholds: {veto_hold_s: 1.0}\n")
UAVS = ("uav1", "uav2", "uav3", "uav4", "uav5")
RATE_HZ = 20.0


class Session:
    """A verifier driven by hand: `arrival` (its clock when a pose is processed) and the monotonic clock."""

    def __init__(self, fail_safe: str = "veto", lag_behind_clock_s: float = 0.0) -> None:
        self.clock = 1000.0
        self.mono = 0.0
        self.behind = lag_behind_clock_s  # how far the stamps sit behind the verifier's clock (the transport)
        mission = parse_mission(MISSION)
        self.v = LiveVerifier(mission, SafetyMonitor(mission), 0.02, lambda: self.clock, lambda s: None,
                              lambda text: None, monotonic=lambda: self.mono, fail_safe=fail_safe)

    def tick(self, t: float, gap: dict[str, float] | None = None, late_s: float = 0.0,
             skip: tuple[str, ...] = ()) -> None:
        """Every vehicle's pose stamped t (x = 3 m apart, or as `gap` places it), processed `late_s` after the
        transport's delay; then the periodic check."""
        self.clock = t + self.behind + late_s
        self.mono = t
        for k, uav in enumerate(UAVS):
            if uav not in skip:
                self.v.on_pose(uav, t, ((gap or {}).get(uav, 3.0 * k), 0.0, 10.0), None)
        self.v.check()

    def fly(self, t0: float, t1: float, **kw) -> float:
        n = round((t1 - t0) * RATE_HZ)
        for k in range(n):
            self.tick(t0 + k / RATE_HZ, **kw)
        return t0 + n / RATE_HZ

    def row(self, name: str = "safety/verifier"):
        return next(r for r in self.v.status(list(UAVS)) if r.name == name)

    @property
    def veto(self) -> bool:
        return self.v.monitor.veto

    def reasons(self) -> list[str]:
        return [r["kind"] for r in self.v.health_report.reasons]


def test_a_stream_stamped_behind_the_verifiers_clock_is_still_checked_and_vetoed():
    s = Session(lag_behind_clock_s=2.5)  # the late-started simulator's stamps: 2.5 s behind, > the stale timeout
    t = s.fly(0.0, 3.0)
    assert not s.veto and s.v.state.ended == []  # five vehicles reporting at 20 Hz: nothing over, nothing stale
    assert s.v.state.values["stale_data"]["value"] < 0.1  # silence measured in the stream's time, not 2.5 s
    t = s.fly(t, t + 1.0, gap={"uav1": 3.0, "uav2": 3.23})  # uav1-uav2 at 0.23 m
    assert s.veto
    active = {a["constraint"]: a for a in s.v.state.active}
    assert set(active) == {"min_separation"} and active["min_separation"]["uavs"] == ["uav1", "uav2"]
    assert abs(active["min_separation"]["value"] - 0.23) < 1e-9
    assert s.reasons() == []  # a constant transport delay is no lag: the verifier keeps up


def test_falling_behind_the_stream_raises_the_fail_safe_veto_until_caught_up():
    s = Session()
    t = s.fly(0.0, 2.0)
    assert not s.veto and s.row().level == 0 and "verifying" in s.row().message
    t = s.fly(t, t + 0.5, late_s=0.4)  # the verifier processes every pose 0.4 s late (starved, held GIL)
    assert s.veto and s.reasons() == ["lag"]
    degraded = [a for a in s.v.state.active if a["constraint"] == DEGRADED]
    assert len(degraded) == 1 and abs(degraded[0]["value"] - 0.4) < 1e-6
    row = s.row()
    assert row.level == ERROR and row.values["constraint"] == DEGRADED and "behind the pose stream by 0.40 s" in \
        row.message and "veto raised (fail-safe)" in row.message
    t = s.fly(t, t + 0.6)  # caught up: the cause ends max_lag_s after the last late pose, the veto after its hold
    assert s.reasons() == [] and s.veto
    t = s.fly(t, t + 1.0)
    assert not s.veto and s.row().level == 0


def test_poses_lost_within_the_stale_timeout_are_counted_per_vehicle_and_degrade_the_verifier():
    s = Session()
    t = s.fly(0.0, 2.0)
    t = s.fly(t, t + 0.3, skip=("uav3",))  # six of uav3's poses never arrive (0.35-s gap < the 0.5-s timeout)
    s.tick(t)
    assert s.reasons() == ["poses_lost"] and s.veto
    row = s.row()
    assert row.values["poses_lost"] == "6" and row.values["poses_lost_by_vehicle"] == "uav3:6"
    assert row.values["uavs"] == "uav3" and "poses of uav3 lost" in row.message
    t = s.fly(t + 1 / RATE_HZ, t + 2.5)
    assert not s.veto and s.row().level == 0 and s.row().values["poses_lost"] == "6"  # kept, not a cause any more


def test_a_silence_longer_than_the_stale_timeout_is_stale_data_not_a_degraded_verifier():
    s = Session()
    t = s.fly(0.0, 2.0)
    t = s.fly(t, t + 1.0, skip=("uav3",))
    assert s.veto and {a["constraint"] for a in s.v.state.active} == {"stale_data"}
    s.tick(t)  # uav3 is back after 1.05 s: its poses were lost too, but that silence is the hazard's
    assert "poses_lost" not in s.reasons() and s.row().values["poses_lost_by_vehicle"] == "uav3:20"


def test_a_stalled_check_loop_degrades_the_verifier_while_the_flight_goes_on():
    s = Session()
    t = s.fly(0.0, 2.0)
    s.mono += 0.6  # neither timer nor pose ran a check for 0.6 s of the monotonic clock
    s.clock += 0.0
    s.v.check()
    assert s.reasons() == ["stalled"] and s.veto and s.v.health.stalls == 1
    assert "check loop stalled for 0.6" in s.row().message
    s.fly(t, t + 2.0)
    assert not s.veto


def test_fail_safe_warn_says_so_on_the_status_without_vetoing():
    s = Session(fail_safe="warn")
    t = s.fly(0.0, 2.0)
    s.fly(t, t + 0.5, late_s=0.4)
    assert s.reasons() == ["lag"] and not s.veto
    assert s.row().level == WARN and "not vetoing (fail_safe: warn)" in s.row().message


def test_transport_losses_reported_by_dds_are_counted():
    s = Session()
    t = s.fly(0.0, 2.0)
    s.v.on_lost("uav2", 3)
    s.tick(t)
    assert s.row().values["poses_lost_by_vehicle"] == "uav2:3" and s.reasons() == ["poses_lost"] and s.veto


def test_an_ordinary_jittery_stream_never_degrades_the_verifier():
    s = Session(lag_behind_clock_s=0.003)
    rng = random.Random(0)
    vetoed = []
    for k in range(int(60 * RATE_HZ)):  # a minute at 20 Hz, stamps and processing jittered by up to 15 ms
        t = k / RATE_HZ + rng.uniform(-0.005, 0.005)
        s.tick(t, late_s=rng.uniform(0.0, 0.015))
        vetoed.append(s.veto)
    assert not any(vetoed) and s.row().values["poses_lost"] == "0"


def test_a_degraded_episode_is_listed_apart_and_decides_nothing_about_the_segment():
    from uav_debate_eval.live.flight_record import episode_record, headline
    from uav_debate_eval.live.veto_history import VetoEpisode, VetoEvidence, apply_live_veto
    from uav_debate_eval.report.live_section import live_markdown

    degraded = VetoEpisode(110.0, 111.5, evidence=[VetoEvidence(
        "safety/verifier", ERROR, "verifier_degraded: behind the pose stream by 0.40 s",
        {"constraint": DEGRADED, "reasons": "lag", "t": 110.0, "uavs": ""})])
    hazard = VetoEpisode(120.0, 122.0, evidence=[VetoEvidence(
        "safety/min_separation", ERROR, "violated", {"uavs": "uav1,uav2", "value": 0.23, "limit": 0.5, "t": 120.0}),
        VetoEvidence("safety/verifier", ERROR, "degraded", {"constraint": DEGRADED, "reasons": "lag", "t": 120.0})])
    assert (degraded.kind, hazard.kind) == ("degraded", "hazard")  # a hazard during a degraded veto is a hazard

    report = {"verdict": {"label": "safe", "vetoed": False, "summary": "fine"}, "violations": []}
    assert not apply_live_veto(report, [degraded], 105.0, 115.0, origin=100.0)
    assert report["verdict"] == {"label": "safe", "vetoed": False, "summary": "fine"} and report["violations"] == []
    assert [e["kind"] for e in report["live"]["degraded_episodes"]] == ["degraded"]
    assert report["live"]["veto_episodes"] == []

    record = episode_record(degraded, [], [], 100.0)
    assert record["kind"] == "degraded" and record["causes"] == ["behind the pose stream"]
    flight = {"violations": [], "live": {"flight": True, "segments": [], "veto_episodes": [],
                                         "degraded_episodes": [record], "poses_lost_before_verifier": {"uav3": 6}}}
    said = headline(flight)
    assert said == ["The verifier could not vouch for the swarm once (behind the pose stream) and held the fail-safe "
                    "veto (verifier_degraded) until it had caught up.",
                    "6 poses never reached the verifier (counted per vehicle in the live section)."]
    text = "\n".join(live_markdown(flight))
    assert "No hazard raised the veto." in text and "Fail-safe veto episodes (verifier_degraded) (1)" in text
    assert "poses lost before the verifier: uav3 6" in text


def test_a_stale_veto_while_the_estimate_was_invalid_says_so():
    """A vehicle whose estimator flagged its position invalid (GPS lost) reaches the verifier with no pose: stale,
    a veto. The flight report's data quality finds the estimator_invalid span; the episode names it as its cause and
    the headline says why the veto rose, so the operator does not look for a radio dropout."""
    from uav_debate_eval.live.flight_record import ESTIMATE_INVALID, episode_record, headline
    from uav_debate_eval.live.veto_history import VetoEpisode, VetoEvidence

    stale = VetoEpisode(110.0, 113.0, evidence=[VetoEvidence(
        "safety/stale_data", ERROR, "violated", {"uavs": "px4_0", "value": 3.0, "limit": 2.0, "t": 110.0})])
    lost = {"kind": "estimator_invalid", "uavs": ["px4_0"], "t_start": 8.0, "t_end": 11.0}
    elsewhere = {**lost, "uavs": ["px4_1"]}
    assert episode_record(stale, [], [], 100.0, [lost])["causes"] == [ESTIMATE_INVALID]
    assert episode_record(stale, [], [], 100.0, [elsewhere])["causes"] == []  # another vehicle's
    assert episode_record(stale, [], [], 100.0, [{**lost, "t_start": 1.0, "t_end": 4.0}])["causes"] == []  # before
    record = episode_record(stale, [], [], 100.0, [lost])
    said = headline({"violations": [], "live": {"segments": [], "veto_episodes": [record]}})
    assert said[-1] == ("The veto for stale data of px4_0 (t=10.0–13.0 s) came while its estimator flagged its "
                        "position invalid: no position reached the verifier (the report's estimator_invalid finding).")
