"""ArduPilot reader (issue 27): DataFlash .bin and MAVLink .tlog written by the tests (test/ardupilot_logs.py)."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest
from ardupilot_logs import (
    GPS_EPOCH_UTC_S,
    GPS_MS0,
    GPS_WEEK,
    Vehicle,
    evaluate_log,
    swarm,
    write_bin,
    write_mission,
    write_swarm_bins,
    write_tlog,
)

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission_file import load_mission
from uav_debate_eval.io.ardupilot import read_ardupilot_logs
from uav_debate_eval.io.dataflash_columns import columns
from uav_debate_eval.io.dataflash_open import open_dataflash
from uav_debate_eval.io.loader import load_inputs, one_flight
from uav_debate_eval.quality.assessment import assess
from uav_debate_eval.quality.gnss import jumps
from uav_debate_eval.sim.dataflash import offset_latlon

T0_UTC = GPS_EPOCH_UTC_S + GPS_WEEK * 604800 + GPS_MS0 / 1000


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ardupilot")
    bins = write_swarm_bins(root)
    return {"root": root, "bins": bins, "tlog": write_tlog(swarm(), root / "swarm.tlog"),
            "mission": write_mission(root)}


def _kinds(traj) -> dict[tuple[str, str], tuple[float, float]]:
    return {(f.kind, f.uavs[0]): (f.t_start, f.t_end) for f in traj.ingest.findings}


def test_three_bins_one_world_frame_and_gps_clock(logs):
    traj = load_inputs(logs["bins"])
    assert traj.uav_ids == ["sysid1", "sysid2", "sysid3"]  # SYSID_THISMAV from the logs' parameters
    assert traj.t0 == pytest.approx(T0_UTC, abs=1e-3)  # boot clocks moved to GPS UTC time (each booted apart)
    assert traj.duration == pytest.approx(59.9, abs=1e-6)
    for k, u in enumerate(traj.uav_ids):
        tr = traj.tracks[u]
        assert tr.pos[0] == pytest.approx([10.0 * k, 0.0, 0.0], abs=0.02)  # origins 10 m apart east (ORGN)
        assert tr.pos[np.searchsorted(tr.t, 10.0), 2] == pytest.approx(10.0, abs=1e-3)  # NED down -> ENU up
        assert not tr.vel_derived  # the EKF's own velocity
    one = traj.tracks["sysid1"]
    i = np.searchsorted(one.t, 22.0)
    assert one.vel[i] == pytest.approx([0.0, 8.0, 0.0], abs=1e-6)  # north is ENU y


def test_ekf_validity_lane_and_log_spans(logs):
    traj = load_inputs(logs["bins"])
    three = traj.tracks["sysid3"]
    bad = three.t[~three.est_valid]
    assert bad.min() == pytest.approx(40.0) and bad.max() == pytest.approx(44.9) and len(bad) == 50
    assert traj.tracks["sysid1"].est_valid is None and traj.tracks["sysid2"].est_valid is None
    i = np.searchsorted(three.t, 50.0)
    assert three.pos[i, 1] - three.pos[np.searchsorted(three.t, 41.0) - 1, 1] == pytest.approx(2 * 12.0 + 0.3, abs=0.05)
    spans = _kinds(traj)
    assert spans[("gps_glitch", "sysid2")] == pytest.approx((30.0, 32.2))
    assert spans[("ekf_lane_switch", "sysid3")] == pytest.approx((42.0, 42.0))
    assert spans[("logging_gap", "sysid2")] == pytest.approx((49.9, 51.5))
    assert len(spans) == 3


def test_modes_errors_events_commands(logs):
    traj = load_inputs(logs["bins"])
    by = {(e.type, e.uavs[0], e.extra["label"]): e for e in traj.ingest.log_events}
    land = by[("flight_mode", "sysid3", "mode=LAND reason=ekf_failsafe")]
    assert land.t == pytest.approx(40.8) and land.extra["mode"] == "LAND"
    err = by[("autopilot_error", "sysid3", "EKFCHECK_bad_variance")]
    assert (err.t, err.t_end) == pytest.approx((40.0, 45.0))  # ERR EKFCHECK 2 ... resolved
    # ERR FLIGHT_MODE 3: the autopilot refused AUTO at that instant (a real log read "FLIGHT MODE code 3" from there
    # to the log's end, 111 s, with advice on sensors and vibration)
    refused = by[("autopilot_error", "sysid2", "refused_AUTO")]
    assert (refused.t, refused.t_end) == pytest.approx((15.0, 15.0)) and refused.extra["refused_mode"] == "AUTO"
    assert ("autopilot_event", "sysid1", "ARMED") in by and ("autopilot_event", "sysid2", "LAND_COMPLETE") in by
    assert by[("mission_command", "sysid1", "NAV_WAYPOINT#1")].t == pytest.approx(9.0)
    dump = by[("mission_command", "sysid1", "mission_of_3_items")]  # the mission the logger wrote at arming
    assert dump.t == pytest.approx(0.5) and dump.extra["items"] == 3
    assert not any(e.extra["label"].startswith("EKF_PRIMARY") for e in traj.ingest.log_events)  # a span, not an event
    # logged at boot, before the EKF's first sample: the mode the flight starts in, at t = 0; SET_HOME left out
    start = by[("flight_mode", "sysid1", "mode=STABILIZE reason=startup")]
    assert start.t == 0.0 and start.extra["set_at"] < 0
    assert ("autopilot_event", "sysid1", "SET_HOME") not in by
    assert "sysid1: 1 autopilot log entries before the flight's first sample left out" in traj.ingest.notes
    assert min(e.t for e in traj.ingest.log_events) == 0.0


def test_tlog_of_the_same_flight_agrees(logs):
    b, t = load_inputs(logs["bins"]), load_inputs([logs["tlog"]])
    assert t.uav_ids == b.uav_ids  # one ground-station log, one vehicle per MAVLink system id
    assert t.t0 == pytest.approx(b.t0, abs=1e-3)  # SYSTEM_TIME's GPS time
    for u in b.uav_ids:
        assert len(t.tracks[u]) == len(b.tracks[u])
        # the .bin logs both lanes' estimates; after the switch the .tlog streams lane 1 (0.3 m apart)
        assert np.abs(t.tracks[u].pos - b.tracks[u].pos).max() < 0.35
        assert np.array_equal(t.tracks[u].est_valid is None, b.tracks[u].est_valid is None)
    assert int((~t.tracks["sysid3"].est_valid).sum()) == 50
    spans = _kinds(t)
    assert spans[("gps_glitch", "sysid2")] == pytest.approx((30.0, 32.2))
    assert spans[("ekf_lane_switch", "sysid3")] == pytest.approx((42.0, 42.0))
    assert spans[("logging_gap", "sysid2")] == pytest.approx((49.9, 51.5))
    modes = [e.extra["mode"] for e in t.ingest.log_events if e.type == "flight_mode" and e.uavs == ["sysid3"]]
    assert modes == ["GUIDED", "LAND"]
    reached = [e for e in t.ingest.log_events if e.type == "mission_command" and e.uavs == ["sysid1"]]
    assert [(e.t, e.extra["label"]) for e in reached] == [(9.0, "NAV_WAYPOINT#1")]  # as the .bin's CMD says
    # MAVProxy beside each SITL instance: one .tlog per vehicle reads as the same flight
    per = [write_tlog([v], logs["root"] / f"mav{v.sysid}.tlog") for v in swarm()]
    apart = load_inputs(per)
    assert apart.uav_ids == t.uav_ids and apart.t0 == t.t0
    assert all(np.array_equal(apart.tracks[u].pos, t.tracks[u].pos) for u in t.uav_ids)


def test_column_gathers_equal_dfreader_messages(logs):
    reader = open_dataflash(logs["bins"][2])
    cols = columns(reader, "XKF1", ["TimeUS", "C", "PN", "VN", "GX"])
    gps = columns(reader, "GPS", ["Lat", "Alt", "HDop"])
    reader._rewind()
    msgs = []
    while (m := reader.recv_match(type="XKF1", strict=True)) is not None:
        msgs.append((m.TimeUS, m.C, m.PN, m.VN))
    reader._rewind()
    fixes = []
    while (m := reader.recv_match(type="GPS", strict=True)) is not None:
        fixes.append((m.Lat, m.Alt, m.HDop))
    reader.close()
    assert np.array_equal(np.column_stack([cols["TimeUS"], cols["C"], cols["PN"], cols["VN"]]), np.array(msgs))
    assert np.allclose(np.column_stack([gps["Lat"], gps["Alt"], gps["HDop"]]), np.array(fixes), rtol=0, atol=1e-12)


def test_duplicate_sysids_take_file_names(tmp_path):
    a = write_bin(Vehicle(1, 100.0, 0.0), tmp_path / "a.bin")
    b = write_bin(Vehicle(1, 120.0, 10.0), tmp_path / "b.bin")  # SITL instances all default to SYSID_THISMAV 1
    traj = read_ardupilot_logs([a, b])
    assert traj.uav_ids == ["a", "b"]
    assert any("named after its file (sysid1 is not unique" in n for n in traj.ingest.notes)
    assert load_inputs([a, b], names=["left", "right"]).uav_ids == ["left", "right"]


def test_truncated_logs(logs, tmp_path):
    raw = logs["bins"][0].read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(raw[:-7])  # a log cut inside its last message, as a power-off leaves it
    traj = read_ardupilot_logs([cut])
    assert traj.duration == pytest.approx(59.9, abs=0.11)
    assert any("ends inside a message (truncated)" in n for n in traj.ingest.notes)
    header_only = tmp_path / "header_only.bin"  # cut after a message's 3-byte header (a real Copter 4.4 SITL log)
    header_only.write_bytes(raw + raw[-100:][raw[-100:].index(b"\xa3\x95"):][:3])
    assert any("ends inside a message (truncated)" in n for n in read_ardupilot_logs([header_only]).ingest.notes)
    assert not any("truncated" in n for n in read_ardupilot_logs([logs["bins"][0]]).ingest.notes)
    half = raw.index(b"\xa3\x95", len(raw) // 4)  # a message of a type no FMT describes a quarter in: the reader
    damaged = tmp_path / "damaged.bin"  # stops there, mid-file, which is no truncation
    damaged.write_bytes(raw[:half] + b"\xa3\x95\xfe" + bytes(20) + raw[half:])
    notes = read_ardupilot_logs([damaged]).ingest.notes
    assert not any("truncated" in n for n in notes)
    assert f"damaged.bin: read up to byte {half:,} of {len(raw) + 23:,}, where a message no format describes stopped " \
           "the reader (a damaged log); the rest is not in the flight" in notes
    head = tmp_path / "head.bin"
    head.write_bytes(raw[:500])  # cut before the first EKF message
    with pytest.raises(InputError, match="head.bin: no position in the log"):
        read_ardupilot_logs([head])


_BAD_FMT = (bytes([0xA3, 0x95, 0x80]) + struct.pack("<BB4s16s64s", 67, 20, b"XKF1", b"QBccCfffffffccce",
                                                     b"TimeUS,C,Roll,Pitch,Yaw,VN,VE,VD,dPD,PN,PE,PD,GX,GY,GZ,OH")
            + (bytes([0xA3, 0x95, 67]) + bytes(17)) * 10)


@pytest.mark.parametrize("name,data,reason", [
    ("noise.bin", bytes(range(256)) * 8, "not an ArduPilot DataFlash log"),
    ("badfmt.bin", _BAD_FMT, "XKF1 format 'QBccCfffffffccce' does not match its length 20"),
    ("empty.bin", b"", "not an ArduPilot DataFlash log"),
    ("empty.tlog", b"", "not a MAVLink telemetry log"),
    ("noise.tlog", bytes(range(256)) * 8, "no vehicle position in the telemetry log"),
])
def test_bad_logs_are_input_errors(tmp_path, name, data, reason):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError, match=reason) as exc:
        read_ardupilot_logs([path])
    assert "\n" not in str(exc.value) and name in str(exc.value)


def _global_only_tlog(path, placed_from: float | None):
    """A ground station's log of a bench vehicle: heartbeats and GLOBAL_POSITION_INT at 0°, 0° (no fix yet), from
    `placed_from` s on at a real place."""
    from pymavlink.dialects.v20 import ardupilotmega as mavlink

    mav = mavlink.MAVLink(None, srcSystem=1, srcComponent=1)
    with open(path, "wb") as f:
        for k in range(100):
            t = k / 10
            placed = placed_from is not None and t >= placed_from
            lat, lon = (int(47.4e7), int(8.5e7) + k) if placed else (0, 0)
            for msg in (mavlink.MAVLink_heartbeat_message(2, 3, 89, 0, 5, 3),
                        mavlink.MAVLink_global_position_int_message(int(t * 1000), lat, lon, 500_000, 0, 0, 0, 0, 0)):
                f.write(struct.pack(">Q", int((1.7e9 + t) * 1e6)) + msg.pack(mav))
    return path


def test_a_tlog_whose_global_positions_are_0_0_has_no_horizontal_position_there(tmp_path):
    """A real bench .tlog (ArduPlane 3.8, no GPS fix, never armed) held only GLOBAL_POSITION_INT at 0°, 0°: it read
    as a vehicle at rest, judged safe. Those samples have no horizontal position (their altitude stays: a real
    ArduCopter 3.2 log without GPS told of its crash by it); the ones after the fix are placed around it."""
    tr = load_inputs([_global_only_tlog(tmp_path / "bench.tlog", None)]).tracks["sysid1"]
    assert len(tr.t) == 100 and not tr.est_valid.any() and tr.est_z_valid.all()
    traj = load_inputs([_global_only_tlog(tmp_path / "fix.tlog", 4.0)])
    tr = traj.tracks["sysid1"]
    assert len(tr.t) == 100 and (tr.est_valid == (tr.t >= 4.0 - 1e-9)).all() and tr.est_z_valid.all()
    assert np.abs(tr.pos[:, :2]).max() < 1.0  # placed around its first real fix, not 0°, 0° (thousands of km away)
    rc, rep = evaluate_log(tmp_path / "bench.tlog", tmp_path / "out")
    assert rc == 4 and rep["verdict"]["label"] == "inconclusive"


def test_gps_jumps_beyond_the_vehicle_class(logs):
    traj = load_inputs(logs["bins"])
    t, pos = traj.ingest.gnss["sysid2"]
    idx = jumps(t, pos, 30.0)
    # out at 30.0 and back at 32.0; the fix after each misses the prediction the jump made, but moved no further than
    # the receiver's noise from it: no jump of its own
    assert t[idx].tolist() == pytest.approx([30.0, 32.0])
    assert jumps(*traj.ingest.gnss["sysid1"], 30.0).size == 0  # an 8 m/s dash is no jump
    # without the autopilot's own ERR report, the quality pass finds the glitch from the fixes
    traj.ingest.findings = [f for f in traj.ingest.findings if f.kind != "gps_glitch"]
    found = [f for f in assess(traj, load_mission(logs["mission"])).findings if f.kind == "gps_glitch"]
    assert len(found) == 1 and found[0].uavs == ["sysid2"]
    assert (found[0].t_start, found[0].t_end) == pytest.approx((29.8, 32.0))
    assert found[0].values["jump_m"] == pytest.approx(25.0, abs=0.5)


def test_no_logging_gap_beside_a_stray_stamp():
    """A real Rover 4.5 tlog: its first GLOBAL_POSITION_INT stamped 10.6 s after boot, the rest 387.3-421.4 s. The
    flight leaves the first out as a stray stamp; its 376.7-s 'gap' to the rest was said as a logging gap too."""
    from uav_debate_eval.io.ardupilot_log import gaps

    rest = np.arange(387.309, 421.409, 0.2)
    assert gaps(np.concatenate([[10.567], rest]) * 1e6) == []
    silent = np.concatenate([rest[:50], rest[60:]]) * 1e6  # a real 2.2-s silence is still one
    assert gaps(silent) == [pytest.approx((rest[49] * 1e6, rest[60] * 1e6))]


def test_fixes_logged_moments_apart_make_no_jump():
    """A real ArduCopter 3.2.1 log's first GPS records: 23 and 20 ms apart, the altitude settling 0.38 m each, then
    5 Hz. The velocity over 20 ms carried that noise 10x into the next fix's prediction: a 'GPS jump' of 0.03 m."""
    t = np.array([0.0, 0.023, 0.043, 0.244, 0.428, 0.632])
    pos = np.array([[0.0, 0.0, 0.0], [0.046, 0.155, 0.38], [-0.091, 0.255, 0.77], [-0.082, 0.277, 0.79],
                    [-0.082, 0.288, 0.97], [-0.1, 0.311, 1.09]])
    assert jumps(t, pos, 10.0).size == 0
    pos[4:] += [30.0, 0.0, 0.0]  # a real jump: 30 m in 0.18 s
    assert jumps(t, pos, 10.0).tolist() == [4]


