"""Read vehicle poses from rosbag2 (dir, .mcap, .db3) and ROS 1 .bag files with `rosbags` (no ROS install).

Pose topics are detected by type (PoseStamped, Odometry, TransformStamped, PoseArray, TFMessage) and vehicles by
topic namespace (`/uav1/pose`, `/uav1/mavros/local_position/pose`, `/cf1/odom` -> `uav1`, `cf1`) or tf child frame.
Speed (a 300k-message bag in a fraction of a second): MCAP chunks are read with numpy through their message
indexes (raw_messages), and PoseStamped/Odometry messages of one serialised length are decoded as one numpy
array (stamped), both checked against rosbags' own reading. Anything else goes through rosbags message by message.
"""

from uav_debate_eval.io.rosbag.reader import bag_span, read_bag
from uav_debate_eval.io.rosbag.topics import vehicle_from_topic

__all__ = ["bag_span", "read_bag", "vehicle_from_topic"]
