"""Every DataFlash generation the field writes, through the DataFlash writer's old layouts and real logs:
time fields, GPS week fields, the estimator in use beside ones only declared, vehicle class, SITL."""

import random
from pathlib import Path

import numpy as np
import pytest
from contract import SHARED_SPEC

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io.dataflash import read_dataflash
from uav_debate_eval.io.dataflash_columns import columns, field_names
from uav_debate_eval.io.dataflash_open import open_dataflash
from uav_debate_eval.sim.dataflash import COPTER33_FORMATS, EKF2_FORMATS, GOOD_FLAGS, DataFlashWriter, gps_week_ms

LAT0, LON0 = -35.36, 149.16
REAL = Path(__file__).parent / "fixtures" / "real" / "ardupilot"
SHARED = SHARED_SPEC.parent / "fixtures" / "real" / "ardupilot"  # ../shared beside the clone


def write_copter33(path: Path, n: int = 100) -> None:
    """An ArduCopter 3.3 log: TimeMS, EKF1/EKF4, GPS T/Week, EV and ERR without time, MODE without a reason."""
    w = DataFlashWriter(path, formats=COPTER33_FORMATS)
    w.write("MSG", "ArduCopter V3.3.1 (a1b2c3d4)")
    w.write("PARM", "ANGLE_MAX", 4500)
    w.write("MODE", 1000, 0, 0)
    week, ms0 = gps_week_ms(1_430_000_000.0)
    for i in range(n):
        t_ms = 2000 + 100 * i
        w.write("EKF1", t_ms, 0, 0, 0, 1.0, 0, 0, 0.1 * i, 0, -5.0, 0, 0, 0)
        w.write("EKF4", t_ms, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0, 0, 0, 0, 0)
        if i % 2 == 0:
            w.write("GPS", 3, ms0 + 100 * i, week, 10, 0.9, LAT0 + 1e-6 * i, LON0, 0.0, 600.0, 1.0, 0.0, 0.0, t_ms)
        if i == 50:
            w.write("EV", 10)
            w.write("ERR", 11, 2)
    w.close()


def test_copter33_time_ms_gps_week_and_untimed_events(tmp_path):
    path = tmp_path / "c33.bin"
    write_copter33(path)
    reader = open_dataflash(path)
    gps = columns(reader, "GPS", ["GMS", "GWk", "Lat"])
    assert gps is not None and set(gps) == {"TimeUS", "GMS", "GWk", "Lat", "offset"}
    assert gps["TimeUS"][0] == pytest.approx(2.0e6) and gps["GWk"][0] == pytest.approx(1841)
    assert field_names(reader, "GPS")[1:3] == ["GMS", "GWk"]
    reader.close()
    log = read_dataflash(path, "c33")
    assert log.firmware.startswith("ArduCopter V3.3.1") and log.vehicle_class == "multirotor" and not log.sitl
    assert log.estimator.startswith("EKF1") and len(log.track.t_us) == 100
    assert log.track.t_us[0] == pytest.approx(2.0e6) and log.track.pos_ned[10, 0] == pytest.approx(1.0, abs=1e-4)
    assert log.track.utc_offset_us == pytest.approx((1_430_000_000.0 - 2.0) * 1e6, abs=2e3)
    assert log.track.valid is None  # EKF4's flags are 0 throughout: not reported, not invalid
    assert any("validity not reported" in n for n in log.notes)
    gps_glitch = [e for e in log.events if e.extra.get("subsystem") == "GPS"]
    assert gps_glitch and gps_glitch[0].t_us == pytest.approx(7.0e6, abs=0.2e6)  # ERR takes the clock before it


def write_ekf2(path: Path, params: dict, declare_xkf: bool = True, write_xkf: bool = False,
               firmware: str = "ArduCopter V4.0.3", flags: int = GOOD_FLAGS & 0xFFFF) -> None:
    """EKF2 in use (NKF1/NKF4), EKF3's XKF1 declared (or also written 100 m away, to tell them apart)."""
    w = DataFlashWriter(path, formats=EKF2_FORMATS)
    w.write("MSG", 0, firmware)
    for k, v in params.items():
        w.write("PARM", 0, k, v, v)
    if declare_xkf:
        w.declare("XKF1")
    for i in range(50):
        t = 1_000_000 + 100_000 * i
        w.write("NKF1", t, 0, 0, 0, 0, 2.0, 0, 0, 0, 0.2 * i, 0, 0, 0, 0)
        w.write("NKF4", t, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0, 0, 0, 0, 0, flags, 0, 0)
        if write_xkf:
            w.write("XKF1", t, 0, 0, 0, 0, 0, 2.0, 0, 0, 100.0, 0.2 * i, 0, 0, 0, 0, 0)
    w.close()


