"""Limits from the vehicle's own parameters (CONTRACT.md §3): without a mission, a log's fence, speed and lean
parameters become the checks, each with its source; a mission file wins."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from contract import SHARED_SPEC

from uav_debate_eval.cli import main
from uav_debate_eval.core.mission import Geofence
from uav_debate_eval.core.vehicle_limits import CLAMP_MARGIN, TARGET_MARGIN, limit_params, own_limits
from uav_debate_eval.runner.job import ReadOptions, read_flight
from uav_debate_eval.safety.geometry import fence_ratio
from uav_debate_eval.sim.dataflash import EKF2_FORMATS, GOOD_FLAGS, DataFlashWriter

REAL = Path(__file__).parent / "fixtures" / "real"
SHARED_REAL = SHARED_SPEC.parent / "fixtures" / "real"  # ../shared beside the clone (absent in a worktree)
if not SHARED_REAL.is_dir():
    SHARED_REAL = Path("/work/shared/fixtures/real")
HOME = {"v": ((10.0, -5.0, 2.0), "its first sample")}
COPTER = {"FENCE_ENABLE": 1, "FENCE_TYPE": 3, "FENCE_ALT_MAX": 100, "FENCE_RADIUS": 300, "WPNAV_SPEED": 500,
          "LOIT_SPEED": 1250, "WPNAV_SPEED_UP": 250, "WPNAV_SPEED_DN": 150, "ANGLE_MAX": 3000}


def test_an_arducopter_3x_loiter_speed_goes_by_its_old_name():
    """ArduCopter before 3.4 called LOIT_SPEED WPNAV_LOIT_SPEED (a real 3.1 log flew 7.2 m/s in LOITER, whose
    10 m/s target was missed: judged by 1.5 x WPNAV_SPEED 5 m/s alone, it read borderline)."""
    old = {k: v for k, v in COPTER.items() if k != "LOIT_SPEED"} | {"WPNAV_LOIT_SPEED": 1000}
    lim = own_limits({"v": old}, HOME, controlled=True)
    assert lim.constraints.max_speed_mps == pytest.approx(TARGET_MARGIN * 10.0)
    assert "WPNAV_LOIT_SPEED 10 m/s" in lim.sources["max_speed"]
    assert "WPNAV_LOIT_SPEED" in limit_params(old)  # kept by the readers


def test_a_px4_plane_is_judged_by_its_airspeed_limit_and_a_vtol_by_the_looser():
    """A PX4 build holds both the multicopter's and the plane's parameters. A real PX4 1.11 plane's log (FW_AIRSPD_MAX
    20, no MPC_XY_VEL_MAX) had no speed limit ('nothing was checked'); a plane whose log also holds MPC_XY_VEL_MAX
    was judged by a multicopter's clamp, as was a VTOL in fixed-wing cruise. The class the log gives decides."""
    px4 = {"MPC_XY_VEL_MAX": 12.0, "FW_AIRSPD_MAX": 20.0}
    quad = own_limits({"v": px4}, HOME, controlled=False, classes={"v": "multirotor"})
    assert quad.constraints.max_speed_mps == pytest.approx(CLAMP_MARGIN * 12.0)
    plane = own_limits({"v": px4}, HOME, controlled=False, classes={"v": "fixed_wing"})
    assert plane.constraints.max_speed_mps == pytest.approx(TARGET_MARGIN * 20.0)
    assert "FW_AIRSPD_MAX 20 m/s (its airspeed limit; wind adds to ground speed" in plane.sources["max_speed"]
    vtol = own_limits({"v": {"MPC_XY_VEL_MAX": 12.0, "FW_AIRSPD_MAX": 8.0}}, HOME, controlled=False,
                      classes={"v": "vtol"})
    assert vtol.constraints.max_speed_mps == pytest.approx(CLAMP_MARGIN * 12.0)  # the looser of the two
    assert own_limits({"v": {"FW_AIRSPD_MAX": 20.0}}, HOME, controlled=False).constraints.max_speed_mps is None
    both = {**px4, "MPC_Z_VEL_MAX_UP": 3.0, "MPC_Z_VEL_MAX_DN": 1.0, "FW_T_CLMB_MAX": 5.0, "FW_T_SINK_MAX": 5.0}
    vertical = {cls: own_limits({"v": both}, HOME, controlled=False, classes={"v": cls}).constraints
                .max_vertical_speed_mps for cls in ("multirotor", "fixed_wing", "vtol")}
    assert vertical == pytest.approx({"multirotor": CLAMP_MARGIN * 3.0, "fixed_wing": TARGET_MARGIN * 5.0,
                                      "vtol": TARGET_MARGIN * 5.0})  # a plane's sink rate is no multicopter's
    assert "FW_AIRSPD_MAX" in limit_params(px4)


