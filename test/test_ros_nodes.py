"""The live nodes in one process: unknown parameters, clock jumps, segment hand-over, executors, the
simulator's playback order and the demo's mission file (their ROS-free core: test_live_core.py)."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from uav_debate_eval.core.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


# -- parameter files ------------------------------------------------------------------------------------------

def test_live_command_rejects_unknown_parameters(tmp_path: Path, capsys, ros_env):
    from uav_debate_eval.cli import main
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"dsl_builder": {"ros__parameters": {"windw_s": 5.0}}}))
    assert main(["live", "--config", str(path), "--out", str(tmp_path / "out"), "--duration", "0.1"]) == 2
    assert "dsl_builder: unknown parameters ['windw_s']" in capsys.readouterr().err


def test_live_command_rejects_unknown_parameters_of_the_verifiers_own_process(tmp_path: Path, capsys, ros_env):
    """The verifier runs in a process of its own under `live` (issue 32) and still refuses a typo, exit 2."""
    from uav_debate_eval.cli import main
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"safety_verifier": {"ros__parameters": {"chek_rate_hz": 5.0}}}))
    assert main(["live", "--config", str(path), "--out", str(tmp_path / "out"), "--duration", "0.1"]) == 2
    assert "safety_verifier: unknown parameters ['chek_rate_hz']" in capsys.readouterr().err


def test_demo_mission_matches_the_simulated_demo_flight():
    from uav_debate_eval.core.mission_file import load_mission, mission_to_yaml
    from uav_debate_eval.sim.scenarios import simulate
    sim = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())["swarm_sim"]["ros__parameters"]
    result = simulate(sim["scenario"], seed=sim["seed"], faults=sim["faults"])
    assert mission_to_yaml(load_mission(ROOT / "config" / "demo_mission.yaml")) == mission_to_yaml(result.mission)
    assert [f.kind for f in result.truth if f.expect_constraint] == ["near_miss"]


# -- nodes in one process (no spinning needed) --------------------------------------------------------------

@pytest.fixture
def ros_context(ros_env):
    import rclpy
    rclpy.init(args=[])
    yield
    rclpy.shutdown()


@pytest.mark.ros
def test_backwards_clock_jump_resets_once_and_is_logged_once(ros_context):
    from rclpy.parameter import Parameter

    from uav_debate_eval.nodes.dsl_builder import DslBuilderNode
    node = DslBuilderNode(parameter_overrides=[Parameter("uav_names", value=["a", "b"]),
                                               Parameter("window_s", value=5.0)])
    try:
        for k in range(100):  # 10 s at 10 Hz
            node._on_pose("a", 100.0 + k * 0.1, (0.0, 0.0, 10.0))
            node._on_pose("b", 100.0 + k * 0.1, (3.0, 0.0, 10.0))
        first = node.cutter.on_time(node.swarm.newest_t)  # the first segment opened at the first pose, t=100
        assert (first.t_start, first.t_end) == (100.0, 105.0) and node.cutter.start == pytest.approx(105.0)
        for k in range(20):  # the bag loops: back to t=100
            node._on_pose("a", 100.0 + k * 0.1, (0.0, 0.0, 10.0))
            node._on_pose("b", 100.0 + k * 0.1, (3.0, 0.0, 10.0))
        assert node.swarm.resets == 1 and node.jumps.jumps == 1  # one warning for the whole jump, not per message
        assert node.jumps.last_message.startswith("time jumped backwards (bag or sim loop, now t=100.000)")
        # the open segment was dropped with its samples; the first pose after the jump opened the next one
        assert node.cutter.start == pytest.approx(100.0) and node.cutter.count == 1
        assert len(node.swarm.rings["a"]) == 20
    finally:
        node.destroy_node()


@pytest.mark.ros
def test_builder_closes_the_last_segment_at_the_announced_end_not_before(ros_context):
    """The simulator's end message overtook its last poses (a busy machine): the last segment still ends at the
    announced stamp, with those poses in it, once they have arrived."""
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from uav_debate_eval.live.segments import end_message
    from uav_debate_eval.nodes.dsl_builder import DslBuilderNode
    node = DslBuilderNode(parameter_overrides=[Parameter("uav_names", value=["a", "b"]),
                                               Parameter("window_s", value=50.0)])
    closed = []
    node.segment_listeners.append(lambda seg, traj: closed.append((seg, traj)))
    try:
        def poses(k0: int, k1: int) -> None:
            for k in range(k0, k1):
                node._on_pose("a", 100.0 + k * 0.1, (0.0, 0.0, 10.0))
                node._on_pose("b", 100.0 + k * 0.1, (3.0, 0.0, 10.0))
            node._on_timer()

        poses(0, 1)  # the timer sees the stream start
        poses(1, 81)  # up to t=108.0
        node._on_flight_end(String(data=end_message(110.0)))
        assert not closed and node.cutter.end_t == 110.0
        poses(81, 101)  # the rest, up to t=110.0
        assert [(seg.reason, seg.t_start, seg.t_end) for seg, _ in closed] == [("end", 100.0, pytest.approx(110.0))]
        t = closed[0][1].tracks["a"].t  # the poses after the announcement are in it
        assert len(t) == 101 and t[-1] - t[0] == pytest.approx(10.0)
    finally:
        node.destroy_node()


@pytest.mark.ros
def test_builder_hands_segments_to_an_in_process_panel(ros_context, tmp_path: Path):
    from rclpy.parameter import Parameter

    from uav_debate_eval.nodes.debate_panel import DebatePanelNode
    from uav_debate_eval.nodes.dsl_builder import DslBuilderNode
    builder = DslBuilderNode(parameter_overrides=[Parameter("uav_names", value=["a", "b"]),
                                                  Parameter("window_s", value=5.0)])
    panel = DebatePanelNode(builder=builder, parameter_overrides=[Parameter("output_dir", value=str(tmp_path))])
    got = []
    panel.submit = lambda *args: got.append(args)  # the evaluation itself is the pipeline's business
    try:
        assert panel.swarm is builder.swarm and panel.poses is builder.poses  # no subscription of its own
        for k in range(61):
            builder._on_pose("a", k * 0.1, (0.0, 0.0, 10.0))
            builder._on_pose("b", k * 0.1, (3.0, 0.0, 10.0))
            builder._emit(builder.cutter.on_time(builder.swarm.newest_t))
        assert len(got) == 1
        seg_id, t0, t1, reason, traj, origin = got[0]
        assert (seg_id, t0, t1, reason, origin) == ("S1", 0.0, 5.0, "window", None)
        assert traj.uav_ids == ["a", "b"] and traj.tracks["a"].t[-1] == pytest.approx(5.0)
    finally:
        panel.destroy_node()
        builder.destroy_node()


def _thread_cpu_s(name: str) -> float:
    """CPU seconds (user + system) the live thread called `name` has used so far (Linux /proc)."""
    import threading

    tid = next(t.native_id for t in threading.enumerate() if t.name == name)
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.ros
def test_a_waiting_trigger_holds_up_no_panel_callback_and_the_panel_thread_idles(ros_context, tmp_path: Path):
    """The trigger waits 2 s for its evaluation while status messages arrive at 50 Hz: the panel keeps taking
    them, and its thread sleeps between them. (On a MultiThreadedExecutor the panel's thread spun and held the
    GIL; in `live` the verifier's pose callbacks then stalled for up to 2 s.)"""
    from concurrent.futures import Future

    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger

    from uav_debate_eval.nodes.debate_panel import DebatePanelNode
    from uav_debate_eval.nodes.dsl_builder import DslBuilderNode
    from uav_debate_eval.nodes.executors import spin_nodes
    from uav_debate_eval.nodes.topics import STATUS_TOPIC, TRIGGER_SERVICE

    builder = DslBuilderNode(parameter_overrides=[Parameter("uav_names", value=["a", "b"])])
    panel = DebatePanelNode(builder=builder, parameter_overrides=[Parameter("output_dir", value=str(tmp_path))])
    for k in range(20):
        builder._on_pose("a", k * 0.1, (0.0, 0.0, 10.0))
        builder._on_pose("b", k * 0.1, (3.0, 0.0, 10.0))
    statuses: list[float] = []
    on_status = panel.vetoes.on_status
    panel.vetoes.on_status = lambda *args: (statuses.append(time.monotonic()), on_status(*args))
    evaluation: Future = Future()
    panel.submit = lambda *args: evaluation
    feeder = Node("status_feeder")
    pub = feeder.create_publisher(DiagnosticArray, STATUS_TOPIC, 10)
    status = DiagnosticArray(status=[DiagnosticStatus(name="safety_verifier: min_separation", level=b"\x00")])
    feeder.create_timer(0.02, lambda: pub.publish(status))
    client = feeder.create_client(Trigger, TRIGGER_SERVICE)
    calls: list = []
    cpu: dict[str, float] = {}

    def tick() -> None:
        now = time.monotonic()
        if not calls and client.service_is_ready() and len(statuses) > 5:
            calls.append((now, client.call_async(Trigger.Request())))
            cpu["start"] = _thread_cpu_s("spin_debate_panel")
        elif calls and now - calls[0][0] > 2.0 and not evaluation.done():
            cpu["waited"] = _thread_cpu_s("spin_debate_panel") - cpu["start"]
            evaluation.set_result({"verdict": "safe"})

    try:
        spin_nodes([feeder, builder, panel, panel.trigger_server], duration_s=6.0, on_tick=tick)
        assert calls and calls[0][1].done(), "the trigger was not answered"
        assert calls[0][1].result().success and json.loads(calls[0][1].result().message) == {"verdict": "safe"}
        t_call = calls[0][0]
        during = [t for t in statuses if t_call < t < t_call + 2.0]
        assert cpu["waited"] < 0.3, f"the panel's thread used {cpu['waited']:.2f} s of CPU in 2 s of waiting"
        assert len(during) >= 50, f"{len(during)} status messages taken while the trigger waited (50 Hz for 2 s)"
    finally:
        panel.destroy_node()
        builder.destroy_node()
        feeder.destroy_node()


@pytest.mark.ros
def test_builder_starts_the_first_segment_at_the_first_pose_when_its_timer_is_late(ros_context, tmp_path: Path):
    """No timer tick for the first 1.8 s of poses (as an executor under load does): the first window still
    starts at the first pose, so the first segment covers the flight from its start."""
    from rclpy.parameter import Parameter

    from uav_debate_eval.nodes.dsl_builder import DslBuilderNode
    builder = DslBuilderNode(parameter_overrides=[Parameter("uav_names", value=["a", "b"]),
                                                  Parameter("window_s", value=5.0)])
    got: list = []
    builder._emit = lambda seg: got.append(seg) if seg else None
    try:
        for k in range(61):
            builder._on_pose("a", k * 0.1, (0.0, 0.0, 10.0))
            builder._on_pose("b", k * 0.1, (3.0, 0.0, 10.0))
            if k * 0.1 >= 1.8:  # the timer's first tick comes late
                builder._on_timer()
        assert [(s.id, s.t_start, s.t_end) for s in got] == [("S1", 0.0, 5.0)]
    finally:
        builder.destroy_node()


@pytest.mark.ros
def test_builder_takes_the_verifier_poses_and_a_failing_listener_is_detached(ros_context):
    """In `live` the builder listens to the verifier's pose input (one subscription per topic for both); the
    verifier sees every pose first, and a listener that raises is detached without stopping it."""
    from rclpy.parameter import Parameter

    from uav_debate_eval.nodes.dsl_builder import DslBuilderNode
    from uav_debate_eval.nodes.safety_verifier import SafetyVerifierNode

    names = [Parameter("uav_names", value=["a", "b"])]
    verifier = SafetyVerifierNode(parameter_overrides=names)
    builder = DslBuilderNode(pose_source=verifier.poses, parameter_overrides=[Parameter("window_s", value=5.0)])
    seen: list[str] = []

    def failing(uav, t, pos, vel):
        seen.append(uav)
        raise RuntimeError("listener bug")

    try:
        assert builder.poses is verifier.poses and verifier.poses.listeners == [builder._on_pose]
        assert not [s for s in builder.subscriptions if s.topic_name.endswith("/pose")]
        verifier.poses.add_listener(failing)
        for k in range(10):
            verifier.poses.callback("a", k * 0.1, (0.0, 0.0, 10.0), None)
            verifier.poses.callback("b", k * 0.1, (3.0, 0.0, 10.0), None)
        assert seen == ["a"]  # called once, then detached
        assert verifier.poses.listeners == [builder._on_pose]
        assert verifier.verifier.poses_received == 20
        assert len(builder.swarm.rings["a"]) == 10 and len(builder.swarm.rings["b"]) == 10
    finally:
        builder.destroy_node()
        verifier.destroy_node()


# -- report rotation and the simulator's CSV playback ---------------------------------------------------------

def test_csv_ticks_group_by_stamp_in_time_order():
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.sim.playback import csv_ticks
    traj = SwarmTrajectory.from_columns(
        np.array([0.2, 0.0, 0.1, 0.0, 0.2]), np.array(["b", "a", "a", "b", "a"], dtype=object),
        np.arange(15, dtype=float).reshape(5, 3))
    ticks = [(t, [u for u, *_ in batch]) for t, batch in csv_ticks(traj)]
    assert ticks == [(0.0, ["a", "b"]), (0.1, ["a"]), (0.2, ["a", "b"])]
    assert all(math.isfinite(t) for t, _ in ticks)


@pytest.mark.ros
@pytest.mark.parametrize("kind", ["single", "events"])
def test_stopping_the_graph_leaves_no_unretrieved_callback_error(ros_context, capfd, kind):
    """Stopping the graph while callbacks are always in flight: every node's executor finishes its callback
    before it is shut down (rclpy's MultiThreadedExecutor did not wait, and the callbacks then failed with
    "cannot use Destroyable" and "exception was never retrieved")."""
    import gc

    from rclpy.node import Node
    from std_msgs.msg import String

    from uav_debate_eval.nodes.executors import events_executor_available, spin_nodes

    if kind == "events" and not events_executor_available():
        pytest.skip("this rclpy has no EventsExecutor")
    nodes = [Node(f"busy{i}") for i in range(3)]
    received = [0, 0, 0]

    def on_msg(i: int) -> None:
        received[i] += 1
        time.sleep(0.002)

    for i, node in enumerate(nodes):  # a 1 kHz timer feeding a subscription that takes 2 ms
        pub = node.create_publisher(String, "/busy", 10)
        node.create_subscription(String, "/busy", lambda _msg, i=i: on_msg(i), 10)
        node.create_timer(0.001, lambda pub=pub: pub.publish(String(data="x")))
    try:
        spin_nodes(nodes, duration_s=1.0, executor=kind)
    finally:
        for node in nodes:
            node.destroy_node()
    gc.collect()  # rclpy reports an unretrieved error when the task is collected
    err = capfd.readouterr().err
    assert "never retrieved" not in err and "Traceback" not in err
    assert all(n > 100 for n in received), received  # every node's executor ran its callbacks concurrently


def test_a_failing_callback_stops_the_graph_and_is_raised(ros_context):
    """A callback's exception is not lost in its executor's thread: the graph stops and spin_nodes raises it."""
    from rclpy.node import Node

    from uav_debate_eval.nodes.executors import spin_nodes

    node = Node("failing")

    def boom() -> None:
        raise RuntimeError("callback failed on purpose")

    node.create_timer(0.05, boom)
    t0 = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match="on purpose"):
            spin_nodes([node], duration_s=10.0, executor="single")
    finally:
        node.destroy_node()
    assert time.monotonic() - t0 < 5.0


