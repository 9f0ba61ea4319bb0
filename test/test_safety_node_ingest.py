"""safety_verifier's pose path in process: poses go into the monitor's arrays, a breaking pose is checked on
arrival, a bag loop resets on the pose that starts it, and the pose queue is deeper than sensor-data's 5."""

import os
import time

import pytest

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import ReliabilityPolicy, qos_profile_sensor_data  # noqa: E402

from uav_debate_eval.nodes.pose_input import VERIFIER_QUEUE_DEPTH, pose_qos  # noqa: E402
from uav_debate_eval.nodes.safety_verifier import SafetyVerifierNode  # noqa: E402


def _node(ctx, name, **params):
    iso = f"/t{os.getpid()}{name}"  # remapped: other suites' nodes may share the DDS domain
    remap = ["--ros-args", "-r", f"/swarm/safety/veto:={iso}/veto", "-r", f"/swarm/safety/status:={iso}/status",
             "-r", f"/swarm/safety/markers:={iso}/markers"]
    overrides = [Parameter(k, value=v) for k, v in {"uav_names": ["a", "b", "c"], "min_separation_m": 0.5,
                                                    "stale_timeout_s": 60.0, **params}.items()]
    return SafetyVerifierNode(name, context=ctx, cli_args=remap, parameter_overrides=overrides)


def test_pose_qos_depth():
    assert pose_qos("sensor_data") is qos_profile_sensor_data  # publishers (swarm_sim) keep the plain profile
    deep = pose_qos("sensor_data", 80)
    assert deep.depth == 80 and deep.reliability == ReliabilityPolicy.BEST_EFFORT
    assert pose_qos("reliable").depth == 50 and pose_qos("reliable", 7).depth == 7
    with pytest.raises(ValueError, match="depth"):
        pose_qos("sensor_data", 0)


def test_pose_subscriptions_queue_depth_default_and_parameter(ctx):
    node = _node(ctx, "sv_depth")
    assert {s.qos_profile.depth for s in node.poses._subs.values()} == {VERIFIER_QUEUE_DEPTH}  # must lose none
    assert all(s.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT for s in node.poses._subs.values())
    node.destroy_node()
    node = _node(ctx, "sv_depth7", pose_queue_depth=7)
    assert {s.qos_profile.depth for s in node.poses._subs.values()} == {7}
    node.destroy_node()


def test_poses_are_stored_and_a_breaking_pose_is_checked_on_arrival(ctx):
    node = _node(ctx, "sv_ingest")
    t = time.time()
    for k in range(20):  # a burst of ordinary poses: stored, no veto
        for u, x in (("a", 0.0), ("b", 2.0), ("c", -2.0)):
            node.verifier.on_pose(u, t + 0.02 * k, (x, 0.0, 1.0), None)
    latest = node.monitor.latest()
    assert sorted(latest) == ["a", "b", "c"] and latest["b"][0] == pytest.approx(t + 0.38)
    assert not node.monitor.veto and node.verifier.poses_received == 60
    node.verifier.on_pose("b", t + 0.4, (0.3, 0.0, 1.0), None)
    assert node.monitor.veto  # raised inside the pose callback, not at the next timer tick
    assert {a["constraint"] for a in node.verifier.state.active} >= {"min_separation"}
    node.destroy_node()


def test_bag_loop_resets_on_the_next_vehicle_s_pose_going_back_too(ctx):
    node = _node(ctx, "sv_loop")
    t = time.time()
    node.verifier.on_pose("a", t, (0.0, 0.0, 1.0), None)
    node.verifier.on_pose("b", t, (2.0, 0.0, 1.0), None)
    node.verifier.on_pose("a", t - 30.0, (1.0, 0.0, 1.0), None)  # stamps 30 s back: the bag looped, or a rebooted
    assert node.verifier.swarm.resets == 0
    node.verifier.on_pose("b", t - 30.0, (3.0, 0.0, 1.0), None)  # b's too: the bag looped; a's pose starts the run
    assert node.verifier.swarm.resets == 1
    assert {u: s[1] for u, s in node.monitor.latest().items()} == {"a": 1.0, "b": 3.0}
    node.destroy_node()


def test_a_silent_vehicle_is_checked_from_the_others_poses_when_the_timer_is_late(ctx):
    """No executor spins here, so the check timer never fires (as when rclpy's EventsExecutor holds it back):
    the poses of the vehicles still reporting run the overdue full check, and a's silence raises the veto."""
    from rclpy.time import Time
    node = _node(ctx, "sv_late_timer", use_sim_time=True, stale_timeout_s=1.0, check_rate_hz=500.0,
                 min_separation_m=0.1)
    clock = node.get_clock()
    assert clock.ros_time_is_active
    raised_at = None
    try:
        for k in range(60):  # 3 s at 20 Hz; a goes silent after 1 s
            t = 100.0 + 0.05 * k
            clock.set_ros_time_override(Time(nanoseconds=round(t * 1e9)))
            for u, x in (("a", 0.0), ("b", 5.0), ("c", -5.0)):
                if u != "a" or t < 101.0:
                    node.verifier.on_pose(u, t, (x, 0.0, 10.0), (0.0, 0.0, 0.0))
            if raised_at is None and node.monitor.veto:
                raised_at = t
            time.sleep(0.003)  # longer than the 2 ms check period: each step's first pose finds a check due
        stale = [a for a in node.verifier.state.active if a["constraint"] == "stale_data"]
        assert stale and stale[0]["uavs"] == ["a"]
        # a's last pose at 100.95 s: stale once the clock is past 101.95 s, vetoed at the next 50 ms step
        assert raised_at == pytest.approx(102.0)
    finally:
        node.destroy_node()
