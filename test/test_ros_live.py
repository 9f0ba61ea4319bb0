"""The live pipeline end to end over real DDS, three processes: swarm_sim -> `live` (monitor) -> this test.

The simulator plays a short formation flight in real time with /clock; the monitor runs with
use_sim_time and the rules backend. Each test gets its own leased ROS_DOMAIN_ID (conftest `ros_domain`) so concurrent
test runs of other helpers cannot cross-talk.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from uav_debate_eval.commands.live import MONITOR_NICENESS
from uav_debate_eval.live.workers import stop_process

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: Real time: the bounds below are in stream seconds, and a stall of the monitor (three busy processes and
#: a debate worker on 2 shared cores) costs `SPEED` times its length in stream time; at 2x, half-second
#: stalls broke them about one run in three.
SPEED = 1.0
#: Veto delivery bound in stream seconds (DDS + 3 busy processes on 2 shared cores; the soak benchmark
#: measures the real p99 against the 100 ms target).
LATENCY_TARGET_S = 1.0
#: How late (stream seconds, by the verifier's own clock) the verifier may decide after the truth: one check
#: period, plus the backlog a starved executor builds on 2 shared cores while /clock runs on.
DECISION_S = 1.0
#: Clearing late is the safe direction (the veto stays up longer); the bound only has to catch a veto that
#: never clears. A segment closing at the same time starts DSL and debate workers that compete with the
#: verifier for the 2 cores of CI, which has delayed the clear by up to ~1.2 s of stream time.
CLEAR_SLACK_S = 3.0
STALE_S = 1.0


def _env(domain: int) -> dict[str, str]:
    """The child processes' environment on the test's leased domain (conftest `ros_domain`), with the same
    discovery settings as this process (conftest), so the processes see each other and nobody else."""
    return {**os.environ, "ROS_DOMAIN_ID": str(domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
            "ROS_LOCALHOST_ONLY": os.environ.get("ROS_LOCALHOST_ONLY", "1"), "PYTHONUNBUFFERED": "1",
            "MPLBACKEND": "Agg"}


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:
        return True


def run_live(args: list[str], domain: int, log: Path, timeout_s: float = 240.0) -> int:
    """`uav-debate-eval live ARGS` on the leased domain to its end (its exit status), killed with its process group
    when it outlives the timeout; its output goes to `log`."""
    cmd = [sys.executable, "-m", "uav_debate_eval.cli", "live", *args]
    live = subprocess.Popen(cmd, env=_env(domain), stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        return live.wait(timeout=timeout_s)
    finally:
        if live.poll() is None:
            os.killpg(live.pid, signal.SIGKILL)
            live.wait()


def _write_config(tmp: Path, faults: list[str], duration_s: float) -> tuple[Path, dict]:
    """Parameter file for sim + monitor, and the scenario (computed here too, for names and the mission)."""
    from uav_debate_eval.core.mission_file import mission_to_yaml
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("formation", seed=3, duration_s=duration_s, faults=faults)
    # 2 cores shared with other test runs: allow 1 s of silence (the scenario's dropout lasts 2 s).
    sim.mission.constraints.stale_timeout_s = STALE_S
    mission = tmp / "mission.yaml"
    mission.write_text(mission_to_yaml(sim.mission))
    names = list(sim.traj.uav_ids)
    monitor = {"use_sim_time": True, "uav_names": names, "mission_file": str(mission), "pose_qos": "reliable"}
    cfg = {
        "swarm_sim": {"ros__parameters": {"scenario": "formation", "seed": 3, "duration_s": duration_s,
                                          "faults": faults, "speed": SPEED, "publish_clock": True,
                                          "start_delay_s": 4.0, "pose_qos": "reliable",
                                          "wait_for_subscribers": 1}},
        "safety_verifier": {"ros__parameters": dict(monitor)},
        "dsl_builder": {"ros__parameters": {**monitor, "segment_mode": "window", "window_s": 10.0,
                                            "idle_flush_s": 2.0, "buffer_s": 40.0}},
        "debate_panel": {"ros__parameters": {**monitor, "llm_backend": "rules", "buffer_s": 40.0,
                                             "keep_reports": 2, "max_pending": 6, "output_dir": str(tmp / "out")}},
    }
    path = tmp / "live.yaml"
    path.write_text(yaml.dump(cfg, Dumper=_NoAliases))  # rcl's parser rejects YAML aliases
    return path, {"names": names, "truth": [f.to_dict() for f in sim.truth], "mission": sim.mission}


class Recorder:
    """The test's own rclpy node: records veto edges (with the stream clock), DSL, segments, reports."""

    def __init__(self, env: dict[str, str]):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rosgraph_msgs.msg import Clock
        from std_msgs.msg import Bool, String

        from uav_debate_eval.nodes.topics import latched

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=int(env["ROS_DOMAIN_ID"]))
        self.node = Node("test_recorder", context=self.context)
        self.clock = None
        self.veto: list[tuple[float, bool, float | None]] = []  # (wall, value, stream clock)
        self.status: list[dict] = []  # errors and warnings, each with the stamp of its status message
        self.verdicts: list[tuple[float, bool]] = []  # the verifier's own veto state changes, by status stamp
        self.tracked: list[tuple[float, str]] = []  # (status stamp, vehicles the verifier tracks) when it changes
        self.silence: list[tuple[float, str]] = []  # (status stamp, the stale_data row's longest silence), every status
        self.dsl: list[str] = []
        self.segments: list[dict] = []
        self.reports: list[dict] = []
        self.truth: dict | None = None
        n = self.node
        n.create_subscription(Clock, "/clock", self._on_clock, 10)
        n.create_subscription(Bool, "/swarm/safety/veto", self._on_veto, latched())
        n.create_subscription(DiagnosticArray, "/swarm/safety/status", self._on_status, 50)
        n.create_subscription(String, "/swarm/dsl", lambda m: self.dsl.append(m.data), latched(10))
        n.create_subscription(String, "/swarm/segment", lambda m: self.segments.append(json.loads(m.data)),
                              latched(10))
        n.create_subscription(String, "/swarm/evaluation/report", lambda m: self.reports.append(json.loads(m.data)),
                              latched(10))
        n.create_subscription(String, "/swarm/sim/truth", self._on_truth, latched())
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def _on_clock(self, msg) -> None:
        self.clock = msg.clock.sec + msg.clock.nanosec * 1e-9

    def _on_veto(self, msg) -> None:
        if not self.veto or self.veto[-1][1] != msg.data:
            self.veto.append((time.monotonic(), bool(msg.data), self.clock))

    def _on_status(self, msg) -> None:
        from uav_debate_eval.live.veto_history import level_of, status_evidence
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.status += [{**status_evidence(s).to_dict(), "stamp": stamp} for s in msg.status if level_of(s.level) >= 2]
        del self.status[:-5000]
        quiet = next((s for s in msg.status if s.name == "safety/stale_data"), None)
        if quiet is not None:
            self.silence.append((stamp, next((kv.value for kv in quiet.values if kv.key == "value"), "")))
            del self.silence[:-5000]
        row = next((s for s in msg.status if s.name == "safety/veto"), None)
        if row is None:
            return
        veto = level_of(row.level) >= 2
        if not self.verdicts or self.verdicts[-1][1] != veto:
            self.verdicts.append((stamp, veto))
        tracked = next((kv.value for kv in row.values if kv.key == "vehicles"), "")
        if not self.tracked or self.tracked[-1][1] != tracked:
            self.tracked.append((stamp, tracked))

    def _on_truth(self, msg) -> None:
        self.truth = json.loads(msg.data)

    def call_trigger(self, timeout_s: float = 60.0):
        from std_srvs.srv import Trigger
        client = self.node.create_client(Trigger, "/swarm/evaluation/trigger")
        assert client.wait_for_service(timeout_sec=20.0), "trigger service not available"
        future = client.call_async(Trigger.Request())
        end = time.monotonic() + timeout_s
        while not future.done() and time.monotonic() < end:
            time.sleep(0.05)
        assert future.done(), "trigger service did not answer"
        return future.result()

    def wait(self, cond, timeout_s: float, what: str | Callable[[], str]) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if cond():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.executor.shutdown()
        self.node.destroy_node()
        import rclpy
        rclpy.shutdown(context=self.context)


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is not None:
        stop_process(proc, timeout_s=15.0)


