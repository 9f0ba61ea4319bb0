"""PX4 attitude against its own target (vehicle_attitude q vs vehicle_attitude_setpoint q_d) for attitude_control,
PX4 crash evidence (failure detector, rest on its side) and its vehicle class, on real logs and a variant with loss
of control injected."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from contract import SHARED_SPEC

from uav_debate_eval.cli import main
from uav_debate_eval.io.px4_attitude import px4_attitude, roll_pitch_deg
from uav_debate_eval.io.ulog import read_ulogs

FLIGHT = Path(__file__).parent / "fixtures" / "real" / "px4_mission_rtl" / "flight.ulg"
SHARED = SHARED_SPEC.parent / "fixtures" / "real" / "px4_v116"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/fixtures/real/px4_v116")


def quaternion(roll_deg: float, pitch_deg: float) -> tuple[float, float, float, float]:
    r, p = math.radians(roll_deg) / 2, math.radians(pitch_deg) / 2
    return (math.cos(r) * math.cos(p), math.sin(r) * math.cos(p), math.cos(r) * math.sin(p),
            -math.sin(r) * math.sin(p))


def test_roll_pitch_from_quaternions():
    d = {f"q[{i}]": np.array([v]) for i, v in enumerate(quaternion(30.0, -20.0))}
    assert roll_pitch_deg(d, "q")[0] == pytest.approx([30.0, -20.0], abs=1e-9)
    assert roll_pitch_deg(d, "q_d") is None


def test_setpoint_counts_only_fresh_armed_and_controlling():
    att = {"timestamp": np.array([0, 1e6, 2e6, 3e6, 4e6]), **{f"q[{i}]": np.full(5, v)
                                                          for i, v in enumerate(quaternion(10, 0))}}
    sp = {"timestamp": np.array([0.5e6]), **{f"q_d[{i}]": np.array([v]) for i, v in enumerate(quaternion(0, 0))}}
    status = {"timestamp": np.array([0.0, 2.5e6]), "arming_state": np.array([2, 1])}
    mode = {"timestamp": np.array([0.0]), "flag_control_attitude_enabled": np.array([1])}
    t, actual, target, controlled = px4_attitude({"vehicle_attitude": att, "vehicle_attitude_setpoint": sp,
                                                  "vehicle_status": status, "vehicle_control_mode": mode})
    # before the first setpoint: none; 1 s: fresh and armed; 2 s: stale (1.5 s old); 3-4 s: disarmed
    assert controlled.tolist() == [False, True, False, False, False]
    assert actual[1, 0] == pytest.approx(10.0) and target[1] == pytest.approx([0.0, 0.0])


def test_real_px4_logs_attitude_class_and_no_crash():
    traj = read_ulogs([FLIGHT])
    t, actual, target, controlled = traj.ingest.attitude["flight"]
    assert len(t) == 1099 and controlled.sum() == 1077
    err = np.abs((actual - target + 180) % 360 - 180).max(axis=1)
    assert err[controlled].max() == pytest.approx(29.3, abs=0.1)
    assert traj.ingest.autopilot["flight"]["vehicle_class"] == "multirotor"  # is_rotary_wing (PX4 before 1.14)
    assert not [e for e in traj.ingest.log_events if e.type == "crash"]


@pytest.mark.skipif(not (SHARED / "sitl_log_71.ulg").is_file(), reason="shared PX4 logs absent")
def test_real_px4_116_sitl_log():
    traj = read_ulogs([SHARED / "sitl_log_71.ulg"])
    assert traj.ingest.autopilot["sitl_log_71"] == {"vehicle_class": "multirotor", "firmware": "PX4",
                                                    "estimator": "", "sitl": True}  # system_type 2 (quadrotor)
    assert traj.ingest.attitude["sitl_log_71"][3].sum() == 1511


def lose_control(src: Path, dst: Path, at_s: float) -> None:
    """The real flight with its attitude rolled to 100° from `at_s` (flight time) to the end, and PX4's failure
    detector flagging roll from then on."""
    from pyulog import ULog

    log = ULog(str(src))
    t0 = min(float(d.data["timestamp"][0]) for d in log.data_list if d.name == "vehicle_local_position")
    for d in log.data_list:
        if d.name == "vehicle_attitude":
            late = d.data["timestamp"] >= t0 + at_s * 1e6
            for i, v in enumerate(quaternion(100.0, 0.0)):
                d.data[f"q[{i}]"][late] = v
        if d.name == "vehicle_status":
            d.data["failure_detector_status"][d.data["timestamp"] >= t0 + (at_s + 1.0) * 1e6] = 1
    log.write_ulog(str(dst))


def test_px4_loss_of_control_and_crash_without_mission(tmp_path):
    path = tmp_path / "px4crash.ulg"
    lose_control(FLIGHT, path, at_s=30.0)
    out = tmp_path / "out"
    assert main(["evaluate", str(path), "--out", str(out), "--llm", "rules", "--quiet"]) == 3
    rep = json.loads((out / "report.json").read_text())
    (v,) = [v for v in rep["violations"] if v["constraint"] == "attitude_control"]
    assert v["t_start"] == pytest.approx(30.0, abs=0.2) and v["limit"] == pytest.approx(45.0)
    assert "lost attitude control" in v["detail"] and "roll 100°" in v["detail"]
    assert rep["mission"]["limit_sources"]["attitude_control"].startswith("the contract's default")
    (crash,) = [f for f in rep["findings"] if f["kind"] == "crash"]
    assert crash["severity"] == "hazard"
    assert "failure detector" in crash["sentence"] and "came to rest on its side (100° tilt)" in crash["sentence"]
    assert crash["t_start"] == pytest.approx(30.0, abs=0.2)
