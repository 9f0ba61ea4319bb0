"""A recording whose clock restarted (a simulation reset, a looping bag recorded, two runs appended to one file):
the last run is the flight, as `live` reports it, and the earlier runs are left out and said so. Before, runs on
the same stamps were kept one and "conflicting duplicates" the other (the last run's hazard hidden), and runs a few
milliseconds apart were interleaved into one flight jumping 100 m every sample (2,237 m/s "violations")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from uav_debate_eval.cli import main as cli
from uav_debate_eval.core import StreamingSwarm, SwarmTrajectory
from uav_debate_eval.core.stamps import clock_restarts

RATE = 10.0


def _runs(offsets: list[float], n: int = 201) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Runs of two vehicles (a, b), one after another in the recording, run k stamped from 1000 + offsets[k] and
    flown at x = 100 k + 2 t: (stamps, vehicles, positions, the run of each row)."""
    t, ids, pos, run = [], [], [], []
    for k, off in enumerate(offsets):
        for i in range(n):
            for u, y in (("a", 0.0), ("b", 5.0)):
                t.append(1000.0 + off + i / RATE)
                ids.append(u)
                pos.append((100.0 * k + 2.0 * i / RATE, y, 10.0))
                run.append(k)
    return np.array(t), ids, np.array(pos), np.array(run)


@pytest.mark.parametrize("offsets", [[0.0, 0.0], [0.0, 0.05], [0.0, 7.0, 3.0]])
def test_the_last_run_is_the_flight_and_the_earlier_ones_are_left_out_and_found(offsets):
    t, ids, pos, run = _runs(offsets)
    traj = SwarmTrajectory.from_columns(t, ids, pos)
    last = run == len(offsets) - 1
    assert traj.ingest.dropped == {"earlier_run": int((~last).sum())} and traj.ingest.out_of_order == 0
    assert traj.t0 == pytest.approx(1000.0 + offsets[-1])
    for u in ("a", "b"):
        tr = traj.tracks[u]
        assert len(tr) == 201 and np.allclose(tr.pos[:, 0], 100.0 * (len(offsets) - 1) + 2.0 * tr.t)
        assert np.all(np.diff(tr.pos[:, 0]) == pytest.approx(0.2))  # no jump between runs
    (finding,) = [f for f in traj.ingest.findings if f.kind == "clock_restart"]
    assert finding.uavs == ["a", "b"] and finding.t_start == 0.0
    assert finding.values["samples"] == int((~last).sum())


def test_rows_out_of_order_and_clocks_a_constant_apart_are_no_restart():
    t, ids, pos, _ = _runs([0.0])
    t = t.copy()
    t[2 * 100] -= 5.05  # one row of a stamped 5 s back: sorted, counted
    b_rows = np.array([u == "b" for u in ids])
    t[b_rows] -= 30.0  # b's computer 30 s behind a's
    traj = SwarmTrajectory.from_columns(t, ids, pos)
    assert "earlier_run" not in traj.ingest.dropped and traj.ingest.out_of_order == 1
    assert len(traj.tracks["a"]) == len(traj.tracks["b"]) == 201
    assert not [f for f in traj.ingest.findings if f.kind == "clock_restart"]


def test_restarts_are_found_per_vehicle_in_recording_order():
    a = np.concatenate([np.arange(0.0, 3.0, 0.1), np.arange(0.5, 1.0, 0.1)])  # back 2.4 s for 5 rows: a restart
    short = np.concatenate([np.arange(0.0, 3.0, 0.1), np.arange(0.5, 0.9, 0.1)])  # back for 4 rows only
    lone = np.arange(0.0, 3.0, 0.1)
    lone[5] = 60.0  # one sample stamped ahead, the flight going on behind it: a stray (a gap), not a run
    tv = np.concatenate([a, short, lone])
    earlier = clock_restarts(tv, np.cumsum([0, len(a), len(short), len(lone)]))
    assert earlier is not None
    assert earlier[:len(a)].tolist() == [True] * 30 + [False] * 5 and not earlier[len(a):].any()
    assert clock_restarts(np.arange(0.0, 5.0, 0.1), np.array([0, 50])) is None


