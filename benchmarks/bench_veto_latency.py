"""End-to-end veto latency over real DDS, three processes: pose publisher -> safety_verifier -> subscriber.

Two graphs, one after the other (``--graph`` picks one): the verifier alone in its own process, then the
verifier where `uav-debate-eval live` runs it, in one process with dsl_builder, debate_panel and the Foxglove
view, with the publisher also sending /clock as a bag replay with ``--clock`` does (segments are cut every
10 s and evaluated in the worker process meanwhile). There, a node whose thread holds the GIL shows up as
veto latency and dropped poses: the panel's MultiThreadedExecutor, which busy-looped, made p99 412 ms.

The publisher sends 100 vehicles (PoseStamped each, sensor-data QoS) at 50 Hz on a 3 m grid and
repeatedly moves one vehicle 0.3 m next to its neighbour for 0.1 s. Latency = arrival of the veto
rising edge at the subscriber (wall clock) minus the header stamp of the first breaking pose (the
publisher stamps with the same wall clock). Messages/s and drops come from the verifier's own
``poses_received`` count on /swarm/safety/status versus the publisher's sent count.

Edge accounting: each rising edge is matched to the break window it falls in ([break, next break)).
The publisher stops before the subscriber does, so every vehicle goes silent together: the verifier takes
that as the end of the flight (close_on_quiet), not as stale data, and an edge after it is reported apart.
``--load K`` runs K CPU-bound processes alongside, to see the pipeline on a loaded machine.
Target (issue 3): p99 < 10 ms. `--rules` runs each graph without and with 5 mission rules (issue 26).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N_UAVS, RATE_HZ, CYCLE_S, NEAR_S, HOLD_S, STALE_S = 100, 50.0, 0.6, 0.1, 0.2, 1.0
VERIFIER_PARAMS = {"min_separation_m": 0.5, "hold_time_s": HOLD_S, "stale_timeout_s": STALE_S, "max_speed_mps": 20.0,
                   "check_rate_hz": 50.0, "status_rate_hz": 2.0}
NAMES = [f"uav{k}" for k in range(N_UAVS)]


def publisher(duration: float, sim_time: bool) -> None:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped
    from rclpy.qos import qos_profile_sensor_data
    from rosgraph_msgs.msg import Clock

    from uav_debate_eval.nodes.topics import STATUS_TOPIC

    rclpy.init()
    node = rclpy.create_node("bench_pose_pub")
    pubs = [node.create_publisher(PoseStamped, f"/{u}/pose", qos_profile_sensor_data) for u in NAMES]
    clock = node.create_publisher(Clock, "/clock", 10) if sim_time else None

    def send_clock() -> None:  # like `ros2 bag play --clock`: the time first, then that tick's poses
        if clock is not None:
            clock.publish(Clock(clock=node.get_clock().now().to_msg()))

    grid = [(3.0 * (k % 10), 3.0 * (k // 10), 10.0) for k in range(N_UAVS)]
    msgs = [PoseStamped() for _ in NAMES]
    for m in msgs:
        m.header.frame_id = "map"
        m.pose.orientation.w = 1.0
    # Start once the verifier's executor runs (its first status message; `live` builds all its nodes first, and
    # the poses that arrive before would overflow the subscription queues) and every pose topic is matched.
    spinning: list[bool] = []
    node.create_subscription(DiagnosticArray, STATUS_TOPIC, lambda _msg: spinning.append(True), 10)
    end = time.time() + 60.0
    while not (spinning and all(p.get_subscription_count() for p in pubs)) and time.time() < end:
        send_clock()  # (with /clock the verifier's status timer runs on it)
        rclpy.spin_once(node, timeout_sec=0.1)
    t0 = time.time()
    sent, breaks, tick, was_near, last = 0, [], 0, False, t0
    period = 1.0 / RATE_HZ
    while (el := time.time() - t0) < duration:
        cycle = int(el // CYCLE_S)
        near = el - cycle * CYCLE_S < NEAR_S and el > 1.0
        mover = 1 + 2 * (cycle % 45)  # uav1, uav3, ... each next to its left neighbour
        order = [mover] + [k for k in range(N_UAVS) if k != mover]  # the breaking pose goes out first
        send_clock()
        for k in order:
            x, y, z = grid[k]
            if near and k == mover:
                x = grid[k - 1][0] + 0.3
            m = msgs[k]
            now = node.get_clock().now()
            m.header.stamp = now.to_msg()
            m.pose.position.x, m.pose.position.y, m.pose.position.z = x, y, z
            pubs[k].publish(m)
            last = time.time()
            sent += 1
            if near and not was_near and k == mover:
                breaks.append(now.nanoseconds * 1e-9)
        was_near = near
        tick += 1
        time.sleep(max(0.0, t0 + tick * period - time.time()))
    print(json.dumps({"sent": sent, "breaks": breaks, "elapsed": time.time() - t0, "t_last": last}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def subscriber(duration: float) -> None:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from std_msgs.msg import Bool

    from uav_debate_eval.nodes.topics import STATUS_TOPIC, VETO_TOPIC, latched

    rclpy.init()
    node = rclpy.create_node("bench_veto_sub")
    veto: list[tuple[float, bool]] = []
    received = {"poses": 0}

    def on_status(msg: DiagnosticArray) -> None:
        for st in msg.status:
            for kv in st.values:
                if kv.key == "poses_received":
                    received["poses"] = int(kv.value)

    node.create_subscription(Bool, VETO_TOPIC, lambda m: veto.append((time.time(), m.data)), latched())
    node.create_subscription(DiagnosticArray, STATUS_TOPIC, on_status, 10)
    from rclpy.experimental import EventsExecutor

    executor = EventsExecutor()
    executor.add_node(node)
    end = time.time() + duration
    while time.time() < end:
        executor.spin_once(timeout_sec=0.05)
    print(json.dumps({"veto": veto, "poses_received": received["poses"]}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def burn(duration: float) -> None:
    """One CPU-bound process for --load, ending by itself."""
    end = time.time() + duration
    while time.time() < end:
        sum(range(10_000))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rules_mission(out: Path) -> Path:
    """A mission file with the 5 live rules of bench_rules_live (3 per vehicle, 2 per pair; --rules)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_rules_live import LIVE_RULES

    path = out / "rules_mission.yaml"
    path.write_text(json.dumps({"mission": {"name": "bench_rules"}, "rules": [
        {"id": rid, "severity": sev, "over": over, "stl": stl} for rid, sev, over, stl in LIVE_RULES]}))
    return path