def test_ekf2_in_use_with_ekf3_only_declared(tmp_path):
    path = tmp_path / "ekf2.bin"
    write_ekf2(path, {"SYSID_THISMAV": 1})
    log = read_dataflash(path, "v")
    assert log.estimator.startswith("EKF2 (NKF1") and "XKF1 only declared" in log.estimator
    assert log.track.pos_ned[-1, 1] == pytest.approx(9.8, abs=1e-3)
    assert log.track.valid is not None and log.track.valid.all()


@pytest.mark.parametrize("ekf_type, east", [(2, 9.8), (3, 9.8), (None, 9.8)])
def test_the_estimator_named_by_ahrs_ekf_type(tmp_path, ekf_type, east):
    path = tmp_path / "both.bin"
    params = {"AHRS_EKF_TYPE": ekf_type} if ekf_type is not None else {}
    write_ekf2(path, params, declare_xkf=False, write_xkf=True)
    log = read_dataflash(path, "v")
    expected = {2: "EKF2", 3: "EKF3", None: "EKF3"}[ekf_type]
    assert log.estimator.startswith(expected)
    north = log.track.pos_ned[-1, 0]
    assert north == pytest.approx(100.0 if expected == "EKF3" else 0.0)
    assert log.track.pos_ned[-1, 1] == pytest.approx(east, abs=1e-3)


def test_sitl_quadplane_source_makes_ekf_flags_meaningless(tmp_path):
    path = tmp_path / "sitl.bin"
    write_ekf2(path, {"AHRS_EKF_TYPE": 10, "SIM_SPEEDUP": 1, "Q_ENABLE": 1}, firmware="ArduPlane V4.5.0",
               flags=0)
    log = read_dataflash(path, "v")
    assert log.sitl and log.vehicle_class == "vtol"
    assert log.track.valid is None and any("SITL" in n for n in log.notes)


@pytest.mark.parametrize("firmware, cls", [("ArduPlane V4.3.0", "fixed_wing"), ("ArduRover V4.2.0", "rover"),
                                           ("APM:Copter V3.4-rc2", "multirotor"), ("ArduSub V4.1.0", "underwater")])
def test_vehicle_class_from_firmware(tmp_path, firmware, cls):
    path = tmp_path / "v.bin"
    write_ekf2(path, {}, firmware=firmware)
    assert read_dataflash(path, "v").vehicle_class == cls


def test_global_position_when_no_ekf_was_logged(tmp_path):
    path = tmp_path / "pos.bin"
    w = DataFlashWriter(path, formats=EKF2_FORMATS)
    w.declare("NKF1")
    for i in range(20):
        w.write("POS", 1_000_000 + 200_000 * i, LAT0 + 1e-5 * i, LON0, 600.0, 10.0, 10.0)
    w.close()
    log = read_dataflash(path, "v")
    assert log.estimator.startswith("POS") and len(log.track.t_us) == 20
    assert log.track.pos_ned[-1, 0] == pytest.approx(19 * 1.109, rel=0.01)
    assert np.allclose(log.track.vel_ned[5:15, 0], 1.109 / 0.2, rtol=0.01)


def write_copter33_dcm(path: Path) -> None:
    """An ArduCopter 3.3 log flown on DCM (AHRS_EKF_USE 0): its EKF1 drifts away at 40 m/s while the GPS says
    1 m/s north; the GPS stops at 6 s, the log (ATT) goes on to 10 s and the vehicle flips at 8 s."""
    w = DataFlashWriter(path, formats=COPTER33_FORMATS)
    w.write("MSG", "ArduCopter V3.3-dev (a1b2c3d4)")
    w.write("PARM", "AHRS_EKF_USE", 0)
    week, ms0 = gps_week_ms(1_430_000_000.0)
    for i in range(100):
        t_ms = 100 * i
        w.write("EKF1", t_ms, 0, 0, 0, 40.0, 0, 0, 4.0 * i, 0, -5.0, 0, 0, 0)
        roll = 178.0 if t_ms >= 8000 else 0.0
        w.write("ATT", t_ms, 0, roll, 0, 0, 0, 0, 0, 0)
        if t_ms <= 6000 and i % 2 == 0:
            w.write("GPS", 3, ms0 + t_ms, week, 10, 0.9, LAT0 + 0.1 * i / 111_320, LON0, 5.0, 605.0, 1.0, 0.0, 0.0,
                    t_ms)
    w.close()


