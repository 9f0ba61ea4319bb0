"""PX4 ULog reader: a real log (test/fixtures/px4, BSD-3 pyulog test data) and the two-vehicle alignment math."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from uav_debate_eval.cli import main
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission_file import load_mission
from uav_debate_eval.io.loader import load_inputs
from uav_debate_eval.io.ulog import LogTrack, combine, geodetic_to_enu, ned_to_enu, read_ulogs
from uav_debate_eval.quality.assessment import assess

SMALL = Path(__file__).parent / "fixtures" / "px4" / "sample_log_small.ulg"
RTL = Path(__file__).parent / "fixtures" / "real" / "px4_mission_rtl" / "flight.ulg"
MISSION_RTL = load_mission(RTL.with_name("mission.yaml"))
A_WGS84, E2 = 6378137.0, 6.69437999014e-3


def test_real_px4_log():
    traj = read_ulogs([SMALL])
    assert traj.uav_ids == ["sample_log_small"]
    tr = traj.tracks["sample_log_small"]
    assert len(tr) == 636
    assert traj.duration == pytest.approx(6.496152, abs=1e-5)
    # boot time 20.463 s moved to GPS UTC (2021-04-21)
    assert traj.t_start == 0.0 and traj.t0 == pytest.approx(1618986658.4635, abs=1e-3)  # flight time, clock kept
    assert tr.pos[0, 2] == pytest.approx(1.167656, abs=1e-6)  # z_enu = -z_ned
    assert tr.pos[:, 2].max() == pytest.approx(1.183107, abs=1e-6)
    assert tr.pos[:, :2].max() == 0.0
    assert not tr.vel_derived
    assert not tr.est_valid.any()  # the estimator never had a valid horizontal position
    assert "clocks aligned with GPS UTC time (t = UTC seconds)" in traj.ingest.notes
    assert any("636 of 636 samples flagged not valid" in n for n in traj.ingest.notes)


def test_a_ulogs_flight_modes_are_events_as_a_bags_are():
    """PX4's vehicle_status.nav_state gave a bag's flight its modes (io.px4.apply_status) but not the same flight's
    ULog: the real RTL flight switches from its mission to RTL at 17.6 s (the README's 17.7 s), and the report never
    said so. Both readers now build the event with io.px4_attitude.mode_event."""
    from pyulog import ULog

    traj = read_ulogs([RTL])
    modes = [(e.t, e.extra["mode"], bool(e.extra.get("initial"))) for e in traj.ingest.log_events
             if e.type == "flight_mode"]
    assert [(m, first) for _, m, first in modes] == [("AUTO_MISSION", True), ("AUTO_RTL", False)]
    log = ULog(str(RTL), ["vehicle_status", "vehicle_local_position"])
    status = log.get_dataset("vehicle_status").data
    switch_us = float(status["timestamp"][np.flatnonzero(np.diff(status["nav_state"]))[0] + 1])
    first_us = float(log.get_dataset("vehicle_local_position").data["timestamp"][0])
    assert modes[1][0] == pytest.approx((switch_us - first_us) / 1e6, abs=1e-6) == pytest.approx(17.642, abs=1e-3)


def test_px4_logs_of_different_days_are_not_one_flight(tmp_path):
    """Several .ulg were one flight without a look at their times: two logs of 2019 and 2021 (pyulog's 2022 and 2024
    samples in the field) became one flight on a two-year grid, a 51-GB MemoryError. With GPS time in every log, their
    spans decide as for every other input; forced together (--one-flight), a clear error, exit 2."""
    from uav_debate_eval.io.loader import one_flight

    logs = [SMALL, RTL]
    together, why = one_flight(logs)
    assert not together and why == "time spans do not overlap (sample_log_small.ulg starts after the others end)"
    copy = tmp_path / "copy.ulg"
    copy.write_bytes(SMALL.read_bytes())
    assert one_flight([SMALL, copy])[0]  # the same time: one flight
    # one by one: the bench log is inconclusive (no horizontal position), the RTL flight safe
    assert main(["evaluate", *map(str, logs), "--out", str(tmp_path / "apart"), "--llm", "rules", "--quiet"]) == 4
    flights = sorted(p.name for p in (tmp_path / "apart").iterdir() if p.is_dir())
    assert flights == ["flight_ulg", "sample_log_small_ulg"]
    assert main(["evaluate", *map(str, logs), "--one-flight", "--out", str(tmp_path / "forced"), "--llm", "rules",
                 "--quiet"]) == 2


def test_a_px4_log_given_twice_is_one_vehicle(tmp_path):
    """Two copies of one .ulg were two vehicles named by their files, 0 m apart: a min_separation violation. The same
    samples stamp for stamp are one vehicle recorded twice, in any frame (a duplicate_vehicle finding), as an
    ArduPilot log given twice already was."""
    copy = tmp_path / "copy.ulg"
    copy.write_bytes(RTL.read_bytes())
    traj = load_inputs([RTL, copy])
    assert traj.uav_ids == ["copy", "flight"]
    mission = load_mission(RTL.with_name("mission.yaml"))
    mission.constraints.min_separation_m = 2.0
    quality = assess(traj, mission)
    assert quality.traj.uav_ids == ["copy"]
    [twice] = [f for f in quality.findings if f.kind == "duplicate_vehicle"]
    assert twice.uavs == ["copy", "flight"] and "recorded twice: the same samples, stamp for stamp" in twice.detail


def test_ulog_via_loader_names_from_mission():
    traj = load_inputs([SMALL], names=["px4_a"])
    assert traj.uav_ids == ["px4_a"]


def test_ned_to_enu():
    assert ned_to_enu(np.array([[1.0, 2.0, 3.0]])).tolist() == [[2.0, 1.0, -3.0]]


def _offset_ref(lat0, lon0, alt0, east, north, up):
    """lat/lon/alt of a point east/north/up metres from the reference (ellipsoid radii of curvature)."""
    s = math.sin(math.radians(lat0))
    m = A_WGS84 * (1 - E2) / (1 - E2 * s * s) ** 1.5
    n = A_WGS84 / math.sqrt(1 - E2 * s * s)
    return lat0 + math.degrees(north / m), lon0 + math.degrees(east / (n * math.cos(math.radians(lat0)))), alt0 + up


def test_geodetic_to_enu_small_offsets():
    ref = (47.3977418, 8.5455939, 487.96)
    p = _offset_ref(*ref, 20.0, 10.0, 5.0)
    assert geodetic_to_enu(*p, *ref) == pytest.approx([20.0, 10.0, 5.0], abs=2e-3)
    assert geodetic_to_enu(*ref, *ref) == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)


def test_two_vehicle_alignment_frames_and_clocks():
    ref_a = (47.3977418, 8.5455939, 488.0)
    ref_b = _offset_ref(*ref_a, 20.0, 10.0, 5.0)  # B's origin: 20 m east, 10 m north, 5 m up of A's
    n = 11
    t = np.arange(n) * 0.1
    # Both fly the same world path: east = 2 t, north = 0, up = 3 (in A's frame).
    pos_a = np.column_stack([np.zeros(n), 2 * t, np.full(n, -3.0)])  # NED in A's frame
    pos_b = np.column_stack([np.full(n, -10.0), 2 * t - 20.0, np.full(n, 2.0)])  # the same points from B's origin
    vel = np.tile([0.0, 2.0, 0.0], (n, 1))
    utc0 = 1.7e15
    a = LogTrack("a", 5e6 + t * 1e6, pos_a, vel, ref_a, utc0 - 5e6)
    b = LogTrack("b", 90e6 + t * 1e6, pos_b, vel, ref_b, utc0 - 90e6)  # booted at another time
    traj = combine([a, b])
    ta, tb = traj.tracks["a"], traj.tracks["b"]
    np.testing.assert_allclose(ta.t, tb.t)
    assert ta.t[0] == 0.0 and traj.t0 == pytest.approx(1.7e9)
    np.testing.assert_allclose(tb.pos, ta.pos, atol=5e-3)
    assert ta.pos[10] == pytest.approx([2.0, 0.0, 3.0])
    assert ta.vel[0] == pytest.approx([2.0, 0.0, 0.0])
    assert any(n.startswith("b: origin at E+20.00 N+10.00 U+5.00 m") for n in traj.ingest.notes)


def test_alignment_without_utc_aligns_starts_and_says_so():
    n = 5
    t = np.arange(n) * 0.2
    pos = np.zeros((n, 3))
    a = LogTrack("a", 3e6 + t * 1e6, pos, pos, None, None)
    b = LogTrack("b", 70e6 + t * 1e6, pos + [1.0, 0.0, 0.0], pos, None, 1e15)
    traj = combine([a, b])
    assert traj.tracks["a"].t[0] == 0.0 and traj.tracks["b"].t[0] == 0.0
    assert "no GPS UTC time in a: log starts aligned to t = 0" in traj.ingest.notes
    assert "b: no global reference; its local frame is not placed among the others" in traj.ingest.notes
    assert traj.tracks["b"].pos[0] == pytest.approx([0.0, 1.0, 0.0])  # NED north -> ENU y


def test_damaged_ulog(tmp_path):
    bad = tmp_path / "bad.ulg"
    bad.write_bytes(b"not a ulog" * 100)
    with pytest.raises(InputError, match=r"bad.ulg: cannot read ULog"):
        read_ulogs([bad])


_SIZES = {"int8_t": 1, "uint8_t": 1, "bool": 1, "char": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4,
          "uint32_t": 4, "float": 4, "int64_t": 8, "uint64_t": 8, "double": 8}
_CODES = {"float": "<f", "uint64_t": "<Q", "double": "<d"}


def _message(data: bytes, topic: str, nth: int) -> tuple[int, list[list[str]]]:
    """(offset of the msg_id of the `nth` (1-based) logged `topic` message, the topic's [type, name] fields)."""
    formats, names, seen, at = {}, {}, 0, 16  # after the file header
    while at + 3 <= len(data):
        size, kind = struct.unpack_from("<HB", data, at)
        body = at + 3
        if kind == ord("F"):  # "name:type field;type field;..."
            name, fields = data[body:body + size].decode().split(":", 1)
            formats[name] = [f.split(" ") for f in fields.strip(";").split(";")]
        elif kind == ord("A"):  # subscription: multi_id u8, msg_id u16, name
            names[struct.unpack_from("<H", data, body + 1)[0]] = data[body + 3:body + size].decode()
        elif kind == ord("D") and names.get(struct.unpack_from("<H", data, body)[0]) == topic:
            seen += 1
            if seen == nth:
                return body, formats[topic]
        at = body + size
    raise AssertionError(f"fewer than {nth} {topic} messages")


def _with_field_changed(src: Path, dst: Path, topic: str, nth: int, field: str, change) -> float:
    """`src` with `field` of the `nth` logged `topic` message replaced by change(value), as one corrupted value of a
    real log reads; returns the original value. Flat formats only (vehicle_local_position's)."""
    data = bytearray(src.read_bytes())
    at, fields = _message(data, topic, nth)
    offset = at + 2  # after the msg_id
    for ftype, fname in fields:
        if fname == field:
            (value,) = struct.unpack_from(_CODES[ftype], data, offset)
            struct.pack_into(_CODES[ftype], data, offset, change(value))
            dst.write_bytes(bytes(data))
            return value
        base, _, count = ftype.partition("[")
        offset += _SIZES[base] * (int(count.rstrip("]")) if count else 1)
    raise AssertionError(f"{topic} has no field {field}")


def test_a_corrupted_stamp_in_a_real_log_is_left_out_and_found(tmp_path):
    """One vehicle_local_position stamped 2.7e8 s late (seen in a fuzzed real log: the checker's grid asked for
    228 GiB) is a stray_stamp finding; the flight, its span and its report are those of the other 635 samples."""
    bad = tmp_path / "stray.ulg"
    _with_field_changed(SMALL, bad, "vehicle_local_position", 300, "timestamp", lambda us: us + 270_000_000_000_000)
    clean, traj = read_ulogs([SMALL]), read_ulogs([bad])
    tr = traj.tracks["stray"]
    assert len(tr) == 635 and traj.ingest.dropped == {"stray_stamp": 1}
    assert traj.duration == pytest.approx(clean.duration) and traj.t0 == pytest.approx(clean.t0)
    (found,) = [f for f in traj.ingest.findings if f.kind == "stray_stamp"]
    before = clean.tracks["sample_log_small"].t[298]  # the sample recorded before it
    assert found.uavs == ["stray"] and found.t_start == pytest.approx(before)
    assert found.values["offset_s"] == pytest.approx(2.7e8, abs=1.0)
    out = tmp_path / "out"
    assert main(["evaluate", str(bad), "--out", str(out), "--llm", "rules", "--quiet"]) in (0, 3, 4)
    report = json.loads((out / "report.json").read_text())
    assert report["mission"]["duration_s"] == pytest.approx(clean.duration, abs=1e-3)
    assert [f["uavs"] for f in report["data_quality"]["findings"] if f["kind"] == "stray_stamp"] == [["stray"]]


def test_a_corrupted_velocity_in_a_real_log_is_a_finding_not_a_violation(tmp_path):
    """One vehicle_local_position vx of a real flight (safe) read 3.5e15 m/s (a flipped exponent bit, seen in a
    fuzzed real log: the report said max_speed violated at 3.5e15 m/s) while the positions fly on: a
    velocity_spike finding, the speed checks use the positions there, and the flight stays safe. A speed reached
    and left across samples (three samples in a row) stays what the log says."""
    bad = tmp_path / "spike.ulg"
    _with_field_changed(RTL, bad, "vehicle_local_position", 200, "vx", lambda v: 3.5e15)
    clean, traj = read_ulogs([RTL]), read_ulogs([bad])
    quality = assess(traj, MISSION_RTL)
    (found,) = [f for f in quality.findings if f.kind == "velocity_spike"]
    t_spike = clean.tracks["flight"].t[199]
    assert found.uavs == ["spike"] and found.t_start == pytest.approx(t_spike)
    assert found.values["recorded_mps"] == pytest.approx(3.5e15, rel=1e-6)
    vel, clean_vel = quality.traj.tracks["spike"].vel, clean.tracks["flight"].vel
    assert np.linalg.norm(vel[199] - clean_vel[199]) < 1.0  # the positions' central difference
    assert np.array_equal(np.delete(vel, 199, axis=0), np.delete(clean_vel, 199, axis=0))
    out = tmp_path / "out"
    assert main(["evaluate", str(bad), "--mission", str(RTL.with_name("mission.yaml")), "--out", str(out),
                 "--llm", "rules", "--quiet"]) == 0
    huge = tmp_path / "huge.ulg"  # float32's largest: a flipped top exponent bit
    _with_field_changed(RTL, huge, "vehicle_local_position", 200, "vx", lambda v: 3.0e38)
    (found,) = [f for f in assess(read_ulogs([huge]), MISSION_RTL).findings if f.kind == "velocity_spike"]
    assert found.values["recorded_mps"] == pytest.approx(3.0e38, rel=1e-6)
    flown = tmp_path / "flown.ulg"
    for k in (199, 200, 201):
        _with_field_changed(RTL if k == 199 else flown, flown, "vehicle_local_position", k, "vx", lambda v: v + 40.0)
    assert not [f for f in assess(read_ulogs([flown]), MISSION_RTL).findings if f.kind == "velocity_spike"]


def test_a_damaged_log_is_read_quietly_and_its_damage_noted(tmp_path, capsys):
    """pyulog prints a line for each message it cannot place (hundreds in a damaged log, on stdout, where a script
    reads the tool's output): they become one note; the rest of the log is read."""
    data = bytearray(SMALL.read_bytes())
    for nth, msg_id in ((100, 4321), (200, 4321), (300, 4322)):  # position messages under ids none subscribed
        at, _ = _message(data, "vehicle_local_position", nth)
        struct.pack_into("<H", data, at, msg_id)
    bad = tmp_path / "damaged.ulg"
    bad.write_bytes(bytes(data))
    traj = read_ulogs([bad])
    assert capsys.readouterr().out == ""
    assert len(traj.tracks["damaged"]) == 633
    assert ("damaged: the log is damaged (messages under 2 unknown id(s) skipped): what the damage held is lost"
            in traj.ingest.notes)
    assert not [n for n in read_ulogs([SMALL]).ingest.notes if "damaged" in n]


def test_a_real_logs_arming_is_read_as_a_bags_vehicle_status_is():
    """PX4 swarms stand on their pads closer than their separation: the parked pairs (safety.parked) need the ULog's
    arming, as the bag reader and the live input have it from vehicle_status."""
    traj = read_ulogs([RTL])
    arming = [(e.t, e.extra["label"]) for e in traj.ingest.log_events if e.extra.get("source") == "vehicle_status"]
    assert arming == [(pytest.approx(0.564, abs=1e-3), "armed"), (pytest.approx(39.364, abs=1e-3), "disarmed")]


def test_a_real_logs_land_detector_is_read():
    """Armed on the pad is parked too (safety.parked): vehicle_land_detected's first read (a state, not a change: the
    log starts at arming, and the vehicle is airborne by its first message) and its landing, 1 s before the disarm."""
    traj = read_ulogs([RTL])
    landing = [(e.t, e.extra["label"], bool(e.extra.get("initial")))
               for e in traj.ingest.log_events if e.extra.get("source") == "vehicle_land_detected"]
    assert landing == [(0.0, "airborne", True), (pytest.approx(38.360, abs=1e-3), "landed", False)]
