"""The end of a live session over real DDS: Ctrl-C on `live`, the simulator's announced end, and a panel
killed outright. Each ends cleanly: exit 0, no traceback, the flight report written, no process left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_ros_live import Recorder, _env, _tail, _write_config, node_processes

from uav_debate_eval.report.schema import validate_report

pytestmark = [pytest.mark.ros, pytest.mark.slow]

BAD_OUTPUT = ("Traceback", "terminate called", "KeyboardInterrupt", "never retrieved")


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (from /proc's children lists)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = {int(k) for k in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += list(kids - found)
            found |= kids
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pids: set[int], timeout_s: float) -> set[int]:
    end = time.monotonic() + timeout_s
    while (left := {p for p in pids if _alive(p)}) and time.monotonic() < end:
        time.sleep(0.05)
    return left


def _live_sim(config: Path, out: Path, env: dict, log: Path, *extra: str) -> subprocess.Popen:
    """`live --sim` in a session of its own, so the test can Ctrl-C its whole process group like a terminal."""
    cmd = [sys.executable, "-m", "uav_debate_eval.cli", "live", "--config", str(config), "--out", str(out),
           "--llm", "rules", "--sim", *extra]
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.parametrize("stop", ["ctrl-c", "systemd"])
def test_ctrl_c_on_live_writes_the_flight_report_and_exits_0(tmp_path: Path, ros_domain: int, stop: str):
    """`ctrl-c`: the terminal's SIGINT to live's process group; `systemd`: a service stop, SIGTERM to every
    process of the session at once (the verifier, the simulator, the workers too: before, the workers died of it
    mid-report and the flight report was lost)."""
    env = _env(ros_domain)
    config, _ = _write_config(tmp_path, ["near_miss"], 60.0)
    out, log = tmp_path / "out", tmp_path / "live.log"
    live = _live_sim(config, out, env, log)
    try:
        end = time.monotonic() + 120
        while not list(out.glob("0000[1-9]_S*")) and time.monotonic() < end and live.poll() is None:
            time.sleep(0.2)
        assert list(out.glob("0000[1-9]_S*")), f"no segment report before Ctrl-C:\n{_tail(log)}"
        children = _descendants(live.pid)
        assert children, "live runs the simulator and its worker processes"
        if stop == "ctrl-c":
            os.killpg(live.pid, signal.SIGINT)  # the terminal's Ctrl-C reaches the whole foreground group
        else:  # KillMode=control-group
            for pid in (live.pid, *children):
                os.kill(pid, signal.SIGTERM)
        rc = live.wait(timeout=120)
    finally:
        if live.poll() is None:
            os.killpg(live.pid, signal.SIGKILL)
            live.wait()
    text = log.read_text()
    assert rc == 0, text[-3000:]
    assert not [b for b in BAD_OUTPUT if b in text], text[-3000:]
    report = json.loads((out / "flight" / "report.json").read_text())
    validate_report(report)
    assert (out / "flight" / "report.html").is_file() and (out / "flight" / "report.md").is_file()
    segments = report["live"]["segments"]
    assert len(segments) >= 2 and segments[0]["t_start"] == pytest.approx(0.0, abs=1.0)
    assert "flight verdict:" in text and "flight report:" in text
    assert not _gone(children, 10.0), "a child process outlived `live`"


def test_announced_end_of_the_flight_closes_it_without_a_stale_veto(tmp_path: Path, ros_domain: int):
    """The simulator says its flight is over: the last segment closes at once ('end'), no vehicle is called
    stale when the poses stop, `live` exits 0 by itself."""
    env = _env(ros_domain)
    config, scenario = _write_config(tmp_path, [], 14.0)
    out, log = tmp_path / "out", tmp_path / "live.log"
    rec = Recorder(env)
    live = _live_sim(config, out, env, log)
    try:
        rc = live.wait(timeout=180)
        time.sleep(0.5)
    finally:
        if live.poll() is None:
            os.killpg(live.pid, signal.SIGKILL)
            live.wait()
        rec.close()
    text = log.read_text()
    assert rc == 0, text[-3000:]
    stale = [s for s in rec.status if s["name"] == "safety/stale_data"]
    assert not stale, f"stale_data at the end of the flight: {stale[:3]}"
    report = json.loads((out / "flight" / "report.json").read_text())
    assert report["live"]["segments"][-1]["t_end"] == pytest.approx(14.0, abs=1.0)
    assert not [v for v in report["violations"] if v["constraint"] == "stale_data"]
    assert rec.segments and rec.segments[-1]["reason"] == "end"
    assert set(report["mission"]["uavs"]) == set(scenario["names"])


def test_a_sigkilled_panel_leaves_no_worker_behind(tmp_path: Path, ros_domain: int):
    config, _ = _write_config(tmp_path, [], 40.0)
    with node_processes(tmp_path, _env(ros_domain), config) as (rec, procs):
        rec.wait(lambda: len(rec.reports) >= 1, 90, "the panel's first report")  # its worker process exists
        workers = _descendants(procs["debate_panel"].pid)
        assert workers, "the panel evaluates in a worker process"
        procs["debate_panel"].kill()
        procs["debate_panel"].wait()
        left = _gone(workers, 3.0)
    assert not left, f"orphan worker(s) {left} after the panel was SIGKILLed"


def test_a_sigkilled_live_leaves_no_simulator_or_worker_behind_and_its_flight_on_the_tape(tmp_path: Path,
                                                                                         ros_domain: int):
    """SIGKILL: no flight report, but the poses taped as the segments closed are a flight `evaluate` reads, and the
    next session on the same OUT keeps them (before: the tape named no vehicle and the next session deleted it)."""
    env = _env(ros_domain)
    config, scenario = _write_config(tmp_path, [], 40.0)
    out, log = tmp_path / "out", tmp_path / "live.log"
    live = _live_sim(config, out, env, log)
    try:
        end = time.monotonic() + 120
        while not list(out.glob("0000[1-9]_S*")) and time.monotonic() < end and live.poll() is None:
            time.sleep(0.2)  # the first report: the simulator, the DSL and the panel workers all run
        children = _descendants(live.pid)
        assert len(children) >= 2, f"expected the simulator and workers below live: {children}"
        live.kill()
        live.wait()
        left = _gone(children, 3.0)
    finally:
        if live.poll() is None:
            os.killpg(live.pid, signal.SIGKILL)
            live.wait()
    assert not left, f"processes left after live was SIGKILLed: {left}"
    assert not (out / "flight" / "report.json").exists()
    from uav_debate_eval.cli import main
    from uav_debate_eval.core.streaming import StreamingSwarm
    from uav_debate_eval.live.evaluator import SegmentEvaluator
    from uav_debate_eval.live.segment_job import PanelSettings
    from uav_debate_eval.live.veto_history import VetoHistory

    logs: list[tuple[str, str]] = []
    ev = SegmentEvaluator(PanelSettings(output_dir=str(out)), scenario["mission"], VetoHistory(), max_pending=2,
                          publish=lambda report: None, log=lambda level, text: logs.append((level, text)),
                          clock_jumps=lambda: 0, swarm=StreamingSwarm(capacity=10))
    assert ev.close() is None  # the next session: it received nothing
    [kept] = list(out.glob("unfinished-*"))
    assert ("warning", f"the previous session in {out} ended without its flight report: its poses are kept in "
                       f"{kept} (uav-debate-eval evaluate {kept / 'tape'})") in logs
    assert main(["evaluate", str(kept / "tape"), "--out", str(tmp_path / "kept"), "--llm", "rules", "--quiet"]) == 0
    report = json.loads((tmp_path / "kept" / "report.json").read_text())
    validate_report(report)
    assert report["mission"]["uavs"] == scenario["names"] and report["mission"]["t_end"] >= 9.0
    assert report["mission"]["name"] == scenario["mission"].name  # the session's mission, kept with its tape
