"""The live nodes' own logic, in one process: segment cutting, the live veto override, parameter files,
clock jumps, report rotation, the simulator's playback order and the demo's mission file."""

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


# -- segment cutter (pure logic) ---------------------------------------------------------------------------

def test_window_mode_cuts_back_to_back_windows():
    from uav_debate_eval.nodes.dsl_builder import SegmentCutter
    cut = SegmentCutter("window", window_s=10.0, min_segment_s=2.0, max_segment_s=60.0)
    segs = [s for t in np.arange(0.0, 35.01, 0.5) if (s := cut.on_time(float(t)))]
    assert [(s.id, s.t_start, s.t_end, s.reason) for s in segs] == [
        ("S1", 0.0, 10.0, "window"), ("S2", 10.0, 20.0, "window"), ("S3", 20.0, 30.0, "window")]
    idle = cut.on_idle(35.0)
    assert (idle.id, idle.t_start, idle.t_end, idle.reason) == ("S4", 30.0, 35.0, "idle")
    assert cut.on_idle(36.0) is None  # shorter than min_segment_s: merged into the next one


def test_veto_mode_closes_on_the_falling_edge_and_at_max_length():
    from uav_debate_eval.nodes.dsl_builder import SegmentCutter
    cut = SegmentCutter("veto", window_s=30.0, min_segment_s=2.0, max_segment_s=20.0)
    assert cut.on_time(0.0) is None
    assert cut.on_veto(True, 5.0) is None  # rising edge: the episode is still going on
    seg = cut.on_veto(False, 7.5)
    assert (seg.t_start, seg.t_end, seg.reason) == (0.0, 7.5, "veto")
    assert cut.on_veto(False, 8.0) is None  # no edge
    assert cut.on_time(27.4) is None
    seg = cut.on_time(27.5)
    assert (seg.t_start, seg.t_end, seg.reason) == (7.5, 27.5, "max")


def test_cutter_reset_forgets_the_open_segment():
    from uav_debate_eval.nodes.dsl_builder import SegmentCutter
    cut = SegmentCutter("window", 10.0, 2.0, 60.0)
    cut.on_time(100.0)
    cut.reset()
    assert cut.on_time(3.0) is None and cut.start == 3.0
    with pytest.raises(ValueError, match="segment_mode"):
        SegmentCutter("hourly", 10.0, 2.0, 60.0)


# -- live veto override --------------------------------------------------------------------------------------

def _report(label="safe"):
    return {"verdict": {"label": label, "vetoed": False, "summary": "panel says fine"}, "violations": []}


def test_live_veto_overrides_the_panel_and_adds_the_evidence():
    from uav_debate_eval.nodes.debate_panel import VetoEpisode, apply_live_veto
    ev = {"name": "safety/min_separation", "level": 2, "message": "violated by uav1, uav2",
          "values": {"uavs": "uav1,uav2", "value": 0.31, "limit": 0.5, "t": 14.2}}
    episode = VetoEpisode(14.0, 16.0, 15.0, [ev])
    report = _report("safe")
    assert apply_live_veto(report, [episode], 10.0, 20.0) is True
    assert report["verdict"]["label"] == "risky" and report["verdict"]["vetoed"] is True
    assert report["verdict"]["summary"].startswith("Live safety veto during this segment overrides the panel's 'safe'")
    assert report["violations"] == [{"constraint": "min_separation", "t_start": 14.2, "t_end": 14.2,
                                     "uavs": ["uav1", "uav2"], "worst_value": 0.31, "limit": 0.5,
                                     "detail": "live veto: violated by uav1, uav2"}]
    assert report["live"]["override"] is True and report["live"]["veto_episodes"][0]["t_on"] == 14.0


def test_hold_tail_alone_does_not_veto_the_next_segment():
    from uav_debate_eval.nodes.debate_panel import VetoEpisode, apply_live_veto
    episode = VetoEpisode(14.0, t_off=21.0, t_violating=20.0)  # violation until 20, veto held until 21
    report = _report("safe")
    assert apply_live_veto(report, [episode], 20.5, 30.0) is False
    assert report["verdict"] == {"label": "safe", "vetoed": False, "summary": "panel says fine"}
    assert apply_live_veto(_report(), [VetoEpisode(25.0)], 20.5, 30.0) is True  # still open: overlaps


def test_offline_violation_is_not_duplicated():
    from uav_debate_eval.nodes.debate_panel import VetoEpisode, apply_live_veto
    report = _report("risky")
    report["violations"] = [{"constraint": "min_separation", "t_start": 14.1, "t_end": 15.9, "uavs": ["uav1", "uav2"],
                             "worst_value": 0.3, "limit": 0.5}]
    ev = {"name": "safety/min_separation", "level": 2, "message": "m", "values": {"uavs": "uav1,uav2"}}
    apply_live_veto(report, [VetoEpisode(14.0, 17.0, 16.0, [ev])], 0.0, 30.0)
    assert len(report["violations"]) == 1
    assert report["live"]["override"] is False  # it was risky already
    assert report["verdict"]["summary"] == "panel says fine"


