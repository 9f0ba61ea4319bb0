"""A live session that never made its flight report (killed, the power lost, a third Ctrl-C) leaves its tape, and
the tape is a flight `evaluate` reads: its manifest names the vehicles, its chunks are written whole, the session's
mission is kept beside them. The next session on the same OUT keeps it (OUT/unfinished-<time>/) instead of
overwriting it. Before: the chunks held vehicle indexes with no names on disk, and the next session deleted them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from contract import REPORT_SCHEMA

from uav_debate_eval.cli import main
from uav_debate_eval.core.mission_file import mission_to_yaml
from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.io.loader import load_inputs
from uav_debate_eval.live.tape import FlightTape, load_tape
from uav_debate_eval.report.schema import validate_report
from uav_debate_eval.sim.scenarios import simulate

BASE = 1_000.0


@pytest.fixture()
def killed_session(tmp_path: Path):
    """A session's tape after two closed segments of a near-miss flight, then nothing: the process died."""
    sim = simulate("formation", seed=0, faults=["near_miss"], duration_s=40.0)
    mission = tmp_path / "session_mission.yaml"
    mission.write_text(mission_to_yaml(sim.mission))
    out = tmp_path / "out"
    tape = FlightTape(out / "flight" / ".tape", mission)
    swarm = StreamingSwarm(capacity=2000)
    rows = sorted((BASE + t, u, tuple(p)) for u, tr in sim.traj.tracks.items()
                  for t, p in zip(tr.t.tolist(), tr.pos, strict=True))
    last = -np.inf
    for cut in (BASE + 15.0, BASE + 30.0):  # two segments close; the last 10 s are received but never taped
        for t, u, p in rows:
            if last < t <= cut:
                swarm.add(u, t, p)
        tape.take(swarm)
        last = cut
    return sim, out, tape


def test_the_tape_of_a_killed_session_is_a_flight_evaluate_reads(killed_session, tmp_path):
    sim, out, tape = killed_session
    folder = out / "flight" / ".tape"
    expected = load_tape(tape.chunks, tape.vehicles)
    traj = load_inputs([folder])  # from the disk alone: what the session held in memory is gone
    assert traj.uav_ids == expected.uav_ids == sim.traj.uav_ids
    for u in traj.uav_ids:
        np.testing.assert_array_equal(traj.tracks[u].pos, expected.tracks[u].pos)
        np.testing.assert_array_equal(traj.tracks[u].t, expected.tracks[u].t)
    assert traj.t0 == BASE and traj.t_end == pytest.approx(30.0, abs=0.11)
    assert any("the session ended without its flight report" in n for n in traj.ingest.notes)
    rc = main(["evaluate", str(folder), "--out", str(tmp_path / "report"), "--llm", "rules", "--quiet"])
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    validate_report(report, REPORT_SCHEMA)
    assert rc == 3 and report["verdict"]["label"] == "risky"  # the near miss at 14.5 s was taped
    assert {v["constraint"] for v in report["violations"]} == {"min_separation"}
    assert report["mission"]["name"] == sim.mission.name  # the session's mission, found inside the tape


def test_the_next_session_keeps_an_unfinished_tape_and_its_cut_bag(killed_session, tmp_path):
    sim, out, tape = killed_session
    bag = out / "flight" / "rosbag2"  # the session bag, cut: no metadata.yaml
    bag.mkdir()
    (bag / "rosbag2_0.mcap").write_bytes(b"\x89MCAP0\r\n")
    again = FlightTape(out / "flight" / ".tape", None)
    [kept] = sorted(out.glob("unfinished-*"))
    assert again.kept == kept and sorted(p.name for p in kept.iterdir()) == ["mission.yaml", "rosbag2", "tape"]
    assert len(list((kept / "tape").glob("*.npy"))) == 2 and not bag.exists()
    assert load_inputs([kept / "tape"]).n_samples == tape.stats.samples
    fresh = out / "flight" / ".tape"
    assert json.loads((fresh / "tape.json").read_text())["vehicles"] == [] and not list(fresh.glob("*.npy"))
    FlightTape(out / "flight" / ".tape", None)  # a session that taped nothing leaves nothing to keep
    assert len(list(out.glob("unfinished-*"))) == 1


