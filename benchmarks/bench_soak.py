"""Soak benchmark of the live pipeline: 100 vehicles at 50 Hz for 10 minutes, rules backend.

Three processes over real DDS: a publisher (child: a 10 x 10 grid of vehicles flying small circles,
one scripted near miss every `--fault-period` seconds), the monitor (`uav-debate-eval live`, child)
and this process, which records the veto edges it receives. Every injected near miss must produce
exactly one rising and one falling edge at the predicted stream times (no dropped or extra edge);
the monitor's RSS growth after warm-up, its CPU use and the veto latency are printed with targets.

RSS growth is measured from the first segment report to the last one, sampled as each report arrives:
before the first report the worker processes and the heap are still warming up, and the DSL and panel
workers swing by 100 MB within a segment's evaluation, so samples at the same point of the cycle are
compared (the start and peak RSS are printed too).

    python benchmarks/bench_soak.py                # the full 10 minutes
    python benchmarks/bench_soak.py --minutes 1    # a quick check while developing
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import yaml

MIN_SEP = 0.5
HOLD_S = 1.0
SPACING = 3.0
CLOSEST = 0.3  # separation at the bottom of a scripted near miss
FIRST_FAULT_S = 10.0
RSS_TARGET_MB = 50.0
LATENCY_TARGET_MS = 100.0
ARRAY_TOPIC = "/bench/poses"


def names(n: int) -> list[str]:
    return [f"uav{i:03d}" for i in range(n)]


def fault_schedule(n: int, duration_s: float, period_s: float) -> list[dict]:
    """Near miss k: vehicle a (even index) flies to its right-hand neighbour b and back, 3 s in all.

    The pair's distance is SPACING - (SPACING - CLOSEST) f with f ramping 0->1 over 1 s, holding 1 s,
    ramping back over 1 s, so it is below MIN_SEP on an interval known in closed form.
    """
    side = int(math.ceil(math.sqrt(n)))
    frac = (SPACING - MIN_SEP) / (SPACING - CLOSEST)  # f at which the separation crosses MIN_SEP
    pairs = [(r * side + 2 * c, r * side + 2 * c + 1) for r in range(side) for c in range(side // 2)]
    pairs = [(a, b) for a, b in pairs if b < n]
    out, k, s = [], 0, FIRST_FAULT_S
    while s + 3.0 + HOLD_S + 2.0 < duration_s:
        a, b = pairs[k % len(pairs)]
        out.append({"a": a, "b": b, "start": s, "onset": s + frac, "end": s + 3.0 - frac})
        k += 1
        s += period_s
    return out


def positions(t: float, n: int, faults: list[dict]) -> np.ndarray:
    side = int(math.ceil(math.sqrt(n)))
    idx = np.arange(n)
    grid = np.stack([(idx % side) * SPACING, (idx // side) * SPACING, np.full(n, 5.0)], axis=1)
    circle = 0.5 * np.array([math.cos(t), math.sin(t), 0.0])
    pos = grid + circle
    for f in faults:
        if f["start"] <= t <= f["start"] + 3.0:
            u = t - f["start"]
            frac = min(u, 1.0, 3.0 - u)
            target = pos[f["b"]] + np.array([CLOSEST, 0.0, 0.0]) * -1.0  # on a's side of b
            pos[f["a"]] = (1 - frac) * pos[f["a"]] + frac * target
    return pos


def publish(args: argparse.Namespace) -> None:
    """Child process: PoseArray (or one PoseStamped per vehicle) at `rate` Hz, wall-clock stamps."""
    import rclpy
    from geometry_msgs.msg import PoseArray, PoseStamped
    from rclpy.qos import qos_profile_sensor_data

    from uav_debate_eval.core.cdr import pose_array_cdr, pose_stamped_cdr

    n, duration = args.vehicles, args.minutes * 60.0
    faults = fault_schedule(n, duration, args.fault_period)
    rclpy.init(args=[])
    node = rclpy.create_node("soak_publisher")
    if args.per_vehicle:
        pubs = [node.create_publisher(PoseStamped, f"/{u}/pose", qos_profile_sensor_data) for u in names(n)]
    else:
        pub = node.create_publisher(PoseArray, ARRAY_TOPIC, qos_profile_sensor_data)
    time.sleep(args.start_delay)
    base = time.time()
    Path(args.publish).write_text(json.dumps({"stamp_base": base}))
    dt = 1.0 / args.rate
    k = 0
    delays: list[float] = []  # publish time - stamp, s: the publisher's own share of the veto latency
    while True:
        t = k * dt
        if t > duration:
            break
        wait = base + t - time.time()
        if wait > 0:
            time.sleep(wait)
        stamp_t = base + t
        pos = positions(t, n, faults)
        if args.per_vehicle:  # serialized with struct (core.cdr): no Python message per pose
            for i, p in enumerate(pos.tolist()):
                pubs[i].publish(pose_stamped_cdr(stamp_t, "world", p))
        else:  # serialized with numpy (core.cdr): no Python object per pose, so the stamp is the send time
            pub.publish(pose_array_cdr(stamp_t, "world", pos))
        delays.append(time.time() - stamp_t)
        k += 1
    Path(args.publish).write_text(json.dumps({"stamp_base": base, "publish_delay_ms": [
        1000.0 * float(np.percentile(delays, q)) for q in (50, 99)], "tick_delay_s": delays}))
    node.destroy_node()
    rclpy.shutdown()


def _tree(pid: int) -> list[int]:
    """The process and its descendants (the monitor's DSL and panel worker processes count too)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            todo += [int(c) for c in task.read_text().split()]
    return out


def _proc_stats(pid: int, tree: bool = True) -> tuple[float, float]:
    """(RSS MB, CPU seconds user+system) of a process (tree), from /proc (exited children's CPU included)."""
    rss_kb, cpu = 0, 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for p in _tree(pid) if tree else [pid]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")]
        rss_kb += rss[0] if rss else 0  # none: a zombie (exited, not yet reaped)
        cpu += (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / ticks
    return rss_kb / 1024.0, cpu


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:
        return True


def write_config(tmp: Path, n: int, per_vehicle: bool) -> Path:
    mission = tmp / "mission.yaml"
    mission.write_text(yaml.safe_dump({
        "mission": {"name": "soak", "type": "grid"},
        "constraints": {"min_separation_m": MIN_SEP, "max_speed_mps": 8.0, "stale_timeout_s": 1.0},
        "thresholds": {"veto_hold_s": HOLD_S}}))
    pose = ({"pose_type": "PoseStamped", "uav_names": names(n)} if per_vehicle else
            {"pose_type": "PoseArray", "pose_array_topic": ARRAY_TOPIC, "pose_array_names": names(n)})
    common = {**pose, "mission_file": str(mission)}
    cfg = {
        "safety_verifier": {"ros__parameters": dict(common)},
        "dsl_builder": {"ros__parameters": {**common, "segment_mode": "window", "window_s": 30.0, "buffer_s": 40.0,
                                            "max_segment_s": 35.0}},
        "debate_panel": {"ros__parameters": {**common, "llm_backend": "rules", "buffer_s": 40.0, "keep_reports": 3}},
    }
    path = tmp / "soak.yaml"
    path.write_text(yaml.dump(cfg, Dumper=_NoAliases))  # rcl's parser rejects YAML aliases
    return path


class VetoRecorder:
    def __init__(self, monitor_pid: int):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import Bool, String

        from uav_debate_eval.nodes.topics import SEGMENT_TOPIC, latched

        rclpy.init(args=[])
        self.node = rclpy.create_node("soak_recorder")
        self.edges: list[tuple[float, bool]] = []
        self.monitor_pid = monitor_pid
        self.report_rss: list[tuple[float, float]] = []  # (tree RSS MB, main RSS MB) as each report arrives
        self.segments = 0
        self._last: bool | None = None
        self.node.create_subscription(Bool, "/swarm/safety/veto", self._on_veto, latched())
        self.node.create_subscription(String, "/swarm/evaluation/report", self._on_report, latched())
        self.node.create_subscription(String, SEGMENT_TOPIC, self._on_segment, latched(10))
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def _on_veto(self, msg) -> None:
        if msg.data != self._last:
            self._last = bool(msg.data)
            self.edges.append((time.time(), bool(msg.data)))

    def _on_segment(self, msg) -> None:
        self.segments += 1

    def settle(self, quiet_s: float = 10.0, timeout_s: float = 120.0) -> None:
        """After the stream: wait for the last (idle flush) segment and a report for every segment, i.e. until
        nothing new came for `quiet_s` and the reports have caught up."""
        end = time.time() + timeout_s
        seen, since = None, time.time()
        while time.time() < end:
            now = (self.segments, len(self.report_rss))
            if now != seen:
                seen, since = now, time.time()
            elif now[1] >= now[0] > 0 and time.time() - since >= quiet_s:
                return
            time.sleep(0.5)

    def _on_report(self, msg) -> None:
        self.report_rss.append((_proc_stats(self.monitor_pid)[0], _proc_stats(self.monitor_pid, tree=False)[0]))

    def close(self) -> None:
        import rclpy
        self._stop.set()
        self._thread.join(timeout=2)
        self.node.destroy_node()
        rclpy.try_shutdown()


def match_edges(faults: list[dict], edges: list[tuple[float, bool]], base: float, rate: float, duration: float,
                tick_delay_s: list[float] | None = None):
    """Pair each fault with its rising and falling edge; returns (latencies ms, missing, extra). With
    `tick_delay_s` (how late the publisher sent each tick) the latency runs from the breaking tick's sending.

    Left out: the latched initial state before the stream starts, and edges after it ends (counted apart:
    the end of the stream must raise none).
    """
    ups = [t - base for t, v in edges if v and 0.0 <= t - base <= duration + 0.5]
    downs = [t - base for t, v in edges if not v and 0.0 <= t - base <= duration + 0.5]
    lat, missing, used_up, used_down = [], 0, set(), set()
    for f in faults:
        first_tick = math.ceil(f["onset"] * rate - 1e-9) / rate
        up = next((i for i, t in enumerate(ups) if i not in used_up and first_tick - 0.01 <= t <= first_tick + 1.0),
                  None)
        clear = f["end"] + HOLD_S
        down = next((i for i, t in enumerate(downs) if i not in used_down and clear - 0.05 <= t <= clear + 1.5), None)
        if up is None or down is None:
            missing += (up is None) + (down is None)
        if up is not None:
            used_up.add(up)
            k = round(first_tick * rate)
            sent = first_tick + (tick_delay_s[k] if tick_delay_s is not None and k < len(tick_delay_s) else 0.0)
            lat.append((ups[up] - sent) * 1000.0)
        if down is not None:
            used_down.add(down)
    extra = (len(ups) - len(used_up)) + (len(downs) - len(used_down))
    return lat, missing, extra


def live_cmd(config: Path, out: Path, duration_s: float) -> list[str]:
    """The monitor under test: `uav-debate-eval live` on the rules backend."""
    return [sys.executable, "-m", "uav_debate_eval.cli", "live", "--config", str(config), "--out", str(out),
            "--llm", "rules", "--quiet", "--duration", str(duration_s)]


def publisher_cmd(base_file: Path, args: argparse.Namespace, per_vehicle: bool) -> list[str]:
    """This script as the publisher child (it writes the stream's stamp base to `base_file`)."""
    return [sys.executable, str(Path(__file__).resolve()), "--publish", str(base_file), "--minutes",
            str(args.minutes), "--vehicles", str(args.vehicles), "--rate", str(args.rate), "--fault-period",
            str(args.fault_period), "--start-delay", str(args.start_delay)] + (["--per-vehicle"] if per_vehicle else [])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--vehicles", type=int, default=100)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--fault-period", type=float, default=15.0)
    ap.add_argument("--per-vehicle", action="store_true", help="one PoseStamped topic per vehicle (default: one "
                    "PoseArray, as Gazebo's bridge publishes)")
    ap.add_argument("--start-delay", type=float, default=8.0, help=argparse.SUPPRESS)
    ap.add_argument("--publish", help=argparse.SUPPRESS)  # internal: run as the publisher child
    args = ap.parse_args()
    if args.publish:
        publish(args)
        return 0

    os.environ["ROS_DOMAIN_ID"] = str(101 + os.getpid() % 60)
    os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    duration = args.minutes * 60.0
    faults = fault_schedule(args.vehicles, duration, args.fault_period)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp_name:
        tmp = Path(tmp_name)
        config = write_config(tmp, args.vehicles, args.per_vehicle)
        live_log = (tmp / "live.log").open("w")
        live = subprocess.Popen(live_cmd(config, tmp / "out", duration + args.start_delay + 15.0),
                                stdout=live_log, stderr=subprocess.STDOUT)
        rec = VetoRecorder(live.pid)
        base_file = tmp / "base.json"
        publisher = subprocess.Popen(publisher_cmd(base_file, args, args.per_vehicle))
        samples: list[tuple[float, float, float, float]] = []  # (wall, tree RSS MB, tree cpu s, ROS process cpu s)
        pub_cpu0 = None
        try:
            while not base_file.exists():
                time.sleep(0.2)
            base = json.loads(base_file.read_text())["stamp_base"]
            while publisher.poll() is None:
                rss, cpu = _proc_stats(live.pid)
                samples.append((time.time() - base, rss, cpu, _proc_stats(live.pid, tree=False)[1]))
                if pub_cpu0 is None:
                    pub_cpu0 = (time.time(), _proc_stats(publisher.pid)[1])
                pub_cpu1 = (time.time(), _proc_stats(publisher.pid)[1])
                time.sleep(2.0)
            time.sleep(HOLD_S + 3.0)  # the last falling edge
            rec.settle()
        finally:
            publisher.wait()
            live.terminate()
            live.wait(timeout=600)  # then `live` evaluates the whole 10-minute flight (~1-2 min for 3M poses)
            rec.close()
        log_tail = (tmp / "live.log").read_text()[-2000:]

    lat, missing, extra = match_edges(faults, rec.edges, base, args.rate, duration)
    if extra:
        print("veto edges (stream s): " + ", ".join(f"{t - base:.2f}{'+' if v else '-'}" for t, v in rec.edges))
    nan = float("nan")
    first, last = (rec.report_rss[0], rec.report_rss[-1]) if len(rec.report_rss) >= 2 else ((nan, nan),) * 2
    rss_growth, main_growth = last[0] - first[0], last[1] - first[1]
    span = max(samples[-1][0] - samples[0][0], 1e-9)
    cpu, main_cpu = ((samples[-1][k] - samples[0][k]) / span * 100.0 for k in (2, 3))
    pub_cpu = (pub_cpu1[1] - pub_cpu0[1]) / max(pub_cpu1[0] - pub_cpu0[0], 1e-9) * 100.0
    p50, p99 = (np.percentile(lat, 50), np.percentile(lat, 99)) if lat else (float("nan"),) * 2
    mode = "PoseStamped per vehicle" if args.per_vehicle else "one PoseArray"
    print(f"soak: {args.vehicles} vehicles x {args.rate:g} Hz ({mode}) for {args.minutes:g} min, rules backend")
    print(f"  injected near misses          {len(faults):8d}    (expected veto edges {2 * len(faults)})")
    after_end = sum(1 for t, v in rec.edges if v and t - base > duration + 0.5)
    print(f"  veto edges seen               {len(rec.edges):8d}    (incl. the latched initial state)")
    print(f"  veto raised after the end     {after_end:8d}    target 0   {'ok' if after_end == 0 else 'FAIL'}  "
          "(every vehicle going quiet together ends the flight)")
    print(f"  dropped veto edges            {missing:8d}    target 0   {'ok' if missing == 0 else 'FAIL'}")
    print(f"  unexpected veto edges         {extra:8d}    target 0   {'ok' if extra == 0 else 'FAIL'}")
    print(f"  veto latency p50              {p50:8.1f} ms")
    print(f"  veto latency p99              {p99:8.1f} ms target < {LATENCY_TARGET_MS:g} ms   "
          f"{'ok' if p99 < LATENCY_TARGET_MS else 'FAIL'}")
    print(f"  monitor RSS growth            {rss_growth:8.1f} MB target < {RSS_TARGET_MB:g} MB   "
          f"{'ok' if rss_growth < RSS_TARGET_MB else 'FAIL'}  (process tree at the first -> last of "
          f"{len(rec.report_rss)} reports: {first[0]:.0f} -> {last[0]:.0f} MB)")
    print(f"  monitor RSS start, peak       {samples[0][1]:8.0f} MB, {max(s[1] for s in samples):.0f} MB "
          "(stream start: before any worker process)")
    print(f"  of which the ROS process      {main_growth:8.1f} MB  (RSS {first[1]:.0f} -> {last[1]:.0f} MB; "
          "the rest: DSL and panel worker processes)")
    print(f"  monitor CPU                   {cpu:8.1f} %  of one core (3 nodes + DSL/panel worker processes)")
    print(f"  of which the ROS process      {main_cpu:8.1f} %  (the nodes; the workers run niced)")
    print(f"  publisher CPU                 {pub_cpu:8.1f} %  of one core")
    print(f"  segment reports published     {len(rec.report_rss):8d}")
    ok = missing == 0 and extra == 0 and after_end == 0 and rss_growth < RSS_TARGET_MB
    if not ok:
        print("monitor log tail:\n" + log_tail)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
