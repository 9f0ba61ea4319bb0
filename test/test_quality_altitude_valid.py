"""A position whose horizontal part alone is invalid (no GPS; the barometer still holds the altitude) loses only the
checks of the horizontal position: a fall inside it is still found (real PX4 1.6-1.12 and ArduCopter 4.7 logs flag
xy invalid and z valid; every vertical check was dropped with them and such a flight ended inconclusive)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from uav_debate_eval.core import SwarmTrajectory
from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.io import ardupilot_codes as codes
from uav_debate_eval.io.ardupilot import read_ardupilot_logs
from uav_debate_eval.io.ulog import read_ulogs
from uav_debate_eval.quality.assessment import assess
from uav_debate_eval.safety.checker import check_trajectory
from uav_debate_eval.sim.dataflash import DataFlashWriter

MISSION = parse_mission("constraints: {max_speed_mps: 8, max_vertical_speed_mps: 3, "
                        "geofence: {min: [-100, -100, 0], max: [100, 100, 60]}}")
SMALL = Path(__file__).parent / "fixtures" / "px4" / "sample_log_small.ulg"


def _falling(altitude_valid: bool | None) -> SwarmTrajectory:
    """40 s at 10 Hz: a hover at 30 m, the horizontal position invalid from 10 to 30 s, a 6 m/s fall at 20-22 s."""
    t = np.arange(0.0, 40.0, 0.1)
    z = 30.0 - 6.0 * np.clip(t - 20.0, 0.0, 2.0)
    pos = np.column_stack([0 * t, 0 * t, z])
    vel = np.column_stack([0 * t, 0 * t, np.where((t > 20.0) & (t <= 22.0), -6.0, 0.0)])
    invalid = (t >= 10.0) & (t < 30.0)
    z_valid = None if altitude_valid is None else np.full(len(t), altitude_valid) | ~invalid
    return SwarmTrajectory.from_columns(t, ["uav1"] * len(t), pos, vel=vel, est_valid=~invalid, est_z_valid=z_valid)


def test_a_fall_without_a_horizontal_position_is_still_found():
    quality = assess(_falling(altitude_valid=True), MISSION)
    lost = {ne.constraint for ne in quality.not_evaluable}
    assert lost == {"max_speed", "geofence"}  # one vehicle: no separation to check
    result = check_trajectory(quality.traj, MISSION, quality=quality)
    falls = [v for v in result.violations if v.constraint == "max_vertical_speed"]
    assert result.label == "risky" and len(falls) == 1
    assert falls[0].t_start == pytest.approx(20.1, abs=0.11) and falls[0].worst_value == pytest.approx(6.0)
    found = [f for f in quality.findings if f.kind == "estimator_invalid"]
    assert len(found) == 1 and "horizontal position invalid" in found[0].detail
    assert found[0].affects == ["max_speed", "geofence"]


@pytest.mark.parametrize("altitude_valid", [False, None])
def test_without_a_valid_altitude_every_position_check_is_lost_as_before(altitude_valid):
    quality = assess(_falling(altitude_valid), MISSION)
    assert {ne.constraint for ne in quality.not_evaluable} == {"max_speed", "max_vertical_speed", "geofence"}
    result = check_trajectory(quality.traj, MISSION, quality=quality)
    assert not result.violations and result.label == "inconclusive"


def test_px4_log_without_gps_keeps_its_vertical_checks():
    """pyulog's sample log: xy_valid 0 and z_valid, v_z_valid 1 throughout (a bench log without GPS)."""
    traj = read_ulogs([SMALL])
    tr = traj.tracks["sample_log_small"]
    assert not tr.est_valid.any() and tr.est_z_valid.all()
    assert any("636 of them with a valid altitude" in n for n in traj.ingest.notes)
    quality = assess(traj, MISSION)
    assert {ne.constraint for ne in quality.not_evaluable} == {"max_speed", "geofence"}


