"""Thin rclpy nodes over the core. Only this subpackage imports rclpy."""