def test_live_and_evaluate_keep_the_same_run(tmp_path: Path):
    """The live stream's rings restart on the loop; the recording of the same poses, evaluated, keeps that run."""
    t, ids, pos, run = _runs([0.0, 0.05])
    swarm = StreamingSwarm(capacity=1000)
    for ti, u, p in zip(t.tolist(), ids, pos, strict=True):
        swarm.add(u, ti, p)
    assert swarm.resets == 1
    offline = SwarmTrajectory.from_columns(t, ids, pos)
    live = swarm.window(-np.inf, np.inf)
    for u in ("a", "b"):
        assert np.allclose(live.tracks[u].pos, offline.tracks[u].pos)
        assert np.allclose(live.tracks[u].t + live.t0, offline.tracks[u].t + offline.t0)


def test_evaluate_reports_the_last_run_and_what_it_left_out(tmp_path: Path):
    t, ids, pos, run = _runs([0.0, 0.05])
    pos[(run == 1) & (np.array(ids) == "b"), 1] = 0.4  # the last run's near miss: b 0.4 m beside a
    csv = tmp_path / "sim_reset.csv"
    lines = ["t,uav_id,x,y,z"] + [f"{ti:.3f},{u},{p[0]:.3f},{p[1]:.3f},{p[2]:.3f}"
                                  for ti, u, p in zip(t.tolist(), ids, pos.tolist(), strict=True)]
    csv.write_text("\n".join(lines) + "\n")
    mission = tmp_path / "mission.yaml"
    mission.write_text("name: reset\ntype: formation\nconstraints: {min_separation_m: 1.0, max_speed_mps: 5.0}\n")
    assert cli(["evaluate", str(csv), "--mission", str(mission), "--out", str(tmp_path / "out"), "--quiet"]) == 3
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {v["constraint"] for v in report["violations"]} == {"min_separation"}  # no 2,000 m/s interleaving
    assert report["ingest"]["dropped"] == {"earlier_run": 402}
    kinds = [f["kind"] for f in report["data_quality"]["findings"]]
    assert kinds == ["clock_restart"]
    assert "were not checked; this report covers the last run" in (tmp_path / "out" / "report.md").read_text()


def test_per_drone_files_merged_keep_what_each_file_dropped_and_found(tmp_path: Path):
    """Per-drone recordings merged into one flight: before, each file's counts and findings were lost (the merge
    re-read only the rows each file kept): rows_in 402 of 805, no `nan`, no clock_restart."""
    t, ids, pos, _ = _runs([0.0, 0.05])
    paths = []
    for u in ("a", "b"):
        rows = [f"{ti:.3f},{u},{p[0]:.3f},{p[1]:.3f},{p[2]:.3f}"
                for ti, v, p in zip(t.tolist(), ids, pos.tolist(), strict=True) if v == u]
        if u == "a":
            rows.insert(10, "1000.95,a,nan,0,10")
        paths.append(tmp_path / f"drone_{u}.csv")
        paths[-1].write_text("\n".join(["t,uav_id,x,y,z", *rows]) + "\n")
    (tmp_path / "late.csv").write_text("t,uav_id,x,y,z\n" + "".join(
        f"{1000.05 + 3.0 + k / RATE:.3f},{u},{k / RATE:.3f},9,10\n" for k in range(50) for u in ("a", "b")))
    from uav_debate_eval.io.loader import load_inputs

    traj = load_inputs([*paths, tmp_path / "late.csv"])
    assert traj.ingest.rows_in == 403 + 402 + 100 and traj.ingest.rows_kept == 402 + 100
    assert traj.ingest.dropped == {"nan": 1, "earlier_run": 402}
    restarts = [f for f in traj.ingest.findings if f.kind == "clock_restart"]
    assert sorted(u for f in restarts for u in f.uavs) == ["drone_a", "drone_b"]  # named as their tracks
    assert all(f.t_start == pytest.approx(0.0) for f in restarts)  # the merged flight starts with the last run
    assert sorted(traj.uav_ids) == ["drone_a", "drone_b", "late/a", "late/b"]


def _one_rebooted(n: int = 201) -> tuple[np.ndarray, list[str], np.ndarray]:
    """a and b flown together at 10 Hz; b's companion computer restarts at 1010 s, its stamps from 0.5 s on."""
    t, ids, pos = [], [], []
    for i in range(n):
        for u, y in (("a", 0.0), ("b", 5.0)):
            ti = 1000.0 + i / RATE
            t.append(ti if u == "a" or ti < 1010.0 else ti - 1009.5)
            ids.append(u)
            pos.append((2.0 * i / RATE, y, 10.0))
    return np.array(t), ids, np.array(pos)