def test_an_ekf_the_vehicle_did_not_fly_on_is_not_its_track(tmp_path):
    path = tmp_path / "dcm.bin"
    write_copter33_dcm(path)
    log = read_dataflash(path, "v")
    assert log.estimator.startswith("GPS (AHRS_EKF_USE 0")
    t, speed = log.track.t_us, np.linalg.norm(log.track.vel_ned[:, :2], axis=1)
    fixes = t <= 6.0e6
    assert fixes.sum() == 31 and np.allclose(speed[fixes], 1.0, atol=0.01)  # the GPS's 1 m/s, not the EKF's 40
    assert t[-1] == pytest.approx(9.9e6) and log.track.valid is not None
    assert log.track.valid[fixes].all() and not log.track.valid[~fixes].any()  # no position after the GPS stopped
    assert any("track goes on with its attitude" in n for n in log.notes)
    crash = [e for e in log.events if e.type == "crash"]
    assert crash and crash[0].t_us == pytest.approx(8.0e6, abs=0.2e6)  # after the fixes, still in the flight


def test_the_ekf_in_use_is_read_when_the_autopilot_flew_on_it(tmp_path):
    path = tmp_path / "c33.bin"
    write_copter33(path)  # AHRS_EKF_USE not logged: the EKF, as before
    assert read_dataflash(path, "v").estimator.startswith("EKF1")


def test_nothing_to_read_is_one_line(tmp_path):
    path = tmp_path / "none.bin"
    w = DataFlashWriter(path, formats=EKF2_FORMATS)
    w.declare("NKF1")
    w.write("MSG", 0, "ArduCopter V4.0.3")
    w.close()
    with pytest.raises(InputError, match=r"none.bin: no position in the log: no EKF position logged \(NKF1 declared"):
        read_dataflash(path, "v")


@pytest.mark.parametrize("name, cls, estimator, firmware", [
    ("plane382_fragment.BIN", "fixed_wing", "EKF2", "ArduPlane V3.8.2"),
    ("plane423_center_0003.bin", "fixed_wing", "EKF3", "ArduPlane V4.2.3"),
    ("sub41_nogps_small.BIN", "underwater", "EKF3", "ArduSub V4.1.0"),
])
def test_real_logs_in_project(name, cls, estimator, firmware):
    log = read_dataflash(REAL / name, "v")
    assert log.vehicle_class == cls and log.estimator.startswith(estimator) and log.firmware.startswith(firmware)
    assert len(log.track.t_us) > 20


@pytest.mark.parametrize("name, estimator, gps_fixes", [
    ("copter33_gps_7.BIN", "EKF1", 200), ("copter33_gps_112.BIN", "GPS (AHRS_EKF_USE 0", 900),
    ("copter34_nogps_22.BIN", "EKF2", 0)])
def test_real_unlicensed_logs_from_shared(name, estimator, gps_fixes):
    path = SHARED / name
    if not path.exists():
        pytest.skip("../shared/fixtures/real/ardupilot is not here")
    log = read_dataflash(path, "v")
    assert log.vehicle_class == "multirotor" and log.estimator.startswith(estimator)
    assert len(log.gps_t_us) >= gps_fixes
    if gps_fixes:
        assert log.track.utc_offset_us is not None and 1.4e15 < log.track.utc_offset_us < 1.44e15  # 2014-2015


def test_real_sitl_plane_tlog_is_known_as_such():
    from uav_debate_eval.io.tlog import read_tlog

    (log,) = read_tlog(REAL / "plane450_sitl_mav.tlog")
    assert log.sitl and log.vehicle_class == "fixed_wing" and log.firmware.startswith("ArduPlane V4.5.0")
    assert log.track.valid is not None and log.track.valid.mean() > 0.98  # only the EKF's start-up is invalid


