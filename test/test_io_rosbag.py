"""Bag reader: topic/vehicle detection, stamps, frames and bad files, on bags written here with rosbags."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io.loader import load_inputs
from uav_debate_eval.io.rosbag import read_bag, vehicle_from_topic
from uav_debate_eval.sim import recording

TS2 = get_typestore(Stores.ROS2_JAZZY)
TS1 = get_typestore(Stores.ROS1_NOETIC)


def _header(ts, sec, nsec, frame="map"):
    Header = ts.types["std_msgs/msg/Header"]
    Time = ts.types["builtin_interfaces/msg/Time"]
    if ts is TS1:
        return Header(0, Time(sec, nsec), frame)
    return Header(Time(sec, nsec), frame)


def _pose(ts, x, y, z, q=(0.0, 0.0, 0.0, 1.0)):
    P, Pt, Q = ts.types["geometry_msgs/msg/Pose"], ts.types["geometry_msgs/msg/Point"], \
        ts.types["geometry_msgs/msg/Quaternion"]
    return P(Pt(x, y, z), Q(*q))


def pose_stamped(ts, t, xyz, frame="map"):
    sec = int(math.floor(t))
    return ts.types["geometry_msgs/msg/PoseStamped"](_header(ts, sec, int(round((t - sec) * 1e9)), frame),
                                                     _pose(ts, *xyz))


def write_bag(path: Path, msgs: list[tuple[str, str, int, object]], fmt: str = "mcap") -> Path:
    """msgs: (topic, msgtype, receive ns, message)."""
    return recording.write_bag(path, msgs, TS1 if fmt == "ros1" else TS2, fmt)


def two_vehicle_msgs(ts, n=20):
    """uav1 along x at 1 m/s, uav2 (mavros namespace) along y; header stamps 100 s + k/10, receive + 0.5 s."""
    out = []
    for k in range(n):
        t = 100.0 + k / 10
        recv = int((t + 0.5) * 1e9)
        out.append(("/uav1/pose", "geometry_msgs/msg/PoseStamped", recv, pose_stamped(ts, t, (k / 10, 0.0, 2.0))))
        out.append(("/uav2/mavros/local_position/pose", "geometry_msgs/msg/PoseStamped", recv,
                    pose_stamped(ts, t, (0.0, k / 10, 3.0))))
    return out


def test_vehicle_names_from_topics():
    assert vehicle_from_topic("/uav1/pose") == "uav1"
    assert vehicle_from_topic("/uav1/mavros/local_position/pose") == "uav1"
    assert vehicle_from_topic("/cf1/pose") == "cf1"
    assert vehicle_from_topic("/uav1/odom") == "uav1"
    assert vehicle_from_topic("/mavros/local_position/pose") == "uav"


def test_mavros_own_estimate_is_the_vehicles_pose_and_the_others_are_named():
    """A real PX4 quadrotor's bags under motion capture hold /mavros/vision_pose/pose (the mocap fed to the autopilot)
    beside /mavros/local_position/pose (its estimate): the shorter name won, unlike `live`, which reads
    local_position, and nothing said the other was there. A setpoint is no pose either."""
    from uav_debate_eval.io.rosbag.topics import ODOM, POSE, select_topics

    types = {"/mavros/vision_pose/pose": POSE, "/mavros/local_position/pose": POSE,
             "/mavros/setpoint_position/local": POSE, "/uav2/mavros/local_position/pose": POSE}
    notes: list[str] = []
    assert list(select_topics(Path("b.bag"), types, {}, notes)) == ["/mavros/local_position/pose",
                                                                    "/uav2/mavros/local_position/pose"]
    assert notes == ["/mavros/local_position/pose read as the vehicle's pose; not read: /mavros/vision_pose/pose, "
                     "/mavros/setpoint_position/local (one pose topic a vehicle; --topics picks others)"]
    del types["/mavros/local_position/pose"]
    assert list(select_topics(Path("b.bag"), types, {})) == ["/mavros/vision_pose/pose",
                                                            "/uav2/mavros/local_position/pose"]
    types["/mavros/local_position/odom"] = ODOM  # its estimate as Odometry still wins over the PoseStamped it is fed
    assert list(select_topics(Path("b.bag"), types, {})) == ["/mavros/local_position/odom",
                                                            "/uav2/mavros/local_position/pose"]


def test_mavros_0_28s_velocity_is_in_the_body_frame():
    """MAVROS 0.28 published local_position/velocity in the body frame (`base_link`), 0.25-0.27 and 0.29's
    velocity_local in the world frame (`map`): the frame id says which, so a 0.28 bag's is rotated as velocity_body."""
    from types import SimpleNamespace

    from uav_debate_eval.io.rosbag.mavros import _body_frame

    def twist(frame: str) -> SimpleNamespace:
        return SimpleNamespace(header=SimpleNamespace(frame_id=frame))

    assert [_body_frame(twist(f)) for f in ("base_link", "/base_link", "fcu", "map", "odom", "")] == [
        True, True, True, False, False, False]


