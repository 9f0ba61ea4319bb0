"""One flight, one truth for a MAVROS swarm over real DDS: three vehicles publish as MAVROS does (each
`local_position/pose` from its own EKF origin, `local_position/velocity_local`, `global_position/global`, `state`
latched with every heartbeat), parked
and disarmed, then armed, flying a near miss, landing and disarming; the publisher records what it sent as a rosbag2.
`live` (Ctrl-C at the end) writes the flight report; `evaluate` of the bag gives the same verdict, violations,
events (arming included), data quality and findings: the frames placed by the fixes, the parked start no pair, the
measured velocity in place of the derived one (uav1's estimator reports a 9.5 m/s glitch its poses do not show)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from ros_domain import leased_domain
from test_ros_live import _NoAliases
from test_ros_safety import _env

from uav_debate_eval.cli import main

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: The end of a publisher script: the messages it sent (`sent`: topic, type, ns, CDR) written to `bag` with the
#: typestore `ts`, as a recorder would have, and their count said.
SAVE_SENT = textwrap.dedent("""
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {}
        for topic, msgtype, ns, data in sent:
            if topic not in conns:
                conns[topic] = w.add_connection(topic, msgtype, typestore=ts)
            w.write(conns[topic], ns, data)
    print("SENT", len(sent), flush=True)
""")
SWARM = textwrap.dedent("""
    import math, shutil, sys, time
    from pathlib import Path
    import rclpy
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from mavros_msgs.msg import ExtendedState, State
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.serialization import serialize_message
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore, get_types_from_msg
    from sensor_msgs.msg import NavSatFix
    bag, state_msg = Path(sys.argv[1]), sys.argv[2]
    uavs = ["uav1", "uav2", "uav3"]
    spawn = {"uav1": 0.0, "uav2": 5.0, "uav3": 10.0}  # east (m) of each EKF origin
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    rclpy.init()
    node = rclpy.create_node("mavros_swarm")
    st = {u: node.create_publisher(State, f"/{u}/mavros/state", latched) for u in uavs}
    ex = {u: node.create_publisher(ExtendedState, f"/{u}/mavros/extended_state", reliable) for u in uavs}
    fx = {u: node.create_publisher(NavSatFix, f"/{u}/mavros/global_position/global", reliable) for u in uavs}
    ps = {u: node.create_publisher(PoseStamped, f"/{u}/mavros/local_position/pose", reliable) for u in uavs}
    vl = {u: node.create_publisher(TwistStamped, f"/{u}/mavros/local_position/velocity_local", reliable) for u in uavs}
    sent = []

    def send(pub, msg, msgtype):
        sent.append((pub.topic_name, msgtype, time.time_ns(), serialize_message(msg)))
        pub.publish(msg)

    # the verifier's poses, the states and fixes both the verifier and the flight report's input read, the velocities
    # the flight report's alone
    while any(p.get_subscription_count() < need for pubs, need in ((ps, 1), (st, 2), (ex, 2), (fx, 2), (vl, 1))
              for p in pubs.values()):
        time.sleep(0.05)
    time.sleep(1.0)
    lat0, lon0 = 47.397742, 8.545594
    t0, beat, armed, grounded = time.time(), 0.0, None, None
    while (el := time.time() - t0) < 20.0:
        now_armed = 3.0 <= el < 18.0
        stamp = node.get_clock().now().to_msg()
        z = max(0.0, min(3.0, (el - 4.0) * 1.5)) if el < 15 else max(0.0, 3.0 - (el - 15.0) * 1.5)
        if el >= beat or now_armed != armed or (z == 0.0) != grounded:  # armed on the pads from 3 s to 4 s
            beat, armed, grounded = el + 1.0, now_armed, z == 0.0
            for u in uavs:
                m = State(connected=True, armed=now_armed, mode="GUIDED")
                m.header.stamp = stamp
                send(st[u], m, "mavros_msgs/msg/State")
                e = ExtendedState(landed_state=ExtendedState.LANDED_STATE_ON_GROUND if grounded else
                                  ExtendedState.LANDED_STATE_IN_AIR)
                e.header.stamp = stamp
                send(ex[u], e, "mavros_msgs/msg/ExtendedState")
        north = max(0.0, min(8.0, el - 6.0))
        vz = 1.5 if 4.0 < el < 6.0 else -1.5 if 15.0 < el < 17.0 else 0.0
        for u in uavs:
            dx = 4.2 * max(0.0, 1 - abs(el - 10.0) / 2.0) if u == "uav2" else 0.0  # toward uav3, 0.8 m at 10 s
            vx = (2.1 if 8.0 < el < 10.0 else -2.1 if 10.0 < el < 12.0 else 0.0) if u == "uav2" else \
                9.5 if u == "uav1" and 12.0 <= el < 12.5 else 0.0
            v = TwistStamped()
            v.header.stamp, v.header.frame_id = stamp, "map"
            v.twist.linear.x, v.twist.linear.y, v.twist.linear.z = vx, 1.0 if 6.0 < el < 14.0 else 0.0, vz
            send(vl[u], v, "geometry_msgs/msg/TwistStamped")
            f = NavSatFix(latitude=lat0 + north / 111_132.954, altitude=500.0 + z,
                          longitude=lon0 + (spawn[u] + dx) / (111_319.49 * math.cos(math.radians(lat0))))
            f.header.stamp = stamp
            send(fx[u], f, "sensor_msgs/msg/NavSatFix")
            m = PoseStamped()
            m.header.stamp, m.header.frame_id = stamp, "map"
            m.pose.position.x, m.pose.position.y, m.pose.position.z = dx, north, z  # from its own origin
            m.pose.orientation.w = 1.0
            send(ps[u], m, "geometry_msgs/msg/PoseStamped")
        time.sleep(0.05)
    node.destroy_node()
    rclpy.shutdown()
    ts = get_typestore(Stores.ROS2_JAZZY)
    for name in ("State", "ExtendedState"):
        ts.register(get_types_from_msg((Path(state_msg).parent / f"{name}.msg").read_text(), f"mavros_msgs/msg/{name}"))
