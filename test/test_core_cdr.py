"""A serialized PoseArray read with numpy equals what rclpy deserializes, and a damaged one is refused."""

import numpy as np
import pytest
from geometry_msgs.msg import Pose, PoseArray
from rclpy.serialization import serialize_message

from uav_debate_eval.core.cdr import pose_array_cdr, pose_array_positions, pose_stamped_cdr, pose_stamped_position


def _array(frame_id: str, n: int) -> PoseArray:
    rng = np.random.default_rng(n)
    msg = PoseArray()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_795_000_123, 456_789_000
    msg.header.frame_id = frame_id
    poses = []
    for p in rng.normal(0, 50, (n, 3)).tolist():
        pose = Pose()
        pose.position.x, pose.position.y, pose.position.z = p
        pose.orientation.w = 1.0
        poses.append(pose)
    msg.poses = poses
    return msg


@pytest.mark.parametrize("frame_id", ["", "w", "map", "world12"])  # every padding before the count and the poses
@pytest.mark.parametrize("n", [0, 1, 1000])
def test_positions_equal_rclpys_message(frame_id, n):
    msg = _array(frame_id, n)
    t, frame, pos = pose_array_positions(serialize_message(msg))
    assert frame == frame_id and t == pytest.approx(1_795_000_123.456789, abs=1e-6)
    expected = np.array([[p.position.x, p.position.y, p.position.z] for p in msg.poses]).reshape(n, 3)
    assert np.array_equal(pos, expected)


def test_a_damaged_array_is_refused_in_one_line():
    data = serialize_message(_array("map", 10))
    with pytest.raises(ValueError, match="10 poses need 560 bytes"):
        pose_array_positions(data[:-8])
    with pytest.raises(ValueError, match="encapsulation"):
        pose_array_positions(b"\x07\x07" + data[2:])
    with pytest.raises(ValueError, match="truncated header|runs past"):
        pose_array_positions(data[:10])


@pytest.mark.parametrize("frame_id", ["", "map", "world"])
@pytest.mark.parametrize("n", [0, 3])
def test_written_arrays_are_what_rclpy_reads(frame_id, n):
    from rclpy.serialization import deserialize_message

    positions = np.arange(3 * n, dtype=float).reshape(n, 3) - 2.5
    msg = deserialize_message(pose_array_cdr(1_795_000_001.25, frame_id, positions), PoseArray)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == (1_795_000_001, 250_000_000,
                                                                                     frame_id)
    assert [[p.position.x, p.position.y, p.position.z] for p in msg.poses] == positions.tolist()
    assert all(p.orientation.w == 1.0 for p in msg.poses)


@pytest.mark.parametrize("frame_id", ["", "map", "uav12/odom"])
def test_pose_stamped_both_ways(frame_id):
    from geometry_msgs.msg import PoseStamped
    from rclpy.serialization import deserialize_message

    msg = PoseStamped()
    msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id = 7, 500_000_000, frame_id
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = 1.5, -2.25, 30.0
    assert pose_stamped_position(serialize_message(msg)) == (7.5, frame_id, (1.5, -2.25, 30.0))
    back = deserialize_message(pose_stamped_cdr(7.5, frame_id, (1.5, -2.25, 30.0)), PoseStamped)
    assert (back.header.stamp.sec, back.header.stamp.nanosec, back.header.frame_id) == (7, 500_000_000, frame_id)
    assert (back.pose.position.x, back.pose.position.y, back.pose.position.z, back.pose.orientation.w) == \
        (1.5, -2.25, 30.0, 1.0)
    with pytest.raises(ValueError, match="truncated pose"):
        pose_stamped_position(serialize_message(msg)[:-30])