def test_a_chunk_cut_by_the_kill_costs_its_own_poses_said_in_a_note(killed_session):
    _, out, tape = killed_session
    folder = out / "flight" / ".tape"
    whole = load_inputs([folder]).n_samples
    first = np.load(tape.chunks[0])
    tape.chunks[1].write_bytes(tape.chunks[1].read_bytes()[:200])
    traj = load_inputs([folder])
    assert traj.n_samples == len(first) < whole
    assert any("1 tape chunk(s) unreadable" in n and "00001.npy" in n for n in traj.ingest.notes)
    tape.chunks[0].write_bytes(b"")
    with pytest.raises(Exception, match="the live tape holds no pose"):
        load_inputs([folder])


def test_a_folder_that_is_neither_a_bag_nor_a_tape_is_one_line(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    assert main(["evaluate", str(tmp_path / "x"), "--out", str(tmp_path / "o")]) == 2
    assert "rosbag2 folder or live tape, at any depth" in capsys.readouterr().err
    with pytest.raises(Exception, match="not a rosbag2 .no metadata.yaml inside. nor a live session's tape"):
        load_inputs([tmp_path / "x"])


def _mavros_session(t: np.ndarray) -> dict:
    """Two MAVROS vehicles' side streams: each frame at its own EKF origin, first fixes 5 m apart east, the arming,
    the landed state, a measured velocity (north 1 m/s, as the poses move)."""
    lat, lon = 47.397742, 8.545594
    east = 5.0 / (111_319.49 * np.cos(np.radians(lat)))
    vel = np.column_stack([t, np.zeros(len(t)), np.ones(len(t)), np.zeros(len(t))])
    return {"mavros": {"states": {u: [(BASE, False), (BASE + 2.0, True)] for u in ("uav1", "uav2")},
                       "landings": {u: [(BASE, True), (BASE + 3.0, False)] for u in ("uav1", "uav2")},
                       "fixes": {"uav1": [BASE + 1.0, lat, lon, 500.0], "uav2": [BASE + 1.0, lat, lon + east, 500.0]},
                       "anchor": "uav1", "velocities": {"uav1": vel, "uav2": vel},
                       "velocity_topics": {u: f"/{u}/mavros/local_position/velocity_local" for u in ("uav1", "uav2")}},
            "local_frames": ["uav1", "uav2"], "topics": ["/uav1/mavros/local_position/pose"], "clock": "system clock"}


def test_each_close_writes_only_the_side_rows_new_since_the_last(tmp_path):
    """The side streams' arrays grow with the session (50 MAVROS vehicles' measured velocity at 30 Hz: 43 MB after
    15 minutes); each segment close rewrote all of them. Now a close writes the rows new since the last in a file of
    its own, and the tape reads them back whole."""
    from uav_debate_eval.io.live_tape import load_side, side_chunks

    tape = FlightTape(tmp_path / ".tape", None)
    t = BASE + np.arange(0.0, 30.0, 0.1)
    full = _mavros_session(t)
    for n in (100, 200, 200, 300):  # three closes with new rows, one without
        tape.keep_side(lambda n=n: _mavros_session(t[:n]))
    chunks = side_chunks(tape.folder)
    assert [c.name for c in chunks] == ["session-00000.npz", "session-00001.npz", "session-00002.npz"]
    sizes = []
    for c in chunks:
        with np.load(c) as stored:
            sizes.append(sorted(len(stored[k]) for k in stored.files if k != "index"))
    assert sizes == [[100, 100], [100, 100], [100, 100]]  # each vehicle's new rows only
    side = load_side(tape.folder)
    for u in ("uav1", "uav2"):
        np.testing.assert_array_equal(side["mavros"]["velocities"][u], full["mavros"]["velocities"][u])
    assert side["mavros"]["fixes"] == full["mavros"]["fixes"]
    chunks[1].write_bytes(b"cut")  # a damaged one: the side streams are not read (the poses alone, said)
    assert load_side(tape.folder) is None


def test_a_killed_mavros_sessions_tape_keeps_its_side_streams_and_places_its_frames(tmp_path):
    """The side streams (fixes, arming, landed state, measured velocity) are kept beside the chunks, so a killed
    MAVROS session's tape reads as its flight report would have: the two local frames placed 5 m apart by their
    fixes. Before, the tape held the poses alone: two vehicles at their own origins read as one spot, a false near
    miss over the whole flight."""
    from uav_debate_eval.io.live_tape import load_side, read_tape, save_side, session_trajectory, tape_columns

    t = BASE + np.arange(0.0, 10.0, 0.1)
    swarm = StreamingSwarm(capacity=2000)
    tape = FlightTape(tmp_path / ".tape", None)
    for u in ("uav1", "uav2"):
        for k, ti in enumerate(t.tolist()):
            swarm.add(u, ti, (0.0, 0.1 * k, 2.0))  # north at 1 m/s, each from its own origin
    tape.take(swarm)
    session = _mavros_session(t)
    tape.keep_side(lambda: session)
    side = load_side(tape.folder)
    assert sorted(side) == ["local_frames", "mavros"]  # the session's inputs are not side streams
    np.testing.assert_array_equal(side["mavros"]["velocities"]["uav2"], session["mavros"]["velocities"]["uav2"])
    traj = read_tape(tape.folder)
    live = session_trajectory(tape_columns(tape.chunks, tape.vehicles), session)  # the flight report's way
    for u in ("uav1", "uav2"):
        np.testing.assert_array_equal(traj.tracks[u].pos, live.tracks[u].pos)
        np.testing.assert_array_equal(traj.tracks[u].vel, live.tracks[u].vel)
    assert traj.tracks["uav2"].pos[0] - traj.tracks["uav1"].pos[0] == pytest.approx([5.0, 0.0, 0.0], abs=0.01)
    assert [(e.uavs, e.extra["label"]) for e in traj.ingest.log_events] == [
        (e.uavs, e.extra["label"]) for e in live.ingest.log_events]
    assert {e.extra["label"] for e in traj.ingest.log_events} == {"ARMED", "DISARMED", "landed", "airborne"}
    assert any("nor what its side streams (local_frames, mavros) received after it" in n for n in traj.ingest.notes)
    mission = tmp_path / "mission.yaml"
    mission.write_text("mission: {name: m, type: formation}\nconstraints: {min_separation_m: 2.0}\n")
    assert main(["evaluate", str(tape.folder), "--mission", str(mission), "--out", str(tmp_path / "r"), "--llm",
                 "rules", "--quiet"]) in (0, 4)
    assert not json.loads((tmp_path / "r" / "report.json").read_text())["violations"]
    (tape.folder / "session.npz").write_bytes(b"cut")  # a side file cut by the kill: the poses alone, said
    assert load_side(tape.folder) is None
    assert any("its side streams (PX4 status, MAVROS state and fixes), if it had any, were not kept or" in n
               for n in read_tape(tape.folder).ingest.notes)
    save_side(tape.folder, {"topics": ["/uav1/pose"]})  # a session without side streams: nothing to say
    assert load_side(tape.folder) == {} and not any("side streams" in n for n in read_tape(tape.folder).ingest.notes)
    save_side(tape.folder, {"px4": {"statuses": {}, "landings": {}, "offsets": {"px4_1": 0.5}, "spawned": [],
                                    "invalid": {"px4_1": [(BASE + 1.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0)]}}})
    np.testing.assert_array_equal(load_side(tape.folder)["px4"]["invalid"]["px4_1"],
                                  [[BASE + 1.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0]])


def test_side_rows_of_a_run_before_a_clock_jump_stay_off_the_new_flight():
    """A clock jump restarts the tape with the new flight (a simulator restarted), but the session keeps the side rows
    of the run before it, whose stamps overlap the new run's: the earlier run's 5 m/s landed on the new run's hover.
    Each vehicle's side rows count from the last time their clock went back."""
    from uav_debate_eval.io.live_tape import latest_run, put_measured_velocity

    run1 = np.column_stack([np.arange(0.0, 10.0, 0.1), np.full(100, 5.0), np.zeros((100, 2))])
    run2 = np.column_stack([np.arange(0.05, 10.0, 0.1), np.zeros((100, 3))])
    assert latest_run(np.concatenate([run1, run2])).tolist() == run2.tolist()
    assert latest_run(run1).tolist() == run1.tolist()
    t = np.arange(1.0, 2.0, 0.1)
    data = np.column_stack([np.zeros(len(t)), t, np.zeros((len(t), 3)), np.full((len(t), 3), np.nan)])
    put_measured_velocity((data, np.full(len(t), "uav1", dtype=object)), {"uav1": np.concatenate([run1, run2])})
    assert np.abs(data[:, 5:8]).max() < 1e-9