""") + SAVE_SENT
MISSION = "mission: {name: mavros_swarm, type: formation}\nconstraints: {min_separation_m: 2.0, max_speed_mps: 8.0}\n"
COMPARED = ("violations", "events", "data_quality", "findings")


def fly_beside_live(tmp_path: Path, script: str, common: dict, args: tuple[str, ...] = (),
                    before_stop: Callable[[Path], object] = lambda out: time.sleep(2.0)) -> SimpleNamespace:
    """`live` on `common`'s pose parameters beside a publisher `script` (run as `script BAG *args`: it records what it
    sent as a rosbag2 at tmp_path/bag), then `before_stop(out)` (default: the last poses reach the tape) and Ctrl-C
    (the open segment, then the flight report). Returns the flight report, `evaluate` of the bag (the replay) and
    what `before_stop` returned (`kept`)."""
    (tmp_path / "publisher.py").write_text(script)
    cfg = {"safety_verifier": {"ros__parameters": {**common, "fail_safe": "warn"}},
           "dsl_builder": {"ros__parameters": {**common, "segment_mode": "window", "window_s": 30.0,
                                               "idle_flush_s": 2.0}},
           "debate_panel": {"ros__parameters": {**common, "llm_backend": "rules"}}}
    config = tmp_path / "live.yaml"
    config.write_text(yaml.dump(cfg, Dumper=_NoAliases))
    out, bag = tmp_path / "out", tmp_path / "bag"
    with leased_domain() as domain, (tmp_path / "live.log").open("w") as log:
        live = subprocess.Popen([sys.executable, "-m", "uav_debate_eval.cli", "live", "--config", str(config),
                                 "--out", str(out), "--llm", "rules", "--quiet"], env=_env(domain), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            sent = subprocess.run([sys.executable, str(tmp_path / "publisher.py"), str(bag), *args],
                                  env=_env(domain), capture_output=True, text=True, timeout=120)
            assert sent.returncode == 0 and "SENT" in sent.stdout, sent.stderr[-3000:]
            kept = before_stop(out)
            live.send_signal(signal.SIGINT)
            rc = live.wait(timeout=180)
        finally:
            if live.poll() is None:
                os.killpg(live.pid, signal.SIGKILL)
                live.wait()
    text = (tmp_path / "live.log").read_text()
    assert rc == 0 and (out / "flight" / "report.json").is_file(), text[-3000:]
    main(["evaluate", str(bag), "--mission", common["mission_file"], "--out", str(tmp_path / "replay"), "--quiet"])
    return SimpleNamespace(flight=json.loads((out / "flight" / "report.json").read_text()),
                           replay=json.loads((tmp_path / "replay" / "report.json").read_text()), kept=kept)


def test_live_mavros_flight_report_equals_evaluate_of_its_bag(tmp_path: Path):
    pytest.importorskip("mavros_msgs.msg", reason="mavros_msgs not generated (make setup)")
    from uav_debate_eval.io.rosbag.mavros import STATE_MSG

    mission = tmp_path / "mission.yaml"
    mission.write_text(MISSION)
    common = {"pose_topic_pattern": "/{uav}/mavros/local_position/pose", "uav_names": ["uav1", "uav2", "uav3"],
              "pose_qos": "reliable", "mission_file": str(mission)}
    flown = fly_beside_live(tmp_path, SWARM, common, (str(STATE_MSG),), lambda out: _tape_after(
        out / "flight" / ".tape", time.time(), tmp_path / "killed_tape"))
    flight, replay, killed = flown.flight, flown.replay, flown.kept
    assert flight["verdict"]["label"] == replay["verdict"]["label"] == "risky"
    glitch, near = sorted(flight["violations"], key=lambda v: v["constraint"])
    assert (near["constraint"], near["uavs"]) == ("min_separation", ["uav2", "uav3"])  # no pair parked at the start
    assert near["worst_value"] == pytest.approx(0.84, abs=0.1)
    assert (glitch["constraint"], glitch["uavs"]) == ("max_speed", ["uav1"])  # as measured, not as derived
    assert glitch["worst_value"] == pytest.approx((9.5**2 + 1.0**2) ** 0.5, abs=0.01)  # east 9.5, north 1 m/s
    for report in (flight, replay):
        assert {f"{u}: velocity measured by /{u}/mavros/local_position/velocity_local" for u in ("uav1", "uav2", "uav3")
                } <= set(report["ingest"]["notes"])
    for key in COMPARED:
        assert flight[key] == replay[key], key
    # the tape as a SIGKILL after the idle flush would have left it: with its side streams, the same flight
    main(["evaluate", str(killed), "--mission", str(mission), "--out", str(tmp_path / "tape"), "--quiet"])
    from_tape = json.loads((tmp_path / "tape" / "report.json").read_text())
    for key in COMPARED:
        assert from_tape[key] == flight[key], key
    arming = [e["extra"]["label"] for e in flight["events"] if e["type"] == "autopilot_event"
              and e["extra"]["label"] in ("ARMED", "DISARMED")]
    assert arming == ["DISARMED"] * 3 + ["ARMED"] * 3 + ["DISARMED"] * 3
    landing = [e["extra"]["label"] for e in flight["events"] if e["type"] == "autopilot_event"
               and e["extra"]["label"] in ("landed", "airborne")]
    assert landing == ["landed"] * 3 + ["airborne"] * 3 + ["landed"] * 3


def _tape_after(tape: Path, since: float, copy: Path, timeout_s: float = 20.0) -> Path:
    """The live tape once its segment closed after `since` (the idle flush: the flight's last poses and its side
    streams on disk), copied as a SIGKILL would leave it."""
    import shutil

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        side = tape / "session.npz"
        if side.is_file() and side.stat().st_mtime > since:
            time.sleep(0.2)  # (the side file is the last written of a take)
            shutil.copytree(tape, copy)
            return copy
        time.sleep(0.1)
    raise AssertionError(f"no segment closed after the flight: {sorted(p.name for p in tape.iterdir())}")
