"""Foxglove output of the core: the 3-D scene and the plot/indicator messages (scene), the live WebSocket
view (foxglove_live) and the annotated MCAP of an evaluated flight (mcap_export). Uses the official
foxglove-sdk; no rclpy."""
