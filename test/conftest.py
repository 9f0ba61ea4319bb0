"""Shared pytest configuration: keep ROS discovery local and test runs isolated from each other."""

import os
from pathlib import Path

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


#: Test modules that fly real-time DDS flights (`test_ros_*.py`): `make test` runs them in order on one worker.
REAL_TIME_PREFIX = "test_ros_"


def _real_time(nodeid: str) -> bool:
    return Path(nodeid.split("::", 1)[0]).name.startswith(REAL_TIME_PREFIX)


def pytest_collection_modifyitems(config, items):
    """The real-time modules first (a stable sort): under `make test` the worker that takes them starts at once."""
    items.sort(key=lambda item: not _real_time(item.nodeid))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs two pytest-xdist workers. The real-time DDS flights (about 5 minutes of wall clock, mostly
    waiting on the stream) go as one unit to one worker, so they run beside the CPU-bound tests instead of after
    them and never two at once on 2 cores. Other modules are units of their own (module fixtures stay shared).
    (xdist's `loadgroup` cannot do this under pytest 9: its group suffix no longer reaches the node id.)"""
    if config.getvalue("dist") != "load":  # another --dist asked for by name: xdist's own
        return None
    from xdist.scheduler import LoadScopeScheduling

    class RealTimeOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return REAL_TIME_PREFIX if _real_time(nodeid) else super()._split_scope(nodeid)

    config.option.loadscopereorder = False  # keep the collection order: the real-time unit first
    return RealTimeOnOneWorker(config, log)

# A reader's unexpected exception is a bug the tests must see, not a file reported unreadable (core.errors.reading).
os.environ.setdefault("UAV_DEBATE_EVAL_STRICT_READERS", "1")