def test_overlap_rule_on_gps_time(logs, tmp_path):
    together, why = one_flight(logs["bins"])
    assert together and "absolute clock" in why
    later = write_bin(dataclasses.replace(swarm()[0], week_shift=1), tmp_path / "next_week.bin")
    apart, why = one_flight([logs["bins"][0], later])
    assert not apart and "do not overlap" in why


def test_tlog_type_filtered_scan_equals_mavutil(logs, tmp_path):
    from uav_debate_eval.io import tlog

    fast, count, bad = tlog._filtered(logs["tlog"].read_bytes())
    slow, count_slow, bad_slow = tlog._robust(logs["tlog"])
    assert (count, bad) == (count_slow, bad_slow) == (5207, 0)
    assert sorted(fast) == sorted(slow) == [1, 2, 3]
    for sysid, kinds in slow.items():
        assert sorted(fast[sysid]) == sorted(kinds)
        for kind, msgs in kinds.items():
            assert [(m._timestamp, m.to_dict()) for m in fast[sysid][kind]] == \
                [(m._timestamp, m.to_dict()) for m in msgs]
    # trailing garbage: no longer a clean sequence of records, so mavutil's resynchronising parser reads it
    damaged = tmp_path / "damaged.tlog"
    damaged.write_bytes(logs["tlog"].read_bytes() + b"\x13\x37" * 40)
    assert tlog._filtered(damaged.read_bytes()) is None
    traj = read_ardupilot_logs([damaged])
    assert traj.uav_ids == ["sysid1", "sysid2", "sysid3"]
    assert any("unreadable bytes or packets skipped" in n for n in traj.ingest.notes)


