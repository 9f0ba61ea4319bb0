"""The shared pose-input module: topic patterns (MAVROS, Crazyswarm2), discovery, Odometry, PoseArray, stamps."""

import math
import time

import pytest

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from geometry_msgs.msg import Pose, PoseArray, PoseStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402

from uav_debate_eval.core.frames import rotate  # noqa: E402
from uav_debate_eval.nodes.pose_input import PoseInput, topic_regex  # noqa: E402


def test_topic_patterns_match_one_name_segment():
    mavros = topic_regex("/{uav}/mavros/local_position/pose")
    assert mavros.match("/uav3/mavros/local_position/pose").group(1) == "uav3"
    assert mavros.match("/a/b/mavros/local_position/pose") is None
    cf = topic_regex("/{uav}/pose")
    assert cf.match("/cf231/pose").group(1) == "cf231"
    assert cf.match("/cf231/pose/extra") is None
    with pytest.raises(ValueError):
        topic_regex("/pose")


def test_rotate_body_twist_to_world():
    yaw90 = (0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4))
    assert rotate(yaw90, (1.0, 0.0, 0.5)) == pytest.approx((0.0, 1.0, 0.5))
    assert rotate((0.0, 0.0, 0.0, 1.0), (1.0, 2.0, 3.0)) == pytest.approx((1.0, 2.0, 3.0))


def _spin_until(ex, cond, timeout=8.0, publish=None):
    end = time.time() + timeout
    while time.time() < end and not cond():
        if publish:
            publish()
        ex.spin_once(timeout_sec=0.05)
    return cond()


def _publishing(ctx, node, msg_type, topic: str, qos=qos_profile_sensor_data):
    """A publisher on `topic` from a node of its own, and an executor spinning both nodes."""
    pub_node = rclpy.create_node(f"{node.get_name()}_pub", context=ctx)
    pub = pub_node.create_publisher(msg_type, topic, qos)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    ex.add_node(pub_node)
    return pub, ex


def _stamped(msg, t: float):
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int(round((t % 1) * 1e9))
    return msg


def test_discovery_and_odometry_in_world_frame(ctx):
    got = []
    node = rclpy.create_node("pi_odom", context=ctx, parameter_overrides=[
        Parameter("pose_topic_pattern", value="/{uav}/mavros/local_position/odom"),
        Parameter("pose_type", value="Odometry"), Parameter("pose_discovery_period_s", value=0.2)])
    inp = PoseInput(node, lambda *a: got.append(a))
    pub_node = rclpy.create_node("pi_pub", context=ctx)
    pub = pub_node.create_publisher(Odometry, "/drone7/mavros/local_position/odom", qos_profile_sensor_data)
    other = pub_node.create_publisher(PoseStamped, "/drone8/mavros/local_position/odom_typo", 10)  # noqa: F841
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    ex.add_node(pub_node)
    msg = _stamped(Odometry(), 12.5)
    msg.pose.pose.position.x, msg.pose.pose.position.z = 1.0, 2.0
    msg.pose.pose.orientation.z, msg.pose.pose.orientation.w = math.sin(math.pi / 4), math.cos(math.pi / 4)
    msg.twist.twist.linear.x = 2.0
    # as MAVROS sends it: the twist in the body frame (REP 105, core.frames: rotated because child != header)
    msg.header.frame_id, msg.child_frame_id = "map", "base_link"
    assert _spin_until(ex, lambda: got, publish=lambda: pub.publish(msg))
    uav, t, pos, vel = got[0]
    assert (uav, t, pos) == ("drone7", 12.5, (1.0, 0.0, 2.0))
    assert vel == pytest.approx((0.0, 2.0, 0.0))
    assert inp.uav_names == ["drone7"]
    ex.shutdown()


def test_a_position_only_trackers_points_are_discovered_and_read(ctx):
    """PointStamped topics (a laser tracker, an ultra-wideband tag: io.rosbag.point offline) are discovered by type
    and read as positions without a velocity (derived downstream, as offline); a PoseStamped on a matching name is
    not taken (pose_type PointStamped was refused before: "expected one of ...")."""
    from geometry_msgs.msg import PointStamped

    got = []
    node = rclpy.create_node("pi_point", context=ctx, parameter_overrides=[
        Parameter("pose_topic_pattern", value="/{uav}/position"), Parameter("pose_type", value="PointStamped"),
        Parameter("pose_discovery_period_s", value=0.2)])
    inp = PoseInput(node, lambda *a: got.append(a))
    pub, ex = _publishing(ctx, node, PointStamped, "/tag3/position")
    pose_node = rclpy.create_node("pi_point_pose", context=ctx)
    pose_node.create_publisher(PoseStamped, "/tag4/position", qos_profile_sensor_data)
    ex.add_node(pose_node)
    msg = _stamped(PointStamped(), 40.25)
    msg.point.x, msg.point.y, msg.point.z = 4.7, -1.8, 0.8
    assert _spin_until(ex, lambda: got, publish=lambda: pub.publish(msg))
    assert got[0] == ("tag3", 40.25, (4.7, -1.8, 0.8), None)
    assert inp.uav_names == ["tag3"]
    ex.shutdown()


