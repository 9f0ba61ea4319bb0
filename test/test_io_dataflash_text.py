"""DataFlash text logs (`.log`: Mission Planner's downloads of APM 2.x / ArduCopter 3.0-3.1 logs and its
conversions): read as the binary log they print, flight modes printed by name, ArduCopter 3.0's GPS time of week as
the clock; a `.log` of another program is not taken for one. The layouts below are the firmware's own FMT lines
(ArduCopter 3.1 and 3.0.1), as real logs of those versions print them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from uav_debate_eval.cli import main
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io.loader import input_kind, load_inputs
from uav_debate_eval.runner.discover import is_recording
from uav_debate_eval.sim.dataflash import offset_latlon

HEAD_31 = """ArduCopter V3.1 (5c6503e2)
Free RAM: 1044
APM 2
FMT, 128, 89, FMT, BBnNZ, Type,Length,Name,Format
FMT, 129, 23, PARM, Nf, Name,Value
FMT, 130, 45, GPS, BIHBcLLeeEefI, Status,TimeMS,Week,NSats,HDop,Lat,Lng,RelAlt,Alt,Spd,GCrs,VZ,T
FMT, 132, 67, MSG, Z, Message
FMT, 3, 6, MODE, Mh, Mode,ThrCrs
PARM, SYSID_THISMAV, 3
PARM, WPNAV_SPEED, 500
"""
HEAD_30 = """ArduCopter V3.0.1
FMT, 128, 89, FMT, BBnNZ, Type,Length,Name,Format
FMT, 130, 35, GPS, BIBcLLeeEe, Status,Time,NSats,HDop,Lat,Lng,RelAlt,Alt,Spd,GCrs
FMT, 3, 6, MODE, Mh, Mode,ThrCrs
FMT, 129, 23, PARM, Nf, Name,Value
PARM, WPNAV_SPEED, 500
"""
HOME = (30.155734, -97.957547, 297.9)


def _fix(k: int) -> tuple[float, float, float]:
    lat, lon = offset_latlon(HOME[0], HOME[1], 3.0 * k / 5, 0.0)  # 3 m/s north at 5 Hz
    return float(lat), float(lon), HOME[2] + 10.0


def _fixes_31(at_12_s: list[str]) -> list[str]:
    """ArduCopter 3.1's GPS lines of 20 s at 5 Hz (boot time T from 500 s), `at_12_s` printed after the 61st."""
    lines = []
    for k in range(100):
        lat, lon, alt = _fix(k)
        lines.append(f"GPS, 3, {300000 + 200 * k}, 1814, 9, 1.53, {lat:.7f}, {lon:.7f}, 10.00, {alt:.2f}, 3.00, "
                     f"0.00, 0.00, {500000 + 200 * k}")
        if k == 60:
            lines += at_12_s
    return lines


def _log_31(path: Path) -> Path:
    lines = [HEAD_31.rstrip("\n"), "MODE, STABILIZE, 352",
             *_fixes_31(["MODE, RTL, 271", "MSG, Reached home, low battery, landing"])]
    lines.append("GPS, 3, cut")  # a line cut by the end of the download
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_copter_31_text_log_reads_as_its_binary_log(tmp_path):
    path = _log_31(tmp_path / "copter31.log")
    assert input_kind(path) == "ardupilot" and is_recording(path)
    traj = load_inputs([path])
    tr = traj.tracks["sysid3"]  # SYSID_THISMAV from the PARM lines
    assert len(tr) == 100 and tr.vel[0] == pytest.approx([0.0, 3.0, 0.0], abs=1e-3)  # GPS speed and course
    assert tr.pos[-1, 1] - tr.pos[0, 1] == pytest.approx(3.0 * 99 / 5, abs=0.02)
    assert traj.duration == pytest.approx(19.8, abs=1e-6)
    modes = [(e.t, e.extra["mode"]) for e in traj.ingest.log_events if e.type == "flight_mode"]
    assert [m for _, m in modes] == ["STABILIZE", "RTL"]  # printed by name, read back as ArduCopter's numbers
    assert modes[1][0] == pytest.approx(12.0, abs=0.01)
    notes = " ".join(traj.ingest.notes)
    assert "ArduCopter V3.1" in notes and "a DataFlash text log, read as its binary form (1 line(s)" in notes
    assert "the track is the GPS receiver's 100 3-D fixes" in notes