@pytest.mark.parametrize("fmt,name", [("mcap", "flight.mcap"), ("sqlite3", "flight.db3"), ("ros1", "flight.bag")])
def test_pose_stamped_all_formats(tmp_path, fmt, name):
    ts = TS1 if fmt == "ros1" else TS2
    bag = write_bag(tmp_path / name, two_vehicle_msgs(ts), fmt)
    traj = read_bag(bag)
    assert traj.uav_ids == ["uav1", "uav2"]
    tr1, tr2 = traj.tracks["uav1"], traj.tracks["uav2"]
    assert len(tr1) == 20 and len(tr2) == 20
    assert traj.t0 == pytest.approx(100.0) and tr1.t[-1] == pytest.approx(1.9)  # header stamps, not receive
    assert tr1.pos[5] == pytest.approx([0.5, 0.0, 2.0])
    assert tr2.pos[19] == pytest.approx([0.0, 1.9, 3.0])
    assert tr1.vel[10] == pytest.approx([1.0, 0.0, 0.0])  # derived from positions
    assert traj.ingest.notes == []


def test_raw_storage_file_inside_rosbag2_dir(tmp_path):
    bag = write_bag(tmp_path / "dirbag", two_vehicle_msgs(TS2), "mcap")
    raw = next(bag.glob("*.mcap"))
    a, b = read_bag(bag), read_bag(raw)
    assert a.uav_ids == b.uav_ids
    np.testing.assert_array_equal(a.tracks["uav2"].pos, b.tracks["uav2"].pos)


def test_fast_decoder_matches_library_with_varying_frame_ids(tmp_path):
    msgs = [("/a/pose", "geometry_msgs/msg/PoseStamped", (k + 1) * 10**8,
             pose_stamped(TS2, 5.0 + k * 0.1, (k * 1.5, -k, 0.25 * k), frame="m" * (k % 3 + 1))) for k in range(9)]
    traj = read_bag(write_bag(tmp_path / "var.mcap", msgs))  # lengths differ: decoded message by message
    assert traj.tracks["a"].pos[:, 0] == pytest.approx([k * 1.5 for k in range(9)])
    assert traj.tracks["a"].t + traj.t0 == pytest.approx([5.0 + k * 0.1 for k in range(9)])


@pytest.mark.parametrize("fmt,name", [("mcap", "cov.mcap"), ("ros1", "cov.bag")])
def test_pose_with_covariance_is_read_with_its_spread(tmp_path, fmt, name):
    """PoseWithCovarianceStamped (a real vehicle's dead-reckoned pose on it: refused as an unsupported type before):
    positions as a PoseStamped's, and a covariance the estimator disowns (> 10 m) leaves the sample not valid, as
    an Odometry's does; the fast decoder and the library's agree (frame ids of two lengths)."""
    ts = TS1 if fmt == "ros1" else TS2
    Stamped, PWC = ts.types["geometry_msgs/msg/PoseWithCovarianceStamped"], ts.types[
        "geometry_msgs/msg/PoseWithCovariance"]
    msgs = []
    for k in range(12):
        cov = np.zeros(36)
        cov[0] = cov[7] = 400.0 if 5 <= k < 8 else 0.04  # a 20-m spread for three samples
        frame = "map" if k < 6 else "world"
        msgs.append(("/auv1/dead_reckoning", "geometry_msgs/msg/PoseWithCovarianceStamped", (50 + k) * 10**8,
                     Stamped(_header(ts, 5, k * 10**8, frame), PWC(_pose(ts, 0.5 * k, 1.0, -2.0), cov))))
    traj = read_bag(write_bag(tmp_path / name, msgs, fmt))
    tr = traj.tracks["auv1"]
    assert traj.uav_ids == ["auv1"] and len(tr) == 12
    assert tr.pos[:, 0] == pytest.approx([0.5 * k for k in range(12)]) and tr.pos[4] == pytest.approx([2, 1, -2])
    assert list(np.flatnonzero(~tr.est_valid)) == [5, 6, 7]