# -- parameter files ------------------------------------------------------------------------------------------

def test_params_file_merges_wildcards_and_namespaces(tmp_path: Path):
    from uav_debate_eval.nodes.live import read_params_file
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({
        "/**": {"ros__parameters": {"pose_type": "Odometry", "pose_qos": "reliable"}},
        "/ns/dsl_builder": {"ros__parameters": {"window_s": 5.0, "pose_qos": "sensor_data"}}}))
    params = read_params_file(path)
    assert params["dsl_builder"] == {"pose_type": "Odometry", "pose_qos": "sensor_data", "window_s": 5.0}
    assert params["**"] == {"pose_type": "Odometry", "pose_qos": "reliable"}
    path.write_text("dsl_builder:\n  window_s: 5\n")
    with pytest.raises(InputError, match="dsl_builder: expected a 'ros__parameters' mapping"):
        read_params_file(path)


def test_live_command_rejects_unknown_parameters(tmp_path: Path, capsys):
    from uav_debate_eval.cli import main
    os.environ["ROS_DOMAIN_ID"] = str(150 + os.getpid() % 50)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"dsl_builder": {"ros__parameters": {"windw_s": 5.0}}}))
    assert main(["live", "--config", str(path), "--out", str(tmp_path / "out"), "--duration", "0.1"]) == 2
    assert "dsl_builder: unknown parameters ['windw_s']" in capsys.readouterr().err


def test_mission_names_resolve_to_packaged_files():
    from uav_debate_eval.nodes.live import find_config, mission_from_param
    assert mission_from_param("").constraints.min_separation_m == 0.5  # config/default_mission.yaml
    assert mission_from_param("demo_mission.yaml").uavs == ["uav1", "uav2", "uav3", "uav4", "uav5"]
    with pytest.raises(InputError, match="nope.yaml: config file not found"):
        find_config("nope.yaml")


def test_demo_mission_matches_the_simulated_demo_flight():
    from uav_debate_eval.core.mission import load_mission, mission_to_yaml
    from uav_debate_eval.sim.scenarios import simulate
    sim = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())["swarm_sim"]["ros__parameters"]
    result = simulate(sim["scenario"], seed=sim["seed"], faults=sim["faults"])
    assert mission_to_yaml(load_mission(ROOT / "config" / "demo_mission.yaml")) == mission_to_yaml(result.mission)
    assert [f.kind for f in result.truth if f.expect_constraint] == ["near_miss"]


# -- nodes in one process (no spinning needed) --------------------------------------------------------------

@pytest.fixture
def ros_context():
    import rclpy
    os.environ["ROS_DOMAIN_ID"] = str(150 + os.getpid() % 50)
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
        node.cutter.on_time(node.swarm.newest_t)
        assert node.cutter.start == pytest.approx(109.9)
        for k in range(20):  # the bag loops: back to t=100
            node._on_pose("a", 100.0 + k * 0.1, (0.0, 0.0, 10.0))
            node._on_pose("b", 100.0 + k * 0.1, (3.0, 0.0, 10.0))
        assert node.swarm.resets == 1 and node.jumps.jumps == 1  # one warning for the whole jump, not per message
        assert node.jumps.last_message.startswith("time jumped backwards (bag or sim loop, now t=100.000)")
        assert node.cutter.start is None  # the open segment was dropped with its samples
        assert len(node.swarm.rings["a"]) == 20
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
        assert panel.swarm is builder.swarm and not hasattr(panel, "poses")
        for k in range(61):
            builder._on_pose("a", k * 0.1, (0.0, 0.0, 10.0))
            builder._on_pose("b", k * 0.1, (3.0, 0.0, 10.0))
            builder._emit(builder.cutter.on_time(builder.swarm.newest_t))
        assert len(got) == 1
        seg_id, t0, t1, reason, traj = got[0]
        assert (seg_id, t0, t1, reason) == ("S1", 0.0, 5.0, "window")
        assert traj.uav_ids == ["a", "b"] and traj.tracks["a"].t[-1] == pytest.approx(5.0)
    finally:
        panel.destroy_node()
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
        assert verifier.poses_received == 20
        assert len(builder.swarm.rings["a"]) == 10 and len(builder.swarm.rings["b"]) == 10
    finally:
        builder.destroy_node()
        verifier.destroy_node()


# -- report rotation and the simulator's CSV playback ---------------------------------------------------------