def test_quality_judges_a_plane_by_a_plane_reach():
    from uav_debate_eval.core.mission import Mission
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.quality.gnss import vehicle_class

    t = np.arange(10.0)
    traj = SwarmTrajectory.from_columns(t, np.array(["p"] * 10), np.zeros((10, 3)))
    traj.ingest.autopilot["p"] = {"vehicle_class": "fixed_wing"}
    assert vehicle_class(traj, Mission(), "p") == "fixed_wing"
    named = Mission()
    named.vehicle_class = "indoor_micro"
    assert vehicle_class(traj, named, "p") == "indoor_micro"  # the mission's word wins
    assert vehicle_class(traj, Mission(), "other") == "multirotor"


def test_a_mode_logged_twice_is_one_event(tmp_path):
    path = tmp_path / "twice.bin"
    w = DataFlashWriter(path, formats=EKF2_FORMATS)
    w.write("MODE", 1_000_000, 5, 5, 1)
    w.write("MODE", 1_000_000, 5, 5, 1)
    w.write("MODE", 3_000_000, 6, 6, 1)
    for i in range(30):
        w.write("NKF1", 1_000_000 + 100_000 * i, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    w.close()
    modes = [e for e in read_dataflash(path, "v").events if e.type == "flight_mode"]
    assert [e.t_us for e in modes] == [1_000_000, 3_000_000]


@pytest.mark.parametrize("damage, exit_code", [("tail_zeroed", 2), ("blocks_zeroed", 4)])
def test_damaged_bin_prints_nothing_but_the_one_line(tmp_path, capfd, damage, exit_code):
    """pymavlink's C indexer writes "bad header ..." per damaged byte to the stderr descriptor (716,745 lines for
    this log with its tail zeroed): the user sees only the one-line error, or nothing with --quiet."""
    from uav_debate_eval.cli import main

    data = bytearray((REAL / "plane423_center_0003.bin").read_bytes())
    if damage == "tail_zeroed":
        data[20000:] = bytes(len(data) - 20000)
    else:
        rng = random.Random(3)
        for _ in range(40):
            start = rng.randrange(2000, len(data))
            data[start:start + 64] = bytes(64)
    path = tmp_path / "damaged.bin"
    path.write_bytes(bytes(data))
    capfd.readouterr()
    assert main(["evaluate", str(path), "--out", str(tmp_path / "out"), "--llm", "rules", "--quiet"]) == exit_code
    out, err = capfd.readouterr()
    assert out == ""
    if exit_code == 2:
        assert err.count("\n") == 1 and err.startswith("uav-debate-eval evaluate: error: ") and "no position" in err
        assert not (tmp_path / "out" / "report.json").exists()
    else:
        assert err == ""


def _format_damaged(src: Path, dst: Path, name: str, char: int = ord("\n")) -> Path:
    """`src` with the second format character of `name`'s FMT record replaced by `char` (a flipped bit on the card)."""
    data = bytearray(src.read_bytes())
    at = data.find(b"\xa3\x95\x80")
    while at >= 0:
        if data[at + 5:at + 9] == name.encode().ljust(4, b"\0"):
            data[at + 10] = char
            dst.write_bytes(bytes(data))
            return dst
        at = data.find(b"\xa3\x95\x80", at + 1)
    raise AssertionError(f"{src.name} declares no {name}")


def test_a_damaged_format_of_a_type_not_read_loses_only_that_type(tmp_path, capsys):
    """pymavlink refused a whole real log for one unknown format character in the FMT of PIDN (a type the evaluation
    never reads): now those messages are skipped and the track is the one the undamaged log gives, with a note. A
    damaged type the track needs (XKF1), or one DFReader itself interprets (UNIT), is still a one-line error, its
    control character escaped (it was printed raw, a line break inside the 'one-line' error)."""
    from uav_debate_eval.cli import main

    src = REAL / "plane423_center_0003.bin"
    whole, damaged = read_dataflash(src, "p"), read_dataflash(_format_damaged(src, tmp_path / "pidn.bin", "PIDN"), "p")
    for field in ("t_us", "pos_ned", "vel_ned"):
        assert np.array_equal(getattr(damaged.track, field), getattr(whole.track, field))
    assert damaged.estimator == whole.estimator == "EKF3 (XKF1; AHRS_EKF_TYPE 3)"
    assert damaged.notes == ["pidn.bin: the format table is damaged for PIDN (types the evaluation does not read): "
                             "their messages were skipped, the rest read as logged"]
    with pytest.raises(InputError, match=r"xkf1.bin: the format of XKF1 is damaged"):
        read_dataflash(_format_damaged(src, tmp_path / "xkf1.bin", "XKF1"), "p")
    unit = _format_damaged(src, tmp_path / "unit.bin", "UNIT")
    assert main(["evaluate", str(unit), "--out", str(tmp_path / "out"), "--llm", "rules", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Unsupported format char: '\\n' in message UNIT" in err, err


def _zero_length_type(src: Path, dst: Path, name: str, type_id: int) -> Path:
    """`src` with one more FMT record, declaring `name` of length 0 and no format (a flipped byte), and one
    message of that type right after it, before the flight's messages."""
    import struct

    data = src.read_bytes()
    fmt = b"\xa3\x95\x80" + struct.pack("<BB4s16s64s", type_id, 0, name.encode(), b"", b"")
    dst.write_bytes(data[:89] + fmt + bytes([0xA3, 0x95, type_id]) + data[89:])
    return dst


def test_a_format_of_length_zero_is_lengthened_not_read_for_ever(tmp_path):
    """A type of length 0 sent pymavlink's DFReader back to the same message for ever (its offset moves by the
    length minus the 3-byte header it read): `evaluate` hung on a flipped byte (found by the fuzzer; its alarm
    could not stop a loop that catches every exception). The type is given a length that holds its header and
    skipped with a note; a type the evaluation reads is a one-line error. Run in a child with a time limit, so a
    regression fails here instead of hanging the suite."""
    import subprocess
    import sys

    src = REAL / "plane423_center_0003.bin"
    code = ("import sys; from pathlib import Path; from uav_debate_eval.io.dataflash import read_dataflash; "
            "log = read_dataflash(Path(sys.argv[1]), 'p'); print(len(log.track.t_us)); print(*log.notes, sep='\\n')")
    ok = subprocess.run([sys.executable, "-c", code, str(_zero_length_type(src, tmp_path / "zero.bin", "ZZZZ", 250))],
                        capture_output=True, text=True, timeout=120)
    count, note = ok.stdout.splitlines()[:2]
    assert int(count) == len(read_dataflash(src, "p").track.t_us)
    assert note == ("zero.bin: the format table is damaged for ZZZZ (types the evaluation does not read): their "
                    "messages were skipped, the rest read as logged")
    with pytest.raises(InputError, match=r"needed.bin: the format of XKF1 is damaged \(a length shorter than its "):
        read_dataflash(_zero_length_type(src, tmp_path / "needed.bin", "XKF1", 250), "p")


def test_a_log_cut_before_its_first_whole_status_message_reads_without_it(tmp_path):
    """A real ArduPlane log cut 16 kB in holds an NKF1 message but no whole NKF4 (the estimator's status): an
    IndexError (fuzz seeds 1 and 2). The position is read; its validity is not known, said in a note."""
    cut = tmp_path / "cut.bin"
    cut.write_bytes((REAL / "plane382_fragment.BIN").read_bytes()[:15972])
    log = read_dataflash(cut, "p")
    assert len(log.track.t_us) == 1 and log.track.valid is None
    assert "cut.bin: NKF4 holds no whole timed message: the estimator's own validity is not known" in log.notes


def test_the_mode_a_log_starts_in_is_no_switch(tmp_path):
    """A real ArduPlane log was in RTL from its first record, disarmed, and read "sysid1 switched to RTL at 0 s"
    with advice to review why; the first MODE is written when logging starts."""
    from uav_debate_eval.core.records import Event
    from uav_debate_eval.findings.autopilot import autopilot_findings

    path = tmp_path / "c33.bin"
    write_copter33(path)
    modes = [e for e in read_dataflash(path, "v").events if e.type == "flight_mode"]
    assert len(modes) == 1 and modes[0].extra.get("initial") is True
    start = Event("EVENT[1]", "flight_mode", 0.0, ["v"], extra={"mode": "RTL", "reason": "", "initial": True})
    switch = Event("EVENT[2]", "flight_mode", 5.0, ["v"], extra={"mode": "RTL", "reason": ""})
    [found] = autopilot_findings([start, switch], None)
    assert found.sentence.startswith("v switched to RTL at 5 s")