def start_verifier(graph: str, env: dict, out: Path, sim_time: bool, rules: bool = False) -> subprocess.Popen:
    """The standalone safety_verifier, or `uav-debate-eval live --foxglove 0` (verifier, builder, panel and the
    Foxglove view in one process) with the same verifier settings; either logs on stderr. `rules`: the verifier
    also monitors the 5 mission rules of bench_rules_live."""
    params = dict(VERIFIER_PARAMS, **({"mission_file": str(rules_mission(out))} if rules else {}))
    if graph == "verifier":
        return subprocess.Popen(
            [sys.executable, "-m", "uav_debate_eval.nodes.safety_verifier", "--ros-args",
             "-p", f"uav_names:=[{', '.join(NAMES)}]", "--log-level", "info",
             *[a for k, v in params.items() for a in ("-p", f"{k}:={v}")],
             "-p", f"use_sim_time:={str(sim_time).lower()}"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    config = out / "live.yaml"
    config.write_text(json.dumps({  # JSON is YAML
        "/**": {"ros__parameters": {"uav_names": NAMES, "pose_qos": "sensor_data", "use_sim_time": sim_time}},
        "/**/safety_verifier": {"ros__parameters": params},
        "/**/dsl_builder": {"ros__parameters": {"segment_mode": "window", "window_s": 10.0}},
        "/**/debate_panel": {"ros__parameters": {"llm_backend": "rules", "keep_reports": 2}}}))
    return subprocess.Popen([sys.executable, "-m", "uav_debate_eval.cli", "live", "--config", str(config),
                             "--out", str(out / "reports"), "--quiet", "--foxglove", "0"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def run(graph: str, args: argparse.Namespace, rules: bool = False) -> tuple[dict, dict, float, str, float]:
    """One measurement: the publisher's and the subscriber's records, the verifier process's CPU share, its
    log and the load average at the start."""
    me = [sys.executable, __file__]
    sim_time = args.sim_time or graph == "live"
    burners = [subprocess.Popen(me + ["--role", "burn", "--duration", str(args.duration + 12.0)])
               for _ in range(args.load)]
    env = dict(os.environ, ROS_DOMAIN_ID=str(150 + os.getpid() % 50),
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1")
    with tempfile.TemporaryDirectory(prefix="bench_veto_") as tmp:
        verifier = start_verifier(graph, env, Path(tmp), sim_time, rules)
        sub = subprocess.Popen(me + ["--role", "sub", "--duration", str(args.duration + 12.0)], env=env,
                               stdout=subprocess.PIPE, text=True)
        pub = subprocess.Popen(me + ["--role", "pub", "--duration", str(args.duration)] + ["--sim-time"] * sim_time,
                               env=env, stdout=subprocess.PIPE, text=True)  # it waits for the verifier
        load0, cpu0 = os.getloadavg()[0], cpu_seconds(verifier.pid)
        try:
            p = json.loads(pub.communicate(timeout=args.duration + 90)[0].strip().splitlines()[-1])
            cpu = (cpu_seconds(verifier.pid) - cpu0) / p["elapsed"]
            s = json.loads(sub.communicate(timeout=args.duration + 30)[0].strip().splitlines()[-1])
        finally:
            for proc in (pub, sub, *burners):
                if proc.poll() is None:
                    proc.kill()
            verifier.send_signal(signal.SIGINT)  # (`live`: Ctrl-C; it evaluates the open segment, then exits)
            log = verifier.communicate(timeout=120)[1]
    return p, s, cpu, log, load0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--duration", type=float, default=25.0, help="publishing time, s")
    ap.add_argument("--verbose", action="store_true", help="print the verifier's veto log")
    ap.add_argument("--nice", type=int, default=0,
                    help="niceness of the three processes (negative needs root): on a machine shared with other "
                         "jobs, shows the latency the pipeline itself can reach")
    ap.add_argument("--load", type=int, default=0, help="CPU-bound processes to run alongside")
    ap.add_argument("--graph", choices=["verifier", "live", "both"], default="both",
                    help="the verifier alone (its own process), inside `uav-debate-eval live`, or both in turn")
    ap.add_argument("--sim-time", action="store_true",
                    help="the verifier alone uses /clock too (the live graph always does)")
    ap.add_argument("--rules", action="store_true",
                    help="each graph twice: without, then with the 5 mission rules of bench_rules_live (issue 26)")
    ap.add_argument("--role", choices=["pub", "sub", "burn"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role:
        if args.role == "pub":
            publisher(args.duration, args.sim_time)
        else:
            {"sub": subscriber, "burn": burn}[args.role](args.duration)
        return 0
    if args.nice:
        os.nice(args.nice)  # inherited by the processes (the burners too)
    os.environ.pop("ROS_LOCALHOST_ONLY", None)  # deprecated; the discovery range says the same
    codes = []
    for graph in (["verifier", "live"] if args.graph == "both" else [args.graph]):
        for rules in ([False, True] if args.rules else [False]):
            if args.rules:
                print(f"== {'with' if rules else 'without'} the 5 mission rules")
            codes.append(report(graph, *run(graph, args, rules), verbose=args.verbose))
    return max(codes)


def report(graph: str, p: dict, s: dict, cpu: float, log: str, load0: float, verbose: bool) -> int:
    """Print one graph's figures next to the targets; 0 when every break got its veto and no edge was spurious."""
    if verbose:
        print("\n".join(ln for ln in log.splitlines() if "VETO" in ln or "cleared" in ln or "reset" in ln))
    raised = [(float(t), why) for t, why in re.findall(r"VETO at ([0-9.]+): (.*)", log)]  # verifier's clock
    veto = s["veto"]
    rises = [t for k, (t, v) in enumerate(veto) if v and (k == 0 or not veto[k - 1][1])]
    lat, missed, already_up, matched = [], 0, 0, set()
    for k, b in enumerate(p["breaks"]):
        nxt = p["breaks"][k + 1] if k + 1 < len(p["breaks"]) else b + CYCLE_S
        hit = [r for r in rises if b <= r < nxt]
        if hit:
            lat.append((hit[0] - b) * 1e3)
            matched.add(hit[0])
        elif [v for t, v in veto if t <= b][-1:] == [True]:
            already_up += 1  # still up from the previous break (a late clear): covered, but no edge to time
        else:
            missed += 1
    after = [r for r in rises if r not in matched and r > p["t_last"]]
    extra = [r for r in rises if r not in matched and r <= p["t_last"]]

    def why(r: float) -> str:
        return min(raised, key=lambda tw: abs(tw[0] - r))[1].split(" ")[0] if raised else "?"

    lat = np.array(lat)
    rate = p["sent"] / p["elapsed"]
    drops = p["sent"] - s["poses_received"]
    print("graph: " + ("the verifier alone" if graph == "verifier" else
                       "uav-debate-eval live (verifier, builder, panel, Foxglove view; /clock)"))
    print(f"{N_UAVS} vehicles at {RATE_HZ:g} Hz for {p['elapsed']:.1f} s, {len(p['breaks'])} injected breaks; "
          f"machine load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, "
          f"niceness {os.nice(0)}")
    print(f"{'figure':<34} {'measured':>12}   target")
    if len(lat):
        print(f"{'veto latency p50 (ms)':<34} {np.percentile(lat, 50):>12.2f}")
        p99 = np.percentile(lat, 99)
        print(f"{'veto latency p99 (ms)':<34} {p99:>12.2f}   < 10 ms  {'PASS' if p99 < 10 else 'MISS'}")
        print(f"{'veto latency max (ms)':<34} {lat.max():>12.2f}")
    print(f"{'breaks without a veto':<34} {missed:>12d}   0")
    print(f"{'breaks during a veto still up':<34} {already_up:>12d}   0 (late clear; covered, not timed)")
    print(f"{'rising edges while publishing':<34} {len(rises) - len(after):>12d}   = breaks ({len(p['breaks'])})")
    print(f"{'  of them not a break (spurious)':<34} {len(extra):>12d}   0"
          + (f"  ({', '.join(why(r) for r in extra)})" if extra else ""))
    print(f"{'rising edges after publishing':<34} {len(after):>12d}   0 (every vehicle quiet together: the end"
          + (f"; {', '.join(why(r) for r in after)})" if after else ")"))
    print(f"{'poses sent per second':<34} {rate:>12.0f}   {N_UAVS * RATE_HZ:g}")
    print(f"{'poses sent / received':<34} {p['sent']:>6d}/{s['poses_received']:<6d}")
    print(f"{'dropped poses (sent - received)':<34} {drops:>12d}   0 ({100.0 * drops / max(p['sent'], 1):.2f} %)")
    print(f"{'verifier process CPU (% of one core)':<34} {100 * cpu:>12.0f}")
    print()
    return 0 if len(lat) and not missed and not extra else 1


if __name__ == "__main__":
    raise SystemExit(main())
