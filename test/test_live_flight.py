"""The live flight report without ROS: the poses go on the tape segment by segment, the segments are evaluated as
the panel does (judging only the waypoints due by their end), and at the end the whole flight goes through
`evaluate`. The flight report must be `evaluate` of that flight plus the live record, and its recorded MCAP must
replay to the same report."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from uav_debate_eval.core.mission import RouteSoFar
from uav_debate_eval.core.mission_file import mission_to_yaml
from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.live.flight import FlightJob, FlightRecord, evaluate_flight, final_lines
from uav_debate_eval.live.segment_job import PanelJob, PanelSettings, evaluate_segment
from uav_debate_eval.live.tape import FlightTape, load_tape
from uav_debate_eval.live.veto_history import VetoEpisode, VetoEvidence
from uav_debate_eval.report.precision import rounded
from uav_debate_eval.report.schema import validate_report
from uav_debate_eval.sim.scenarios import simulate

BASE = 1_000.0  # the stream clock at the flight's first sample


def _live(tmp_path: Path, sim, cuts: list[float], episodes: list[VetoEpisode] | None = None,
          **extra_session):
    """Stream the flight through a ring buffer as small as the panel's, tape it as segments close, evaluate each
    segment as the panel does and then the flight. Returns (flight report, its folder, segment reports)."""
    settings = PanelSettings(output_dir=str(tmp_path))
    swarm = StreamingSwarm(capacity=700)  # 35 s at 20 Hz: the tape must keep what the ring forgets
    tape, record, route, reports = FlightTape(tmp_path / "flight" / ".tape"), FlightRecord(), RouteSoFar(), []
    rows = sorted((BASE + t, u, tuple(p)) for u, tr in sim.traj.tracks.items()
                  for t, p in zip(tr.t.tolist(), tr.pos, strict=True))
    start, k = rows[0][0], 0
    bounds = [BASE + c for c in cuts] + [rows[-1][0]]

    def close(reason: str) -> None:
        nonlocal start, route, k
        tape.take(swarm)
        window = swarm.window(start, bounds[k], name=f"S{k + 1}")
        result = evaluate_segment(PanelJob(settings, sim.mission, window, f"S{k + 1}", start, bounds[k], reason,
                                           episodes or [], k + 1, [], 0, route=route))
        route = result.route
        record.add(result.report, result.path)
        reports.append(result.report)
        start, k = bounds[k], k + 1

    for t, u, p in rows:
        if t > bounds[k]:
            close("window")
        swarm.add(u, t, p)
    close("end")
    tape.take(swarm)
    session = {"topics": [f"/{u}/pose" for u in sim.traj.uav_ids], "vehicles": list(sim.traj.uav_ids),
               "clock": "ROS time from /clock (use_sim_time)", **extra_session}
    job = FlightJob(settings, sim.mission, tape.chunks, tape.vehicles, record.segments, episodes or [], session,
                    tape.stats.to_dict(), dict(swarm.rejected), [], 0, tmp_path / "flight",
                    clock_back=dict(swarm.clock_back))
    result = evaluate_flight(job)
    return result.report, Path(result.path), reports, tape


@pytest.fixture(scope="module")
def near_miss(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("near_miss")
    sim = simulate("formation", seed=0, faults=["near_miss"], duration_s=60.0)
    sim.mission.source = str(tmp / "session_mission.yaml")  # as `live` loads it: from a file
    Path(sim.mission.source).write_text(mission_to_yaml(sim.mission))
    sep = VetoEvidence("safety/min_separation", 2, "violated", {"uavs": "uav1,uav2", "t": BASE + 14.5,
                                                                 "value": 0.48, "limit": 0.5})
    episode = VetoEpisode(BASE + 14.5, BASE + 21.0, BASE + 19.9, [sep], t_raised=BASE + 14.55)
    return sim, *_live(tmp, sim, [30.0], [episode])


def test_the_flight_report_is_evaluate_of_the_whole_flight(near_miss):
    from uav_debate_eval.debate.config import DebateConfig
    from uav_debate_eval.runner.pipeline import evaluate

    sim, report, where, _, tape = near_miss
    validate_report(report)
    offline = evaluate(load_tape(tape.chunks, tape.vehicles), sim.mission, DebateConfig(backend="rules")).report
    assert report["verdict"]["label"] == offline["verdict"]["label"] == "risky"
    assert report["violations"] == offline["violations"] and report["findings"] == offline["findings"]
    assert report["rules"] == offline["rules"] and report["rules"]  # the mission's rules, over the whole flight
    assert report["live"]["tape"]["samples"] == sim.traj.n_samples  # the ring forgot, the tape did not
    # the whole flight reached 24 of 25 waypoints: only uav2's miss (the near miss pushed it off) is claimed
    misses = [f for f in report["findings"] if f["kind"] == "waypoint_miss"]
    assert [f["uavs"] for f in misses] == [["uav2"]]
    assert report["verdict"]["recommendations"] and sorted(p.name for p in (where / "figures").glob("*.png"))
    assert "<img" in (where / "report.html").read_text()


def test_segments_judge_only_the_waypoints_due_by_their_end(near_miss):
    _, report, _, segments, _ = near_miss
    first = [f for f in segments[0]["findings"] if f["kind"] == "waypoint_miss"]
    # by 30 s the route has passed 3 of its 5 waypoints; uav2 missed the second of them, nobody missed the rest
    assert [(f["uavs"], f["sentence"].split(" (")[0]) for f in first] == [(["uav2"], "uav2 missed 1 of 3 waypoints")]
    last = [f for f in segments[1]["findings"] if f["kind"] == "waypoint_miss"]
    assert [f["uavs"] for f in last] == [["uav2"]]  # the flight is over: the same miss, no other


def test_the_live_record_names_segments_episodes_and_ids_that_resolve(near_miss):
    _, report, where, segments, _ = near_miss
    live = report["live"]
    assert [s["id"] for s in live["segments"]] == ["S1", "S2"] and live["segments"][0]["vetoed"]
    assert live["segments"][0]["t_start"] == pytest.approx(0.0) and live["segments"][1]["t_end"] == pytest.approx(60.0)
    by_id = {f"{s['live']['segment']['id']}/{f['id']}": f for s in segments for f in s["findings"]}
    shown = [f for s in live["segments"] for f in s["findings"]]
    assert shown and all(by_id[f["id"]]["kind"] == f["kind"] for f in shown)
    for seg in live["segments"]:  # a sentence quoting a finding quotes that segment's finding
        for fid in __import__("re").findall(r"\bS\d+/F\d+\b", seg["summary"]):
            assert fid.startswith(seg["id"] + "/") and fid in by_id
    (ep,) = live["veto_episodes"]
    assert ep["segments"] == ["S1"] and ep["constraints"] == ["min_separation"]
    first = min(v["t_start"] for v in report["violations"] if v["constraint"] == "min_separation")
    assert ep["offending_t"] == pytest.approx(first) and ep["latency_s"] == pytest.approx(14.55 - first)
    head = live["headline"]
    assert head[0].startswith("Min separation broken in 1 episode in segment S1: worst 0.227 m against the 0.5 m")
    assert head[1].startswith("The live veto was raised once (segment S1), at most 0.")
    assert report["inputs"][0].startswith("live ROS 2 session: 5 vehicles (uav1, uav2, uav3, uav4, uav5) on /uav1/pose")
    html = (where / "report.html").read_text()
    assert f"<li>{head[0][:60]}" in html and 'id="live"' in html and "S1/F1" in html
    lines = final_lines(report, where)
    assert lines[1] == "  " + head[0] and lines[-1].endswith("(also report.json, report.md, flight.mcap)")


def test_the_recorded_mcap_replays_to_the_same_report(near_miss, tmp_path: Path):
    from uav_debate_eval.cli import main

    sim, report, where, _, _ = near_miss
    report = rounded(report)  # as its report.json shows it
    (tmp_path / "mission.yaml").write_text(mission_to_yaml(sim.mission))
    assert main(["evaluate", str(where / "flight.mcap"), "--mission", str(tmp_path / "mission.yaml"), "--out",
                 str(tmp_path / "replay"), "--quiet"]) == 3
    replay = json.loads((tmp_path / "replay" / "report.json").read_text())
    assert replay["verdict"]["label"] == report["verdict"]["label"]
    assert replay["violations"] == report["violations"] and replay["findings"] == report["findings"]
    assert main(["evaluate", str(where / "flight.mcap"), "--out", str(tmp_path / "beside"), "--quiet"]) == 3
    beside = json.loads((tmp_path / "beside" / "report.json").read_text())  # the session's mission.yaml beside it
    assert beside["violations"] == report["violations"] and beside["findings"] == report["findings"]


def test_mavros_arming_parks_the_pair_in_the_flight_report_and_its_mcap(tmp_path: Path):
    """The session's MAVROS states (nodes.mavros_state): uav1 and uav2 disarmed from the start, uav2 armed at 16 s of
    the flight. Their near miss from 14.5 s counts only from then on, in the flight report as in the bag reader's,
    and the recorded MCAP carries the arming: its replay parks the same pair."""
    from uav_debate_eval.cli import main

    sim = simulate("formation", seed=0, faults=["near_miss"], duration_s=60.0)
    states = {"uav1": [(BASE, False)], "uav2": [(BASE, False), (BASE + 16.0, True)]}
    plain, _, _, _ = _live(tmp_path / "plain", sim, [30.0])
    report, where, _, _ = _live(tmp_path / "parked", sim, [30.0], mavros={"states": states})
    [before] = [v for v in plain["violations"] if v["constraint"] == "min_separation"]
    [after] = [v for v in report["violations"] if v["constraint"] == "min_separation"]
    assert before["t_start"] < 16.0 and after["t_start"] == pytest.approx(16.0, abs=0.06)
    arming = [(e["uavs"], e["extra"]["label"]) for e in report["events"] if e["type"] == "autopilot_event"]
    assert arming == [(["uav1"], "DISARMED"), (["uav2"], "DISARMED"), (["uav2"], "ARMED")]
    assert "mavros" not in report["live"]["session"]
    (tmp_path / "mission.yaml").write_text(mission_to_yaml(sim.mission))
    assert main(["evaluate", str(where / "flight.mcap"), "--mission", str(tmp_path / "mission.yaml"), "--out",
                 str(tmp_path / "replay"), "--quiet"]) == 3
    replay = json.loads((tmp_path / "replay" / "report.json").read_text())
    assert replay["violations"] == rounded(report)["violations"]


def test_frames_placed_as_received_are_not_placed_again(tmp_path: Path):
    """PX4 without a global reference: the live input placed uav2 at the mission's origin as it received it (its
    tape holds world positions). The flight report places it no second time (it did: 5 m off, and the near miss
    of uav1 and uav2 was gone from the report), nor does the replay of its recorded MCAP."""
    from uav_debate_eval.cli import main
    from uav_debate_eval.core.mission import FrameOrigin

    sim = simulate("formation", seed=0, faults=["near_miss"], duration_s=60.0)
    plain, _, _, _ = _live(tmp_path / "plain", sim, [30.0])
    sim.mission.frame_origins = {"uav2": FrameOrigin((5.0, 0.0, 0.0), 0.0)}
    report, where, _, _ = _live(tmp_path / "spawned", sim, [30.0],
                                px4={"statuses": {}, "offsets": {}, "spawned": ["uav2"]})
    assert report["violations"] == plain["violations"] != []
    (tmp_path / "mission.yaml").write_text(mission_to_yaml(sim.mission))
    main(["evaluate", str(where / "flight.mcap"), "--mission", str(tmp_path / "mission.yaml"), "--out",
          str(tmp_path / "replay"), "--quiet"])
    assert json.loads((tmp_path / "replay" / "report.json").read_text())["violations"] == \
        rounded(report)["violations"]


def test_mavros_local_frames_are_said_in_the_flight_report_and_its_mcap(tmp_path: Path):
    """MAVROS local_position topics live: each vehicle's own frame, as the bag reader takes them; with no frames:
    in the mission the flight report says separation was checked assuming they coincide (frames_unverified), and
    so does the replay of its MCAP."""
    from uav_debate_eval.cli import main

    sim = simulate("formation", seed=0, faults=["near_miss"], duration_s=60.0)
    report, where, _, _ = _live(tmp_path, sim, [30.0], local_frames=list(sim.traj.uav_ids))
    [found] = [f for f in report["data_quality"]["findings"] if f["kind"] == "frames_unverified"]
    assert found["uavs"] == list(sim.traj.uav_ids)
    (tmp_path / "mission.yaml").write_text(mission_to_yaml(sim.mission))
    main(["evaluate", str(where / "flight.mcap"), "--mission", str(tmp_path / "mission.yaml"), "--out",
          str(tmp_path / "replay"), "--quiet"])
    replay = json.loads((tmp_path / "replay" / "report.json").read_text())
    assert [f for f in replay["data_quality"]["findings"] if f["kind"] == "frames_unverified"] == \
        [rounded(found)]


def test_mavros_local_frames_placed_by_the_sessions_fixes(tmp_path: Path):
    """MAVROS local_position with the fixes the session received (global_position/global): the flight report
    places the taped local frames as the bag reader places a recording's, and finds the near miss the world frame
    holds; its MCAP replays to the same."""
    import math

    from uav_debate_eval.cli import main

    sim = simulate("formation", seed=0, faults=["near_miss"], duration_s=60.0)
    plain, _, _, _ = _live(tmp_path / "plain", sim, [30.0])
    origins = {u: tr.pos[0] for u, tr in sim.traj.tracks.items()}  # each local frame starts at the vehicle
    lat0, lon0 = 47.397742, 8.545594
    fixes = {u: [BASE, lat0 + o[1] / 111_132.954, lon0 + o[0] / (111_319.49 * math.cos(math.radians(lat0))),
                 500.0 + o[2]] for u, o in origins.items()}
    local = copy.deepcopy(sim)
    for u, tr in local.traj.tracks.items():
        tr.pos = tr.pos - origins[u]
    report, where, _, _ = _live(tmp_path / "placed", local, [30.0], local_frames=list(sim.traj.uav_ids),
                                mavros={"states": {}, "fixes": fixes, "anchor": "uav1"})
    assert not [f for f in report["data_quality"]["findings"] if f["kind"].startswith("frames_")]
    [near] = [v for v in plain["violations"] if v["constraint"] == "min_separation"]
    [found] = [v for v in report["violations"] if v["constraint"] == "min_separation"]
    assert (found["uavs"], found["t_start"], found["t_end"]) == (near["uavs"], near["t_start"], near["t_end"])
    assert found["worst_value"] == pytest.approx(near["worst_value"], abs=0.02)
    (tmp_path / "mission.yaml").write_text(mission_to_yaml(sim.mission))
    main(["evaluate", str(where / "flight.mcap"), "--mission", str(tmp_path / "mission.yaml"), "--out",
          str(tmp_path / "replay"), "--quiet"])
    replay = json.loads((tmp_path / "replay" / "report.json").read_text())
    assert replay["violations"] == rounded(report)["violations"] and replay["findings"] == rounded(report)["findings"]
    assert replay["dsl"]["raw_tokens"] == report["dsl"]["raw_tokens"]  # the samples, to their last printed digit


def test_route_progress_passes_waypoints_in_order():
    from uav_debate_eval.core.mission import Mission
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.metrics.coordination import due_waypoints, route_progress

    pts = [(0.0, 0.0, 1.0), (10.0, 0.0, 1.0), (10.0, 10.0, 1.0), (0.0, 0.0, 1.0)]  # a closed route
    mission = Mission(waypoints={"a": pts}, waypoint_tolerance_m=0.5)

    def flown(*legs):
        path = np.concatenate([np.linspace(p, q, 50) for p, q in legs])
        return SwarmTrajectory.from_columns(np.arange(len(path)) * 0.1, ["a"] * len(path), path)

    hover = flown((pts[0], pts[0]))
    assert route_progress(hover, mission, {}) == {"a": 1}  # hovering at the start is not the route's return
    skip = flown((pts[0], (5.0, 5.0, 1.0)), ((5.0, 5.0, 1.0), pts[2]))  # cuts the corner past waypoint 2
    assert route_progress(skip, mission, {}) == {"a": 3}
    live = replace(mission, route_so_far=RouteSoFar())
    assert due_waypoints(skip, live) == {"a": [True, True, True, False]}  # the return is not due yet
    assert due_waypoints(skip, replace(live, route_so_far=RouteSoFar(final=True))) == {"a": [True] * 4}
    assert route_progress(flown((pts[2], pts[3])), mission, {"a": 3}) == {"a": 4}


def test_the_tape_counts_what_the_ring_lost_and_restarts_on_a_clock_jump(tmp_path: Path):
    swarm = StreamingSwarm(capacity=10)
    tape = FlightTape(tmp_path / "tape")
    for k in range(5):
        swarm.add("a", 100.0 + k, (0.0, 0.0, float(k)))
    assert tape.take(swarm) == 5 and tape.take(swarm) == 0
    for k in range(5, 30):  # 25 more samples into a ring of 10 before the next take
        swarm.add("a", 100.0 + k, (0.0, 0.0, float(k)))
    assert tape.take(swarm) == 10 and tape.stats.lost == {"a": pytest.approx(16.0)}
    swarm.add("a", 50.0, (0.0, 0.0, 0.0))  # a looping bag: the clock jumps back
    assert tape.take(swarm) == 1 and tape.stats.restarts == 1 and len(tape.chunks) == 1
    traj = load_tape(tape.chunks, tape.vehicles)
    assert traj.t0 == 50.0 and traj.n_samples == 1


@pytest.mark.parametrize("capacity", [3, 5, 17])
def test_a_ring_gives_the_samples_after_a_stamp_wherever_its_write_position_is(capacity: int):
    from uav_debate_eval.core.streaming import VehicleRing

    for n in range(4 * capacity):
        ring = VehicleRing(capacity)
        for k in range(n):
            ring.append(float(k), 0.0, 0.0, float(k))
        held = ring.view()
        for t in [-1.0, *np.arange(0.0, n + 1.0, 0.5).tolist()]:
            np.testing.assert_array_equal(ring.after(t), held[held[:, 0] > t])


def test_the_session_line_says_whose_clock_went_back_and_what_was_not_checked(near_miss):
    """A vehicle whose clock restarted alone during the session: its poses were dropped on arrival (`clock_back`);
    the flight report's live section names it, how far its clock went back and how many poses were not checked."""
    from copy import deepcopy

    from uav_debate_eval.report.live_section import live_markdown

    _, report, _, _, _ = near_miss
    assert report["live"]["clock_back"] == {}
    report = deepcopy(report)
    report["live"]["dropped_poses"] = {"clock_back": 101}
    report["live"]["clock_back"] = {"uav3": {"poses": 101, "back_s": 1009.42}}
    text = "\n".join(live_markdown(report))
    assert ("dropped on arrival: 101 clock back; uav3's clock went back 1009 s while the others flew on: its 101 "
            "poses stamped on it could not be placed in the flight and were not checked") in text
    validate_report(report)