def test_write_rotated_keeps_the_newest_and_points_latest(tmp_path: Path, monkeypatch):
    import uav_debate_eval.report.writer as writer
    from uav_debate_eval.nodes.debate_panel import write_rotated

    def fake_write(evaluation, out):
        Path(out).mkdir(parents=True)
        (Path(out) / "report.json").write_text(json.dumps(evaluation))
    monkeypatch.setattr(writer, "write_reports", fake_write)
    for k in range(1, 6):
        write_rotated({"k": k}, tmp_path, f"{k:05d}_S{k}", keep=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00003_S3", "00004_S4", "00005_S5", "latest"]
    assert json.loads((tmp_path / "latest" / "report.json").read_text()) == {"k": 5}


def test_csv_ticks_group_by_stamp_in_time_order():
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.nodes.swarm_sim import csv_ticks
    traj = SwarmTrajectory.from_columns(
        np.array([0.2, 0.0, 0.1, 0.0, 0.2]), np.array(["b", "a", "a", "b", "a"], dtype=object),
        np.arange(15, dtype=float).reshape(5, 3))
    ticks = [(t, [u for u, *_ in batch]) for t, batch in csv_ticks(traj)]
    assert ticks == [(0.0, ["a", "b"]), (0.1, ["a"]), (0.2, ["a", "b"])]
    assert all(math.isfinite(t) for t, _ in ticks)


def test_llm_down_gives_a_rules_report_that_says_why(tmp_path: Path):
    """The panel's worker side on a real (small) flight: the OpenAI server is unreachable."""
    import socket

    from uav_debate_eval.nodes.debate_panel import PanelJob, PanelSettings, VetoEpisode, evaluate_segment, validate
    from uav_debate_eval.sim.scenarios import simulate

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sim = simulate("formation", seed=1, duration_s=12.0)
    settings = PanelSettings(backend="openai", model="gpt-test", base_url=f"http://127.0.0.1:{port}/v1",
                             output_dir=str(tmp_path), keep_reports=2)
    episode = VetoEpisode(3.0, 4.5, 3.5, [{"name": "safety/stale_data", "level": 2, "message": "uav2 silent",
                                           "values": {"uavs": "uav2", "value": 0.7, "limit": 0.5, "t": 3.5}}])
    job = PanelJob(settings, sim.mission, sim.traj, "S1", 0.0, 12.0, "window", [episode], 7, [], 0)
    os.environ.setdefault("OPENAI_API_KEY", "sk-test")
    result = evaluate_segment(job)
    report = result["report"]
    assert validate(report) == []
    assert report["debate"]["backend"] == "rules"
    assert report["live"]["llm_fallback"] and "openai" in report["live"]["llm_fallback"]
    assert report["verdict"]["summary"].startswith("[")
    assert report["verdict"]["label"] == "risky" and report["verdict"]["vetoed"] is True  # the live stale veto
    assert [v["constraint"] for v in report["violations"]] == ["stale_data"]
    assert result["path"] == str(tmp_path / "00007_S1") and (tmp_path / "00007_S1" / "report.json").is_file()


def test_worker_processes_run_below_the_verifier_priority():
    """DSL and debate work runs in a niced worker, so a saturated CPU serves the safety verifier first."""
    import os

    from uav_debate_eval.nodes.live import WORKER_NICENESS, stop_pool, worker_pool

    pool = worker_pool()
    try:
        assert pool.submit(os.nice, 0).result(timeout=60) == os.nice(0) + WORKER_NICENESS
    finally:
        stop_pool(pool)


@pytest.mark.ros
@pytest.mark.parametrize("kind", ["single", "events"])
def test_stopping_the_graph_leaves_no_unretrieved_callback_error(ros_context, capfd, kind):
    """Stopping the graph while callbacks are always in flight: every node's executor finishes its callback
    before it is shut down (rclpy's MultiThreadedExecutor did not wait, and the callbacks then failed with
    "cannot use Destroyable" and "exception was never retrieved")."""
    import gc

    from rclpy.node import Node
    from std_msgs.msg import String

    from uav_debate_eval.nodes.live import events_executor_available, spin_nodes

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

    from uav_debate_eval.nodes.live import spin_nodes

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
    from uav_debate_eval.nodes.live import node_executor

    with pytest.raises(InputError, match="expected one of auto, events, single"):
        node_executor("fast")


def test_malloc_settings_reach_the_worker_processes(monkeypatch):
    """The monitor's heap settings are in the environment, so the spawned workers start with them too."""
    from uav_debate_eval.nodes import live

    if live._glibc() is None:
        pytest.skip("not glibc")
    for _param, name, _value in live.MALLOC_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    live.tune_malloc()
    pool = live.worker_pool()
    try:
        got = pool.submit(os.getenv, "MALLOC_ARENA_MAX").result(timeout=60)
    finally:
        live.stop_pool(pool)
    assert got == "2"


def _running(pid: int) -> bool:
    try:  # a zombie (exited, not yet reaped by whoever adopted it) is not running
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_worker_process_exits_when_its_node_is_killed():
    """A node killed outright (test_ros_live kills the panel) must not leave its ~170 MB worker behind."""
    import signal
    import subprocess
    import sys
    import time

    code = ("import os, sys\nfrom uav_debate_eval.nodes.live import worker_pool\n"
            "print(worker_pool().submit(os.getpid).result(timeout=120), flush=True)\nsys.stdin.read()\n")
    node = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(node.stdout.readline())
        node.kill()
        node.wait()
        end = time.monotonic() + 20
        while _running(worker) and time.monotonic() < end:
            time.sleep(0.2)
        assert not _running(worker)
    finally:
        node.kill()
        node.wait()
        if worker is not None and _running(worker):
            os.kill(worker, signal.SIGKILL)