def test_copter_fence_speeds_and_sources():
    lim = own_limits({"v": COPTER}, HOME, controlled=True)
    c = lim.constraints
    assert c.max_speed_mps == pytest.approx(TARGET_MARGIN * 12.5)  # LOIT_SPEED is the faster target
    assert c.max_vertical_speed_mps == pytest.approx(TARGET_MARGIN * 2.5)
    assert c.max_attitude_error_deg is None  # ANGLE_MAX 30° is under the 45° default: the default stands
    fence = c.geofence
    assert fence.max[2] == pytest.approx(102.0) and fence.min[2] == -math.inf  # ceiling above home, no floor
    reach = 300.0 / math.cos(math.pi / 64)
    assert fence.min[:2] == pytest.approx((10.0 - reach, -5.0 - reach)) and len(fence.polygon) == 64
    on_circle = np.array([[10.0 + 299.9 * math.cos(a), -5.0 + 299.9 * math.sin(a), 50.0]
                          for a in np.linspace(0, 2 * math.pi, 97)])
    assert (fence.outside_distance(on_circle) < 0).all()  # nothing inside the circle is called outside
    assert fence.outside_distance(np.array([[10.0 + 301.0, -5.0, 50.0], [10.0, -5.0, 103.0]])) == \
        pytest.approx([0.6, 1.0], abs=0.5)
    assert lim.sources["geofence"] == ("v: ceiling 100 m above home from FENCE_ALT_MAX, radius 300 m around home "
                                       "from FENCE_RADIUS (vehicle parameters; home: its first sample)")
    assert "LOIT_SPEED 12.5 m/s (its cruise target" in lim.sources["max_speed"]
    assert "WPNAV_SPEED_UP 2.5 m/s" in lim.sources["max_vertical_speed"]


def test_switched_off_fence_plane_and_lean_limits():
    plane = {"FENCE_ENABLE": 0, "FENCE_TYPE": 7, "FENCE_ALT_MAX": 100, "ARSPD_FBW_MAX": 22, "LIM_ROLL_CD": 6000,
             "LIM_PITCH_MAX": 3000, "LIM_PITCH_MIN": -3000}
    lim = own_limits({"p": plane}, {"p": HOME["v"]}, controlled=True)
    assert lim.constraints.geofence is None and lim.notes == [
        "p: its fence is configured but switched off (FENCE_ENABLE 0): not checked"]
    assert lim.constraints.max_speed_mps == pytest.approx(33.0) and "wind adds to ground speed" in \
        lim.sources["max_speed"]
    assert lim.constraints.max_vertical_speed_mps is None
    assert lim.constraints.max_attitude_error_deg == pytest.approx(60.0)
    assert "LIM_ROLL_CD 60°" in lim.sources["attitude_control"]
    assert own_limits({"p": plane}, {}, controlled=False).constraints.max_attitude_error_deg is None



def test_rover_cruise_speed():
    """ArduRover sets its speed in m/s (WP_SPEED, 0: CRUISE_SPEED is used); a real Rover 4.7 SITL log had both and
    was judged against nothing."""
    lim = own_limits({"r": {"WP_SPEED": 0.0, "CRUISE_SPEED": 2.0}}, {"r": HOME["v"]}, controlled=False)
    assert lim.constraints.max_speed_mps == pytest.approx(TARGET_MARGIN * 2.0)
    assert "CRUISE_SPEED 2 m/s (its cruise target" in lim.sources["max_speed"]
    lim = own_limits({"r": {"WP_SPEED": 2.5, "CRUISE_SPEED": 2.0}}, {"r": HOME["v"]}, controlled=False)
    assert lim.constraints.max_speed_mps == pytest.approx(TARGET_MARGIN * 2.5)
    assert lim.constraints.max_vertical_speed_mps is None

def test_px4_geofence_and_clamps_and_two_vehicles():
    px4 = {"GF_ACTION": 2, "GF_MAX_HOR_DIST": 50, "GF_MAX_VER_DIST": 30, "MPC_XY_VEL_MAX": 12,
           "MPC_Z_VEL_MAX_UP": 3, "MPC_Z_VEL_MAX_DN": 1.5, "MPC_TILTMAX_AIR": 60}
    slow = {**px4, "MPC_XY_VEL_MAX": 5, "GF_MAX_HOR_DIST": 20}
    homes = {"a": ((0.0, 0.0, 0.0), "x"), "b": ((100.0, 0.0, 1.0), "x")}
    lim = own_limits({"a": px4, "b": slow}, homes, controlled=True)
    c = lim.constraints
    assert c.max_speed_mps == pytest.approx(CLAMP_MARGIN * 12) and c.max_vertical_speed_mps == pytest.approx(3.6)
    assert c.max_attitude_error_deg == pytest.approx(60.0)
    assert "the loosest of the vehicles' limits" in lim.sources["max_speed"]
    reach = 50 / math.cos(math.pi / 64)
    assert c.geofence.min == pytest.approx((-reach, -reach, -math.inf))
    assert c.geofence.max[:2] == pytest.approx((100 + 20 / math.cos(math.pi / 64), reach))
    assert c.geofence.max[2] == pytest.approx(31.0) and c.geofence.polygon is None  # the box around both fences
    assert own_limits({"a": {**px4, "GF_ACTION": 0}}, homes, True).constraints.geofence is None


