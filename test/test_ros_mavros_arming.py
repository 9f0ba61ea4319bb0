"""MAVROS parked pairs over real DDS in separate processes: two vehicles stand 1.5 m apart (a 3-m separation limit)
and publish as MAVROS does (`<ns>/mavros/local_position/pose`, and `<ns>/mavros/state` reliable and transient local
with every heartbeat). Disarmed they are no pair: the verifier raises no veto; once one arms it does (issue 35's
parked pairs, live as offline; before, a live MAVROS swarm standing on its pads was vetoed from its first pose)."""

import os
import subprocess
import sys
import textwrap
import time

import pytest
from test_ros_safety import SUBSCRIBER, _env, _messages, _readline, _stop_and_read

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: Two vehicles (argv[1:3]) publishing as MAVROS does: state latched (reliable, transient local), poses best effort.
PRELUDE = textwrap.dedent("""
    import math, sys, time
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from mavros_msgs.msg import State
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
    from sensor_msgs.msg import NavSatFix
    uavs = sys.argv[1:3]
    state_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)
    rclpy.init()
    node = rclpy.create_node("test_mavros_pub")
    states = {u: node.create_publisher(State, f"/{u}/mavros/state", state_qos) for u in uavs}
    poses = {u: node.create_publisher(PoseStamped, f"/{u}/mavros/local_position/pose", qos_profile_sensor_data)
             for u in uavs}

    def publish_poses():
        # the two vehicles standing 1.5 m apart (x 0 and 1.5)
        for u, x in zip(uavs, (0.0, 1.5)):
            m = PoseStamped()
            m.header.stamp = node.get_clock().now().to_msg()
            m.header.frame_id = "map"
            m.pose.position.x, m.pose.orientation.w = x, 1.0
            poses[u].publish(m)
""")
PUBLISHER = PRELUDE + textwrap.dedent("""
    parked_s, armed_s = (float(v) for v in sys.argv[3:5])

    def state(u, armed):
        m = State(connected=True, armed=armed, mode="GUIDED" if armed else "STABILIZE")
        m.header.stamp = node.get_clock().now().to_msg()
        states[u].publish(m)

    for u in uavs:
        state(u, False)
    while any(p.get_subscription_count() == 0 for p in (*states.values(), *poses.values())):
        time.sleep(0.05)
    time.sleep(1.0)  # the latched states are in before the first pose
    print("PARKED " + repr(time.time()), flush=True)
    t0, beat, armed = time.time(), 0.0, False
    while (el := time.time() - t0) < parked_s + armed_s:
        if el >= parked_s and not armed:
            armed = True
            state(uavs[0], True)
            print("ARMED " + repr(time.time()), flush=True)
        if el >= beat:  # MAVROS repeats the state with each heartbeat (1 Hz)
            beat += 1.0
            state(uavs[0], armed)
            state(uavs[1], False)
        publish_poses()
        time.sleep(0.05)
    node.destroy_node()
    rclpy.shutdown()
""")


