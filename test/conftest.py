"""Shared pytest configuration: keep ROS discovery local and test runs isolated from each other."""

import os

import pytest
from ros_domain import leased_domain

os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def ros_domain():
    """A DDS domain id no other test process holds while this test runs (test/ros_domain.py)."""
    with leased_domain() as domain:
        yield domain


@pytest.fixture
def ros_env(ros_domain, monkeypatch):
    """This process's ROS_DOMAIN_ID set to the test's leased domain (restored afterwards)."""
    monkeypatch.setenv("ROS_DOMAIN_ID", str(ros_domain))
    return ros_domain


@pytest.fixture
def ctx(ros_domain):
    """A fresh rclpy context on the test's own leased DDS domain."""
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain)
    yield context
    rclpy.try_shutdown(context=context)
