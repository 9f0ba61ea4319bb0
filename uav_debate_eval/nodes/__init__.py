"""Thin rclpy nodes over the core. Only this subpackage imports rclpy."""

from uav_debate_eval.core import numeric_env

numeric_env.apply()  # before a node's modules import numpy