def test_a_chosen_topic_of_nan_poses_names_the_vehicles_other_topics(tmp_path):
    """A real AUV bag: its Odometry (preferred) held 3 NaN poses, its dead reckoning 342 good ones; the error said
    "no vehicle samples". It names the topic and the others now; beside a good vehicle it is a note."""
    Stamped, PWC = TS2.types["geometry_msgs/msg/PoseWithCovarianceStamped"], TS2.types[
        "geometry_msgs/msg/PoseWithCovariance"]
    Odom, TWC = TS2.types["nav_msgs/msg/Odometry"], TS2.types["geometry_msgs/msg/TwistWithCovariance"]
    Twist, V3 = TS2.types["geometry_msgs/msg/Twist"], TS2.types["geometry_msgs/msg/Vector3"]
    nan = float("nan")
    msgs = [("/auv1/odom", "nav_msgs/msg/Odometry", (50 + k) * 10**8,
             Odom(_header(TS2, 5, k * 10**8, "gps"), "base_link", PWC(_pose(TS2, nan, nan, nan), np.zeros(36)),
                  TWC(Twist(V3(0.0, 0.0, 0.0), V3(0.0, 0.0, 0.0)), np.zeros(36)))) for k in range(3)]
    msgs += [("/auv1/dead_reckoning", "geometry_msgs/msg/PoseWithCovarianceStamped", (50 + k) * 10**8,
              Stamped(_header(TS2, 5, k * 10**8, "odom"), PWC(_pose(TS2, 0.5 * k, 1.0, -2.0), np.zeros(36))))
             for k in range(10)]
    with pytest.raises(InputError, match=r"/auv1/odom, chosen for auv1, holds no finite pose \(3 message\(s\)\); "
                       r"its other pose topics: /auv1/dead_reckoning \(PoseWithCovarianceStamped\): name one"):
        read_bag(write_bag(tmp_path / "nan.mcap", msgs))
    msgs += [("/uav2/pose", "geometry_msgs/msg/PoseStamped", (50 + k) * 10**8,
              pose_stamped(TS2, 5.0 + k * 0.1, (k, 0.0, 2.0))) for k in range(10)]
    traj = read_bag(write_bag(tmp_path / "two.mcap", msgs))
    assert "uav2" in traj.uav_ids and len(traj.tracks["uav2"]) == 10
    assert any(n.startswith("/auv1/odom, chosen for auv1, holds no finite pose") for n in traj.ingest.notes)
    assert read_bag(write_bag(tmp_path / "named.mcap", msgs), topics=["/auv1/dead_reckoning"]).uav_ids == ["auv1"]


def test_odometry_twist_rotated_from_child_frame(tmp_path):
    Odom = TS2.types["nav_msgs/msg/Odometry"]
    PWC, TWC = TS2.types["geometry_msgs/msg/PoseWithCovariance"], TS2.types["geometry_msgs/msg/TwistWithCovariance"]
    Twist, V3 = TS2.types["geometry_msgs/msg/Twist"], TS2.types["geometry_msgs/msg/Vector3"]
    yaw90 = (0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4))
    msgs = []
    for k in range(10):
        m = Odom(_header(TS2, 10 + k, 0, "odom"), "cf1/base_link", PWC(_pose(TS2, 0.0, float(k), 1.0, yaw90),
                 np.zeros(36)), TWC(Twist(V3(1.0, 0.0, 0.0), V3(0.0, 0.0, 0.0)), np.zeros(36)))
        msgs.append(("/cf1/odom", "nav_msgs/msg/Odometry", (10 + k) * 10**9, m))
    traj = read_bag(write_bag(tmp_path / "odom.mcap", msgs))
    tr = traj.tracks["cf1"]
    assert tr.pos[3] == pytest.approx([0.0, 3.0, 1.0])
    assert tr.vel[3] == pytest.approx([0.0, 1.0, 0.0], abs=1e-9)  # body +x with yaw 90 deg is world +y
    assert not tr.vel_derived


def test_ardupilot_dds_twist_is_the_measured_velocity_of_its_pose(tmp_path):
    """ArduPilot's own DDS client (4.5+): `<ns>/ap/twist/filtered` (the AHRS's velocity, local ENU) beside
    `<ns>/ap/pose/filtered` is the vehicle's measured velocity, as MAVROS's velocity_local is; a twist glitch the
    poses do not show is what max_speed sees. Before, the velocity was derived from the poses."""
    Twist, V3 = TS2.types["geometry_msgs/msg/Twist"], TS2.types["geometry_msgs/msg/Vector3"]
    TwistStamped = TS2.types["geometry_msgs/msg/TwistStamped"]
    msgs = []
    for ns in ("", "/copter2"):
        for k in range(30):
            t = 100.0 + k / 10
            vy = 12.0 if k == 15 else 1.0
            msgs.append((f"{ns}/ap/pose/filtered", "geometry_msgs/msg/PoseStamped", int(t * 1e9),
                         pose_stamped(TS2, t, (0.0 if not ns else 10.0, k / 10, 2.0))))
            msgs.append((f"{ns}/ap/twist/filtered", "geometry_msgs/msg/TwistStamped", int(t * 1e9) + 1000,
                         TwistStamped(_header(TS2, int(t), int(round((t % 1) * 1e9)), "base_link"),
                                      Twist(V3(0.0, vy, 0.0), V3(0.0, 0.0, 0.0)))))
    traj = read_bag(write_bag(tmp_path / "ap.mcap", msgs))
    assert traj.uav_ids == ["ap", "copter2"]
    for u in traj.uav_ids:
        tr = traj.tracks[u]
        assert not tr.vel_derived and tr.vel[15] == pytest.approx([0.0, 12.0, 0.0]) and tr.vel[3, 1] == 1.0
        assert f"{u}: velocity measured by {'/copter2' if u == 'copter2' else ''}/ap/twist/filtered" in \
            traj.ingest.notes