def test_px4_and_ardupilot_logs_share_one_clock(logs):
    from pathlib import Path

    px4 = Path(__file__).parent / "fixtures" / "px4" / "sample_log_small.ulg"
    together, why = one_flight([logs["bins"][0], px4])
    assert not together and "do not overlap" in why  # flown years apart: a batch unless --one-flight
    traj = load_inputs([logs["bins"][0], px4])  # what --one-flight reads
    assert traj.uav_ids == ["01", "sample_log_small"]  # an id is missing (the ULog has no SYSID): file names
    assert "clocks aligned with GPS UTC time (t = UTC seconds)" in traj.ingest.notes
    assert traj.t0 == pytest.approx(1618986658.4635, abs=1e-3)  # the PX4 flight (2021) comes first on UTC
    assert traj.tracks["01"].t[0] > 1e8  # ... and the ArduPilot one years later, on the same clock


@pytest.mark.parametrize("scenario,fault", [("formation", "near_miss"), ("tracking", "overspeed"),
                                            ("formation", "telemetry_dropout")])
def test_simulated_flight_round_trips_through_bin_logs(tmp_path, scenario, fault):
    """`simulate --format bin` writes one log per vehicle; read back, the flight has the CSV's violations."""
    from uav_debate_eval.io.csv_io import read_csv
    from uav_debate_eval.runner.pipeline import evaluate
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate(scenario, seed=1, duration_s=40, faults=[fault])
    sim.write(tmp_path, formats=("csv", "bin"))
    bins = sorted((tmp_path / "ardupilot").glob("*.bin"))
    assert [p.stem for p in bins] == sim.traj.uav_ids
    from_bins = load_inputs(bins, names=sim.mission.uavs)
    assert from_bins.uav_ids == sim.traj.uav_ids and from_bins.t0 == pytest.approx(1_795_462_900.0, abs=1e-3)
    a, b = evaluate(read_csv(tmp_path / "trajectory.csv"), sim.mission), evaluate(from_bins, sim.mission)

    def violations(ev) -> list[tuple]:
        return [(v["constraint"], v["uavs"], v["t_start"], v["t_end"], v["worst_value"])
                for v in ev.report["violations"]]

    assert len(violations(a)) >= 1
    for va, vb in zip(violations(a), violations(b), strict=True):
        assert va[:2] == vb[:2] and vb[2:] == pytest.approx(va[2:], abs=2e-3)
    assert b.report["verdict"]["label"] == a.report["verdict"]["label"]


