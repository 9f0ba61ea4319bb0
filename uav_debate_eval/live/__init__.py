"""The ROS-free core of the live monitor: configuration, worker processes, veto episodes, segment cutting,
per-segment evaluation and the flight-level report. The rclpy nodes (uav_debate_eval/nodes/) only wire
parameters, QoS, topics and timers to these modules; nothing here imports rclpy."""