def test_pose_array_names_by_index_and_by_mission(tmp_path):
    PA = TS2.types["geometry_msgs/msg/PoseArray"]
    msgs = [("/swarm/poses", "geometry_msgs/msg/PoseArray", (k + 1) * 10**9,
             PA(_header(TS2, k + 1, 0), [_pose(TS2, float(i), float(k), 1.0) for i in range(3)])) for k in range(5)]
    bag = write_bag(tmp_path / "pa.mcap", msgs)
    traj = read_bag(bag)
    assert traj.uav_ids == ["uav1", "uav2", "uav3"]
    assert traj.tracks["uav3"].pos[4] == pytest.approx([2.0, 4.0, 1.0])
    named = read_bag(bag, names=["a", "b", "c"])
    assert named.uav_ids == ["a", "b", "c"]
    assert named.tracks["b"].pos[0] == pytest.approx([1.0, 0.0, 1.0])


def test_tf_child_frames_as_vehicles(tmp_path):
    TF, TS_, Tr = (TS2.types[n] for n in ("tf2_msgs/msg/TFMessage", "geometry_msgs/msg/TransformStamped",
                                          "geometry_msgs/msg/Transform"))
    V3, Q = TS2.types["geometry_msgs/msg/Vector3"], TS2.types["geometry_msgs/msg/Quaternion"]
    msgs = []
    for k in range(6):
        tfs = [TS_(_header(TS2, 50 + k, 0, "world"), "uav1/base_link", Tr(V3(float(k), 0.0, 1.0), Q(0, 0, 0, 1.0))),
               TS_(_header(TS2, 50 + k, 0, "map"), "uav2", Tr(V3(0.0, float(k), 2.0), Q(0, 0, 0, 1.0))),
               TS_(_header(TS2, 50 + k, 0, "uav1/base_link"), "uav1/camera", Tr(V3(0.1, 0, 0), Q(0, 0, 0, 1.0)))]
        msgs.append(("/tf", "tf2_msgs/msg/TFMessage", (50 + k) * 10**9, TF(tfs)))
    traj = read_bag(write_bag(tmp_path / "tf.mcap", msgs))
    assert traj.uav_ids == ["uav1", "uav2"]
    assert traj.tracks["uav1"].pos[5] == pytest.approx([5.0, 0.0, 1.0])
    assert traj.tracks["uav2"].t[0] + traj.t0 == pytest.approx(50.0)


def test_a_tf_tree_through_odom_carries_each_pose_to_its_root(tmp_path):
    """REP 105's map -> odom -> base_link (odom drifting 0.1 m/s east, rotated 90 deg): `odom` was read as a
    vehicle beside base_link (a false 0.12-m separation at take-off in a real bag) and base_link stayed in odom.
    Per-vehicle trees (map -> uav2/odom -> uav2/base_link) were lost. Both are carried to the root now."""
    TF, TS_, Tr = (TS2.types[n] for n in ("tf2_msgs/msg/TFMessage", "geometry_msgs/msg/TransformStamped",
                                          "geometry_msgs/msg/Transform"))
    V3, Q = TS2.types["geometry_msgs/msg/Vector3"], TS2.types["geometry_msgs/msg/Quaternion"]
    yaw90 = Q(0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4))
    msgs = []
    for k in range(6):
        tfs = [TS_(_header(TS2, 50 + k, 0, "map"), "odom", Tr(V3(0.1 * k, 0.0, 0.0), yaw90)),
               TS_(_header(TS2, 50 + k, 0, "odom"), "base_link", Tr(V3(float(k), 0.0, 1.0), Q(0, 0, 0, 1.0))),
               TS_(_header(TS2, 50 + k, 0, "map"), "uav2/odom", Tr(V3(10.0, 0.0, 0.0), Q(0, 0, 0, 1.0))),
               TS_(_header(TS2, 50 + k, 0, "uav2/odom"), "uav2/base_link",
                   Tr(V3(0.0, float(k), 2.0), Q(0, 0, 0, 1.0)))]
        msgs.append(("/tf", "tf2_msgs/msg/TFMessage", (50 + k) * 10**9, TF(tfs)))
    traj = read_bag(write_bag(tmp_path / "tree.mcap", msgs))
    assert traj.uav_ids == ["base_link", "uav2"]  # no `odom` vehicle
    assert traj.tracks["base_link"].pos[5] == pytest.approx([0.5, 5.0, 1.0])  # odom's x is map's y, plus the drift
    assert traj.tracks["uav2"].pos[5] == pytest.approx([10.0, 5.0, 2.0])
    assert traj.tracks["uav2"].frame == ""  # its tree reaches map: placed
    assert any("carried to the root frame through odom, uav2/odom" in n for n in traj.ingest.notes)
    for _, _, _, m in msgs:
        del m.transforms[2]  # no map -> uav2/odom: uav2 stays in a frame of its own
    local = read_bag(write_bag(tmp_path / "own.mcap", msgs))
    assert local.tracks["uav2"].frame == "local" and local.tracks["uav2"].pos[5] == pytest.approx([0.0, 5.0, 2.0])
    late = [("/tf", "tf2_msgs/msg/TFMessage", 50 * 10**9 + 20 * 10**6 * k + 10**6, TF([
        TS_(_header(TS2, 50, 20 * 10**6 * k, "uav3/odom"), "uav3/base_link",
            Tr(V3(0.1 * k, 0.0, 2.0), Q(0, 0, 0, 1.0)))]))
        for k in range(100)]  # 100 poses at 50 Hz; the link above their frame comes 5 ms after the first
    late += [("/tf", "tf2_msgs/msg/TFMessage", 50 * 10**9 + 20 * 10**6 * k + 6 * 10**6, TF([
        TS_(_header(TS2, 50, 20 * 10**6 * k, "map"), "uav3/odom", Tr(V3(5.0, 0.0, 0.0), Q(0, 0, 0, 1.0)))]))
        for k in range(100)]
    uav3 = read_bag(write_bag(tmp_path / "late.mcap", sorted(late, key=lambda m: m[2]))).tracks["uav3"]
    assert len(uav3) == 100 and uav3.pos[:, 0] == pytest.approx(5.0 + 0.1 * np.arange(100))  # no 5-m step
    ned = [("/tf", "tf2_msgs/msg/TFMessage", (50 + k) * 10**9, TF([TS_(_header(TS2, 50 + k, 0, "local_origin_ned"),
            "fcu_frd", Tr(V3(float(k), 0.0, -2.0), Q(0, 0, 0, 1.0)))])) for k in range(3)]  # MAVROS 1's own tf
    with pytest.raises(InputError, match=r"no pose samples in the selected topics \(/tf: no transform from a world "
                       r"frame \(earth, enu, map, odom, world\); its parent frames: local_origin_ned\)"):
        read_bag(write_bag(tmp_path / "ned.mcap", ned))


