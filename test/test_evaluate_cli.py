"""`uav-debate-eval evaluate`: format round trips, exit codes (CONTRACT.md §4), bad input, batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from batch_summary import summary_rows
from contract import REPORT_SCHEMA

from uav_debate_eval.cli import main
from uav_debate_eval.report.schema import validate_report
from uav_debate_eval.sim.scenarios import simulate

CONTRACT_SCHEMA = REPORT_SCHEMA
PX4 = Path(__file__).parent / "fixtures" / "px4" / "sample_log_small.ulg"
FORMATS = {"csv": "trajectory.csv", "mcap": "trajectory.mcap", "db3": "trajectory.db3", "bag": "trajectory.bag"}


@pytest.fixture(scope="module")
def flights(tmp_path_factory):
    """The same near-miss flight in CSV, MCAP, SQLite3 and ROS 1, and a clean flight, each with its mission.yaml."""
    root = tmp_path_factory.mktemp("flights")
    near = simulate("formation", seed=1, duration_s=40, faults=["near_miss"])
    near.write(root / "near", formats=tuple(FORMATS))
    clean = simulate("formation", seed=1, duration_s=40)
    clean.write(root / "clean", formats=("csv", "mcap"))
    return {"root": root, "near": root / "near", "clean": root / "clean", "truth": near.truth,
            "period": near.traj.sample_period}


def run(argv: list[str]) -> int:
    return main(["evaluate", *argv])


def load(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    validate_report(report)
    validate_report(report, CONTRACT_SCHEMA)
    return report


def test_round_trip_same_violations_in_every_format(flights, tmp_path):
    reports = {}
    for fmt, name in FORMATS.items():
        out = tmp_path / fmt
        assert run([str(flights["near"] / name), "--out", str(out), "--quiet"]) == 3
        reports[fmt] = load(out)
    ref = reports["csv"]
    truth = next(f for f in flights["truth"] if f.kind == "near_miss")
    assert [v["constraint"] for v in ref["violations"]] == ["min_separation"]
    assert ref["violations"][0]["uavs"] == sorted(truth.uavs)
    assert ref["violations"][0]["t_start"] == pytest.approx(truth.t_start, abs=flights["period"])
    for fmt, rep in reports.items():
        assert rep["verdict"]["label"] == "risky", fmt
        assert rep["verdict"]["vetoed"] is True
        assert rep["mission"]["uavs"] == ref["mission"]["uavs"], fmt
        assert len(rep["violations"]) == len(ref["violations"]), fmt
        for a, b in zip(rep["violations"], ref["violations"], strict=True):
            assert (a["constraint"], a["uavs"], a["limit"]) == (b["constraint"], b["uavs"], b["limit"]), fmt
            assert abs(a["t_start"] - b["t_start"]) <= flights["period"] + 1e-9, fmt
            assert abs(a["t_end"] - b["t_end"]) <= flights["period"] + 1e-9, fmt
            assert a["worst_value"] == pytest.approx(b["worst_value"], abs=1e-4), fmt
    for fmt in ("mcap", "db3", "bag"):  # the three bag encodings carry identical samples
        assert reports[fmt]["violations"] == reports["mcap"]["violations"]


def test_rules_backend_is_deterministic(flights, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert run([str(flights["near"] / "trajectory.csv"), "--out", str(out), "--quiet"]) == 3
    ra, rb = load(a), load(b)
    for r in (ra, rb):
        r.pop("timing")
        r["debate"].pop("elapsed_s", None)
    assert ra == rb
    assert _transcript(a) == _transcript(b)


def _transcript(out: Path) -> list[dict]:
    """Transcript rows without wall-clock fields (latency, elapsed time)."""
    rows = [json.loads(x) for x in (out / "transcript.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.endswith(("latency_s", "elapsed_s"))} for r in rows]


def test_clean_flight_exits_zero_and_is_quiet_off_terminal(flights, tmp_path, capsys):
    out = tmp_path / "clean"
    assert run([str(flights["clean"] / "trajectory.mcap"), "--out", str(out), "--segment-mode", "window",
                "--window", "10"]) == 0
    cap = capsys.readouterr()
    assert cap.err == ""  # no progress bar when stderr is not a terminal
    assert cap.out.startswith("safe: 0 violation(s)")
    rep = load(out)
    assert rep["violations"] == [] and rep["verdict"]["label"] in ("safe", "borderline")
    assert [s["t_start"] for s in rep["segments"]] == pytest.approx([0.0, 10.0, 20.0, 30.0])


def test_px4_ulog_without_mission(tmp_path):
    out = tmp_path / "px4"
    # CONTRACT §3: the limits come from the vehicle's parameters; its estimator never had a valid horizontal
    # position, so the speed could not be checked: inconclusive; its altitude was valid, so the vertical speed was
    assert run([str(PX4), "--out", str(out), "--quiet"]) == 4
    rep = load(out)
    assert rep["mission"]["uavs"] == ["sample_log_small"]
    # and its attitude against PX4's own setpoints at the default 45° (its MPC_TILTMAX_AIR 25° is under it)
    assert rep["mission"]["constraints_checked"] == ["max_speed", "max_vertical_speed", "attitude_control"]
    # a VTOL (is_vtol; SYS_AUTOSTART 13014): the looser of its plane's airspeed limit and its multicopter clamp
    assert rep["mission"]["limit_sources"]["max_speed"].startswith("sample_log_small: 1.5 × FW_AIRSPD_MAX 30 m/s")
    assert "max_speed 45 m/s from sample_log_small: 1.5 × FW_AIRSPD_MAX 30 m/s" in " ".join(rep["notes"])
    assert {n["constraint"] for n in rep["data_quality"]["not_evaluable"]} == {"max_speed"}
    assert rep["safety"]["margins"]["max_vertical_speed"]["worst_value"] < 0.5  # on the bench
    assert "clocks aligned with GPS UTC time (t = UTC seconds)" in rep["ingest"]["notes"]


def _bad_inputs(root: Path, flights) -> dict[str, Path]:
    raw = (flights["near"] / "trajectory.mcap").read_bytes()
    bad = {"garbled.mcap": raw[:8] + bytes(range(256)) * 8 + raw[-8:], "random.db3": bytes(range(256)) * 64,
           "nocols.csv": b"time,name,px\n1,a,2\n", "empty.csv": b"",
           "instant.csv": b"t,uav_id,x,y,z\n5.0,uav1,0,0,2\n5.0,uav2,0.1,0,2\n"}
    out = {}
    for name, data in bad.items():
        (root / name).write_bytes(data)
        out[name] = root / name
    (root / "emptydir").mkdir()
    out["emptydir"] = root / "emptydir"
    return out


@pytest.mark.parametrize("name,reason", [
    ("garbled.mcap", "cannot read bag"), ("random.db3", "cannot read bag"),  # a cut one is recovered
    ("nocols.csv", "missing required column(s): t, uav_id, x, y, z"), ("empty.csv", "empty file"),
    ("emptydir", "folder holds no input"),
    # one pose per vehicle (a real bag's GPS topic held one message): no "held throughout" over no time
    ("instant.csv", "the poses read are a single instant (2 sample(s) at 0 s): a flight needs samples over time"),
])
def test_bad_input_exit_2_one_line_nothing_written(flights, tmp_path, capsys, name, reason):
    path = _bad_inputs(tmp_path, flights)[name]
    out = tmp_path / "out"
    assert run([str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err and reason in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_bad_arguments_exit_2(flights, tmp_path, capsys):
    csv_path = str(flights["near"] / "trajectory.csv")
    with pytest.raises(SystemExit) as exc:
        run([csv_path, "--out", str(tmp_path / "o"), "--llm", "nonsense"])
    assert exc.value.code == 2
    assert run([csv_path, "--out", str(tmp_path / "o"), "--mission", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: cannot read mission file" in capsys.readouterr().err
    assert run([csv_path, "--out", str(tmp_path / "o"), "--window", "0"]) == 2
    assert run([str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()


def test_batch_folder_with_failures_exit_2(flights, tmp_path, capsys):
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "near.csv").write_bytes((flights["near"] / "trajectory.csv").read_bytes())
    (folder / "clean.mcap").write_bytes((flights["clean"] / "trajectory.mcap").read_bytes())
    (folder / "mission.yaml").write_bytes((flights["near"] / "mission.yaml").read_bytes())
    raw = (flights["near"] / "trajectory.mcap").read_bytes()
    (folder / "broken.mcap").write_bytes(raw[:8] + bytes(range(256)) * 8 + raw[-8:])
    out = tmp_path / "out"
    assert run([str(folder), "--out", str(out), "--jobs", "2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "broken.mcap" in err and "cannot read bag" in err
    rows = {Path(r["file"]).name: r for r in summary_rows(out)}
    assert sorted(rows) == ["broken.mcap", "clean.mcap", "near.csv"]
    assert rows["near.csv"]["status"] == "ok" and rows["near.csv"]["label"] == "risky"
    assert rows["near.csv"]["violations"] == "1"
    assert rows["clean.mcap"]["violations"] == "0"
    assert rows["broken.mcap"]["status"] == "failed" and "cannot read bag" in rows["broken.mcap"]["error"]
    assert float(rows["near.csv"]["time_s"]) > 0 and int(rows["near.csv"]["dsl_tokens"]) > 0
    load(out / "near_csv")
    load(out / "clean_mcap")
    assert not (out / "broken_mcap").exists()
    md = (out / "summary.md").read_text()
    assert md.count("\n| ") == 4 and "broken" in md


def test_batch_of_files_exit_3_then_0(flights, tmp_path):
    near, clean = flights["near"] / "trajectory.csv", flights["clean"] / "trajectory.csv"
    out = tmp_path / "mixed"
    assert run([str(near), str(clean), "--out", str(out), "--jobs", "1", "--quiet"]) == 3
    assert [r["label"] for r in summary_rows(out)] == ["risky", "safe"]
    assert sorted(p.name for p in out.iterdir()) == ["summary.csv", "summary.md", "trajectory_csv",
                                                     "trajectory_csv_2"]
    for row in summary_rows(out):  # the scores as each report.json gives them (rounded once), not 16 digits
        scores = json.loads((Path(row["report"]) / "report.json").read_text())["scores"]
        assert [row[k] for k in ("flight_control", "safety", "overall")] == \
            [str(scores[k]) for k in ("flight_control", "safety", "overall")]
    only_clean = tmp_path / "clean"
    assert run([str(flights["clean"] / "*.csv"), "--out", str(only_clean), "--quiet"]) == 0
    assert len(summary_rows(only_clean)) == 1


def test_several_ulogs_are_one_flight_unless_batch(tmp_path):
    a, b = tmp_path / "px4a.ulg", tmp_path / "px4b.ulg"
    a.write_bytes(PX4.read_bytes())
    b.write_bytes(PX4.read_bytes())
    out = tmp_path / "one"
    assert run([str(a), str(b), "--out", str(out), "--quiet"]) == 4  # own limits, not evaluable: inconclusive
    rep = load(out)
    # one flight; two copies of one log are one vehicle recorded twice (not two vehicles 0 m apart)
    assert rep["mission"]["uavs"] == ["px4a"]
    assert [f["uavs"] for f in rep["data_quality"]["findings"] if f["kind"] == "duplicate_vehicle"] == [
        ["px4a", "px4b"]]
    batch = tmp_path / "two"
    assert run([str(a), str(b), "--out", str(batch), "--batch", "--jobs", "1", "--quiet"]) == 4
    assert [r["status"] for r in summary_rows(batch)] == ["ok", "ok"]
    assert (batch / "px4a_ulg" / "report.json").exists() and (batch / "px4b_ulg" / "report.json").exists()
