"""Shared pytest configuration: keep ROS discovery local and test runs isolated from each other."""

import os

import pytest

os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def ctx(request):
    """A fresh rclpy context on the test module's own DDS domain (its ROS_DOMAIN_BASE + pid % 60)."""
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=getattr(request.module, "ROS_DOMAIN_BASE", 101) + os.getpid() % 60)
    yield context
    rclpy.try_shutdown(context=context)
