"""safety_verifier over real DDS in separate processes: veto rises on a near miss, clears after the hold,
and a late subscriber gets the latest veto from transient-local durability."""

import os
import re
import select
import subprocess
import sys
import textwrap
import time

import pytest

VETO_TOPIC = "/swarm/safety/veto"  # CONTRACT.md §5

pytestmark = [pytest.mark.ros, pytest.mark.slow]

PUBLISHER = textwrap.dedent("""
    import sys, time
    import rclpy
    import rclpy.duration
    from geometry_msgs.msg import PoseStamped
    from rclpy.qos import qos_profile_sensor_data
    far_s, near_s, after_s = (float(v) for v in sys.argv[1:4])
    a, b, c = sys.argv[4:7]
    behind_ns = int(float(sys.argv[7]) * 1e9) if len(sys.argv) > 7 else 0  # stamps this far behind the clock
    rclpy.init()
    node = rclpy.create_node("test_pose_pub")
    pubs = {u: node.create_publisher(PoseStamped, f"/{u}/pose", qos_profile_sensor_data) for u in (a, b, c)}
    time.sleep(1.0)  # discovery
    t0 = time.time()
    phase = None
    while True:
        el = time.time() - t0
        if el > far_s + near_s + after_s:
            break
        near = far_s <= el < far_s + near_s
        stamp = node.get_clock().now() - rclpy.duration.Duration(nanoseconds=behind_ns)
        if phase != near:
            phase = near
            print(("NEAR " if near else "FAR ") + repr(stamp.nanoseconds * 1e-9), flush=True)
        for u, x in ((a, 0.0), (b, 0.3 if near else 2.0), (c, -2.0)):
            m = PoseStamped()
            m.header.stamp = stamp.to_msg()
            m.header.frame_id = "map"
            m.pose.position.x, m.pose.position.z, m.pose.orientation.w = x, 1.0, 1.0
            pubs[u].publish(m)
        time.sleep(0.02)
    node.destroy_node()
    rclpy.shutdown()
""")

SUBSCRIBER = textwrap.dedent("""
    import sys, time
    import rclpy
    from std_msgs.msg import Bool
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    rclpy.init()
    node = rclpy.create_node("test_veto_sub")
    if sys.argv[2] == "gated":  # imports done; subscribe only when told (a late joiner on cue)
        sys.stdin.readline()
    print("START " + repr(time.time()), flush=True)
    node.create_subscription(Bool, sys.argv[1], lambda m: print(f"{time.time()!r} {int(m.data)}", flush=True), latched)
    try:
        while rclpy.ok():
            rclpy.spin_once(node, timeout_sec=0.05)
    except Exception:
        pass
""")


def _env(domain: int) -> dict:
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(domain)
    env["ROS_LOCALHOST_ONLY"] = "1"
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _readline(proc: subprocess.Popen, timeout: float = 30.0) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output from {proc.args} within {timeout} s"
    return proc.stdout.readline()