def test_pose_array_names_and_zero_stamp_fallback(ctx):
    got = []
    node = rclpy.create_node("pi_array", context=ctx, parameter_overrides=[
        Parameter("pose_type", value="PoseArray"), Parameter("pose_array_topic", value="/world/w/pose/info"),
        Parameter("pose_array_names", value=["uav1", "", "uav2"]), Parameter("pose_qos", value="reliable")])
    inp = PoseInput(node, lambda *a: got.append(a))
    assert inp.uav_names == ["uav1", "uav2"]
    pub_node = rclpy.create_node("pi_array_pub", context=ctx)
    pub = pub_node.create_publisher(PoseArray, "/world/w/pose/info", 10)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    ex.add_node(pub_node)
    msg = PoseArray()
    for x in (1.0, 2.0, 3.0, 4.0):
        p = Pose()
        p.position.x = x
        msg.poses.append(p)
    assert _spin_until(ex, lambda: len(got) >= 2, publish=lambda: pub.publish(msg))
    assert [(u, pos[0], vel) for u, _, pos, vel in got[:2]] == [("uav1", 1.0, None), ("uav2", 3.0, None)]
    assert abs(got[0][1] - time.time()) < 5.0  # zero stamp -> the node clock
    ex.shutdown()


def test_named_stamped_topics_and_bad_parameters(ctx):
    got = []
    node = rclpy.create_node("pi_named", context=ctx, parameter_overrides=[Parameter("uav_names", value=["cf1"])])
    PoseInput(node, lambda *a: got.append(a))
    pub, ex = _publishing(ctx, node, PoseStamped, "/cf1/pose")
    msg = _stamped(PoseStamped(), 3.25)
    msg.pose.position.y = -1.5
    assert _spin_until(ex, lambda: got, publish=lambda: pub.publish(msg))
    assert got[0] == ("cf1", 3.25, (0.0, -1.5, 0.0), None)
    ex.shutdown()
    bad = rclpy.create_node("pi_bad", context=ctx, parameter_overrides=[Parameter("pose_type", value="Twist")])
    with pytest.raises(ValueError, match="pose_type"):
        PoseInput(bad, lambda *a: None)
    bad2 = rclpy.create_node("pi_bad2", context=ctx, parameter_overrides=[Parameter("pose_type", value="PoseArray")])
    with pytest.raises(ValueError, match="pose_array_names"):
        PoseInput(bad2, lambda *a: None)


def test_pose_array_whole_to_the_owner_and_pose_by_pose_to_listeners(ctx):
    """The verifier takes a PoseArray whole (read with numpy, core.cdr); a listener still gets it pose by pose.
    An array shorter than the names gives the vehicles it holds."""
    batches, poses = [], []
    node = rclpy.create_node("pi_batch", context=ctx, parameter_overrides=[
        Parameter("pose_type", value="PoseArray"), Parameter("pose_array_topic", value="/world/b/pose/info"),
        Parameter("pose_array_names", value=["uav1", "", "uav2", "uav3"]), Parameter("pose_qos", value="reliable")])
    inp = PoseInput(node, lambda *a: pytest.fail("pose by pose to an owner that takes batches"),
                    on_batch=lambda t, names, pos: batches.append((t, names, pos)))
    inp.add_listener(lambda *a: poses.append(a))
    pub_node = rclpy.create_node("pi_batch_pub", context=ctx)
    pub = pub_node.create_publisher(PoseArray, "/world/b/pose/info", 10)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    ex.add_node(pub_node)
    msg = _stamped(PoseArray(), 42.25)
    msg.header.frame_id = "map"
    for x in (1.0, 2.0, 3.0):
        p = Pose()
        p.position.x, p.position.y, p.position.z = x, -x, 10 * x
        msg.poses.append(p)
    assert _spin_until(ex, lambda: batches and len(poses) >= 2, publish=lambda: pub.publish(msg))
    t, names, pos = batches[0]
    assert (t, names) == (42.25, ["uav1", "uav2"])
    assert pos.tolist() == [[1.0, -1.0, 10.0], [3.0, -3.0, 30.0]]
    assert poses[:2] == [("uav1", 42.25, (1.0, -1.0, 10.0), None), ("uav2", 42.25, (3.0, -3.0, 30.0), None)]
    assert inp._bad_said == {"short array"}  # warned (once): a missing pose shifts the names after it
    ex.shutdown()


