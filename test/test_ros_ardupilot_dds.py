"""One flight, one truth for ArduPilot's own DDS client (4.5+, no MAVROS) over real DDS: a vehicle publishes
`/ap/pose/filtered` (PoseStamped, local ENU) and `/ap/twist/filtered` (TwistStamped, its AHRS's velocity) as
ArduPilot does, and records what it sent as a rosbag2. Its AHRS reports a 12 m/s velocity glitch its poses do not
show. `live` reads the measured velocity beside the poses (nodes.mavros_state.velocity_topic) as `evaluate` of the
bag does (io.rosbag.topics.companions): the same max_speed violation, events, data quality and findings in both;
before, live derived the velocity from the poses and the bag did too, blind to the autopilot's own estimate."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_ros_mavros_flight import COMPARED, SAVE_SENT, fly_beside_live

pytestmark = [pytest.mark.ros, pytest.mark.slow]

VEHICLE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import rclpy
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import serialize_message
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore
    bag = Path(sys.argv[1])
    reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    rclpy.init()
    node = rclpy.create_node("ardupilot_dds")
    pose = node.create_publisher(PoseStamped, "/ap/pose/filtered", reliable)
    twist = node.create_publisher(TwistStamped, "/ap/twist/filtered", reliable)
    sent = []

    def send(pub, msg, msgtype):
        sent.append((pub.topic_name, msgtype, time.time_ns(), serialize_message(msg)))
        pub.publish(msg)

    while pose.get_subscription_count() < 1 or twist.get_subscription_count() < 1:  # the verifier; the panel
        time.sleep(0.05)
    time.sleep(1.0)
    t0 = time.time()
    while (el := time.time() - t0) < 12.0:
        stamp = node.get_clock().now().to_msg()
        z = min(5.0, el * 1.0)
        north = max(0.0, el - 5.0) * 2.0  # 2 m/s north after the climb
        vn = 12.0 if 8.0 <= el < 8.5 else (2.0 if el >= 5.0 else 0.0)  # the AHRS's glitch: 12 m/s for 0.5 s
        v = TwistStamped()
        v.header.stamp, v.header.frame_id = stamp, "base_link"
        v.twist.linear.x, v.twist.linear.y, v.twist.linear.z = 0.0, vn, 1.0 if el < 5.0 else 0.0
        send(twist, v, "geometry_msgs/msg/TwistStamped")
        m = PoseStamped()
        m.header.stamp, m.header.frame_id = stamp, "map"
        m.pose.position.x, m.pose.position.y, m.pose.position.z = 0.0, north, z
        m.pose.orientation.w = 1.0
        send(pose, m, "geometry_msgs/msg/PoseStamped")
        time.sleep(0.05)
    node.destroy_node()
    rclpy.shutdown()
    ts = get_typestore(Stores.ROS2_JAZZY)
""") + SAVE_SENT


def test_live_ardupilot_dds_flight_report_takes_the_measured_velocity_as_its_bag_does(tmp_path: Path):
    mission = tmp_path / "mission.yaml"
    mission.write_text("mission: {name: ardupilot_dds, type: survey}\nconstraints: {max_speed_mps: 8.0}\n")
    common = {"pose_topic_pattern": "/{uav}/pose/filtered", "uav_names": ["ap"], "pose_qos": "reliable",
              "mission_file": str(mission)}
    flown = fly_beside_live(tmp_path, VEHICLE, common)
    flight, replay = flown.flight, flown.replay
    [glitch] = flight["violations"]
    assert (glitch["constraint"], glitch["uavs"]) == ("max_speed", ["ap"])  # as the AHRS measured it
    assert glitch["worst_value"] == pytest.approx(12.0, abs=0.01)
    for report in (flight, replay):
        assert "ap: velocity measured by /ap/twist/filtered" in report["ingest"]["notes"]
    for key in COMPARED:
        assert flight[key] == replay[key], key