def test_one_vehicle_s_clock_restarting_alone_leaves_its_later_samples_out_live_and_offline(tmp_path: Path):
    """Before: evaluate kept b's samples on its new clock (0.5 s, 1,000 s before a's) and dropped its flight with a,
    while live reset the whole swarm on b's first such pose. Now both keep b's flight on the common clock and leave
    its later samples out (`clock_back`), and the report says what was not checked."""
    t, ids, pos = _one_rebooted()
    offline = SwarmTrajectory.from_columns(t, ids, pos)
    assert offline.ingest.dropped == {"clock_back": 101} and offline.t0 == 1000.0
    assert len(offline.tracks["a"]) == 201 and len(offline.tracks["b"]) == 100
    assert offline.tracks["b"].t[-1] == pytest.approx(9.9)
    (finding,) = offline.ingest.findings
    assert finding.kind == "clock_back" and finding.uavs == ["b"] and finding.t_start == pytest.approx(9.9)
    assert finding.values == {"samples": 101, "back_s": pytest.approx(1009.9 - 0.5)}
    swarm = StreamingSwarm(capacity=1000)
    for ti, u, p in zip(t.tolist(), ids, pos, strict=True):
        swarm.add(u, ti, p)
    assert swarm.resets == 0 and swarm.rejected == {"clock_back": 101}  # once known, b's later samples at once
    assert swarm.clock_back == {"b": (101, pytest.approx(1009.9 - 0.5))}
    live = swarm.window(-np.inf, np.inf)
    for u in ("a", "b"):
        assert np.allclose(live.tracks[u].pos, offline.tracks[u].pos)
        assert np.allclose(live.tracks[u].t + live.t0, offline.tracks[u].t + offline.t0)
    csv = tmp_path / "reboot.csv"
    csv.write_text("t,uav_id,x,y,z\n" + "".join(f"{ti:.3f},{u},{p[0]:.3f},{p[1]:.3f},{p[2]:.3f}\n"
                                                for ti, u, p in zip(t.tolist(), ids, pos.tolist(), strict=True)))
    mission = tmp_path / "mission.yaml"
    mission.write_text("name: reboot\ntype: formation\nconstraints: {min_separation_m: 1.0, stale_timeout_s: 1.0}\n")
    assert cli(["evaluate", str(csv), "--mission", str(mission), "--out", str(tmp_path / "out"), "--quiet"]) == 3
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["ingest"]["dropped"] == {"clock_back": 101}
    assert {v["constraint"] for v in report["violations"]} == {"stale_data"}  # b unheard on the flight's clock
    assert [f["kind"] for f in report["data_quality"]["findings"]] == ["clock_back"]
    assert ("The clock of b went back 1009.4 s at 9.9 s while the others flew on: its 101 later samples could not "
            "be placed in the flight and were not checked.") in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize("burst", [1, 3])
def test_poses_stamped_seconds_ahead_then_the_clock_going_on_are_strays_live_and_offline(burst: int):
    """A time-sync glitch stamps `burst` poses of c 5 s ahead, then c goes on on its clock. Before, evaluate sorted
    them in: the first took the place of c's real sample at its stamp (a "conflicting duplicate" of it, kept first),
    c jumping 10 m there and back; live kept it and reset the swarm at c's next pose. Now both drop them."""
    t, ids, pos = [], [], []
    for i in range(200):
        for u, y in (("a", 0.0), ("b", 5.0), ("c", 10.0)):
            t.append(100.0 + i / RATE + (5.0 if u == "c" and 50 <= i < 50 + burst else 0.0))
            ids.append(u)
            pos.append((2.0 * i / RATE, y, 5.0))
    t, pos = np.array(t), np.array(pos)
    offline = SwarmTrajectory.from_columns(t, ids, pos)
    assert offline.ingest.dropped == {"stray_stamp": burst} and offline.ingest.out_of_order == 0
    c = offline.tracks["c"]
    assert len(c) == 200 - burst and np.allclose(c.pos[:, 0], 2.0 * c.t)  # every kept sample where it was
    (finding,) = offline.ingest.findings
    assert finding.kind == "stray_stamp" and finding.uavs == ["c"] and finding.values["samples"] == burst
    swarm = StreamingSwarm(capacity=1000)
    for ti, u, p in zip(t.tolist(), ids, pos, strict=True):
        swarm.add(u, ti, p)
    assert swarm.resets == 0 and swarm.rejected == {"stray_stamp": burst}
    live = swarm.window(-np.inf, np.inf)
    for u in ("a", "b", "c"):
        assert np.allclose(live.tracks[u].pos, offline.tracks[u].pos)
        assert np.allclose(live.tracks[u].t + live.t0, offline.tracks[u].t + offline.t0)