def test_unknown_executor_kind_is_an_input_error():
    from uav_debate_eval.nodes.executors import node_executor

    with pytest.raises(InputError, match="expected one of auto, events, single"):
        node_executor("fast")




@pytest.mark.ros
def test_out_of_range_and_read_only_parameters(ros_context):
    """A value outside its range is a ParameterError (an InputError: one line, exit 2), and a value read only
    at start refuses a later change instead of ignoring it."""
    from rclpy.parameter import Parameter

    from uav_debate_eval.core.errors import ParameterError
    from uav_debate_eval.nodes.dsl_builder import DslBuilderNode

    with pytest.raises(ParameterError, match="parameter window_s"):
        DslBuilderNode(parameter_overrides=[Parameter("window_s", value=-1.0)])
    node = DslBuilderNode(parameter_overrides=[Parameter("window_s", value=5.0)])
    try:
        result = node.set_parameters([Parameter("window_s", value=10.0)])[0]
        assert not result.successful and node.get_parameter("window_s").value == 5.0
        desc = node.describe_parameter("window_s")
        assert desc.read_only and desc.floating_point_range[0].from_value == 0.5
    finally:
        node.destroy_node()


@pytest.mark.ros
def test_topics_follow_the_namespace_and_keep_the_contract_names_without_one(ros_context):
    from uav_debate_eval.nodes.safety_verifier import SafetyVerifierNode

    plain = SafetyVerifierNode()
    spaced = SafetyVerifierNode(node_name="safety_verifier_b", namespace="/fleet_b")
    try:
        assert (plain.veto_pub.topic_name, plain.status_pub.topic_name) == ("/swarm/safety/veto",
                                                                            "/swarm/safety/status")
        assert spaced.veto_pub.topic_name == "/fleet_b/swarm/safety/veto"
    finally:
        plain.destroy_node()
        spaced.destroy_node()