def test_mission_names_follow_the_order_of_the_logs(tmp_path):
    """Mission names are given to the logs in the order the logs are given (as for PX4), not in id order."""
    from uav_debate_eval.io.csv_io import read_csv
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("swap", seed=0, n_uavs=12, duration_s=10)
    sim.write(tmp_path, formats=("csv", "bin"))
    names = sim.mission.uavs[::-1]
    traj = load_inputs([tmp_path / "ardupilot" / f"{u}.bin" for u in names], names=names)
    csv = read_csv(tmp_path / "trajectory.csv")
    assert sorted(traj.uav_ids) == sorted(csv.uav_ids)
    for u in csv.uav_ids:
        assert np.abs(traj.tracks[u].pos - csv.tracks[u].pos).max() < 2e-3, u
    assert any("named uav12 from the mission's uavs" in n for n in traj.ingest.notes)


def test_estimator_validity_rule():
    """ArduPilot's EKF failsafe rule: flags without a position, or two of the velocity / position / compass test
    ratios at the threshold; one high ratio alone (a compass glitch) leaves the position usable."""
    from uav_debate_eval.io import ardupilot_codes as codes
    from uav_debate_eval.io.ardupilot_log import invalid_reasons
    from uav_debate_eval.io.log_series import hold_last

    good, lost = 0b1_1010_0000_0011_1111, 0b1_0000_0000_0000_0111
    assert codes.position_ok(good) and not codes.position_ok(lost)
    assert not codes.position_ok(good | codes.CONST_POS_MODE)
    flags = np.array([True, True, True, False])
    ratios = np.array([[0.1, 0.1, 0.1], [0.9, 0.1, 0.1], [0.9, 0.85, 0.1], [0.1, 0.1, 0.1]])
    assert invalid_reasons(flags, ratios, 0.8).tolist() == [False, False, True, True]
    state = hold_last(np.array([10.0, 20.0]), np.array([1, 2]), np.array([5.0, 10.0, 15.0, 25.0]))
    assert state.tolist() == [1, 1, 1, 2]