def test_ardupilot_constant_position_mode_keeps_the_altitude(tmp_path):
    """XKF4 SS 0xA7 (a real ArduCopter 4.7 log without a GPS fix): attitude, velocities and the vertical position,
    the horizontal one held constant: the position is not valid, the altitude is; 0x07 has no altitude either."""
    assert not codes.position_ok(0xA7) and codes.vertical_ok(0xA7) and not codes.vertical_ok(0x07)
    old = {"NKF1": (80, "QccCfffffffccce", "TimeUS,Roll,Pitch,Yaw,VN,VE,VD,dPD,PN,PE,PD,GX,GY,GZ,OH"),
           "NKF4": (81, "QcccccfbbHBHHb", "TimeUS,SV,SP,SH,SM,SVT,errRP,OFN,OFE,FS,TS,SS,GPS,PI")}
    path = tmp_path / "nogps.bin"
    w = DataFlashWriter(path, old)
    w.write("PARM", 1_000_000, "SYSID_THISMAV", 4, 1)
    for k in range(300):  # 30 s at 10 Hz, hovering 3 m up; 12-14 s without a horizontal position, 20-22 s no altitude
        t = 10.0 + k / 10
        flags = 0xA7 if 12.0 <= t < 14.0 else 0x07 if 20.0 <= t < 22.0 else 0x3F
        w.write("NKF1", t * 1e6, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -3.0, 0, 0, 0, 0)
        w.write("NKF4", t * 1e6, 0.1, 0.1, 0.1, 0.1, 0, 0, 0, 0, 0, 0, flags, 0, 0)
    w.close()
    tr = read_ardupilot_logs([path]).tracks["sysid4"]
    assert int((~tr.est_valid).sum()) == 40 and int((~tr.est_z_valid).sum()) == 20
    assert not (tr.est_z_valid & (tr.t >= 10.0) & (tr.t < 12.0)).any()  # 0x07 (flight time: boot 10 s is 0)


def _aligning_on_the_ground() -> SwarmTrajectory:
    """pyulog's PX4 events sample as it flew: the estimate invalid from boot to 9.6 s while disarmed (the EKF aligning
    on the ground), armed at 14.9 s, a flight of 15 s, and again invalid 28-32 s (2 s armed, 2 s disarmed)."""
    from uav_debate_eval.core.arming import state_events

    t = np.arange(0.0, 35.0, 0.1)
    z = np.interp(t, [16.0, 20.0, 24.0, 28.0], [5.0, 10.0, 10.0, 5.0])  # a 1.25 m/s climb and descent
    vel = np.column_stack([0 * t, 0 * t, np.gradient(z, t)])
    invalid = (t < 9.6) | ((t >= 28.0) & (t < 32.0))
    traj = SwarmTrajectory.from_columns(t, ["px4"] * len(t), np.column_stack([0 * t, 0 * t, z]), vel=vel,
                                        est_valid=~invalid)
    state_events(traj.ingest.log_events, "px4", [(0.0, False), (14.9, True), (30.05, False)], 0.0, "vehicle_status")
    return traj


def test_an_estimate_invalid_while_disarmed_loses_no_flight():
    """Before: the ground time before arming made a careful flight's verdict inconclusive (exit 4)."""
    from uav_debate_eval.findings.catalogue import build_findings

    traj = _aligning_on_the_ground()
    quality = assess(traj, MISSION)
    spans = sorted((ne.t_start, ne.t_end, ne.on_ground) for ne in quality.not_evaluable if ne.constraint == "max_speed")
    assert spans == [pytest.approx((0.0, 9.5, True)), pytest.approx((28.0, 30.0, False)),
                     pytest.approx((30.1, 31.9, True))]
    assert [(f.t_start, f.t_end) for f in quality.findings if f.kind == "estimator_invalid"] == [
        pytest.approx((0.0, 9.5)), pytest.approx((28.0, 31.9))]  # the recording's truth: one span each
    assert not quality.material_gaps(quality.traj, ["max_speed"])
    result = check_trajectory(quality.traj, MISSION, quality=quality)
    assert result.label == "safe" and not result.violations
    ground = [ne for ne in result.data_quality.not_evaluable if ne.on_ground]
    assert ground and all(ne.reason.endswith("while it stood disarmed") and ne.to_dict()["on_ground"] for ne in ground)
    assert "on_ground" not in next(ne for ne in result.data_quality.not_evaluable if not ne.on_ground).to_dict()
    findings = build_findings(result, None, None, MISSION, (0.0, 35.0))
    said = {f.severity for f in findings if f.kind == "not_evaluable:max_speed" and f.t_start < 10.0}
    assert said == {"info"}


def test_an_estimate_invalid_in_flight_still_leaves_the_verdict_open():
    """The same flight invalid over its armed part: inconclusive as before (a flight's checks lost)."""
    from uav_debate_eval.core.arming import state_events

    t = np.arange(0.0, 35.0, 0.1)
    invalid = (t >= 14.0) & (t < 30.0)
    traj = SwarmTrajectory.from_columns(t, ["px4"] * len(t), np.zeros((len(t), 3)), vel=np.zeros((len(t), 3)),
                                        est_valid=~invalid)
    state_events(traj.ingest.log_events, "px4", [(0.0, False), (14.9, True), (30.05, False)], 0.0, "vehicle_status")
    quality = assess(traj, MISSION)
    assert quality.material_gaps(quality.traj, ["max_speed"]) == ["max_speed"]
    assert check_trajectory(quality.traj, MISSION, quality=quality).label == "inconclusive"