def test_fence_ratio_with_open_sides():
    fence = Geofence((-math.inf, -math.inf, -math.inf), (math.inf, math.inf, 100.0))
    r = fence_ratio(np.array([[5.0, 5.0, 50.0], [5.0, 5.0, 103.0]]), fence)
    assert r.tolist() == pytest.approx([0.0, 4.0])
    closed = Geofence((-10.0, -10.0, 0.0), (10.0, 10.0, 10.0))
    assert fence_ratio(np.array([[5.0, 0.0, 5.0]]), closed).tolist() == pytest.approx([0.5])


def write_fenced_flight(path: Path, ceiling_m: float, enabled: int = 1, armed_again: int | None = None) -> None:
    """A copter armed at 1.5 s that climbs from 5 m to 30 m over 40 s, its fence ceiling at `ceiling_m`;
    `armed_again`: the sample it is armed once more at (the autopilot sets its home there again)."""
    w = DataFlashWriter(path, formats=EKF2_FORMATS)
    w.write("MSG", 0, "ArduCopter V3.6.4")
    for name, value in (("AHRS_EKF_TYPE", 2), ("FENCE_ENABLE", enabled), ("FENCE_TYPE", 1),
                        ("FENCE_ALT_MAX", ceiling_m), ("WPNAV_SPEED", 500), ("WPNAV_SPEED_UP", 250)):
        w.write("PARM", 0, name, value, value)
    for i in range(400):
        t = 1_000_000 + 100_000 * i
        if i == 5 or i == armed_again:
            w.write("EV", t, 10)  # ARMED
        up = 5.0 + 25.0 * i / 399
        w.write("NKF1", t, 0, 0, 0, 0, 0, -25.0 / 40, 0, 0, 0, -up, 0, 0, 0)
        w.write("NKF4", t, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0, 0, 0, 0, 0, GOOD_FLAGS & 0xFFFF, 0, 0)
    w.close()


def evaluate(path: Path, out: Path, *extra: str) -> tuple[int, dict]:
    code = main(["evaluate", str(path), "--out", str(out), "--llm", "rules", "--quiet", *extra])
    return code, json.loads((out / "report.json").read_text())


def test_flight_beyond_its_own_fence_is_a_violation(tmp_path):
    path = tmp_path / "fenced.bin"
    write_fenced_flight(path, ceiling_m=20.0)
    code, rep = evaluate(path, tmp_path / "out")
    assert code == 3 and rep["verdict"]["label"] == "risky"
    (v,) = [v for v in rep["violations"] if v["constraint"] == "geofence"]
    home = 5.0 + 25.0 * 5 / 399  # where it was armed (0.5 s): the ceiling is 20 m above that
    assert v["t_start"] == pytest.approx((home + 20.0 - 5.0) / 25.0 * 39.9, abs=0.15)
    assert v["worst_value"] == pytest.approx(30.0 - (home + 20.0), abs=0.01)
    src = rep["mission"]["limit_sources"]
    assert src["geofence"] == ("fenced: ceiling 20 m above home from FENCE_ALT_MAX (vehicle parameters; home: "
                               "where it was armed at 0.5 s)")
    assert rep["mission"]["constraints_checked"] == ["max_speed", "max_vertical_speed", "geofence"]
    assert "max_speed 7.5 m/s from fenced: 1.5 × WPNAV_SPEED 5 m/s" in " ".join(rep["notes"])
    assert any("geofence from fenced: ceiling 20 m above home from FENCE_ALT_MAX" in n for n in rep["notes"])


def test_a_home_moved_by_a_later_arming_is_said_beside_the_fence(tmp_path):
    """The autopilot sets home (and its fence) anew at each arming; the fence here stays around the first. Armed again
    18 m from it, the fence's source says so: near that home, the first one's fence judges the flight."""
    path = tmp_path / "rearmed.bin"
    write_fenced_flight(path, ceiling_m=40.0, armed_again=300)
    code, rep = evaluate(path, tmp_path / "out")
    assert rep["mission"]["limit_sources"]["geofence"].endswith(
        "home: where it was armed at 0.5 s; armed again 18 m from it at 30.0 s, where the autopilot set its home (and "
        "fence) anew: near that home, the fence here is the first one's)")
    write_fenced_flight(path, ceiling_m=40.0, armed_again=6)  # again at the same spot: nothing to say
    code, rep = evaluate(path, tmp_path / "same")
    assert rep["mission"]["limit_sources"]["geofence"].endswith("home: where it was armed at 0.5 s)")