def test_older_firmware_ekf2_log_without_origin(tmp_path):
    """ArduPilot 3.x / 4.0 logs: EKF2's NKF1/NKF4 without a core column, GPS without an instance, no ORGN (the
    origin comes from the GPS fixes minus the local position)."""
    from uav_debate_eval.sim.dataflash import DataFlashWriter, gps_week_ms

    old = {"NKF1": (80, "QccCfffffffccce", "TimeUS,Roll,Pitch,Yaw,VN,VE,VD,dPD,PN,PE,PD,GX,GY,GZ,OH"),
           "NKF4": (81, "QcccccfbbHBHHb", "TimeUS,SV,SP,SH,SM,SVT,errRP,OFN,OFE,FS,TS,SS,GPS,PI"),
           "GPS": (82, "QBIHBcLLefffB", "TimeUS,Status,GMS,GWk,NSats,HDop,Lat,Lng,Alt,Spd,GCrs,VZ,U")}
    path = tmp_path / "old.bin"
    w = DataFlashWriter(path, old)
    w.write("PARM", 1_000_000, "SYSID_THISMAV", 7, 1)
    home = (-35.363261, 149.165230, 584.0)
    for k in range(300):  # 30 s at 10 Hz: 2 m/s east from 5 m north of the fix that set the origin
        t, east = 10.0 + k / 10, 2.0 * k / 10
        lost = 12.0 <= t < 14.0
        w.write("NKF1", t * 1e6, 0, 0, 0, 0.0, 2.0, 0.0, 0.0, 5.0, east, -3.0, 0, 0, 0, 0)
        w.write("NKF4", t * 1e6, 0.1, 0.1, 0.1, 0.1, 0, 0, 0, 0, 0, 0, 0x07 if lost else 0x3F, 0, 0)
        if k % 2 == 0:
            week, ms = gps_week_ms(1_795_462_900.0 + k / 10)
            lat, lon = offset_latlon(home[0], home[1], 5.0, east)
            w.write("GPS", t * 1e6, 3, ms, week, 10, 0.9, float(lat), float(lon), home[2] + 3.0, 0, 0, 0, 1)
    w.close()
    traj = read_ardupilot_logs([path])
    tr = traj.tracks["sysid7"]
    assert traj.t0 == pytest.approx(1_795_462_900.0, abs=1e-3) and len(tr) == 300
    assert tr.pos[0] == pytest.approx([0.0, 5.0, 3.0], abs=0.02)  # the single vehicle's frame: its EKF origin
    assert tr.pos[-1, 0] == pytest.approx(59.8, abs=1e-4) and tr.vel[0] == pytest.approx([2.0, 0.0, 0.0])
    assert len(tr.t[~tr.est_valid]) == 20
    assert any("sysid7: 20 of 300 samples flagged not valid" in n and "NKF4 status flags" in n
               for n in traj.ingest.notes)
    # placed beside a vehicle whose ORGN is 10 m east of that home: the fix-derived origin is the home
    other = write_bin(Vehicle(2, 100.0, 10.0), tmp_path / "new.bin")
    both = read_ardupilot_logs([path, other])
    assert both.tracks["sysid2"].pos[0] == pytest.approx([10.0, 0.0, 0.0], abs=0.05)  # 5 m shift: 2.5 cm off


