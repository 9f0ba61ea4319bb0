"""Simulator outputs: CSV, rosbag2 (MCAP, SQLite3), ROS 1 bag, mission.yaml, truth.json and the CLI."""

import json

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import Reader as Reader2
from rosbags.rosbag2.storage_mcap import McapReader
from rosbags.rosbag2.storage_sqlite3 import Sqlite3Reader
from rosbags.typesys import Stores, get_typestore

from uav_debate_eval.cli import main
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission_file import load_mission
from uav_debate_eval.io.csv_io import read_csv
from uav_debate_eval.io.rosbag_write import write_bag
from uav_debate_eval.sim.scenarios import simulate
from uav_debate_eval.sim.truth import load_truth

TS2 = get_typestore(Stores.ROS2_JAZZY)


@pytest.fixture(scope="module")
def flight():
    return simulate("formation", n_uavs=3, duration_s=15, rate_hz=10, faults=["telemetry_dropout@5"])


def _check_messages(traj, by_topic):
    assert sorted(by_topic) == [f"/{u}/pose" for u in traj.uav_ids]
    for u in traj.uav_ids:
        msgs = by_topic[f"/{u}/pose"]
        tr = traj.tracks[u]
        assert len(msgs) == len(tr)
        stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in msgs])
        np.testing.assert_allclose(stamps, tr.t, atol=1e-9)
        np.testing.assert_allclose([ns * 1e-9 for ns, _ in msgs], tr.t, atol=1e-9)
        pos = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z] for _, m in msgs])
        np.testing.assert_array_equal(pos, tr.pos)
        assert {m.header.frame_id for _, m in msgs} == {"map"}
        q = np.array([[m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w]
                      for _, m in msgs])
        np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0)


@pytest.mark.parametrize("fmt, suffix, reader", [("mcap", ".mcap", McapReader), ("sqlite3", ".db3", Sqlite3Reader)])
def test_rosbag2_single_file(tmp_path, flight, fmt, suffix, reader):
    path = write_bag(flight.traj, tmp_path / f"flight{suffix}", fmt=fmt)
    assert path.is_file() and [p.name for p in tmp_path.iterdir()] == [f"flight{suffix}"]
    storage = reader(path)
    storage.open()
    try:
        assert {c.msgtype for c in storage.connections} == {"geometry_msgs/msg/PoseStamped"}
        by_topic: dict = {}
        for conn, ns, raw in storage.messages(storage.connections):
            by_topic.setdefault(conn.topic, []).append((ns, TS2.deserialize_cdr(raw, conn.msgtype)))
    finally:
        storage.close()
    _check_messages(flight.traj, by_topic)
    assert len(by_topic["/uav1/pose"]) < 151  # the dropout's samples are not in the bag either


def test_rosbag2_directory_with_odometry(tmp_path, flight):
    path = write_bag(flight.traj, tmp_path / "bagdir", fmt="mcap", topic_pattern="/{uav}/odom", msgtype="Odometry")
    assert (path / "metadata.yaml").exists() and (path / "bagdir.mcap").exists()
    with Reader2(path) as reader:
        assert {c.topic for c in reader.connections} == {f"/{u}/odom" for u in flight.traj.uav_ids}
        conn, ns, raw = next(iter(reader.messages()))
        msg = TS2.deserialize_cdr(raw, conn.msgtype)
        assert conn.msgtype == "nav_msgs/msg/Odometry" and ns == 0
        tr = flight.traj.tracks[conn.topic.split("/")[1]]
        v = msg.twist.twist.linear
        np.testing.assert_array_equal([v.x, v.y, v.z], tr.vel[0])
        assert msg.pose.pose.position.z == tr.pos[0, 2]
        assert reader.message_count == flight.traj.n_samples


def test_ros1_bag(tmp_path, flight):
    path = write_bag(flight.traj, tmp_path / "flight.bag", fmt="ros1")
    by_topic: dict = {}
    with AnyReader([path]) as reader:
        for conn, ns, raw in reader.messages():
            by_topic.setdefault(conn.topic, []).append((ns, reader.deserialize(raw, conn.msgtype)))
    _check_messages(flight.traj, by_topic)