def _fly(tmp_path, domain: int, script: str, args: list[str], *params: str):
    """The verifier on two MAVROS vehicles (3-m separation; `params`: more of its parameters), a veto subscriber and
    `script` publishing (argv: the two vehicles, then `args`): (veto messages, the verifier's log, the marks the
    publisher printed: word -> time)."""
    pytest.importorskip("mavros_msgs.msg", reason="mavros_msgs not generated (make setup)")
    pub_py, sub_py = tmp_path / "pub.py", tmp_path / "sub.py"
    pub_py.write_text(script)
    sub_py.write_text(SUBSCRIBER)
    env, py = _env(domain), sys.executable
    uavs = [f"m{os.getpid()}{u}" for u in "ab"]  # unique names and veto topic: other suites may share the domain
    veto_topic = f"/m{os.getpid()}/veto"
    verifier = subprocess.Popen(
        [py, "-m", "uav_debate_eval.nodes.safety_verifier", "--ros-args",
         "-p", f"uav_names:=[{', '.join(uavs)}]", "-p", "pose_topic_pattern:=/{uav}/mavros/local_position/pose",
         "-p", "min_separation_m:=3.0", "-p", "heartbeat_hz:=0.05", "-p", "stale_timeout_s:=60.0",
         "-p", "fail_safe:=warn", *params, "-r", f"/swarm/safety/veto:={veto_topic}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sub = subprocess.Popen([py, str(sub_py), veto_topic, "now"], env=env, stdout=subprocess.PIPE, text=True)
    procs = [verifier, sub]
    try:
        sub_lines = [_readline(sub), _readline(sub)]  # START, then the latched False: discovery is done
        pub = subprocess.Popen([py, str(pub_py), *uavs, *args], env=env, stdout=subprocess.PIPE, text=True)
        procs.append(pub)
        marks = dict((ln.split()[0], float(ln.split()[1])) for ln in pub.communicate(timeout=60)[0].splitlines())
        time.sleep(0.5)
    finally:
        outs = _stop_and_read([verifier, sub], procs)
    assert verifier.returncode == 0, outs[id(verifier)]
    return _messages(sub_lines + outs[id(sub)].splitlines()), outs[id(verifier)], marks, uavs


def test_parked_mavros_vehicles_raise_no_veto_until_one_arms(tmp_path, ros_domain):
    msgs, verifier_out, marks, uavs = _fly(tmp_path, ros_domain, PUBLISHER, ["4.0", "3.0"])
    assert set(marks) == {"PARKED", "ARMED"}, marks
    edges = [(t, v) for k, (t, v) in enumerate(msgs) if k == 0 or v != msgs[k - 1][1]]
    assert [v for _, v in edges] == [False, True], (edges, verifier_out)
    assert 0.0 <= edges[1][0] - marks["ARMED"] < 2.0, (edges, marks, verifier_out)
    assert f"min_separation {uavs[0]},{uavs[1]}" in verifier_out


FIX_PUBLISHER = PRELUDE + textwrap.dedent("""
    seconds = float(sys.argv[3])
    fixes = {u: node.create_publisher(NavSatFix, f"/{u}/mavros/global_position/global", qos_profile_sensor_data)
             for u in uavs}
    lat0, lon0 = 47.397742, 8.545594
    east = {uavs[0]: 0.0, uavs[1]: 6.0}  # each hovers 1 m over its own EKF origin; those are 6 m apart
    for u in uavs:
        m = State(connected=True, armed=True, mode="GUIDED")
        m.header.stamp = node.get_clock().now().to_msg()
        states[u].publish(m)
    while any(p.get_subscription_count() == 0 for p in (*states.values(), *fixes.values(), *poses.values())):
        time.sleep(0.05)
    time.sleep(1.0)
    print("START " + repr(time.time()), flush=True)
    t0 = time.time()
    while time.time() - t0 < seconds:
        stamp = node.get_clock().now().to_msg()
        for u in uavs:
            f = NavSatFix(latitude=lat0, longitude=lon0 + east[u] / (111_319.49 * math.cos(math.radians(lat0))),
                          altitude=501.0)
            f.header.stamp = stamp
            fixes[u].publish(f)
            m = PoseStamped()
            m.header.stamp, m.header.frame_id = stamp, "map"
            m.pose.position.z, m.pose.orientation.w = 1.0, 1.0
            poses[u].publish(m)
        time.sleep(0.05)
    node.destroy_node()
    rclpy.shutdown()
""")


def test_mavros_local_frames_placed_by_their_fixes_raise_no_false_veto(tmp_path, ros_domain):
    """Two armed MAVROS vehicles each 1 m over its own EKF origin (both at 0, 0 in their local frames), their
    global fixes 6 m apart: the verifier places the frames as the bag reader does and raises no veto (it vetoed a
    0-m separation before). The first poses may come before both fixes: checked as one frame, as said."""
    msgs, verifier_out, marks, uavs = _fly(tmp_path, ros_domain, FIX_PUBLISHER, ["4.0"], "-p", "hold_time_s:=0.2")
    start = marks["START"]
    assert f"{uavs[1]}: local frame placed in {uavs[0]}'s by the global position fixes (offset E+6.0" \
        in verifier_out
    assert msgs[-1][1] is False, (msgs, verifier_out)  # placed 6 m apart: no veto stands
    assert not [t for t, v in msgs if v and t > start + 1.0], (msgs, verifier_out)


PAD_PUBLISHER = PRELUDE + textwrap.dedent("""
    from mavros_msgs.msg import ExtendedState
    parked_s, flying_s = (float(v) for v in sys.argv[3:5])
    extended = {u: node.create_publisher(ExtendedState, f"/{u}/mavros/extended_state", 10) for u in uavs}

    def publish_states(landed):
        stamp = node.get_clock().now().to_msg()
        for u, on_ground in zip(uavs, landed):
            m = State(connected=True, armed=True, mode="GUIDED")
            m.header.stamp = stamp
            states[u].publish(m)
            e = ExtendedState(landed_state=ExtendedState.LANDED_STATE_ON_GROUND if on_ground else
                              ExtendedState.LANDED_STATE_IN_AIR)
            e.header.stamp = stamp
            extended[u].publish(e)

    while any(p.get_subscription_count() == 0 for p in (*states.values(), *extended.values(), *poses.values())):
        time.sleep(0.05)
    publish_states((True, True))
    time.sleep(1.0)
    print("PADS " + repr(time.time()), flush=True)
    t0, beat, flying = time.time(), 0.0, False
    while (el := time.time() - t0) < parked_s + flying_s:
        if el >= parked_s and not flying:
            flying = True
            publish_states((False, True))
            print("AIRBORNE " + repr(time.time()), flush=True)
        if el >= beat:  # MAVROS repeats both with each heartbeat (1 Hz)
            beat += 1.0
            publish_states((not flying, True))
        publish_poses()
        time.sleep(0.05)
    node.destroy_node()
    rclpy.shutdown()
""")


def test_mavros_vehicles_armed_on_their_pads_raise_no_veto_until_one_is_in_the_air(tmp_path, ros_domain):
    """Armed 1.5 m apart on their pads, ON_GROUND by `<ns>/mavros/extended_state` (MAVLink's EXTENDED_SYS_STATE): no
    pair (before, the veto rose at the first pose: armed is no parking); one reports IN_AIR: the veto rises."""
    pytest.importorskip("mavros_msgs.msg", reason="mavros_msgs not generated (make setup)")
    import mavros_msgs.msg

    if not hasattr(mavros_msgs.msg, "ExtendedState"):
        pytest.skip("mavros_msgs generated before ExtendedState was shipped (make setup)")
    msgs, verifier_out, marks, uavs = _fly(tmp_path, ros_domain, PAD_PUBLISHER, ["4.0", "3.0"])
    assert set(marks) == {"PADS", "AIRBORNE"}, marks
    edges = [(t, v) for k, (t, v) in enumerate(msgs) if k == 0 or v != msgs[k - 1][1]]
    assert [v for _, v in edges] == [False, True], (edges, verifier_out)
    assert 0.0 <= edges[1][0] - marks["AIRBORNE"] < 2.0, (edges, marks, verifier_out)