@pytest.mark.parametrize("late", [1, 2, 3])
def test_a_bag_loop_whose_topics_interleave_at_the_loop_is_one_restart_live_and_offline(late: int):
    """A bag of four vehicles, a topic each, looping: a's first pose of the next run is delivered before the last
    poses of this run of `late` others (an executor behind on a loaded machine). Before, with two or more of them,
    live took a for a vehicle whose clock restarted alone (a pose lost, `verifier_degraded`, a warning) and evaluate
    of the recording kept a's first run beside the others' second (a's whole second run left out as `clock_back`).
    Now both see the one restart of the stream: the last run whole, nothing lost."""
    names = "abcd"
    run_rows = [(u, 100.0 + i / RATE, (2.0 * i / RATE + 100.0 * k, 5.0 * names.index(u), 10.0))
                for k in range(2) for i in range(50) for u in names]
    n = 50 * len(names)
    rows = run_rows[:n - late] + [run_rows[n]] + run_rows[n - late:n] + run_rows[n + 1:]
    t = np.array([r[1] for r in rows])
    ids = [r[0] for r in rows]
    pos = np.array([r[2] for r in rows])
    swarm = StreamingSwarm(capacity=1000)
    for ti, u, p in zip(t.tolist(), ids, pos, strict=True):
        swarm.add(u, ti, p)
    assert swarm.resets == 1 and swarm.rejected == {} and swarm.clock_back == {}
    offline = SwarmTrajectory.from_columns(t, ids, pos)
    assert offline.ingest.dropped == {"earlier_run": n}
    assert [f.kind for f in offline.ingest.findings] == ["clock_restart"]
    live = swarm.window(-np.inf, np.inf)
    for u in names:
        assert np.allclose(offline.tracks[u].pos[:, 0], 100.0 + 2.0 * offline.tracks[u].t)  # the second run
        assert np.allclose(live.tracks[u].pos, offline.tracks[u].pos)
        assert np.allclose(live.tracks[u].t + live.t0, offline.tracks[u].t + offline.t0)


def test_a_sparse_vehicle_on_a_clock_ahead_is_kept_live_as_offline():
    """c joins at 0.5 Hz on a clock 3 s ahead of a's and b's. Before, live held each of its poses as a stamp ahead
    and dropped it when the others went on (15 of 15 lost); evaluate keeps them (each vehicle on its own clock)."""
    t, ids, pos = [], [], []
    for i in range(300):
        for u in "ab":
            t.append(100.0 + i / RATE)
            ids.append(u)
            pos.append((2.0 * i / RATE, 5.0 * "ab".index(u), 10.0))
        if i % 20 == 5:
            t.append(100.0 + i / RATE + 3.0)
            ids.append("c")
            pos.append((2.0 * i / RATE, 10.0, 10.0))
    t, pos = np.array(t), np.array(pos)
    swarm = StreamingSwarm(capacity=1000)
    for ti, u, p in zip(t.tolist(), ids, pos, strict=True):
        swarm.add(u, ti, p)
    assert swarm.resets == 0 and swarm.rejected == {} and len(swarm.rings["c"]) == 15
    offline = SwarmTrajectory.from_columns(t, ids, pos)
    assert offline.ingest.dropped == {} and not offline.ingest.findings
    live = swarm.window(-np.inf, np.inf)
    for u in "abc":
        assert np.allclose(live.tracks[u].pos, offline.tracks[u].pos)
        assert np.allclose(live.tracks[u].t + live.t0, offline.tracks[u].t + offline.t0)


def test_a_row_stamped_before_everything_its_vehicle_recorded_is_a_stray():
    """One row stamped 0.06 s after boot among rows at 125 s of a log that began at 89.6 s (a real ArduCopter SITL
    log's XKF1): sorted in, the flight began 89.5 s early. A row stamped back within the vehicle's span stays a late
    delivery, sorted (above)."""
    from uav_debate_eval.core.stamps import behind_strays

    t = np.concatenate([np.arange(89.6, 125.15, 0.1), [0.056], np.arange(125.2, 150.0, 0.1)])
    stray = behind_strays(t, np.array([0, len(t)]))
    assert stray is not None and np.flatnonzero(stray).tolist() == [356]
    traj = SwarmTrajectory.from_columns(t, ["v"] * len(t), np.zeros((len(t), 3)))
    assert traj.ingest.dropped == {"stray_stamp": 1} and traj.t0 == pytest.approx(89.6)
    inside = t.copy()
    inside[356] = 100.0  # within the span: a late delivery
    assert behind_strays(inside, np.array([0, len(t)])) is None