def _stop_and_read(read: list[subprocess.Popen], procs: list[subprocess.Popen]) -> dict[int, str]:
    """Stop every process still running; the output of those in `read` (the publisher's was read already)."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    return {id(p): p.communicate(timeout=15)[0] for p in read}


def _messages(lines: list[str]) -> list[tuple[float, bool]]:
    return [(float(t), v == "1") for t, v in (ln.split() for ln in lines if ln and ln[0].isdigit())]


def test_veto_rises_clears_after_hold_and_latches_for_late_joiners(tmp_path, ros_domain):
    pub_py, sub_py = tmp_path / "pub.py", tmp_path / "sub.py"
    pub_py.write_text(PUBLISHER)
    sub_py.write_text(SUBSCRIBER)
    env, py = _env(ros_domain), sys.executable
    hold = 0.5
    # names and veto topic unique to this run: other suites' verifiers may share the DDS domain
    uavs = [f"t{os.getpid()}{u}" for u in "abc"]
    veto_topic = f"/t{os.getpid()}/veto"
    # fail-safe warn: these edges are the near miss's; a starved publisher (make test's other worker beside it)
    # would otherwise hold a fail-safe veto for the 60-s stale timeout (test_ros_live covers the fail-safe veto)
    verifier = subprocess.Popen(
        [py, "-m", "uav_debate_eval.nodes.safety_verifier", "--ros-args",
         "-p", f"uav_names:=[{', '.join(uavs)}]", "-p", "min_separation_m:=0.5", "-p", f"hold_time_s:={hold}",
         "-p", "heartbeat_hz:=0.05", "-p", "stale_timeout_s:=60.0", "-p", "fail_safe:=warn",
         "-r", f"{VETO_TOPIC}:={veto_topic}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sub = subprocess.Popen([py, str(sub_py), veto_topic, "now"], env=env, stdout=subprocess.PIPE, text=True)
    late = subprocess.Popen([py, str(sub_py), veto_topic, "gated"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    procs = [verifier, sub, late]
    try:
        sub_lines = [_readline(sub), _readline(sub)]  # START, then the latched False: discovery is done
        assert _messages(sub_lines) and not _messages(sub_lines)[0][1], sub_lines
        far_s, near_s, after_s = 2.0, 3.0, 2.0
        pub = subprocess.Popen([py, str(pub_py), str(far_s), str(near_s), str(after_s), *uavs], env=env,
                               stdout=subprocess.PIPE, text=True)
        procs.append(pub)
        marks = [_readline(pub), _readline(pub)]  # FAR, then NEAR when the break starts
        time.sleep(0.5)  # the veto is up now and stays up for the rest of the near phase
        late.stdin.write("go\n")
        late.stdin.flush()
        marks += pub.communicate(timeout=30)[0].splitlines()
        marks = [(ln.split()[0], float(ln.split()[1])) for ln in marks]
        time.sleep(hold + 1.0)
    finally:
        outs = _stop_and_read([verifier, sub, late], procs)
    verifier_out = outs[id(verifier)]
    assert verifier.returncode == 0, verifier_out
    msgs = _messages(sub_lines + outs[id(sub)].splitlines())
    edges = [(t, v) for k, (t, v) in enumerate(msgs) if k == 0 or v != msgs[k - 1][1]]
    assert [v for _, v in edges] == [False, True, False], (edges, verifier_out)
    rise, fall = edges[1][0], edges[2][0]
    near = next(t for kind, t in marks if kind == "NEAR")
    restored = next(t for kind, t in marks if kind == "FAR" and t > near)
    # semantics here, speed in benchmarks/bench_veto_latency.py: bounds leave room for a loaded machine
    assert 0.0 <= rise - near < 0.5, (rise - near, verifier_out)
    assert hold - 0.05 <= fall - restored < hold + 0.6, (fall - restored, verifier_out)
    assert "VETO at" in verifier_out and f"min_separation {uavs[0]},{uavs[1]}" in verifier_out
    # late joiner: subscribed while the veto was up, no change and no heartbeat (every 20 s) due -> the latched True
    late_lines = outs[id(late)].splitlines()
    late_start = float(late_lines[0].split()[1])
    late_msgs = _messages(late_lines)
    assert rise < late_start < fall, (late_start, edges)
    assert late_msgs and late_msgs[0][1] is True and late_msgs[0][0] < fall, (late_lines, edges, marks)


def test_status_markers_and_sim_time_clock_jump_in_process(ros_domain):
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock
    from visualization_msgs.msg import MarkerArray

    from uav_debate_eval.nodes.safety_verifier import SafetyVerifierNode
    from uav_debate_eval.nodes.topics import MARKERS_TOPIC, STATUS_TOPIC

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=ros_domain)
    try:
        iso = f"/t{os.getpid()}"  # remapped: other suites' nodes may share the DDS domain
        remap = ["--ros-args", "-r", f"{STATUS_TOPIC}:={iso}/status", "-r", f"{MARKERS_TOPIC}:={iso}/markers",
                 "-r", f"/clock:={iso}/clock"]
        node = SafetyVerifierNode("sv_test", namespace="t", context=ctx, cli_args=remap, parameter_overrides=[
            Parameter("use_sim_time", value=True), Parameter("uav_names", value=["a", "b"]),
            Parameter("min_separation_m", value=0.5), Parameter("geofence_min", value=[-5, -5, 0]),
            Parameter("geofence_max", value=[5, 5, 4]), Parameter("stale_timeout_s", value=1.0)])
        aux = rclpy.create_node("sv_aux", context=ctx)
        clock = aux.create_publisher(Clock, f"{iso}/clock", 10)
        status, markers = [], []
        aux.create_subscription(DiagnosticArray, f"{iso}/status", status.append, 10)
        aux.create_subscription(MarkerArray, f"{iso}/markers", markers.append, 10)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        ex.add_node(aux)

        def at(t: float) -> None:
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = int(t), int(round((t % 1) * 1e9))
            end = time.time() + 5.0
            while abs(node.get_clock().now().nanoseconds * 1e-9 - t) > 1e-6 and time.time() < end:
                clock.publish(msg)
                ex.spin_once(timeout_sec=0.02)

        at(100.0)
        node.verifier.on_pose("a", 100.0, (0.0, 0.0, 1.0), None)
        node.verifier.on_pose("b", 100.0, (0.3, 0.0, 1.0), None)  # breaks separation: checked on arrival
        assert node.monitor.veto and node.verifier.state.active[0]["uavs"] == ["a", "b"]
        end = time.time() + 5.0
        while (not status or not markers) and time.time() < end:
            ex.spin_once(timeout_sec=0.05)
        by_name = {s.name: s for s in status[-1].status}
        sep = by_name["safety/min_separation"]
        kv = {k.key: k.value for k in sep.values}
        assert sep.level == DiagnosticStatus.ERROR and kv["uavs"] == "a,b" and float(kv["value"]) == 0.3
        assert float(kv["limit"]) == 0.5 and float(kv["t"]) == 100.0
        assert by_name["safety/geofence"].level == DiagnosticStatus.OK
        assert by_name["safety/veto"].level == DiagnosticStatus.ERROR
        m = {mk.ns: mk for mk in markers[-1].markers}
        assert len(m["geofence"].points) == 24 and len(m["violating_pairs"].points) == 2
        # a bag loop: sim time jumps back -> state reset once, veto dropped
        at(10.0)
        node.verifier.check()
        assert node.monitor.resets == 1 and not node.monitor.veto
        node.verifier.check()
        assert node.monitor.resets == 1
        ex.shutdown()
        node.destroy_node()
        aux.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)


def test_veto_rises_on_a_stream_stamped_seconds_behind_the_verifiers_clock(tmp_path, ros_domain):
    """Issue 32's miss, over DDS: the poses' stamps sit 2.5 s behind the verifier's clock (the demo's simulator
    started late; a remote computer's clock). Before, every vehicle looked silent past the 0.5-s stale timeout,
    the flight was taken for over and the near miss never raised the veto; the verifier now checks in the
    stream's time."""
    pub_py, sub_py = tmp_path / "pub.py", tmp_path / "sub.py"
    pub_py.write_text(PUBLISHER)
    sub_py.write_text(SUBSCRIBER)
    env, py = _env(ros_domain), sys.executable
    uavs = [f"t{os.getpid()}{u}" for u in "abc"]
    veto_topic = f"/t{os.getpid()}/veto"
    verifier = subprocess.Popen(
        [py, "-m", "uav_debate_eval.nodes.safety_verifier", "--ros-args",
         "-p", f"uav_names:=[{', '.join(uavs)}]", "-p", "min_separation_m:=0.5", "-p", "hold_time_s:=0.5",
         "-p", "stale_timeout_s:=0.5", "-r", f"{VETO_TOPIC}:={veto_topic}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sub = subprocess.Popen([py, str(sub_py), veto_topic, "now"], env=env, stdout=subprocess.PIPE, text=True)
    procs = [verifier, sub]
    try:
        sub_lines = [_readline(sub), _readline(sub)]  # START, then the latched False
        pub = subprocess.Popen([py, str(pub_py), "2.0", "2.0", "1.0", *uavs, "2.5"], env=env,
                               stdout=subprocess.PIPE, text=True)
        procs.append(pub)
        marks = pub.communicate(timeout=30)[0].splitlines()
        time.sleep(1.0)
    finally:
        outs = _stop_and_read([verifier, sub], procs)
    verifier_out = outs[id(verifier)]
    msgs = _messages(sub_lines + outs[id(sub)].splitlines())
    rises = [t for k, (t, v) in enumerate(msgs) if v and (k == 0 or not msgs[k - 1][1])]
    near = next(float(ln.split()[1]) for ln in marks if ln.startswith("NEAR")) + 2.5  # the wall clock then
    lags = [float(x) for x in re.findall(r"verifier_degraded\s+([\d.]+)/", verifier_out)]
    if not lags:  # the verifier kept up: the near miss itself raised the veto
        assert rises and 0.0 <= rises[0] - near < 0.5, (msgs, marks, verifier_out)
        assert f"min_separation {uavs[0]},{uavs[1]}" in verifier_out
        return
    # The suite's load on both cores starved the verifier for a moment (a `lag` of 0.3 s, seen in 2 of 4 full runs
    # on a slow day): its fail-safe veto was up at the near miss instead. Never the 2.5-s offset taken for lag (the
    # miss this test guards against), and the veto stands when the pair is close.
    assert all(lag < 1.0 for lag in lags), (lags, verifier_out)
    at_near = [v for t, v in msgs if t <= near + 0.45]
    assert at_near and at_near[-1], (msgs, marks, verifier_out)