def test_zero_stamps_fall_back_to_receive_time_and_say_so(tmp_path):
    msgs = [("/uav1/pose", "geometry_msgs/msg/PoseStamped", int((7.0 + k * 0.2) * 1e9),
             pose_stamped(TS2, 0.0, (float(k), 0.0, 1.0))) for k in range(5)]
    traj = read_bag(write_bag(tmp_path / "zero.mcap", msgs))
    assert traj.tracks["uav1"].t + traj.t0 == pytest.approx([7.0, 7.2, 7.4, 7.6, 7.8])
    assert any("header stamps are zero; used the bag receive time" in n for n in traj.ingest.notes)


def test_sim_clock_starting_at_zero_keeps_the_first_stamp(tmp_path):
    msgs = [("/uav1/pose", "geometry_msgs/msg/PoseStamped", (k + 1) * 10**8,
             pose_stamped(TS2, k * 0.1, (float(k), 0.0, 1.0))) for k in range(5)]
    traj = read_bag(write_bag(tmp_path / "sim0.mcap", msgs))
    assert traj.tracks["uav1"].t == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])


def test_topics_select_and_rename(tmp_path):
    bag = write_bag(tmp_path / "two.mcap", two_vehicle_msgs(TS2))
    traj = read_bag(bag, topics=["/uav2/mavros/local_position/pose=alpha"])
    assert traj.uav_ids == ["alpha"]
    with pytest.raises(InputError, match=r"two.mcap: topic\(s\) not in bag: /nope"):
        read_bag(bag, topics=["/nope"])


def test_mission_names_subset_and_missing(tmp_path):
    bag = write_bag(tmp_path / "two.mcap", two_vehicle_msgs(TS2))
    assert load_inputs([bag], names=["uav2"]).uav_ids == ["uav2"]
    with pytest.raises(InputError, match="mission uavs uav9 not found"):
        load_inputs([bag], names=["uav2", "uav9"])


def test_no_pose_topic(tmp_path):
    S = TS2.types["std_msgs/msg/String"]
    bag = write_bag(tmp_path / "chat.mcap", [("/chatter", "std_msgs/msg/String", 10**9, S("hi"))])
    with pytest.raises(InputError, match=r"chat.mcap: no pose topic .*/chatter \(std_msgs/msg/String\)"):
        read_bag(bag)


def test_unsupported_topic_type_requested(tmp_path):
    S = TS2.types["std_msgs/msg/String"]
    bag = write_bag(tmp_path / "chat.mcap", [("/chatter", "std_msgs/msg/String", 10**9, S("hi"))])
    with pytest.raises(InputError, match="unsupported pose topic type: /chatter"):
        read_bag(bag, topics=["/chatter"])


