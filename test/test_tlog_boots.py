"""A telemetry log across a reboot of the autopilot (a ground-station session over two flights): each boot goes on
the log's receive clock, one after the other. Before, the boot clock put the second flight (its clock from 5 s)
before the first: a 948-s flight in the wrong order with a 421-s gap, its attitude and mode changes misplaced alike"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from uav_debate_eval.io.loader import load_inputs
from uav_debate_eval.io.tlog import read_tlog

REAL = Path(__file__).parent / "fixtures" / "real" / "ardupilot" / "sub411_small.tlog"


def _two_boots(dst: Path, later_s: float, boot_s: float = 5.0) -> Path:
    """The real log, then the same session again `later_s` later on the receive clock, its boot clock restarted (the
    second boot's first message stamped `boot_s` after its start)."""
    from pymavlink.dialects.v20 import ardupilotmega as mavlink

    data = REAL.read_bytes()
    i, records = 0, []
    while i + 18 <= len(data):
        magic, size = data[i + 8], data[i + 9]
        assert magic in (0xFD, 0xFE)
        total = size + 12 + (13 if data[i + 10] & 1 else 0) if magic == 0xFD else size + 8
        if i + 8 + total > len(data):
            break
        packet = bytes(data[i + 8:i + 8 + total])
        try:
            m = mavlink.MAVLink(None).decode(bytearray(packet))
        except mavlink.MAVError:
            m = None
        records.append((int.from_bytes(data[i:i + 8], "big"), packet, m if hasattr(m, "time_boot_ms") else None))
        i += 8 + total
    back_ms = min(m.time_boot_ms for _, _, m in records
                  if m is not None and m.get_type() == "LOCAL_POSITION_NED") - round(boot_s * 1000)
    second = bytearray()
    for stamp, packet, m in records:
        if m is not None:
            m.time_boot_ms = max(0, m.time_boot_ms - back_ms)  # 0 (no boot time) stays 0
            sender = mavlink.MAVLink(None, srcSystem=m.get_srcSystem(), srcComponent=m.get_srcComponent())
            sender.seq = m.get_seq()
            packet = bytes(m.pack(sender, force_mavlink1=packet[0] == 0xFE))
        second += (stamp + round(later_s * 1e6)).to_bytes(8, "big") + packet
    dst.write_bytes(data[:i] + bytes(second))
    return dst


def test_a_second_boot_follows_the_first_on_the_receive_clock(tmp_path: Path):
    (one,) = read_tlog(REAL)
    (two,) = read_tlog(_two_boots(tmp_path / "session.tlog", 400.0))
    n = len(one.track.t_us)
    assert len(two.track.t_us) == 2 * n and np.all(np.diff(two.track.t_us) > 0)
    assert two.track.t_us[n:] - two.track.t_us[:n] == pytest.approx(400e6, abs=2e3)  # the receive clock's 400 s
    assert np.array_equal(two.track.pos_ned[n:], one.track.pos_ned)
    assert one.attitude is not None and two.attitude is not None  # the attitude moved with its boot too
    assert len(two.attitude[0]) == 2 * len(one.attitude[0]) and np.all(np.diff(two.attitude[0]) >= 0)
    assert any("rebooted 1 time(s) during the log" in note for note in two.notes)
    assert not any("rebooted" in note for note in one.notes)


def test_the_flight_of_a_session_over_two_boots_holds_both(tmp_path: Path):
    traj = load_inputs([_two_boots(tmp_path / "session.tlog", 400.0)])
    single = load_inputs([REAL])
    assert traj.n_samples == 2 * single.n_samples
    assert traj.duration == pytest.approx(single.duration + 400.0, abs=0.01)
    assert traj.ingest.dropped == {}


def test_two_autopilots_with_one_system_id_are_a_one_line_error(tmp_path: Path):
    """SITL instances left at SYSID_THISMAV 1, heard by one ground station: two boot clocks interleave in one
    system's stream (before: one vehicle flying 30 s, silent 270 s, then 30 s 200 m away: the second instance)."""
    import struct

    from pymavlink.dialects.v20 import ardupilotmega as mavlink

    from uav_debate_eval.core.errors import InputError

    mav = mavlink.MAVLink(None, srcSystem=1, srcComponent=1)
    path = tmp_path / "two_sitl.tlog"
    with path.open("wb") as f:
        for i in range(300):
            for boot_s, x in ((100.0, 0.0), (400.0, 200.0)):  # each instance's own boot clock and position
                msg = mavlink.MAVLink_local_position_ned_message(round((boot_s + i / 10) * 1000), x, 0.0, -5.0, 0, 0, 0)
                f.write(struct.pack(">Q", int((1_795_462_900.0 + i / 10) * 1e6)) + msg.pack(mav))
    with pytest.raises(InputError, match=r"two_sitl.tlog: system 1: its boot clock goes back 299 times among 600 "
                                         r"positions: two autopilots with one system id \(SYSID_THISMAV\)\?"):
        read_tlog(path)


def test_a_tlog_without_gps_time_does_not_claim_a_utc_clock():
    """A real ArduSub 4.1 tlog has no SYSTEM_TIME with GPS time: its clock is the ground station's receive times.
    The flight's clock note said 'clocks aligned with GPS UTC time' beside the note saying the opposite."""
    notes = load_inputs([REAL]).ingest.notes
    assert "clocks from the ground station's receive times (t = its unix seconds)" in notes
    assert not any("GPS UTC" in n for n in notes)