def _sim_cmd(config: Path) -> list[str]:
    return [sys.executable, "-m", "uav_debate_eval.nodes.swarm_sim", "--ros-args", "--params-file", str(config)]


def _live_cmd(config: Path, out: Path, duration: float) -> list[str]:
    return [sys.executable, "-m", "uav_debate_eval.cli", "live", "--config", str(config), "--out", str(out),
            "--llm", "rules", "--duration", str(duration)]


def _wait_for_monitor(rec: Recorder) -> None:
    """The safety verifier's latched veto: the monitor is up, so the flight is not played to a process that is
    still importing (its start-up time on a loaded machine is anyone's guess)."""
    rec.wait(lambda: bool(rec.veto), 60, "the monitor's latched veto")


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").glob("*/children") for c in task.read_text().split()]


def _tail(path: Path) -> str:
    return path.read_text()[-3000:] if path.exists() else ""


def _panel_logs(tmp_path: Path) -> str:
    return "".join(_tail(tmp_path / f"{n}.log") for n in ("debate_panel", "debate_panel2", "dsl_builder"))


@contextlib.contextmanager
def _live_flight(tmp_path: Path, domain: int, faults: list[str], duration: float):
    """`live` and then swarm_sim started, the simulator's truth received; on exit both stopped and their logs
    kept on the returned namespace (rec, scenario, out, base, logs)."""
    env = _env(domain)
    config, scenario = _write_config(tmp_path, faults, duration)
    flight = SimpleNamespace(rec=Recorder(env), scenario=scenario, out=tmp_path / "out", base=None, logs="")
    live = flight.live = _start(_live_cmd(config, flight.out, 300.0), env, tmp_path / "live.log")
    sim = None
    try:
        _wait_for_monitor(flight.rec)
        sim = _start(_sim_cmd(config), env, tmp_path / "sim.log")
        flight.rec.wait(lambda: flight.rec.truth is not None, 20, "the simulator's latched truth")
        flight.base = flight.rec.truth["stamp_base"]
        yield flight
    finally:
        _stop(sim)
        _stop(live)
        flight.logs = _tail(tmp_path / "live.log") + _tail(tmp_path / "sim.log")
        flight.rec.close()


