"""MAVLink telemetry attitude against the autopilot's own target (ATTITUDE vs ATTITUDE_TARGET or
NAV_CONTROLLER_OUTPUT) for attitude_control, armed and mode from HEARTBEAT, and crash evidence."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from ardupilot_logs import evaluate_log

from uav_debate_eval.cli import main
from uav_debate_eval.io.tlog import read_tlog

REAL = Path(__file__).parent / "fixtures" / "real" / "ardupilot"
STABILIZE, ACRO, ARMED_BASE, DISARMED_BASE = 0, 1, 217, 89


def write_tlog(path: Path, lose_control: bool, acro: bool = False, nav_output: bool = False) -> None:
    """A 40-s hover at 10 Hz, armed in STABILIZE (or ACRO); from 20 s roll swings to 100° against a 0° target and
    the vehicle lies there to the end, the autopilot saying "Crash: Disarming" at 23 s (lose_control)."""
    from pymavlink.dialects.v20 import ardupilotmega as mavlink

    mav = mavlink.MAVLink(None, srcSystem=1, srcComponent=1)
    rows = []
    for i in range(400):
        s = i / 10.0
        ms = int(1000 + s * 1000)
        if i % 10 == 0:
            rows.append((s, mavlink.MAVLink_heartbeat_message(2, 3, ARMED_BASE, ACRO if acro else STABILIZE, 4, 3)))
        rows.append((s, mavlink.MAVLink_local_position_ned_message(ms, 0.0, 0.0, -5.0, 0, 0, 0)))
        roll = 100.0 if lose_control and s >= 20.0 else 2.0
        rows.append((s, mavlink.MAVLink_attitude_message(ms, math.radians(roll), 0.0, 0.0, 0, 0, 0)))
        if nav_output:
            rows.append((s, mavlink.MAVLink_nav_controller_output_message(0.0, 0.0, 0, 0, 0, 0.0, 0.0, 0.0)))
        else:
            rows.append((s, mavlink.MAVLink_attitude_target_message(ms, 0, [1.0, 0.0, 0.0, 0.0], 0, 0, 0, 0.5)))
    if lose_control:
        rows.append((23.0, mavlink.MAVLink_statustext_message(2, b"Crash: Disarming")))
    with open(path, "wb") as f:
        for s, msg in sorted(rows, key=lambda r: r[0]):
            f.write(struct.pack(">Q", int((1_795_462_900.0 + s) * 1e6)) + msg.pack(mav))


def test_reader_keeps_targets_armed_and_crash(tmp_path):
    path = tmp_path / "crash.tlog"
    write_tlog(path, lose_control=True)
    (log,) = read_tlog(path)
    t, actual, target, controlled = log.attitude
    assert len(t) == 400 and controlled.all() and actual[-1, 0] == pytest.approx(100.0, abs=1e-3)
    assert np.abs(target).max() == pytest.approx(0.0)
    (crash,) = [e for e in log.events if e.type == "crash"]
    assert crash.label == ("the autopilot's crash check fired ('Crash: Disarming'); it came to rest on its side "
                           "(100° tilt)")
    assert not [e for e in log.events if e.type == "autopilot_error"]


def evaluate(tmp_path: Path, name: str, **kw) -> tuple[int, dict]:
    path = tmp_path / f"{name}.tlog"
    write_tlog(path, **kw)
    return evaluate_log(path, tmp_path / name)


def test_tlog_loss_of_control_is_a_violation_with_a_crash(tmp_path):
    code, rep = evaluate(tmp_path, "crash", lose_control=True)
    assert code == 3
    (v,) = [v for v in rep["violations"] if v["constraint"] == "attitude_control"]
    assert v["t_start"] == pytest.approx(20.0, abs=0.15) and v["worst_value"] == pytest.approx(100.0, abs=0.01)
    assert "roll 100° against its 0° target" in v["detail"]
    (crash,) = [f for f in rep["findings"] if f["kind"] == "crash"]
    assert crash["severity"] == "hazard" and "Crash: Disarming" in crash["sentence"]


@pytest.mark.parametrize("kw, exit_code", [({"lose_control": False}, 0),
                                           ({"lose_control": False, "nav_output": True}, 0),
                                           ({"lose_control": True, "acro": True}, 4)])
def test_clean_nav_output_and_acro(tmp_path, kw, exit_code):
    code, rep = evaluate(tmp_path, "f", **kw)
    assert code == exit_code
    assert not [v for v in rep["violations"] if v["constraint"] == "attitude_control"]
    if not kw.get("acro"):
        assert rep["safety"]["margins"]["attitude_control"]["worst_value"] == pytest.approx(2.0, abs=0.01)
    else:  # ACRO has no attitude target: nothing compared (inconclusive); the crash is still a hazard finding
        assert "attitude_control" not in rep["mission"]["constraints_checked"]
        assert [f for f in rep["findings"] if f["kind"] == "crash"]


def test_real_sub_tlog_has_targets_but_never_controlled():
    (log,) = read_tlog(REAL / "sub411_small.tlog")
    t, _actual, _target, controlled = log.attitude  # NAV_CONTROLLER_OUTPUT targets, never armed in a held mode
    assert len(t) == 5245 and not controlled.any()


def test_home_reset_is_one_data_quality_finding(tmp_path):
    from pymavlink.dialects.v20 import ardupilotmega as mavlink

    path = tmp_path / "home.tlog"
    write_tlog(path, lose_control=False)
    mav = mavlink.MAVLink(None, srcSystem=1, srcComponent=1)
    lat, lon = -353632610, 1491652300

    def home(s: float, dlat: int) -> bytes:
        msg = mavlink.MAVLink_home_position_message(lat + dlat, lon, 584000, 0, 0, 0, [1, 0, 0, 0], 0, 0, 0)
        return struct.pack(">Q", int((1_795_462_900.0 + s) * 1e6)) + msg.pack(mav)

    # refined by 1 cm at 5 s (no reset), set again 22 m north at 30 s (a reset)
    path.write_bytes(path.read_bytes() + home(0.5, 0) + home(5.0, 1) + home(30.0, 2000))
    code = main(["evaluate", str(path), "--out", str(tmp_path / "out"), "--llm", "rules", "--quiet"])
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 0
    (f,) = [f for f in rep["data_quality"]["findings"] if f["kind"] == "home_reset"]
    assert f["t_start"] == pytest.approx(30.0, abs=0.01) and f["values"]["resets"] == 1
    assert f["values"]["largest_move_m"] == pytest.approx(22.18, abs=0.02)  # 2e-4° of latitude at 35° S
    assert "set home again 1 time(s) (HOME_POSITION, largest move 22.2 m" in f["detail"]
    assert rep["data_quality"]["status"] == "degraded"


def test_real_sitl_plane_home_refinements_are_no_reset():
    (log,) = read_tlog(REAL / "plane450_sitl_mav.tlog")
    assert not [s for s in log.spans if s.kind == "home_reset"]  # 15 HOME_POSITION values, each within 2 cm



def test_a_home_without_its_local_position_leaves_the_origin_to_the_fixes():
    """ArduRover 4.7 sends HOME_POSITION with x, y, z NaN: home cannot be moved back to the EKF origin, so the GPS
    fixes place it (a real rover .tlog was left with 'no global reference'); a home with its local position does."""
    from types import SimpleNamespace

    from uav_debate_eval.io.tlog import _origin
    from uav_debate_eval.io.ulog import LogTrack

    t_us = np.arange(0.0, 10e6, 1e5)
    track = LogTrack("sysid1", t_us, np.zeros((len(t_us), 3)), np.zeros((len(t_us), 3)), None, None, "x.tlog")
    fixes = (t_us, np.tile([-35.363261, 149.165230, 584.0], (len(t_us), 1)))
    nan = float("nan")
    home = SimpleNamespace(latitude=-353632610, longitude=1491652300, altitude=0, x=nan, y=nan, z=nan)
    _origin(track, {"HOME_POSITION": [home]}, fixes)
    assert track.ref == pytest.approx((-35.363261, 149.165230, 584.0), abs=1e-6)
    assert track.ref_how == "GPS minus local position"
    placed = SimpleNamespace(latitude=-353632610, longitude=1491652300, altitude=0, x=0.0, y=0.0, z=0.0)
    _origin(track, {"HOME_POSITION": [placed]}, fixes)
    assert track.ref_how == "HOME_POSITION minus its local position" and track.ref[2] == pytest.approx(0.0)


def test_gps_fixes_keep_their_own_time_when_received_in_bursts():
    """A ground station receives GPS_RAW_INT in bursts (1 ms apart, out of order over a laggy link: a real ArduPlane
    quadplane SITL .tlog): its receive times faked GPS jumps ('jumped 0.0 m between fixes ... more than a vtol can
    move'); each fix carries its own boot time (time_usec), used unless the clock goes back like a reboot."""
    from types import SimpleNamespace

    from uav_debate_eval.io.tlog import _fixes

    def fix(own_s: float, recv_s: float, north: float) -> SimpleNamespace:
        return SimpleNamespace(fix_type=3, lat=-353630000 + int(north * 9), lon=1491650000, alt=584000,
                               time_usec=int(own_s * 1e6), recv=recv_s)

    own = [10.0, 10.2, 10.6, 10.4, 10.8, 10.8, 11.0]  # 10.4 delivered after 10.6; 10.8 sent twice
    recv = [20.000, 20.001, 20.002, 22.300, 22.301, 22.302, 22.303]
    raw = [fix(o, r, 5.0 * o) for o, r in zip(own, recv, strict=True)]
    t, lla = _fixes([], raw, lambda m: m.recv * 1e6)
    assert t.tolist() == [10.0e6, 10.2e6, 10.4e6, 10.6e6, 10.8e6, 11.0e6]
    assert np.all(np.diff(lla[:, 0]) > 0)  # in the order flown
    rebooted = [fix(o, r, 0.0) for o, r in zip([100.0, 100.2, 1.0, 1.2], [1.0, 1.2, 60.0, 60.2], strict=True)]
    t, _ = _fixes([], rebooted, lambda m: m.recv * 1e6)
    assert t.tolist() == [1.0e6, 1.2e6, 60.0e6, 60.2e6]  # the receive clock, as the positions are