@pytest.mark.ros
def test_simulator_holds_playback_until_every_pose_topic_has_a_subscriber(ros_context):
    """Poses sent before a monitor has matched are lost to it (volatile QoS): with wait_for_subscribers the
    flight starts at its first sample only once each pose topic is subscribed."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from uav_debate_eval.nodes.pose_input import pose_qos
    from uav_debate_eval.nodes.swarm_sim import SwarmSimNode
    from uav_debate_eval.sim.scenarios import simulate

    sim = SwarmSimNode(parameter_overrides=[Parameter("scenario", value="formation"), Parameter("speed", value=1.0),
                                            Parameter("start_delay_s", value=0.0),
                                            Parameter("wait_for_subscribers", value=1),
                                            Parameter("topic_pattern", value=f"/t{os.getpid()}/{{uav}}/pose")])
    listener = Node("listener")
    try:
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            sim._on_timer()
            time.sleep(0.02)
        assert sim.published == 0  # nobody listens yet
        names = list(simulate("formation").traj.uav_ids)
        from geometry_msgs.msg import PoseStamped
        subs = [listener.create_subscription(PoseStamped, f"/t{os.getpid()}/{u}/pose", lambda m: None,
                                             pose_qos("sensor_data")) for u in names[:-1]]
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            sim._on_timer()
            time.sleep(0.02)
        assert sim.published == 0, "one pose topic still has no subscriber"
        subs.append(listener.create_subscription(PoseStamped, f"/t{os.getpid()}/{names[-1]}/pose", lambda m: None,
                                                 pose_qos("sensor_data")))
        end = time.monotonic() + 5.0
        while sim.published == 0 and time.monotonic() < end:
            sim._on_timer()
            time.sleep(0.02)
        assert sim.published >= len(names)
        assert sim._last_t == pytest.approx(sim._t0, abs=0.2)  # it started at the flight's start, not mid-way
        # stamped from when it really started (issue 32: a late start had put the whole stream in the past)
        assert sim.stamp_base + sim._last_t == pytest.approx(time.time(), abs=0.5)
    finally:
        listener.destroy_node()
        sim.destroy_node()


@pytest.mark.ros
def test_simulator_waits_for_the_verifiers_own_subscription_and_says_its_stamps_when_it_starts(ros_context):
    """With wait_for_node the flight starts only once that node subscribes every pose topic (another node's
    subscription is not enough); the latched truth then gives the stamps the flight really has."""
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from uav_debate_eval.nodes.pose_input import pose_qos
    from uav_debate_eval.nodes.swarm_sim import SwarmSimNode
    from uav_debate_eval.nodes.topics import TRUTH_TOPIC, latched

    prefix = f"/w{os.getpid()}"
    sim = SwarmSimNode(parameter_overrides=[Parameter("scenario", value="formation"),
                                            Parameter("start_delay_s", value=0.0),
                                            Parameter("wait_for_node", value=f"verifier{os.getpid()}"),
                                            Parameter("topic_pattern", value=f"{prefix}/{{uav}}/pose")])
    other, verifier = Node(f"builder{os.getpid()}"), Node(f"verifier{os.getpid()}")
    truths: list[dict] = []
    other.create_subscription(String, TRUTH_TOPIC, lambda m: truths.append(json.loads(m.data)), latched())

    def run(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not sim.published:
            sim._on_timer()
            rclpy.spin_once(other, timeout_sec=0.02)

    try:
        for u in sim.uav_ids:
            other.create_subscription(PoseStamped, f"{prefix}/{u}/pose", lambda m: None, pose_qos("sensor_data"))
        run(1.5)
        assert sim.published == 0 and truths == []  # subscribed, but not by the verifier: it waits, says nothing
        waited = time.time()
        for u in sim.uav_ids:
            verifier.create_subscription(PoseStamped, f"{prefix}/{u}/pose", lambda m: None, pose_qos("sensor_data"))
        run(5.0)
        assert sim.published >= len(sim.uav_ids)
        end = time.monotonic() + 3.0
        while not truths and time.monotonic() < end:
            rclpy.spin_once(other, timeout_sec=0.05)
        assert truths and truths[-1]["stamp_base"] == pytest.approx(sim.stamp_base)
        assert sim.stamp_base >= waited - 0.1  # not the stamps it had planned before the wait
    finally:
        other.destroy_node()
        verifier.destroy_node()
        sim.destroy_node()


@pytest.mark.ros
def test_verifier_status_names_a_configured_vehicle_it_never_heard_from(ros_context):
    from rclpy.parameter import Parameter

    from uav_debate_eval.nodes.safety_verifier import SafetyVerifierNode
    node = SafetyVerifierNode(parameter_overrides=[Parameter("uav_names", value=[f"v{os.getpid()}{u}" for u in "abc"]),
                                                   Parameter("stale_timeout_s", value=0.5)])
    sent = []
    node.status_pub.publish = sent.append
    a, b, c = node.poses.uav_names
    try:
        for k in range(11):  # a and b report for 1 s; c never does
            node.verifier.on_pose(a, 100.0 + k * 0.1, (0.0, 0.0, 10.0), None)
            node.verifier.on_pose(b, 100.0 + k * 0.1, (3.0, 0.0, 10.0), None)
        node.verifier.state = node.monitor.update(101.0)
        node._publish_status()
        rows = {s.name: s for s in sent[-1].status}
        assert {kv.key: kv.value for kv in rows["safety/unheard"].values}["uavs"] == c
        assert not node.verifier.state.veto  # named, not vetoed
        node.verifier.on_pose(c, 101.0, (6.0, 0.0, 10.0), None)
        node.verifier.state = node.monitor.update(101.0)
        node._publish_status()
        assert "safety/unheard" not in {s.name for s in sent[-1].status}
    finally:
        node.destroy_node()


@pytest.mark.ros
def test_progress_view_prints_veto_edges_not_the_first_latched_state(ros_context):
    """The monitor's latched 'no veto' at start-up is no edge: 'margins restored' only after a VETO ON."""
    from rich.console import Console
    from std_msgs.msg import Bool

    from uav_debate_eval.nodes.progress import ProgressNode
    console = Console(record=True, width=120)
    node = ProgressNode(console)
    try:
        node._on_veto(Bool(data=False))
        assert "veto off" not in console.export_text(clear=False)
        for value in (True, True, False):
            node._on_veto(Bool(data=value))
        text = console.export_text()
        assert text.count("VETO ON") == 1 and text.count("veto off (margins restored for the hold time)") == 1
        assert text.index("VETO ON") < text.index("veto off")
    finally:
        node.destroy_node()