def test_a_copter_30_text_log_is_clocked_by_its_gps(tmp_path):
    lines = [HEAD_30.rstrip("\n")]
    for k in range(50):
        lat, lon, alt = _fix(k)
        lines.append(f"GPS, 3, {594438200 + 200 * k}, 6, 4.68, {lat:.7f}, {lon:.7f}, 3.13, {alt:.2f}, 3.00, 0.00")
    path = tmp_path / "copter30.log"
    path.write_text("\n".join(lines) + "\n")
    code = main(["evaluate", str(path), "--out", str(tmp_path / "out"), "--llm", "rules", "--quiet"])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 0 and report["mission"]["duration_s"] == pytest.approx(9.8, abs=1e-3)
    assert any("the log's only clock is the GPS time of week" in n for n in report["ingest"]["notes"])
    assert report["safety"]["margins"]["max_speed"]["worst_value"] == pytest.approx(3.0, abs=0.05)  # from the fixes
    assert report["safety"]["margins"]["max_speed"]["limit"] == pytest.approx(7.5)  # 1.5 x WPNAV_SPEED 5 m/s


def test_a_log_of_another_program_is_not_a_flight(tmp_path):
    other = tmp_path / "build.log"
    other.write_text("compiling...\nFMT is a word here, not a message\n")
    with pytest.raises(InputError, match="not an ArduPilot DataFlash text log"):
        input_kind(other)
    assert not is_recording(other)  # a folder of flights is walked past it


def test_a_crash_and_mode_changes_after_the_last_fix_stay_in_the_report(tmp_path):
    """A real ArduCopter 3.1 log ends with its crash check (ERR 12 1) and 150 untimed mode changes after its last
    GPS fix: they all take that fix's time. The crash is a hazard finding (it fell 0.1 ms past the flight's end as
    rounded and was left out), and the changes at one instant are one event and a note (they were 75 findings)."""
    lines = _log_31(tmp_path / "crash.log").read_text().splitlines()[:-1]  # without the cut line
    lines.insert(4, "FMT, 14, 5, ERR, BB, Subsys,ECode")
    lines += ["MODE, RTL, 271", "MODE, STABILIZE, 271", "MODE, RTL, 271", "ERR, 12, 1"]
    path = tmp_path / "crash.log"
    path.write_text("\n".join(lines) + "\n")
    traj = load_inputs([path])
    modes = [(e.t, e.extra["mode"]) for e in traj.ingest.log_events if e.type == "flight_mode"]
    assert [m for _, m in modes] == ["STABILIZE", "RTL", "RTL"] and modes[-1][0] == pytest.approx(19.8, abs=1e-3)
    assert any("3 flight mode changes carry no time of their own" in n for n in traj.ingest.notes)
    code = main(["evaluate", str(path), "--out", str(tmp_path / "out"), "--llm", "rules", "--quiet"])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (crash,) = [f for f in report["findings"] if f["kind"] == "crash"]
    assert crash["severity"] == "hazard" and code == 0  # no hard constraint was crossed (the verdict's rule)...
    assert "no hard-constraint violation, but sysid3 crashed at 19.8 s" in report["verdict"]["summary"]  # ...said


def test_mission_planners_export_prints_modes_in_mixed_case_without_a_banner(tmp_path):
    """Real ArduCopter 3.3-3.4 logs as Mission Planner exports them: no firmware banner, `MODE, 116353326, Loiter, 5`
    (QMB: the name in mixed case, then ModeNum). Each MODE line was left out as not fitting its format: no flight
    mode in the report (Loiter, PosHold, RTL, Land lost). A name without a ModeNum column is read without case and
    underscores (AltHold is ALT_HOLD)."""
    head = HEAD_31.replace("ArduCopter V3.1 (5c6503e2)\nFree RAM: 1044\nAPM 2\n", "").replace(
        "FMT, 3, 6, MODE, Mh, Mode,ThrCrs", "FMT, 3, 13, MODE, QMB, TimeUS,Mode,ModeNum")
    lines = [head.rstrip("\n"), "MSG, ArduCopter V3.3.3 (acf2e10c)", "MODE, 500000000, PosHold, 16",
             *_fixes_31(["MODE, 512000000, RTL, 6", "MODE, 514000000, Land, 9"])]
    path = tmp_path / "mp_export.log"
    path.write_text("\n".join(lines) + "\n")
    traj = load_inputs([path])
    assert [e.extra["mode"] for e in traj.ingest.log_events if e.type == "flight_mode"] == ["POSHOLD", "RTL", "LAND"]
    assert not any("do not fit" in n for n in traj.ingest.notes)
    older = tmp_path / "alt_hold.log"  # ArduCopter 3.1's MODE (no ModeNum), the name as another program prints it
    older.write_text(_log_31(tmp_path / "base.log").read_text().replace("MODE, RTL, 271", "MODE, AltHold, 271"))
    assert [e.extra["mode"] for e in load_inputs([older]).ingest.log_events if e.type == "flight_mode"] == [
        "STABILIZE", "ALT_HOLD"]