def test_mavros_state_beside_the_pose_gives_the_arming(ctx):
    """`<ns>/mavros/state` of each MAVROS vehicle, with MAVROS's QoS (reliable, transient local): the state published
    before the input started arrives (latched), the heartbeat's repeats are no change, a change is."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    State = pytest.importorskip("mavros_msgs.msg", reason="mavros_msgs not generated (make setup)").State
    pub_node = rclpy.create_node("pi_mavros_pub", context=ctx)
    state_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)  # as mavros' sys_status publishes it
    state_pub = pub_node.create_publisher(State, "/drone3/mavros/state", state_qos)
    pose_pub = pub_node.create_publisher(PoseStamped, "/drone3/mavros/local_position/pose", qos_profile_sensor_data)
    state_pub.publish(_stamped(State(armed=False, mode="STABILIZE"), 40.0))  # before the input exists
    arming, got = [], []
    node = rclpy.create_node("pi_mavros", context=ctx, parameter_overrides=[
        Parameter("pose_topic_pattern", value="/{uav}/mavros/local_position/pose"),
        Parameter("pose_discovery_period_s", value=0.2)])
    inp = PoseInput(node, lambda *a: got.append(a), on_arming=lambda u, armed: arming.append((u, armed)))
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    ex.add_node(pub_node)
    pose = _stamped(PoseStamped(), 41.0)
    assert _spin_until(ex, lambda: arming and got, publish=lambda: pose_pub.publish(pose))
    assert arming == [("drone3", False)]  # the latched state
    for t, armed in ((41.0, False), (42.0, True), (43.0, True)):  # heartbeat, change, heartbeat
        state_pub.publish(_stamped(State(armed=armed, mode="GUIDED"), t))
    assert _spin_until(ex, lambda: len(arming) >= 2)
    _spin_until(ex, lambda: False, timeout=0.5)  # the last heartbeat too
    assert arming == [("drone3", False), ("drone3", True)]
    assert inp.mavros_status()["states"] == {"drone3": [(40.0, False), (42.0, True)]}
    ex.shutdown()


def test_no_state_topic_for_other_pose_topics(ctx):
    """Crazyswarm2's /cf1/pose is no MAVROS topic: no state is read and the flight report has no arming."""
    from uav_debate_eval.nodes.mavros_state import state_topic

    assert state_topic("/uav1/mavros/local_position/pose") == "/uav1/mavros/state"
    assert state_topic("/mavros/local_position/odom") == "/mavros/state"
    assert state_topic("/cf1/pose") is None
    node = rclpy.create_node("pi_cf", context=ctx, parameter_overrides=[Parameter("uav_names", value=["cf1"])])
    inp = PoseInput(node, lambda *a: None, on_arming=lambda u, armed: None)
    assert inp.topics == ["/cf1/pose"] and inp.mavros_status() == {}
    assert not [t for t, _ in node.get_topic_names_and_types() if t.endswith("/state")]


def test_the_owner_gets_mission_placed_poses_the_listeners_raw_ones(ctx):
    """MAVROS local frames with the mission's `frames:` origins: the verifier (the owner) checks in the world frame,
    as the flight report does after placing the taped raw samples (quality.frames.place_frames); the listeners (the
    tape, the pose relay) get the poses as received, so nothing is placed twice."""
    from uav_debate_eval.core.mission import FrameOrigin

    owner, listener = [], []
    node = rclpy.create_node("pi_frames", context=ctx, parameter_overrides=[
        Parameter("uav_names", value=["uav2"]),
        Parameter("pose_topic_pattern", value="/{uav}/mavros/local_position/odom"),
        Parameter("pose_type", value="Odometry")])
    inp = PoseInput(node, lambda *a: owner.append(a), owner_frames={"uav2": FrameOrigin((6.0, 0.0, 0.0), 90.0)})
    inp.add_listener(lambda *a: listener.append(a))
    pub, ex = _publishing(ctx, node, Odometry, "/uav2/mavros/local_position/odom")
    msg = _stamped(Odometry(), 7.0)
    msg.header.frame_id, msg.child_frame_id = "map", "map"  # world-frame twist
    msg.pose.pose.position.x, msg.pose.pose.position.z, msg.pose.pose.orientation.w = 1.0, 2.0, 1.0
    msg.twist.twist.linear.x = 3.0
    assert _spin_until(ex, lambda: owner and listener, publish=lambda: pub.publish(msg))
    assert owner[0][0] == "uav2" and owner[0][1] == 7.0
    assert owner[0][2] == pytest.approx((6.0, 1.0, 2.0)) and owner[0][3] == pytest.approx((0.0, 3.0, 0.0))
    assert listener[0][2:] == ((1.0, 0.0, 2.0), (3.0, 0.0, 0.0))
    assert inp.reports_local_frames and inp.local_frames() == ["uav2"]
    ex.shutdown()
