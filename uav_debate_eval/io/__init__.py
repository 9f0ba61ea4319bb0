"""Readers and writers: contract CSV, rosbag2 / ROS 1 bags, PX4 ULog."""
