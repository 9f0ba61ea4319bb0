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