def test_sitl_instances_named_after_their_folders(tmp_path):
    """SITL instances all log logs/00000001.BIN with SYSID_THISMAV 1: the folder that tells them apart names them."""
    paths = []
    for k, v in enumerate(swarm()):
        folder = tmp_path / f"sitl{k + 1}" / "logs"
        folder.mkdir(parents=True)
        paths.append(write_bin(dataclasses.replace(v, sysid=1), folder / "00000001.BIN"))
    traj = read_ardupilot_logs(paths)
    assert traj.uav_ids == ["sitl1", "sitl2", "sitl3"]
    assert traj.tracks["sitl2"].pos[0] == pytest.approx([10.0, 0.0, 0.0], abs=0.02)


def test_a_log_with_gps_alone_is_read_from_its_fixes(tmp_path):
    """ArduCopter 3.1 logged no estimate (no EKF, POS or AHR2), only GPS: the track is the 3-D fixes with the
    receiver's velocity (ground speed, course, VZ down positive); a log without a fix is refused in one line."""
    from uav_debate_eval.sim.dataflash import DataFlashWriter, gps_week_ms

    fmt = {"GPS": (82, "QBIHBcLLefffB", "TimeUS,Status,GMS,GWk,NSats,HDop,Lat,Lng,Alt,Spd,GCrs,VZ,U")}
    path = tmp_path / "gps_only.bin"
    w = DataFlashWriter(path, fmt)
    w.write("PARM", 1_000_000, "SYSID_THISMAV", 5, 1)
    home = (30.155734, -97.957547, 297.9)
    for k in range(100):  # 20 s at 5 Hz: 4 m/s north-east (course 45°), climbing 1 m/s
        t = 10.0 + k / 5
        week, ms = gps_week_ms(1_413_662_400.0 + k / 5)
        lat, lon = offset_latlon(home[0], home[1], 4.0 * k / 5 / np.sqrt(2), 4.0 * k / 5 / np.sqrt(2))
        w.write("GPS", t * 1e6, 3, ms, week, 9, 1.2, float(lat), float(lon), home[2] + k / 5, 4.0, 45.0, -1.0, 1)
    w.close()
    traj = read_ardupilot_logs([path])
    tr = traj.tracks["sysid5"]
    assert len(tr) == 100 and not tr.vel_derived
    assert tr.vel[0] == pytest.approx([4.0 / np.sqrt(2), 4.0 / np.sqrt(2), 1.0], abs=1e-4)  # ENU: up is +z
    assert tr.pos[-1] - tr.pos[0] == pytest.approx([19.8 * 4 / np.sqrt(2)] * 2 + [19.8], abs=0.05)
    assert any("the track is the GPS receiver's 100 3-D fixes" in n for n in traj.ingest.notes)
    w = DataFlashWriter(tmp_path / "no_fix.bin", fmt)
    for k in range(10):
        w.write("GPS", (10.0 + k / 5) * 1e6, 1, 0, 0, 0, 99.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
    w.close()
    with pytest.raises(InputError, match="no POS or AHR2 position and no GPS fix"):
        read_ardupilot_logs([tmp_path / "no_fix.bin"])


def test_a_log_that_stops_in_the_air_says_so(logs, tmp_path):
    """Real logs cut in flight (a DataFlash log at 8.1 m, a ULog with landed = 0) read "good" with no word of it.
    The test logs end hovering at 10 m, armed; a disarmed or landed end, a telemetry log or a plane slower than
    flight are no such end; a simulator's is said as one."""
    from uav_debate_eval.core.records import Event
    from uav_debate_eval.findings.autopilot import autopilot_findings
    from uav_debate_eval.io.log_end import mark_ends_in_flight

    traj = load_inputs([logs["bins"][0]])
    [end] = [e for e in traj.ingest.log_events if e.type == "log_end_in_flight"]
    u = traj.uav_ids[0]
    assert end.uavs == [u] and end.t == pytest.approx(traj.tracks[u].t[-1])
    assert end.extra["height_m"] == pytest.approx(10.0, abs=0.2) and end.extra["armed"] and not end.extra["sitl"]
    [found] = autopilot_findings([dataclasses.replace(end, id="EVENT[9]")], None)
    assert found.severity == "warning" and found.sentence.startswith(
        f"{u}'s log ends at 59.9 s while it was armed and in the air, 10.0 m above where its "
        "log started, moving at 0.0 m/s: the recording stopped in flight")
    traj.ingest.log_events = [e for e in traj.ingest.log_events if e.type != "log_end_in_flight"]
    traj.ingest.log_events.append(Event("", "autopilot_event", 59.0, [u], extra={"label": "DISARMED"}))
    mark_ends_in_flight(traj)
    assert not [e for e in traj.ingest.log_events if e.type == "log_end_in_flight"]  # disarmed at the end
    sim = Event("EVENT[3]", "log_end_in_flight", 5.0, ["v"], extra={"height_m": 5.0, "speed_mps": 0.0, "sitl": True})
    [said] = autopilot_findings([sim], None)
    assert said.severity == "info" and said.sentence.startswith("v's simulation stopped at 5 s while it was in the air")
    assert not [e for e in load_inputs([logs["tlog"]]).ingest.log_events if e.type == "log_end_in_flight"]


def test_one_vehicle_given_twice_is_read_once(logs):
    """A real flight's .bin and its ground station's .tlog given together read as two vehicles 0.01 m apart, with
    advice to increase their spacing. The same system id at one spot over the common time is one vehicle: the
    onboard log is read; a finding says so."""
    bins = load_inputs(logs["bins"])
    both = load_inputs([logs["bins"][0], logs["tlog"]])
    first = read_ardupilot_logs([logs["bins"][0]]).uav_ids[0]
    assert sorted(both.uav_ids) == sorted(bins.uav_ids)  # the tlog's other vehicles stay
    assert both.tracks[first].source.endswith(logs["bins"][0].name)
    [twice] = [f for f in both.ingest.findings if f.kind == "duplicate_vehicle"]
    assert twice.uavs == [first] and twice.detail.startswith(
        f"swarm.tlog holds {first} (01.BIN) again: the same system id 1, 0.00 m apart horizontally")
    assert len([e for e in both.ingest.log_events if e.uavs == [first] and e.type == "flight_mode"]) == len(
        [e for e in bins.ingest.log_events if e.uavs == [first] and e.type == "flight_mode"])  # the .bin's only


def test_a_tlogs_extended_sys_state_gives_the_land_detector(logs):
    """EXTENDED_SYS_STATE (PX4 and ArduPilot stream it): on the ground until 3 s, in the air after, as the autopilot's
    landed/airborne events (armed on its pad a vehicle is parked: safety.parked); an undefined state says nothing."""
    t = load_inputs([write_tlog(swarm(), logs["root"] / "landed.tlog", landed_until=3.0)])
    landing = [(e.uavs[0], e.extra["label"], e.t, bool(e.extra.get("initial"))) for e in t.ingest.log_events
               if e.extra.get("label") in ("landed", "airborne")]
    assert landing == [(u, label, pytest.approx(at, abs=0.1), first) for u in t.uav_ids
                       for label, at, first in (("landed", 1.0, True), ("airborne", 3.0, False))]
    assert not [e for e in load_inputs([logs["tlog"]]).ingest.log_events if e.extra.get("label") == "landed"]


def test_a_show_of_one_system_id_pairs_only_the_logs_its_fixes_cannot_tell_apart(tmp_path):
    """Show drones left on the default SYSID_THISMAV 1: every pair of logs was placed and compared (500 logs of a
    2-min flight: 7.0 s of a 11.1-s evaluation, quadratic). A k-d tree of the median GPS fixes keeps the pairs within
    3 x TWICE_M; the log recorded twice is still found; a log without fixes is compared with every log of its id."""
    from uav_debate_eval.io.ardupilot import _same_id_pairs, read_vehicle_logs

    paths = [write_bin(Vehicle(1, 100.0 + k, 5.0 * k), tmp_path / f"d{k:02d}.BIN") for k in range(30)]
    paths.append(write_bin(Vehicle(1, 150.0, 5.0 * 7), tmp_path / "again.BIN"))  # d07 once more
    logs = [lg for p in paths for lg in read_vehicle_logs(p)]
    files = [p for p in paths for _ in read_vehicle_logs(p)]
    assert _same_id_pairs(logs, files) == [(7, 30)]
    logs[3].gps_t_us = logs[3].gps_t_us[:0]  # no fix: told apart by nothing
    assert _same_id_pairs(logs, files) == sorted([(3, k) for k in range(31) if k > 3] + [(k, 3) for k in range(3)]
                                                 + [(7, 30)])
    traj = read_ardupilot_logs(paths)
    [twice] = [f for f in traj.ingest.findings if f.kind == "duplicate_vehicle"]
    assert len(traj.uav_ids) == 30 and twice.detail.startswith("again.BIN holds d07 (d07.BIN) again: the same system "
                                                               "id 1, 0.00 m apart")


def test_a_log_that_stops_falling_ends_in_flight_whatever_its_height():
    """A real ArduCopter 3.2.1 motor failure: the log stops 1.75 m above where it started, falling at 15.7 m/s; under
    the 3-m height rule it had no log_end_in_flight. A vehicle resting 1.75 m up (a hill) still has none."""
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.findings.autopilot import autopilot_findings
    from uav_debate_eval.io.log_end import mark_ends_in_flight

    def ends(descent: float) -> list:
        t = np.arange(0.0, 20.0, 0.1)
        z = np.where(t < 19.0, 10.0, 10.0 - descent * (t - 19.0))
        z = z - z[-1] + 1.75  # ends 1.75 m above where it started... of the log below
        z[:10] = 0.0
        vel = np.column_stack([0 * t, 0 * t, np.gradient(z, t)])
        traj = SwarmTrajectory.from_columns(t, ["v"] * len(t), np.column_stack([0 * t, 0 * t, z]), vel=vel)
        mark_ends_in_flight(traj)
        return [e for e in traj.ingest.log_events if e.type == "log_end_in_flight"]

    [end] = ends(15.7)
    assert end.extra["height_m"] == pytest.approx(1.75) and end.extra["descent_mps"] == pytest.approx(15.7, abs=0.1)
    [said] = autopilot_findings([dataclasses.replace(end, id="EVENT[4]")], None)
    assert "1.8 m above where its log started, moving at 15.7 m/s, falling at 15.7 m/s" in said.sentence
    assert ends(0.0) == [] and ends(2.0) == []  # at rest, or a landing's descent: no flight cut short


def test_an_estimator_row_stamped_off_the_clock_is_no_start_of_the_flight(tmp_path):
    """A real ArduCopter SITL log: one XKF1 stamped 0.06 s after boot among rows at 125 s. Sorted in, it was the
    flight's start, 89.5 s before its first real sample (every time in the report off by that, a false 89-s logging
    gap). A row off the log's clock in recording order, which then goes on where it was, is a stray stamp."""
    from uav_debate_eval.sim.dataflash import EKF2_FORMATS, GOOD_FLAGS, DataFlashWriter

    path = tmp_path / "stray.bin"
    w = DataFlashWriter(path, formats=EKF2_FORMATS)
    w.write("PARM", 0, "AHRS_EKF_TYPE", 2, 2)
    for i in range(400):
        t = 100_000_000 + 100_000 * i
        w.write("NKF1", t, 0, 0, 0, 0, 0, 0, 0, 0.01 * i, 0, -5.0, 0, 0, 0)
        w.write("NKF4", t, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0, 0, 0, 0, 0, GOOD_FLAGS & 0xFFFF, 0, 0)
        if i == 200:
            w.write("NKF1", 56_283, 0, 0, 0, 0, 0, 0, 0, 0.01 * i, 0, -5.0, 0, 0, 0)
    w.close()
    traj = load_inputs([path])
    [u] = traj.uav_ids
    assert traj.duration == pytest.approx(39.9) and len(traj.tracks[u]) == 400
    [stray] = [f for f in traj.ingest.findings if f.kind == "stray_stamp"]
    assert stray.t_start == pytest.approx(20.0) and stray.values == {"samples": 1}
    assert "1 NKF1 record(s) stamped off the log's clock (at 0.06 s among records at 120.00 s)" in stray.detail
    assert not [f for f in traj.ingest.findings if f.kind == "logging_gap"]