def test_near_miss_vetoed_segmented_and_reported_live(tmp_path: Path, ros_domain: int):
    from uav_debate_eval.report.schema import validate_report

    duration = 30.0
    with _live_flight(tmp_path, ros_domain, ["near_miss"], duration) as flight:
        rec, base, out = flight.rec, flight.base, flight.out
        # the veto's process gets a core first: `live` (the analysis) yields to its verifier child
        niceness = {p: int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[16])
                    for p in [flight.live.pid, *_children(flight.live.pid)]}
        verifier = [p for p in niceness if b"safety_verifier" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(verifier) == 1 and niceness[flight.live.pid] == niceness[verifier[0]] + MONITOR_NICENESS
        # all of the flight played, and the last segment (idle flush) was reported
        rec.wait(lambda: rec.clock is not None and rec.clock >= base + duration - 0.5, 40 + duration / SPEED,
                 "the end of the flight")
        # the panel runs in `live`'s niced process: on a loaded machine its evaluations wait for a core
        rec.wait(lambda: rec.segments and rec.segments[-1]["t_end"] >= base + duration - 1.0
                 and len(rec.reports) >= len(rec.segments), 150,
                 lambda: f"a report for every segment (segments {[s['id'] for s in rec.segments]}, reports "
                         f"{[r['live']['segment']['id'] for r in rec.reports]})")
    logs, scenario = flight.logs, flight.scenario
    near = next(f for f in scenario["truth"] if f["kind"] == "near_miss")

    # the verifier decides (stream time): the pair is named as the near miss starts ... Its evidence `t` is
    # the newest pose stamp it had, the message stamp its own clock (/clock) when it decided; under load its
    # poses lag its clock, so the veto timeline (message stamps) is compared with the latter.
    evidence = [s for s in rec.status if s["name"] == "safety/min_separation"]
    assert evidence, f"no min_separation status; verdicts {rec.verdicts}; logs:\n{logs}"
    t_seen, t_on = evidence[0]["values"]["t"] - base, evidence[0]["stamp"] - base
    assert near["t_start"] - 0.05 <= t_seen and t_on <= near["t_start"] + DECISION_S, (t_seen, t_on, near)
    assert all(t_seen <= s["values"]["t"] - base <= near["t_end"] + DECISION_S for s in evidence)

    def veto_at(t: float) -> bool:
        return next((v for stamp, v in reversed(rec.verdicts) if stamp - base <= t), False)

    # ... the veto is up through the near miss and, once the pair has separated, clears after the hold time
    # (a stale-data episode from CPU starvation on 2 shared cores may merge with it: then it clears later)
    assert all(veto_at(t) for t in np.arange(t_on + 0.01, near["t_end"], 0.1))
    hold = scenario["mission"].thresholds.veto_hold_s
    t_off = next(t - base for t, v in rec.verdicts if not v and t - base > t_on)
    assert t_off >= near["t_end"] + hold - 0.1, (t_off, near, hold)
    stale_then = any(s["name"] == "safety/stale_data" and near["t_end"] <= s["values"]["t"] - base <= t_off
                     for s in rec.status)
    assert stale_then or t_off <= near["t_end"] + hold + CLEAR_SLACK_S, (t_off, near, hold)
    # ... and the Bool veto reached this process within the latency target of those decisions
    ups = [c - base for _, v, c in rec.veto if v and c is not None]
    downs = [c - base for _, v, c in rec.veto if not v and c is not None]
    assert any(u <= t_on + LATENCY_TARGET_S for u in ups), (ups, t_on)
    assert any(t_off - 0.05 <= d <= t_off + LATENCY_TARGET_S for d in downs), (downs, t_off)
    assert set(evidence[0]["values"]["uavs"].split(",")) == set(near["uavs"])
    # the near miss is the only separation episode; any other veto is stale data or the fail-safe (2 busy cores
    # can starve the monitor: the verifier then rightly reports vehicles it has not heard from, or that it fell
    # behind the stream, verifier_degraded)
    others = {s["name"] for s in rec.status if s["name"] not in ("safety/veto", "safety/min_separation")}
    assert others <= {"safety/stale_data", "safety/verifier"}, others

    # one DSL per segment, covering the flight without gaps
    assert len(rec.segments) >= 2
    assert len(rec.dsl) == len(rec.segments)
    assert all(text.strip() for text in rec.dsl)
    for a, b in zip(rec.segments, rec.segments[1:], strict=False):
        assert a["t_end"] == pytest.approx(b["t_start"])

    # every report validates; the near-miss segment is risky, vetoed and names the pair
    assert len(rec.reports) == len(rec.segments)
    for report in rec.reports:
        validate_report(report)
    hit = [r for r in rec.reports if r["live"]["segment"]["t_start"] - base <= near["t_start"]
           <= r["live"]["segment"]["t_end"] - base]
    assert len(hit) == 1
    report = hit[0]
    assert report["verdict"]["label"] == "risky" and report["verdict"]["vetoed"] is True
    seps = [v for v in report["violations"] if v["constraint"] == "min_separation"]
    assert seps and set(seps[0]["uavs"]) == set(near["uavs"])
    assert report["live"]["veto_episodes"], "the live veto evidence is in the report"
    assert report["debate"]["backend"] == "rules"
    # segments without the near miss have no separation violation
    for other in rec.reports:
        if other is not report:
            assert all(v["constraint"] == "stale_data" for v in other["violations"]), other["violations"]
    # rotation kept the last 2 report directories on disk
    assert len(sorted(out.glob("[0-9]" * 5 + "_*"))) == 2
    assert (out / "latest" / "report.json").is_file()


def test_silent_vehicle_goes_stale_pipeline_continues_and_trigger_answers(tmp_path: Path, ros_domain: int):
    duration = 24.0
    with _live_flight(tmp_path, ros_domain, ["telemetry_dropout"], duration) as flight:
        rec, base, scenario = flight.rec, flight.base, flight.scenario
        drop = next(f for f in scenario["truth"] if f["kind"] == "telemetry_dropout")
        rec.wait(lambda: rec.clock is not None and rec.clock >= base + drop["t_end"] + 6.0, 40 + duration / SPEED,
                 "the flight to continue past the outage")
        reply = rec.call_trigger()
        rec.wait(lambda: rec.clock is not None and rec.clock >= base + duration - 0.5, 30 + duration / SPEED,
                 "the end of the flight")
        rec.wait(lambda: rec.segments and len(rec.reports) >= len(rec.segments) + 1, 60, "the segment reports")
        # reports may lag the segments on a loaded machine: wait for the one this test is about
        rec.wait(lambda: any(r["live"]["segment"]["t_start"] - base >= drop["t_end"] for r in rec.reports), 60,
                 "a report for a segment that starts after the outage")
    logs = flight.logs

    stale = [s for s in rec.status if s["name"] == "safety/stale_data"
             and drop["t_start"] <= s["values"]["t"] - base <= drop["t_end"]]
    # the silent vehicle was tracked before the outage (the simulator waits for the verifier's subscriptions)
    assert any(t - base < drop["t_start"] and n == str(len(scenario["names"])) for t, n in rec.tracked), rec.tracked
    # the verifier's own clock (status stamps) and the longest silence it saw while uav1 was silent
    during = [(round(t - base, 2), v) for t, v in rec.silence if drop["t_start"] <= t - base <= drop["t_end"] + 1.0]
    clock = (round(rec.silence[0][0] - base, 2), round(rec.silence[-1][0] - base, 2)) if rec.silence else None
    assert stale, (f"no stale_data status during the outage; tracked {rec.tracked}; verifier clock from/to {clock}, "
                   f"{len(rec.silence)} statuses; silence during the outage {during[:40]}; logs:\n{logs}")
    # the silent vehicle is named (CPU starvation on 2 shared cores can make the others stale too)
    limit = drop["t_start"] + scenario["mission"].constraints.stale_timeout_s
    named = [s for s in stale if set(drop["uavs"]) <= set(s["values"]["uavs"].split(","))]
    assert named and named[0]["values"]["t"] - base <= limit + DECISION_S, (named[:1], limit)
    assert all(set(drop["uavs"]) <= set(s["values"]["uavs"].split(",")) for s in stale
               if s["values"]["t"] - base >= limit + DECISION_S)
    assert next(v for stamp, v in reversed(rec.verdicts) if stamp - base <= limit + DECISION_S)
    ups = [c - base for _, v, c in rec.veto if v and c is not None]
    assert any(u <= limit + LATENCY_TARGET_S for u in ups), (ups, limit)
    # reports kept coming after the outage, for segments that start after it
    starts = [round(r["live"]["segment"]["t_start"] - base, 2) for r in rec.reports]
    assert any(t >= drop["t_end"] for t in starts), (starts, drop)
    assert reply.success, reply.message
    triggered = json.loads(reply.message)
    assert triggered["live"]["segment"]["reason"] == "trigger"
    assert triggered["mission"]["uavs"] and set(triggered["mission"]["uavs"]) <= set(scenario["names"])


def _node_cmd(name: str, config: Path) -> list[str]:
    return [sys.executable, "-m", f"uav_debate_eval.nodes.{name}", "--ros-args", "--params-file", str(config)]


@contextlib.contextmanager
def node_processes(tmp_path: Path, env: dict[str, str], config: Path):
    """The launch-file layout, one process per node: the three monitors, then (once the verifier is up) the
    simulator. Yields the recorder and the processes by node name; on exit all are stopped."""
    rec = Recorder(env)
    procs = {name: _start(_node_cmd(name, config), env, tmp_path / f"{name}.log")
             for name in ("safety_verifier", "dsl_builder", "debate_panel")}
    try:
        _wait_for_monitor(rec)
        procs["swarm_sim"] = _start(_node_cmd("swarm_sim", config), env, tmp_path / "swarm_sim.log")
        yield rec, procs
    finally:
        for proc in procs.values():
            _stop(proc)
        rec.close()


def test_each_node_in_its_own_process_and_a_killed_panel_rejoins(tmp_path: Path, ros_domain: int):
    """The panel is killed mid-flight and restarted alone."""
    duration = 40.0
    config, scenario = _write_config(tmp_path, [], duration)
    with node_processes(tmp_path, _env(ros_domain), config) as (rec, procs):
        rec.wait(lambda: rec.truth is not None, 30, "the simulator's latched truth")
        base = rec.truth["stamp_base"]
        rec.wait(lambda: len(rec.segments) >= 1, 60, "the first segment")
        procs["debate_panel"].kill()  # no clean shutdown
        procs["debate_panel"].wait()
        killed_at = rec.clock - base  # flight time: the reports' clock (the builder's, from its first pose)
        procs["debate_panel"] = _start(_node_cmd("debate_panel", config), _env(ros_domain),
                                       tmp_path / "debate_panel2.log")
        try:
            rec.wait(lambda: any(r["live"]["segment"]["t_start"] >= killed_at for r in rec.reports), 120,
                     "a report from the restarted panel")
        except AssertionError as exc:  # say where the flight and the segments were, and what the panels logged
            segments = [(s["id"], round(s["t_start"] - base, 1)) for s in rec.segments]
            where = f"killed at flight t={killed_at:.1f} s, flight now at {rec.clock - base:.1f} s"
            reports = [(r["live"]["segment"]["id"], r["live"]["segment"]["t_start"]) for r in rec.reports]
            raise AssertionError(f"{exc}; {where}, segments {segments}, reports {reports}; "
                                 f"logs:\n{_panel_logs(tmp_path)}") from exc
    logs = _panel_logs(tmp_path)
    assert rec.clock - base >= 20.0, "the flight went on while the panel was down"
    later = [r for r in rec.reports if r["live"]["segment"]["t_start"] >= killed_at]
    assert later and all(r["mission"]["uavs"] == scenario["names"] for r in later), logs
    # the restarted panel dates its segments on the flight's clock, not from the first pose it heard
    cut = {s["id"]: s["t_start"] - s["flight_origin"] for s in rec.segments}
    for r in later:
        assert abs(r["live"]["segment"]["t_start"] - cut[r["live"]["segment"]["id"]]) < 1e-6, logs
    # the restarted panel wrote its reports on disk too, numbered without clashes
    dirs = sorted(p.name for p in (tmp_path / "out").glob("[0-9]" * 5 + "_*"))
    assert len(dirs) == len(set(d[:5] for d in dirs)) >= 1
