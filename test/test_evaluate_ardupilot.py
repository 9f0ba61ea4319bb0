"""`evaluate`, `compare-flights` and batches on ArduPilot logs (issue 27): vehicles, flight time, violations,
data-quality findings, autopilot events, exit codes 0/3/4/2, reports valid against the schema."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from ardupilot_logs import Vehicle, swarm, write_bin, write_mission, write_swarm_bins, write_tlog
from batch_summary import summary_rows
from contract import COMPARISON_SCHEMA, REPORT_SCHEMA

from uav_debate_eval.cli import main
from uav_debate_eval.compare_flights.build import validate_comparison
from uav_debate_eval.report.schema import validate_report


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ardupilot_cli")
    calm = root / "calm"
    return {"root": root, "bins": write_swarm_bins(root / "swarm"), "tlog": write_tlog(swarm(), root / "swarm.tlog"),
            "calm": write_swarm_bins(calm, overspeed=False), "mission": write_mission(root)}


def evaluate(args: list[str], out: Path) -> tuple[int, dict | None]:
    rc = main(["evaluate", *args, "--out", str(out), "--llm", "rules", "--quiet"])
    path = out / "report.json"
    if not path.is_file():
        return rc, None
    report = json.loads(path.read_text())
    validate_report(report, REPORT_SCHEMA)
    return rc, report


def _quality(report: dict) -> dict[tuple[str, str], tuple[float, float]]:
    return {(f["kind"], f["uavs"][0]): (f["t_start"], f["t_end"]) for f in report["data_quality"]["findings"]}


def _check_swarm_report(rep: dict) -> None:
    assert rep["mission"]["uavs"] == ["sysid1", "sysid2", "sysid3"]
    assert rep["verdict"]["label"] == "risky"
    [v] = rep["violations"]  # the overspeed only: no glitch, no failed estimate, no gap is a violation
    assert (v["constraint"], v["uavs"]) == ("max_speed", ["sysid1"])
    assert v["t_start"] == pytest.approx(20.0) and v["t_end"] == pytest.approx(24.9, abs=1e-6)
    assert v["worst_value"] == pytest.approx(8.0, abs=1e-3)
    dq = _quality(rep)
    assert dq[("gps_glitch", "sysid2")] == pytest.approx((30.0, 32.2))
    assert dq[("estimator_invalid", "sysid3")] == pytest.approx((40.0, 44.9))
    assert dq[("ekf_lane_switch", "sysid3")] == pytest.approx((42.0, 42.0))
    assert dq[("logging_gap", "sysid2")] == pytest.approx((49.9, 51.5))
    lost = {(n["constraint"], n["uavs"][0]) for n in rep["data_quality"]["not_evaluable"]}
    assert lost == {(c, "sysid3") for c in ("min_separation", "max_speed", "max_vertical_speed", "geofence")}
    assert rep["data_quality"]["status"] == "degraded"
    land = next(f for f in rep["findings"] if f["kind"] == "flight_mode")  # the panel sees the EKF failsafe
    assert land["severity"] == "warning" and land["uavs"] == ["sysid3"] and "switched to LAND" in land["sentence"]
    assert land["refs"][0] in rep["dsl"]["text"]
    fs = next(f for f in rep["findings"] if f["kind"] == "failsafe")
    assert fs["uavs"] == ["sysid1"] and (fs["t_start"], fs["t_end"]) == pytest.approx((50.0, 52.0))
    assert not any("PreArm" in f["sentence"] for f in rep["findings"])


def test_three_bins_are_one_flight(logs, tmp_path, capsys):
    rc, rep = evaluate([*map(str, logs["bins"]), "--mission", str(logs["mission"])], tmp_path / "bins")
    assert rc == 3
    _check_swarm_report(rep)
    assert rep["dsl"]["text"].count("\n") > 10
    assert "mode=LAND reason=ekf_failsafe" in rep["dsl"]["text"]
    ekf = next(f for f in rep["findings"] if f["kind"] == "autopilot_error")
    assert ekf["uavs"] == ["sysid3"] and "EKFCHECK bad variance" in ekf["sentence"]
    refused = next(f for f in rep["findings"] if "refused" in f["sentence"])
    assert refused["sentence"].startswith("sysid2's autopilot refused a change to AUTO at 15 s (autopilot_error ")
    assert refused["t_start"] == refused["t_end"] == pytest.approx(15.0)
    md = (tmp_path / "bins" / "report.md").read_text()  # the events table says what the autopilot logged
    assert "| flight\\_mode | 40.800 | sysid3 | mode=LAND reason=ekf\\_failsafe" in md
    assert "mode=LAND reason=ekf_failsafe </td>" in (tmp_path / "bins" / "report.html").read_text()


def test_tlog_of_the_same_flight(logs, tmp_path):
    rc, rep = evaluate([str(logs["tlog"]), "--mission", str(logs["mission"])], tmp_path / "tlog")
    assert rc == 3
    _check_swarm_report(rep)


def test_gps_glitch_alone_is_a_finding_not_a_violation(logs, tmp_path):
    rc, rep = evaluate([str(logs["bins"][1]), "--mission", str(logs["mission"])], tmp_path / "glitch")
    assert rc == 0
    assert rep["violations"] == [] and rep["verdict"]["label"] == "safe"
    assert set(_quality(rep)) == {("gps_glitch", "sysid2"), ("logging_gap", "sysid2")}


def test_failed_estimate_alone_is_not_evaluable_not_a_violation(logs, tmp_path):
    rc, rep = evaluate([str(logs["bins"][2]), "--mission", str(logs["mission"])], tmp_path / "ekf")
    assert rc == 0  # the 12 m/s runaway lies inside the span the EKF itself flags invalid
    assert rep["violations"] == []
    assert ("estimator_invalid", "sysid3") in _quality(rep)


def test_estimate_lost_for_half_the_flight_is_inconclusive(logs, tmp_path):
    lost = write_bin(Vehicle(3, 90.0, 20.0, ekf_failure=True, ekf_lost=(10.0, 40.0)), tmp_path / "lost.bin")
    rc, rep = evaluate([str(lost), "--mission", str(logs["mission"])], tmp_path / "lost")
    assert rc == 4  # no violation, but the speed and fence checks lost half the flight
    assert rep["verdict"]["label"] == "inconclusive" and rep["violations"] == []
    assert rep["data_quality"]["status"] == "poor"


@pytest.mark.parametrize("name,data,reason", [
    ("noise.bin", bytes(range(256)) * 8, "not an ArduPilot DataFlash log"),
    ("empty.tlog", b"", "not a MAVLink telemetry log"),
    ("head.bin", None, "no position in the log: no EKF position logged"),
])
def test_bad_log_exit_2_one_line_nothing_written(logs, tmp_path, capsys, name, data, reason):
    path = tmp_path / name
    path.write_bytes(data if data is not None else logs["bins"][0].read_bytes()[:500])
    out = tmp_path / "out"
    assert main(["evaluate", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err and reason in err
    assert not out.exists()


def test_logs_of_different_days_are_a_batch(logs, tmp_path, capsys):
    day2 = tmp_path / "day2"
    day2.mkdir()
    later = write_bin(dataclasses.replace(swarm(overspeed=False)[0], week_shift=1), day2 / "01.BIN")
    out = tmp_path / "days"
    rc = main(["evaluate", str(logs["bins"][0]), str(later), "--mission", str(logs["mission"]), "--out", str(out),
               "--jobs", "1"])
    assert rc == 3
    assert "evaluated one by one (time spans do not overlap" in capsys.readouterr().err
    assert [(r["status"], r["label"], r["violations"]) for r in summary_rows(out)] == [("ok", "risky", "1"),
                                                                                 ("ok", "safe", "0")]


def test_dask_batch_takes_bin_inputs(logs, tmp_path):
    pytest.importorskip("distributed")
    folder = tmp_path / "fleet"
    folder.mkdir()
    for name, src in (("overspeed.bin", logs["bins"][0]), ("calm.bin", logs["calm"][0])):
        (folder / name).write_bytes(src.read_bytes())
    (folder / "mission.yaml").write_bytes(logs["mission"].read_bytes())
    out = tmp_path / "dask"
    assert main(["evaluate", str(folder), "--out", str(out), "--scheduler", "local", "--quiet"]) == 3
    rows = {Path(r["file"]).name: r for r in summary_rows(out)}
    assert rows["overspeed.bin"]["violations"] == "1" and rows["calm.bin"]["label"] == "safe"
    validate_report(json.loads((out / "overspeed_bin" / "report.json").read_text()), REPORT_SCHEMA)


def test_compare_flights_takes_bin_inputs(logs, tmp_path):
    out = tmp_path / "cmp"
    a = "A=" + ",".join(map(str, logs["bins"]))
    b = "B=" + ",".join(map(str, logs["calm"]))
    assert main(["compare-flights", a, b, "--mission", str(logs["mission"]), "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "comparison.json").read_text())
    validate_comparison(doc, COMPARISON_SCHEMA)
    assert doc["winner"] == "B"  # the calm swarm: no overspeed
    flights = {f["key"]: f for f in doc["flights"]}
    assert flights["A"]["violations"] == 1 and flights["B"]["violations"] == 0
    rep = json.loads((out / "A" / "report.json").read_text())
    assert rep["mission"]["uavs"] == ["sysid1", "sysid2", "sysid3"]  # three logs, one run