def test_flight_within_its_fence_or_with_fence_off_and_mission_wins(tmp_path):
    path = tmp_path / "inside.bin"
    write_fenced_flight(path, ceiling_m=40.0)
    code, rep = evaluate(path, tmp_path / "inside")
    assert code == 0 and rep["mission"]["constraints_checked"] == ["max_speed", "max_vertical_speed", "geofence"]
    off = tmp_path / "off.bin"
    write_fenced_flight(off, ceiling_m=20.0, enabled=0)
    code, rep = evaluate(off, tmp_path / "off")
    assert code == 0 and "geofence" not in rep["mission"]["constraints_checked"]
    assert any("fence is configured but switched off (FENCE_ENABLE 0)" in n for n in rep["notes"])
    mission = tmp_path / "m.yaml"
    mission.write_text("mission: {name: m}\nconstraints:\n  max_speed_mps: 0.1\n")
    code, rep = evaluate(path, tmp_path / "mission", "--mission", str(mission))
    assert code == 3 and rep["mission"]["constraints_checked"] == ["max_speed"]
    assert "limit_sources" not in rep["mission"]


@pytest.mark.parametrize("name, speed, source, attitude", [
    ("ardupilot/plane423_center_0003.bin", 33.0, "1.5 × ARSPD_FBW_MAX 22 m/s", None),
    ("ardupilot/sub41_nogps_small.BIN", 18.75, "1.5 × LOIT_SPEED 12.5 m/s", None),
    ("ardupilot/plane450_sitl_mav.tlog", 45.0, "1.5 × AIRSPEED_MAX 30 m/s", None),
])
def test_real_logs_take_their_own_limits(name, speed, source, attitude):
    flight = read_flight([REAL / name], ReadOptions())
    c = flight.mission.constraints
    assert c.max_speed_mps == pytest.approx(speed) and source in flight.mission.limit_sources["max_speed"]
    assert c.geofence is None and any("FENCE_ENABLE 0" in n for n in flight.notes)
    assert c.max_attitude_error_deg == attitude


def test_real_px4_log_without_its_mission_takes_its_parameters(tmp_path):
    ulg = tmp_path / "flight.ulg"
    shutil.copy(REAL / "px4_mission_rtl" / "flight.ulg", ulg)  # away from the mission.yaml beside it
    flight = read_flight([ulg], ReadOptions())
    c, src = flight.mission.constraints, flight.mission.limit_sources
    assert c.max_speed_mps == pytest.approx(1.2 * 9.0) and "MPC_XY_VEL_MAX 9 m/s" in src["max_speed"]
    assert c.max_vertical_speed_mps == pytest.approx(1.2 * 3.0) and "MPC_Z_VEL_MAX_UP" in src["max_vertical_speed"]
    assert c.geofence is None  # GF_MAX_HOR_DIST and GF_MAX_VER_DIST are 0: no fence


def test_real_px4_log_beyond_its_own_geofence(tmp_path):
    from pyulog import ULog

    log = ULog(str(REAL / "px4_mission_rtl" / "flight.ulg"))
    log.initial_parameters.update({"GF_ACTION": 1, "GF_MAX_VER_DIST": 2.0})  # home: its first sample, 12.3 m up
    ulg = tmp_path / "fenced.ulg"
    log.write_ulog(str(ulg))
    code, rep = evaluate(ulg, tmp_path / "out")
    assert code == 3
    fence = [v for v in rep["violations"] if v["constraint"] == "geofence"]
    assert fence and max(v["worst_value"] for v in fence) == pytest.approx(16.72 - 14.30, abs=0.02)
    assert rep["mission"]["limit_sources"]["geofence"] == (
        "fenced: ceiling 2 m above home from GF_MAX_VER_DIST (vehicle parameters; home: its first sample)")


@pytest.mark.skipif(not (SHARED_REAL / "ardupilot" / "copter33_gps_7.BIN").is_file(), reason="shared logs absent")
def test_real_copter33_log_limits():
    flight = read_flight([SHARED_REAL / "ardupilot" / "copter33_gps_7.BIN"], ReadOptions())
    c, src = flight.mission.constraints, flight.mission.limit_sources
    assert c.max_speed_mps == pytest.approx(7.5) and c.max_vertical_speed_mps == pytest.approx(3.75)
    assert c.max_attitude_error_deg == pytest.approx(45.0)
    assert src["attitude_control"].startswith("the contract's default")
    assert c.geofence is None and any("FENCE_ENABLE 0" in n for n in flight.notes)