def test_write_bag_rejects_bad_arguments(tmp_path, flight):
    with pytest.raises(InputError, match="unknown bag format"):
        write_bag(flight.traj, tmp_path / "x.mcap", fmt="hdf5")
    with pytest.raises(InputError, match="unknown message type"):
        write_bag(flight.traj, tmp_path / "x.mcap", msgtype="Imu")
    with pytest.raises(InputError, match="must contain"):
        write_bag(flight.traj, tmp_path / "x.mcap", topic_pattern="/pose")
    (tmp_path / "x.mcap").write_text("keep me")
    with pytest.raises(InputError, match="exists already"):
        write_bag(flight.traj, tmp_path / "x.mcap")
    assert (tmp_path / "x.mcap").read_text() == "keep me"


def test_result_write_all_formats(tmp_path, flight):
    paths = flight.write(tmp_path, ("csv", "mcap", "db3", "bag"))
    assert [p.name for p in paths] == ["trajectory.csv", "trajectory.mcap", "trajectory.db3", "trajectory.bag",
                                       "mission.yaml", "truth.json"]
    back = read_csv(tmp_path / "trajectory.csv")
    assert back.uav_ids == flight.traj.uav_ids and back.n_samples == flight.traj.n_samples
    np.testing.assert_allclose(back.tracks["uav2"].pos, flight.traj.tracks["uav2"].pos, atol=1e-6)
    np.testing.assert_array_equal(back.tracks["uav1"].link_ok, flight.traj.tracks["uav1"].link_ok)
    mission = load_mission(tmp_path / "mission.yaml")
    assert mission.warnings == []
    assert mission.constraints == flight.mission.constraints
    assert mission.formation_offsets == flight.mission.formation_offsets
    assert mission.waypoints == flight.mission.waypoints
    assert load_truth(tmp_path / "truth.json") == flight.truth
    meta = json.loads((tmp_path / "truth.json").read_text())["meta"]
    assert meta == {"scenario": "formation", "seed": 0, "uavs": 3, "duration_s": 15.0, "rate_hz": 10.0,
                    "faults": ["telemetry_dropout@5"]}
    flight.write(tmp_path, ("mcap",))  # writing again replaces the old files
    with pytest.raises(InputError, match="unknown output format 'png'"):
        flight.write(tmp_path, ("png",))


def test_cli_simulate(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["simulate", "tracking", "--out", str(out), "--seed", "4", "--duration", "30", "--rate", "10",
               "--fault", "overspeed@8", "--format", "csv,bag"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "tracking: 1 vehicle(s), 30 s at 10 Hz, 301 samples, faults: overspeed@8" in text
    assert sorted(p.name for p in out.iterdir()) == ["mission.yaml", "trajectory.bag", "trajectory.csv", "truth.json"]
    assert f"wrote {out / 'truth.json'}" in text
    truth = load_truth(out / "truth.json")
    assert [f.kind for f in truth if f.kind != "route_turn"] == ["overspeed"]


@pytest.mark.parametrize("argv, message", [
    (["simulate", "hover", "--out", "X"], "unknown scenario 'hover'"),
    (["simulate", "formation", "--out", "X", "--fault", "crash"], "unknown fault 'crash'"),
    (["simulate", "formation", "--out", "X", "--format", "csv,png"], "unknown output format 'png'"),
    (["simulate", "formation", "--out", "X", "--uavs", "7"], "takes 3-5 vehicle"),
    (["simulate", "formation"], "--out DIR is required"),
    (["simulate"], "give a SCENARIO"),
])
def test_cli_bad_input_exits_2(tmp_path, capsys, argv, message):
    argv = [str(tmp_path / a) if a == "X" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_list(capsys):
    assert main(["simulate", "--list"]) == 0
    text = capsys.readouterr().out
    for name in ("formation", "surveillance", "tracking", "grid", "swap", "near_miss", "link_loss"):
        assert name in text
