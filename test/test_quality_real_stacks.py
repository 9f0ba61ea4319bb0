"""Real-stack recordings (issue: trust the data): each artefact alone is a data-quality finding, never a violation;
the same exceedance held for a realistic duration stays a violation. Fixtures are simulated flights recorded the
way MAVROS, Vicon bridges and estimators record them (uav_debate_eval.sim.recording)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from contract import REPORT_SCHEMA

from uav_debate_eval.core.mission import Geofence
from uav_debate_eval.core.mission_file import mission_to_yaml
from uav_debate_eval.io.csv_io import write_csv
from uav_debate_eval.io.loader import load_inputs, one_flight
from uav_debate_eval.report.schema import validate_report
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.recording import EPOCH, write_mavros_bag, write_mocap_bags
from uav_debate_eval.sim.scenarios import simulate

CONTRACT_SCHEMA = REPORT_SCHEMA
REAL_PX4 = Path(__file__).parent / "fixtures" / "real" / "px4_mission_rtl"


def _report(paths, mission, **kw) -> dict:
    ev = evaluate(load_inputs(paths, **kw), mission)
    validate_report(ev.report, CONTRACT_SCHEMA)
    validate_report(ev.report)
    return ev.report


def _kinds(report) -> set[str]:
    return {f["kind"] for f in report["data_quality"]["findings"]}


def _violations(report, constraint=None) -> list[dict]:
    return [v for v in report["violations"] if constraint in (None, v["constraint"])]


def _mavros_mission(sim, tmp_path):
    """The simulated mission in uav1's local frame (MAVROS' world frame), speed limit from the vehicles."""
    m = copy.deepcopy(sim.mission)
    origin = sim.traj.tracks["uav1"].pos[0]
    fence = m.constraints.geofence
    m.constraints.geofence = Geofence(tuple(np.subtract(fence.min, origin)), tuple(np.subtract(fence.max, origin)))
    return m


# --- MAVROS: republished estimate, zero header stamps, velocity_local, a bare duplicate topic ---------------------

@pytest.fixture(scope="module")
def mavros(tmp_path_factory):
    d = tmp_path_factory.mktemp("mavros")
    clean = simulate("formation", seed=3, duration_s=40)
    fast = simulate("formation", seed=3, duration_s=40, faults=["overspeed@15"])
    return {
        "clean": (write_mavros_bag(clean.traj, d / "clean.bag", global_fix=True, bare_offset=(2.0, 0.4, 0.0)), clean),
        "fast": (write_mavros_bag(fast.traj, d / "fast.bag", global_fix=True), fast),
        "nofix": (write_mavros_bag(clean.traj, d / "nofix.bag"), clean),
        "novel": (write_mavros_bag(clean.traj, d / "novel.bag", global_fix=True, velocity=False), clean),
    }


def test_mavros_republished_receive_time_stream_gives_findings_not_violations(mavros, tmp_path):
    path, sim = mavros["clean"]
    traj = load_inputs([path])
    assert traj.t0 == pytest.approx(EPOCH, abs=0.05) and traj.t_start == 0.0  # flight time, clock kept
    assert {u: traj.tracks[u].vel_derived for u in ("uav1", "uav2", "uav3")} == dict.fromkeys(
        ("uav1", "uav2", "uav3"), False)  # velocity_local paired by namespace
    report = _report([path], _mavros_mission(sim, tmp_path))
    assert _violations(report) == []
    assert {"repeated_samples", "timing_jitter", "duplicate_vehicle"} <= _kinds(report)
    rep = next(f for f in report["data_quality"]["findings"] if f["kind"] == "repeated_samples")
    assert rep["values"]["update_hz"] == pytest.approx(10.0, abs=0.5)
    assert rep["values"]["message_hz"] == pytest.approx(38.0, abs=1.5)
    dup = next(f for f in report["data_quality"]["findings"] if f["kind"] == "duplicate_vehicle")
    assert dup["uavs"] == ["uav1", "uav"] and "uav" not in report["mission"]["uavs"]
    assert report["data_quality"]["status"] == "degraded" and report["verdict"]["label"] in ("safe", "borderline")


def test_mavros_derived_velocity_alone_stays_below_the_limit(mavros):
    """Without velocity_local the speed comes from distinct updates over a baseline: jitter cannot fake speed."""
    path, sim = mavros["novel"]
    traj = load_inputs([path], topics=["/uav1/mavros/local_position/pose"])
    assert traj.tracks["uav1"].vel_derived
    naive = np.linalg.norm(np.diff(traj.tracks["uav1"].pos, axis=0), axis=1) / np.diff(traj.tracks["uav1"].t)
    assert naive.max() > 2 * sim.mission.constraints.max_speed_mps  # what differentiating every message gives
    mission = copy.deepcopy(sim.mission)
    mission.constraints.geofence = None
    report = _report([path], mission, topics=["/uav1/mavros/local_position/pose"])
    assert _violations(report, "max_speed") == [] and _violations(report, "max_vertical_speed") == []


def test_mavros_before_0_28_names_its_world_velocity_local_position_velocity(mavros, tmp_path):
    """ROS 1 bags of 2018 (a real PX4 quadrotor's free flight): MAVROS published its ENU velocity as
    local_position/velocity (velocity_local since 0.29); it was not read, the velocity derived from the poses."""
    bag, sim = mavros["clean"]
    old = write_mavros_bag(sim.traj, tmp_path / "old.bag", global_fix=True, velocity_topic="velocity")
    new, before = load_inputs([bag]), load_inputs([old])
    assert "uav1: velocity measured by /uav1/mavros/local_position/velocity" in before.ingest.notes
    assert before.uav_ids == ["uav1", "uav2", "uav3", "uav4", "uav5"]
    for u in before.uav_ids:
        assert not before.tracks[u].vel_derived
        np.testing.assert_array_equal(before.tracks[u].vel, new.tracks[u].vel)


def test_mavros_held_overspeed_stays_one_violation(mavros, tmp_path):
    path, sim = mavros["fast"]
    truth = next(f for f in sim.truth if f.kind == "overspeed")
    report = _report([path], _mavros_mission(sim, tmp_path))
    speed = _violations(report, "max_speed")
    assert len(speed) == 1 and speed[0]["uavs"] == truth.uavs  # one episode per hazard
    assert speed[0]["worst_value"] > sim.mission.constraints.max_speed_mps and speed[0]["samples"] > 1
    assert report["verdict"]["label"] == "risky"


def test_mavros_local_frames_without_a_fix_make_separation_not_evaluable(mavros, tmp_path):
    path, sim = mavros["nofix"]
    report = _report([path], sim.mission)
    assert "frames_misaligned" in _kinds(report)
    lost = {n["constraint"] for n in report["data_quality"]["not_evaluable"]}
    assert {"min_separation", "geofence"} <= lost
    assert any("frames:" in n["reason"] for n in report["data_quality"]["not_evaluable"])  # names the fixing key
    assert _violations(report) == [] and report["verdict"]["label"] == "inconclusive"
    assert report["data_quality"]["status"] == "poor"


def test_mission_frames_place_local_frames(mavros, tmp_path):
    path, sim = mavros["nofix"]
    starts = {u: tr.pos[0] for u, tr in sim.traj.tracks.items()}
    frames = "frames:\n" + "".join(f"  {u}: {{origin: {[float(x) for x in p]}, yaw_deg: 0}}\n"
                                   for u, p in starts.items())
    mission_file = tmp_path / "mission.yaml"
    mission_file.write_text(mission_to_yaml(sim.mission) + frames)
    from uav_debate_eval.core.mission_file import load_mission

    report = _report([path], load_mission(mission_file))
    assert not {"frames_misaligned", "frames_unverified"} & _kinds(report)
    assert report["verdict"]["label"] != "inconclusive" and _violations(report) == []
    assert report["safety"]["closest_approach"]["d_min"] > sim.mission.constraints.min_separation_m


# --- motion capture: one bag per drone, TransformStamped at 80 Hz, a one-frame swap, unequal ends -------------------

@pytest.fixture(scope="module")
def mocap(tmp_path_factory):
    d = tmp_path_factory.mktemp("mocap")
    sim = simulate("formation", seed=1, n_uavs=4, duration_s=40, rate_hz=80)
    ends = {"uav1": 0.1, "uav2": 0.6, "uav4": 1.0}
    swapped = write_mocap_bags(sim.traj, d / "swap", swap=("uav2", "uav3", 12.0), end_early=ends)
    near = simulate("formation", seed=1, n_uavs=4, duration_s=40, rate_hz=80, faults=["near_miss@10"])
    return sim, swapped, near, write_mocap_bags(near.traj, d / "near", end_early=ends)


def test_per_drone_bags_are_one_flight_and_a_swap_is_a_finding(mocap):
    sim, paths, _, _ = mocap
    together, why = one_flight(paths)
    assert together and "overlap" in why
    report = _report(paths, sim.mission)
    assert report["mission"]["uavs"] == ["uav1", "uav2", "uav3", "uav4"]  # /vicon/uavN/uavN -> uavN
    jumps = [f for f in report["data_quality"]["findings"] if f["kind"] == "position_jump"]
    assert sorted(u for f in jumps for u in f["uavs"]) == ["uav2", "uav3"]
    assert all(f["t_start"] == pytest.approx(12.0, abs=0.02) for f in jumps)
    ends = sorted(f["uavs"][0] for f in report["data_quality"]["findings"] if f["kind"] == "end_of_recording")
    assert ends == ["uav2", "uav4"]  # 0.1 s early is within the stale timeout
    assert _violations(report) == []  # no 300 m/s spike, no stale_data at the end of a file


def test_per_drone_bags_keep_a_real_near_miss(mocap):
    _, _, near, paths = mocap
    truth = next(f for f in near.truth if f.kind == "near_miss")
    report = _report(paths, near.mission)
    sep = _violations(report, "min_separation")
    assert len(sep) == 1 and sep[0]["uavs"] == sorted(truth.uavs) and report["verdict"]["label"] == "risky"
    assert _violations(report, "stale_data") == []


def test_vehicles_selection_from_mission_and_regex(mocap):
    sim, paths, _, _ = mocap
    traj = load_inputs(paths, vehicles=["uav[12]"])
    assert traj.uav_ids == ["uav1", "uav2"]
    why = {v["uav"]: v for v in traj.ingest.vehicles}
    assert why["uav3"]["vehicle"] is False and why["uav1"]["why"] == "mission vehicles: uav[12]"
    assert load_inputs(paths, vehicle_regex=r"/vicon/uav4/").uav_ids == ["uav4"]


def test_silence_mid_flight_still_is_stale(mocap, tmp_path):
    sim, _, _, _ = mocap
    t = sim.traj.tracks["uav3"].t
    sim.traj.tracks["uav3"] = sim.traj.tracks["uav3"].select((t < 10.0) | (t > 12.0))
    paths = write_mocap_bags(sim.traj, tmp_path / "dropout")
    stale = _violations(_report(paths, sim.mission), "stale_data")
    assert [(v["uavs"], round(v["t_end"], 1)) for v in stale] == [(["uav3"], 12.0)]


# --- estimator validity: a CSV with gps_ok = 0 spans (PX4 without GNSS drifts the same way) --------------------------

def _drift_csv(tmp_path, hold_invalid: bool):
    sim = simulate("tracking", seed=2, duration_s=60)
    tr = sim.traj.tracks["uav1"]
    bad = (tr.t > 20.0) & (tr.t < 50.0)
    drift = np.zeros_like(tr.pos)
    drift[bad, 0] = np.cumsum(bad)[bad] * 0.5  # the estimate runs away by hundreds of metres
    tr.pos = tr.pos + drift
    tr.gps_ok = np.where(bad & hold_invalid, 0.0, 1.0)
    return sim, write_csv(sim.traj, tmp_path / "flight.csv")


def test_estimator_invalid_span_is_not_evaluable_not_a_violation(tmp_path):
    sim, path = _drift_csv(tmp_path, hold_invalid=True)
    report = _report([path], sim.mission)
    assert "estimator_invalid" in _kinds(report)
    assert _violations(report, "geofence") == [] and _violations(report, "max_speed") == []
    lost = [n for n in report["data_quality"]["not_evaluable"] if n["constraint"] == "geofence"]
    assert lost and lost[0]["t_start"] == pytest.approx(20.0, abs=0.3)
    assert lost[0]["t_end"] == pytest.approx(50.0, abs=0.3)
    assert report["verdict"]["label"] == "inconclusive"


def test_the_same_drift_with_a_valid_estimate_is_a_violation(tmp_path):
    sim, path = _drift_csv(tmp_path, hold_invalid=False)
    report = _report([path], sim.mission)
    assert _violations(report, "geofence") and report["verdict"]["label"] == "risky"


# --- the real PX4 flight and the command line --------------------------------------------------------------------

def test_real_px4_flight_is_safe_in_flight_time(tmp_path):
    out = tmp_path / "px4"
    proc = subprocess.run([sys.executable, "-m", "uav_debate_eval.cli", "evaluate", str(REAL_PX4 / "flight.ulg"),
                           "--mission", str(REAL_PX4 / "mission.yaml"), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    validate_report(report, CONTRACT_SCHEMA)
    assert report["verdict"]["label"] == "safe" and report["violations"] == []
    assert report["mission"]["t0"] > 1.5e9 and report["mission"]["t_start"] == 0.0
    assert report["mission"]["duration_s"] == pytest.approx(39.4, abs=0.2)
    assert all(0.0 <= s["t_start"] <= 40.0 for s in report["segments"])
    assert "1557756" not in (out / "report.md").read_text()  # no epoch seconds shown
    assert "1557756" not in report["dsl"]["text"]


def test_cli_says_one_flight_and_exit_4_when_inconclusive(mavros, tmp_path):
    path, sim = mavros["nofix"]
    mission = tmp_path / "mission.yaml"
    mission.write_text(mission_to_yaml(sim.mission))
    proc = subprocess.run([sys.executable, "-m", "uav_debate_eval.cli", "evaluate", str(path), "--mission",
                           str(mission), "--out", str(tmp_path / "out"), "--quiet"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 4, proc.stderr


# --- /tf_static places per-vehicle frames ------------------------------------------------------------------------

def _tf_static_bag(path: Path, with_static: bool) -> Path:
    """Two vehicles 4 m apart in the world, each stamping poses in its own frame (`uavN/odom`, origin at its
    start); /tf_static (world -> uavN/odom) says where those frames are."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    t = ts.types
    starts = {"uav1": (0.0, 0.0, 0.0), "uav2": (0.0, 4.0, 0.0)}

    def header(ns, frame):
        return t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9),
                                        frame_id=frame)

    with Writer(path, version=Writer.VERSION_LATEST, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {u: w.add_connection(f"/{u}/pose", "geometry_msgs/msg/PoseStamped", typestore=ts) for u in starts}
        if with_static:
            c = w.add_connection("/tf_static", "tf2_msgs/msg/TFMessage", typestore=ts)
            tfs = [t["geometry_msgs/msg/TransformStamped"](
                header=header(0, "world"), child_frame_id=f"{u}/odom",
                transform=t["geometry_msgs/msg/Transform"](
                    translation=t["geometry_msgs/msg/Vector3"](x=s[0], y=s[1], z=s[2]),
                    rotation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))) for u, s in starts.items()]
            w.write(c, 1, ts.serialize_cdr(t["tf2_msgs/msg/TFMessage"](transforms=tfs), "tf2_msgs/msg/TFMessage"))
        for i in range(200):
            ns = int(EPOCH * 1e9) + i * 50_000_000
            for u in starts:  # both fly the same path east, each from its own origin
                p = t["geometry_msgs/msg/Point"](x=0.1 * i, y=0.0, z=2.0)
                pose = t["geometry_msgs/msg/Pose"](position=p, orientation=t["geometry_msgs/msg/Quaternion"](
                    x=0.0, y=0.0, z=0.0, w=1.0))
                msg = t["geometry_msgs/msg/PoseStamped"](header=header(ns, f"{u}/odom"), pose=pose)
                w.write(conns[u], ns, ts.serialize_cdr(msg, "geometry_msgs/msg/PoseStamped"))
    return path


def test_tf_static_places_per_vehicle_frames(tmp_path):
    placed = load_inputs([_tf_static_bag(tmp_path / "placed", with_static=True)])
    assert placed.tracks["uav2"].pos[0] == pytest.approx([0.0, 4.0, 2.0])
    assert any("placed in world by /tf_static" in n for n in placed.ingest.notes)
    unplaced = load_inputs([_tf_static_bag(tmp_path / "bare", with_static=False)])
    assert unplaced.tracks["uav2"].pos[0] == pytest.approx([0.0, 0.0, 2.0])  # as recorded: on top of uav1