def test_truncated_mcap_is_recovered_and_random_db3_refused(tmp_path):
    bag = write_bag(tmp_path / "ok", two_vehicle_msgs(TS2), "mcap")
    raw = next(bag.glob("*.mcap")).read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(raw[: len(raw) // 2])
    assert any("an MCAP without its footer" in n for n in read_bag(cut).ingest.notes)  # test_io_rosbag_recover
    junk = tmp_path / "junk.db3"
    junk.write_bytes(np.random.default_rng(1).bytes(4096))
    with pytest.raises(InputError, match=r"junk.db3: cannot read bag \("):
        read_bag(junk)
    with pytest.raises(InputError, match="directory is not a rosbag2"):
        load_inputs([tmp_path / "nothing"] if (tmp_path / "nothing").mkdir() is None else [])


def test_bag_stamps_are_the_seconds_live_reads_to_the_last_bit(tmp_path):
    """A Gazebo flight's TFMessage at 20 Hz on the unix clock: the bag's times are the live tape's (live reads sec +
    nanosec * 1e-9 and tapes nanoseconds of it), bit for bit. They were ns / 1e9, a last bit off for a quarter of
    unix stamps: on a segment's edge (a sample at flight time 20 s) a replayed live flight put the sample in another
    segment (the flaky live-versus-bag test of the Gazebo flight)."""
    from uav_debate_eval.core.stamps import stamp_ns
    from uav_debate_eval.io.flight_mcap import poses_trajectory

    TF, TS_, Tr = (TS2.types[n] for n in ("tf2_msgs/msg/TFMessage", "geometry_msgs/msg/TransformStamped",
                                          "geometry_msgs/msg/Transform"))
    V3, Q = TS2.types["geometry_msgs/msg/Vector3"], TS2.types["geometry_msgs/msg/Quaternion"]
    ns = 1_795_819_468_741_536_000 + np.arange(500) * 50_000_000
    live = [sec + nanosec * 1e-9 for sec, nanosec in zip((ns // 10**9).tolist(), (ns % 10**9).tolist(), strict=True)]
    assert (ns / 1e9 != np.array(live)).sum() > 50  # the old formula differs here
    msgs = [("/world/default/dynamic_pose/info", "tf2_msgs/msg/TFMessage", int(n) + 300_000,
             TF([TS_(_header(TS2, int(n) // 10**9, int(n) % 10**9, "default"), "x500_0",
                     Tr(V3(0.1 * k, 0.0, 2.0), Q(0, 0, 0, 1.0)))])) for k, n in enumerate(ns.tolist())]
    bag = read_bag(write_bag(tmp_path / "gz.mcap", msgs))
    tape = poses_trajectory(stamp_ns(np.array(live)), np.full(len(live), "x500_0"),
                            np.column_stack([0.1 * np.arange(500), np.zeros(500), np.full(500, 2.0)]), None, "tape")
    assert bag.t0 == tape.t0 == pytest.approx(live[0], abs=3e-7)
    assert np.array_equal(bag.tracks["x500_0"].t, tape.tracks["x500_0"].t)


def test_ros1_tf_tfmessage_is_read_as_tfmessage(tmp_path):
    """ROS 1's tf/tfMessage (tf before tf2; PlotJuggler's turtlesim sample records /tf so) has TFMessage's layout:
    its transforms from a world frame are vehicles, as tf2_msgs/TFMessage's are (it was skipped: 'no pose
    samples')."""
    from rosbags.rosbag1 import Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC)
    store.register(get_types_from_msg("geometry_msgs/TransformStamped[] transforms", "tf/msg/tfMessage"))
    msgs = store.types
    path = tmp_path / "old_tf.bag"
    with Writer(path) as w:
        conn = w.add_connection("/tf", "tf/msg/tfMessage", typestore=store)
        for k in range(50):
            ns = 1_700_000_000_000_000_000 + k * 100_000_000
            stamp = msgs["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
            tfs = [msgs["geometry_msgs/msg/TransformStamped"](
                header=msgs["std_msgs/msg/Header"](seq=k, stamp=stamp, frame_id="world"), child_frame_id=name,
                transform=msgs["geometry_msgs/msg/Transform"](
                    translation=msgs["geometry_msgs/msg/Vector3"](x=0.1 * k + j, y=2.0 * j, z=1.0),
                    rotation=msgs["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)))
                   for j, name in enumerate(("turtle1", "turtle2"))]
            w.write(conn, ns, store.serialize_ros1(msgs["tf/msg/tfMessage"](transforms=tfs), "tf/msg/tfMessage"))
    traj = load_inputs([path])
    assert traj.uav_ids == ["turtle1", "turtle2"]
    assert len(traj.tracks["turtle2"]) == 50 and traj.tracks["turtle2"].pos[-1] == pytest.approx([5.9, 2.0, 1.0])


def test_a_bag_of_gps_fixes_only_reads_them_as_positions(tmp_path):
    """A real AUV bag's only position on the surface was its NavSatFix; a bag of fixes alone was refused ("no pose
    topic"). Fixes are positions there (on the plane at the first fix); beside a pose, a fix stays a sensor."""
    Fix, Status = TS2.types["sensor_msgs/msg/NavSatFix"], TS2.types["sensor_msgs/msg/NavSatStatus"]
    lat0, lon0, east = 40.0, -111.0, 1.0 / (111_320.0 * math.cos(math.radians(40.0)))

    def fix(k: int, boat: int) -> object:
        cov = np.zeros(9)
        cov[0] = cov[4] = 400.0 if k == 7 else 1.0  # a 20-m spread: not valid
        return Fix(_header(TS2, 50 + k, 0, "gps"), Status(-1 if k == 5 else 0, 1), lat0 + 1e-5 * boat,
                   lon0 + 2.0 * k * east, 10.0, cov, 2)

    msgs = [(f"/boat{b}/fix", "sensor_msgs/msg/NavSatFix", (50 + k) * 10**9, fix(k, b)) for b in (1, 2)
            for k in range(10)]
    traj = read_bag(write_bag(tmp_path / "fix.mcap", msgs))
    assert traj.uav_ids == ["boat1", "boat2"]
    b1, b2 = traj.tracks["boat1"], traj.tracks["boat2"]
    assert b1.pos[:, 0] == pytest.approx(2.0 * np.arange(10), rel=0.005)  # 2 m east per second (a sphere's)
    assert b2.pos[0, 1] == pytest.approx(1.11, abs=0.01)  # 1e-5 deg north of boat1's first fix
    assert list(np.flatnonzero(~b1.est_valid)) == [5, 7]  # no fix; a spread over 10 m
    assert any("the bag's only position is /boat1/fix (NavSatFix)" in n for n in traj.ingest.notes)
    msgs += [("/uav1/pose", "geometry_msgs/msg/PoseStamped", (50 + k) * 10**9,
              pose_stamped(TS2, 50.0 + k, (float(k), 0.0, 2.0))) for k in range(10)]
    assert read_bag(write_bag(tmp_path / "both.mcap", msgs)).uav_ids == ["uav1"]


@pytest.mark.parametrize("fmt", ["mcap", "sqlite3 without definitions"])
def test_mavros_state_gives_a_vehicles_arming(tmp_path, fmt):
    """/<ns>/mavros/state beside its pose: the arming events that park a pair and end a silence without stale
    data (safety.parked), as an autopilot log's; a bag's vehicle whose arming is not recorded has none. A bag
    recorded before Iron holds no message definitions: the state decodes with the shipped one (such a bag was
    refused whole: "cannot read bag (KeyError: 'mavros_msgs/msg/State')")."""
    import sqlite3

    from rosbags.typesys import get_types_from_msg

    ts = get_typestore(Stores.ROS2_JAZZY)
    ts.register(get_types_from_msg("std_msgs/Header header\nbool connected\nbool armed\nbool guided\n"
                                   "bool manual_input\nstring mode\nuint8 system_status\n", "mavros_msgs/msg/State"))
    State = ts.types["mavros_msgs/msg/State"]
    msgs = two_vehicle_msgs(ts)
    msgs += [("/uav2/mavros/state", "mavros_msgs/msg/State", int((100.5 + k / 2) * 1e9),
              State(_header(ts, 100 + k // 2, (k % 2) * 5 * 10**8, ""), True, 2 <= k < 5, False, False, "GUIDED", 4))
             for k in range(8)]
    bag = recording.write_bag(tmp_path / "state", msgs, ts, fmt.split()[0])
    if fmt != "mcap":
        with sqlite3.connect(next(bag.glob("*.db3"))) as db:
            db.execute("DELETE FROM message_definitions")
    traj = read_bag(bag)
    arming = [(e.t, e.uavs, e.extra["label"]) for e in traj.ingest.log_events]
    assert arming == [(0.0, ["uav2"], "DISARMED"), (pytest.approx(1.0), ["uav2"], "ARMED"),
                      (pytest.approx(2.5), ["uav2"], "DISARMED")]


@pytest.mark.parametrize("fmt", ["mcap", "sqlite3 without definitions"])
def test_mavros_extended_state_gives_a_vehicles_landed_state(tmp_path, fmt):
    """/<ns>/mavros/extended_state beside its pose: ON_GROUND is landed (armed on its pad, a vehicle is parked:
    safety.parked), taking off / in the air / landing are not, undefined says nothing; the first state read is no
    change. Without definitions it decodes with the shipped ExtendedState."""
    import sqlite3

    from rosbags.typesys import get_types_from_msg

    from uav_debate_eval.io.rosbag.mavros import MSG_DIR

    ts = get_typestore(Stores.ROS2_JAZZY)
    ts.register(get_types_from_msg((MSG_DIR / "ExtendedState.msg").read_text(), "mavros_msgs/msg/ExtendedState"))
    Extended = ts.types["mavros_msgs/msg/ExtendedState"]
    msgs = two_vehicle_msgs(ts)
    landed_states = [0, 1, 3, 2, 2, 4, 1, 1]  # undefined, on the ground, taking off, in the air, landing, on the ground
    msgs += [("/uav2/mavros/extended_state", "mavros_msgs/msg/ExtendedState", int((100.5 + k / 2) * 1e9),
              Extended(_header(ts, 100 + k // 2, (k % 2) * 5 * 10**8, ""), 0, state))
             for k, state in enumerate(landed_states)]
    bag = recording.write_bag(tmp_path / "extended", msgs, ts, fmt.split()[0])
    if fmt != "mcap":
        with sqlite3.connect(next(bag.glob("*.db3"))) as db:
            db.execute("DELETE FROM message_definitions")
    traj = read_bag(bag)
    landing = [(e.t, e.uavs, e.extra["label"], bool(e.extra.get("initial"))) for e in traj.ingest.log_events]
    assert landing == [(0.5, ["uav2"], "landed", True), (pytest.approx(1.0), ["uav2"], "airborne", False),
                       (pytest.approx(3.0), ["uav2"], "landed", False)]


def _point_stamped(ts, t, xyz, frame="leica"):
    sec = int(math.floor(t))
    return ts.types["geometry_msgs/msg/PointStamped"](_header(ts, sec, int(round((t - sec) * 1e9)), frame),
                                                      ts.types["geometry_msgs/msg/Point"](*xyz))


def test_a_position_only_tracker_is_read_as_the_vehicle(tmp_path):
    """The EuRoC MAV datasets' machine-hall bags (ROS 1) hold the vehicle's position as a laser tracker measured it,
    `/leica/position` (PointStamped, 20 Hz), beside the IMU (200 Hz): such a bag was refused ("no pose topic").
    The points are the positions now (velocity derived, a lost point a dropped row); beside a pose, a point (an
    RViz click, a target) is no vehicle unless --topics names it."""
    imu = TS1.types["sensor_msgs/msg/Imu"]
    vec, quat = TS1.types["geometry_msgs/msg/Vector3"], TS1.types["geometry_msgs/msg/Quaternion"]
    msgs = []
    for k in range(2000):  # 10 s of IMU
        t = 1403636579.0 + k / 200
        msgs.append(("/imu0", "sensor_msgs/msg/Imu", int(t * 1e9),
                     imu(_header(TS1, int(t), int(round((t - int(t)) * 1e9)), "imu4"), quat(0.0, 0.0, 0.0, 1.0),
                         np.full(9, -1.0), vec(0.0, 0.0, 0.0), np.zeros(9), vec(0.0, 0.0, 9.81), np.zeros(9))))
    for k in range(200):  # the tracker at 20 Hz: 1.5 m/s along x, a climb of 0.5 m/s
        t = 1403636579.0 + k / 20
        xyz = (float("nan"),) * 3 if k == 100 else (4.7 + 1.5 * k / 20, -1.8, 0.8 + 0.5 * k / 20)
        msgs.append(("/leica/position", "geometry_msgs/msg/PointStamped", int((t + 0.004) * 1e9),
                     _point_stamped(TS1, t, xyz)))
    msgs.sort(key=lambda m: m[2])
    bag = write_bag(tmp_path / "MH_01_easy.bag", msgs, "ros1")
    traj = read_bag(bag)
    assert traj.uav_ids == ["leica"]
    tr = traj.tracks["leica"]
    assert len(tr) == 199 and tr.t[1] - tr.t[0] == pytest.approx(0.05, abs=1e-6)
    assert traj.ingest.dropped == {"nan": 1}
    assert tr.pos[-1] == pytest.approx([4.7 + 1.5 * 199 / 20, -1.8, 0.8 + 0.5 * 199 / 20])
    assert tr.vel[50] == pytest.approx([1.5, 0.0, 0.5], abs=1e-4)  # derived from the points (stamps to 0.1 us)
    assert any("/leica/position (PointStamped" in n for n in traj.ingest.notes)
    assert read_bag(bag, topics=["/leica/position=mav"]).uav_ids == ["mav"]

    beside = [("/uav1/pose", "geometry_msgs/msg/PoseStamped", (50 + k) * 10**9,
               pose_stamped(TS2, 50.0 + k, (float(k), 0.0, 2.0))) for k in range(10)]
    beside.append(("/clicked_point", "geometry_msgs/msg/PointStamped", 55 * 10**9,
                   _point_stamped(TS2, 55.0, (3.0, 0.5, 2.0), "map")))
    both = write_bag(tmp_path / "click.mcap", beside)
    assert read_bag(both).uav_ids == ["uav1"]
    assert read_bag(both, topics=["/uav1/pose", "/clicked_point"]).uav_ids == ["clicked_point", "uav1"]
