"""The live monitor's ROS-free core (uav_debate_eval/live/): segment cutting, the live veto override,
parameter files, report rotation, the worker processes and the flight-level report. No rclpy here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.live import workers
from uav_debate_eval.live.config import find_config, mission_from_param, read_params_file
from uav_debate_eval.live.segment_job import PanelJob, PanelSettings, evaluate_segment, write_rotated
from uav_debate_eval.live.segments import SegmentCutter, announced_end, end_message
from uav_debate_eval.live.veto_history import VetoEpisode, VetoEvidence, apply_live_veto
from uav_debate_eval.report.schema import validate_report

# -- segment cutter (pure logic) ---------------------------------------------------------------------------

def test_window_mode_cuts_back_to_back_windows():
    cut = SegmentCutter("window", window_s=10.0, min_segment_s=2.0, max_segment_s=60.0)
    segs = [s for t in np.arange(0.0, 35.01, 0.5) if (s := cut.on_time(float(t)))]
    assert [(s.id, s.t_start, s.t_end, s.reason) for s in segs] == [
        ("S1", 0.0, 10.0, "window"), ("S2", 10.0, 20.0, "window"), ("S3", 20.0, 30.0, "window")]
    idle = cut.on_idle(35.0)
    assert (idle.id, idle.t_start, idle.t_end, idle.reason) == ("S4", 30.0, 35.0, "idle")
    assert cut.on_idle(36.0) is None  # shorter than min_segment_s: merged into the next one
    end = cut.on_idle(36.0, "end")  # the flight is over: no next segment to merge into
    assert (end.id, end.t_start, end.t_end, end.reason) == ("S5", 35.0, 36.0, "end")


def test_the_first_segment_starts_at_the_first_sample_however_late_the_timer_ticks():
    """A node's timer may fire seconds after the first poses (an executor under load): the first segment still
    starts at the first sample's stamp, and again at the first sample after a reset."""
    cut = SegmentCutter("window", window_s=10.0, min_segment_s=2.0, max_segment_s=60.0)
    for t in np.arange(0.0, 1.81, 0.1):
        cut.on_sample(float(t))
    assert cut.on_time(1.8) is None and cut.start == 0.0
    seg = cut.on_time(10.2)
    assert (seg.id, seg.t_start, seg.t_end) == ("S1", 0.0, 10.0)
    cut.reset()
    cut.on_sample(3.0)
    cut.on_sample(3.1)
    assert cut.on_time(4.9) is None and cut.start == 3.0


def test_an_announced_end_waits_for_the_poses_that_it_overtook():
    """The end-of-flight message names the last poses' stamp; poses still queued behind it must end up in the
    last segment, so it closes when the stream reaches that stamp, not at the newest pose seen so far."""
    cut = SegmentCutter("window", window_s=10.0, min_segment_s=2.0, max_segment_s=60.0)
    for t in np.arange(20.0, 28.01, 0.5):
        assert cut.on_time(float(t)) is None
    assert announced_end(end_message(30.0)) == 30.0
    assert cut.on_end(30.0, newest=28.0) is None and not cut.end_due(29.5)
    assert cut.on_time(29.5) is None
    assert cut.end_due(30.0)
    end = cut.on_idle(30.0, "end")
    assert (end.t_start, end.t_end, end.reason) == (20.0, 30.0, "end") and cut.end_t is None
    # an end the stream has already reached, or one that names no time, closes at once
    assert cut.on_time(31.0) is None
    assert cut.on_end(31.5, newest=33.0).t_end == 33.0
    for text in ("{}", "not json", '{"t_end": "nan"}', '{"t_end": null}'):
        assert announced_end(text) is None


def test_veto_mode_closes_on_the_falling_edge_and_at_max_length():
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
    ev = VetoEvidence("safety/min_separation", 2, "violated by uav1, uav2",
                      {"uavs": "uav1,uav2", "value": 0.31, "limit": 0.5, "t": 14.2})
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
    episode = VetoEpisode(14.0, t_off=21.0, t_violating=20.0)  # violation until 20, veto held until 21
    report = _report("safe")
    assert apply_live_veto(report, [episode], 20.5, 30.0) is False
    assert report["verdict"] == {"label": "safe", "vetoed": False, "summary": "panel says fine"}
    assert apply_live_veto(_report(), [VetoEpisode(25.0)], 20.5, 30.0) is True  # still open: overlaps


def test_offline_violation_is_not_duplicated():
    report = _report("risky")
    report["violations"] = [{"constraint": "min_separation", "t_start": 14.1, "t_end": 15.9, "uavs": ["uav1", "uav2"],
                             "worst_value": 0.3, "limit": 0.5}]
    ev = VetoEvidence("safety/min_separation", 2, "m", {"uavs": "uav1,uav2"})
    apply_live_veto(report, [VetoEpisode(14.0, 17.0, 16.0, [ev])], 0.0, 30.0)
    assert len(report["violations"]) == 1
    assert report["live"]["override"] is False  # it was risky already
    assert report["verdict"]["summary"] == "panel says fine"


def test_params_file_merges_wildcards_and_namespaces(tmp_path: Path):
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


def test_mission_names_resolve_to_packaged_files():
    assert mission_from_param("").constraints.min_separation_m == 0.5  # config/default_mission.yaml
    assert mission_from_param("demo_mission.yaml").uavs == ["uav1", "uav2", "uav3", "uav4", "uav5"]
    with pytest.raises(InputError, match="nope.yaml: config file not found"):
        find_config("nope.yaml")


def test_write_rotated_keeps_the_newest_and_points_latest(tmp_path: Path, monkeypatch):
    import uav_debate_eval.report.writer as writer

    def fake_write(evaluation, out):
        Path(out).mkdir(parents=True)
        (Path(out) / "report.json").write_text(json.dumps(evaluation))
    monkeypatch.setattr(writer, "write_reports", fake_write)
    for k in range(1, 6):
        write_rotated({"k": k}, tmp_path, f"{k:05d}_S{k}", keep=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00003_S3", "00004_S4", "00005_S5", "latest"]
    assert json.loads((tmp_path / "latest" / "report.json").read_text()) == {"k": 5}


def test_llm_down_gives_a_rules_report_that_says_why(tmp_path: Path):
    """The panel's worker side on a real (small) flight: the OpenAI server is unreachable."""
    import socket

    from uav_debate_eval.sim.scenarios import simulate

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sim = simulate("formation", seed=1, duration_s=12.0)
    settings = PanelSettings(backend="openai", model="gpt-test", base_url=f"http://127.0.0.1:{port}/v1",
                             output_dir=str(tmp_path), keep_reports=2)
    episode = VetoEpisode(3.0, 4.5, 3.5, [VetoEvidence("safety/stale_data", 2, "uav2 silent",
                                                       {"uavs": "uav2", "value": 0.7, "limit": 0.5, "t": 3.5})])
    job = PanelJob(settings, sim.mission, sim.traj, "S1", 0.0, 12.0, "window", [episode], 7, [], 0)
    os.environ.setdefault("OPENAI_API_KEY", "sk-test")
    result = evaluate_segment(job)
    report = result.report
    validate_report(report)
    assert report["debate"]["backend"] == "rules"
    assert report["live"]["llm_fallback"] and "openai" in report["live"]["llm_fallback"]
    assert report["verdict"]["summary"].startswith("[")
    assert report["verdict"]["label"] == "risky" and report["verdict"]["vetoed"] is True  # the live stale veto
    assert [v["constraint"] for v in report["violations"]] == ["stale_data"]
    assert result.path == str(tmp_path / "00007_S1") and (tmp_path / "00007_S1" / "report.json").is_file()


def test_worker_processes_run_below_the_verifier_priority():
    """DSL and debate work runs in a niced worker, so a saturated CPU serves the safety verifier first."""
    import os

    from uav_debate_eval.live.workers import WORKER_NICENESS, stop_pool, worker_pool

    pool = worker_pool()
    try:
        assert pool.submit(os.nice, 0).result(timeout=60) == os.nice(0) + WORKER_NICENESS
    finally:
        stop_pool(pool)


def test_malloc_settings_reach_the_worker_processes(monkeypatch):
    """The monitor's heap settings are in the environment, so the spawned workers start with them too."""
    if workers._glibc() is None:
        pytest.skip("not glibc")
    for _param, name, _value in workers.MALLOC_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    workers.tune_malloc()
    pool = workers.worker_pool()
    try:
        got = pool.submit(os.getenv, "MALLOC_ARENA_MAX").result(timeout=60)
    finally:
        workers.stop_pool(pool)
    assert got == "2"


def _running(pid: int) -> bool:
    try:  # a zombie (exited, not yet reaped by whoever adopted it) is not running
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


BUSY_WORKER = """
import os, sys, time
from uav_debate_eval.live.workers import worker_pool
pool = worker_pool()
print(pool.submit(os.getpid).result(timeout=120), flush=True)
pool.submit(time.sleep, 300)  # the worker is busy (a long debate) when its parent is killed
sys.stdin.read()
"""


@pytest.mark.slow
@pytest.mark.parametrize("busy", [False, True])
def test_worker_process_dies_with_its_sigkilled_parent(busy: bool):
    """A panel killed outright (SIGKILL) must not leave its ~170 MB worker behind, idle or mid-job: the kernel
    kills it (PR_SET_PDEATHSIG), the parent watch is the fallback."""
    code = BUSY_WORKER if busy else BUSY_WORKER.replace("pool.submit(time.sleep, 300)", "pass")
    node = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(node.stdout.readline())
        time.sleep(0.5)  # (busy: the sleep job has reached the worker)
        assert _running(worker)
        node.kill()
        node.wait()
        end = time.monotonic() + 3.0
        while _running(worker) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _running(worker), "orphan worker left behind"
    finally:
        node.kill()
        node.wait()
        if worker is not None and _running(worker):
            os.kill(worker, signal.SIGKILL)


def test_worker_ignores_the_terminals_ctrl_c_and_keeps_working():
    """Ctrl-C reaches the whole process group; the worker must not print a KeyboardInterrupt traceback."""
    pool = workers.worker_pool()
    try:
        pid = pool.submit(os.getpid).result(timeout=60)
        os.kill(pid, signal.SIGINT)
        time.sleep(0.3)
        assert _running(pid) and pool.submit(os.getpid).result(timeout=60) == pid
    finally:
        workers.stop_pool(pool)


GROUP_SIGNALLED = """
import os, signal, sys, time
from uav_debate_eval.live.workers import stop_pool, worker_pool
signal.signal(signal.SIGTERM, lambda *_: print("stopping", flush=True))  # as `live`: the parent decides
pool = worker_pool()
print(pool.submit(os.getpid).result(timeout=120), flush=True)
job = pool.submit(time.sleep, 1.5)  # the flight report, still being written
sys.stdin.readline()  # the test signals the group, then says go on
try:
    job.result(timeout=60)
    print("done", flush=True)
except Exception as exc:
    print(type(exc).__name__, flush=True)
stop_pool(pool)
"""


def test_a_sigterm_to_the_process_group_reaches_the_parent_not_its_worker():
    """`timeout`, `kill -- -PGID` and the terminal signal the whole process group; the worker must finish the job
    the parent asked for (before: SIGTERM killed it mid-job, BrokenProcessPool, no flight report)."""
    parent = subprocess.Popen([sys.executable, "-c", GROUP_SIGNALLED], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        worker = int(parent.stdout.readline())
        time.sleep(0.3)  # the sleep job has reached the worker
        os.killpg(parent.pid, signal.SIGTERM)
        time.sleep(0.3)
        assert _running(worker), "the worker died of a signal meant for its parent"
        out, _ = parent.communicate("go\n", timeout=120)
        assert out.split() == ["stopping", "done"]
    finally:
        parent.kill()
        parent.wait()


def test_a_sigterm_from_anyone_but_the_parent_leaves_the_worker_at_its_job():
    """systemd's stop signals every process of the service, the workers too: the job the parent asked for still
    finishes; the pool's own stop (SIGTERM from the parent) still ends the worker."""
    pool = workers.worker_pool()
    try:
        pid = pool.submit(os.getpid).result(timeout=60)
        job = pool.submit(time.sleep, 1.0)
        time.sleep(0.3)
        outsider = subprocess.run(["kill", "-TERM", str(pid)], check=False)
        assert outsider.returncode == 0
        assert job.result(timeout=60) is None and _running(pid)
    finally:
        workers.stop_pool(pool)
    end = time.monotonic() + 5
    while _running(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _running(pid), "the pool's stop no longer ends its worker"


def test_live_core_imports_no_rclpy():
    code = ("import sys\nimport uav_debate_eval.live.flight, uav_debate_eval.live.segment_job, "
            "uav_debate_eval.live.segments, uav_debate_eval.live.config, uav_debate_eval.live.workers\n"
            "assert 'rclpy' not in sys.modules, 'rclpy imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# -- the flight-level report (test_live_flight.py: the whole flight through evaluate) ----------------------------

def test_veto_history_records_episodes_with_the_verifiers_times():
    from uav_debate_eval.live.veto_history import VetoHistory

    history = VetoHistory()
    sep = VetoEvidence("safety/min_separation", 2, "violated", {"uavs": "a,b", "t": 14.2})
    history.on_status([sep], 14.0)  # no veto up: ignored
    history.on_veto(True, 14.5)  # the Bool arrives with the newest pose's time
    history.on_status([VetoEvidence("safety/veto", 2, "VETO"), sep], 14.5)
    history.on_status([VetoEvidence("safety/min_separation", 2, "violated", {"t": 15.0})], 15.0)
    history.on_veto(False, 16.0)
    (ep,) = history.snapshot()
    assert (ep.t_on, ep.t_violating, ep.t_off) == (14.2, 15.0, 16.0)  # on at the verifier's own time
    assert [e.name for e in ep.evidence] == ["safety/min_separation", "safety/min_separation"]
    history.clear()
    assert history.snapshot() == []


def test_segment_evaluator_skips_duplicates_publishes_and_writes_the_flight(tmp_path: Path):
    from uav_debate_eval.live.evaluator import SegmentEvaluator
    from uav_debate_eval.live.veto_history import VetoHistory
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("formation", seed=0, duration_s=12.0)
    published, logs = [], []
    swarm = StreamingSwarm(capacity=1000)
    for t, u, p in sorted((t, u, tuple(p)) for u, tr in sim.traj.tracks.items()
                          for t, p in zip((tr.t + sim.traj.t0).tolist(), tr.pos, strict=True)):
        swarm.add(u, t, p)
    ev = SegmentEvaluator(PanelSettings(output_dir=str(tmp_path)), sim.mission, VetoHistory(), max_pending=2,
                          publish=published.append, log=lambda level, text: logs.append((level, text)),
                          clock_jumps=lambda: 0, swarm=swarm)
    try:
        t0 = sim.traj.t0
        assert ev.admit("S1", t0) and not ev.admit("S1", t0)  # a latched segment seen again
        report = ev.submit("S1", t0, t0 + 12.0, "window", sim.traj).result(timeout=120)
        assert published == [report] and report["live"]["segment"]["id"] == "S1"
        assert ev.pending == 0 and ev.last_end == t0 + 12.0
        assert [s["id"] for s in ev.evaluated] == ["S1"] and (tmp_path / "00001_S1" / "report.json").is_file()
    finally:
        assert ev.close() == tmp_path / "flight"
    flight = json.loads((tmp_path / "flight" / "report.json").read_text())
    assert flight["live"]["segments"][0]["id"] == "S1" and flight["verdict"]["label"] == report["verdict"]["label"]
    assert flight["live"]["tape"]["samples"] == sim.traj.n_samples and not (tmp_path / "flight" / ".tape").exists()
    assert (tmp_path / "flight" / "flight.mcap").is_file() and list((tmp_path / "flight" / "figures").glob("*.png"))
    assert ("info", f"segment S1: {report['verdict']['label']}, backend rules, {tmp_path / '00001_S1'}") in logs


def crash_unless_told_to_fall_back(job: PanelJob):
    """A worker job that dies like llama.cpp's segfault does, unless the panel already fell back to rules."""
    if job.forced_fallback is None:
        os._exit(139)
    return evaluate_segment(job)


def test_a_worker_that_dies_in_the_llm_redoes_the_segment_with_rules(tmp_path: Path, monkeypatch):
    from uav_debate_eval.live import evaluator as evaluator_mod
    from uav_debate_eval.live.veto_history import VetoHistory
    from uav_debate_eval.sim.scenarios import simulate

    monkeypatch.setattr(evaluator_mod, "evaluate_segment", crash_unless_told_to_fall_back)
    sim = simulate("formation", seed=0, duration_s=12.0)
    logs = []
    ev = evaluator_mod.SegmentEvaluator(
        PanelSettings(backend="local", write_files=False), sim.mission, VetoHistory(), max_pending=2,
        publish=lambda report: None, log=lambda level, text: logs.append((level, text)), clock_jumps=lambda: 0,
        swarm=StreamingSwarm())
    try:
        first = ev.submit("S1", 0.0, 12.0, "window", sim.traj).result(timeout=120)
        second = ev.submit("S2", 0.0, 12.0, "window", sim.traj).result(timeout=120)
    finally:
        ev.close()
    why = "the worker process died in the local LLM backend; rules backend used"
    for report in (first, second):
        assert report["debate"]["backend"] == "rules" and report["live"]["llm_fallback"] == why
        assert report["verdict"]["summary"].startswith(f"[{why}]")
    said = [text for level, text in logs if level == "warning" and text.startswith("segment")]
    assert said == [f"segment S1: {why}"]  # S2 went straight to rules


def hang_unless_told_to_fall_back(job: PanelJob):
    """A worker job whose LLM never finishes (a starved embedded model), unless the panel already fell back."""
    if job.forced_fallback is None:
        time.sleep(3600)
    return evaluate_segment(job)


def test_the_flight_report_survives_a_segment_whose_llm_times_out_meanwhile(tmp_path: Path, monkeypatch):
    """Ctrl-C twice skipped the open segment while its LLM still ran; the flight report queued behind it on the same
    worker, and the segment's timeout stopped that worker: 'flight report failed: BrokenProcessPool' and no report
    (issue 32's soak). The flight report has a worker of its own."""
    import threading

    from uav_debate_eval.live import evaluator as evaluator_mod
    from uav_debate_eval.live.veto_history import VetoHistory
    from uav_debate_eval.sim.scenarios import simulate

    monkeypatch.setattr(evaluator_mod, "evaluate_segment", hang_unless_told_to_fall_back)
    sim = simulate("formation", seed=0, duration_s=12.0)
    swarm = StreamingSwarm(capacity=1000)
    for uav, track in sim.traj.tracks.items():
        for t, p in zip(track.t.tolist(), track.pos.tolist(), strict=True):
            swarm.add(uav, t, p)
    logs = []
    ev = evaluator_mod.SegmentEvaluator(
        PanelSettings(backend="local", llm_timeout_s=8.0, output_dir=str(tmp_path), write_files=False), sim.mission,
        VetoHistory(), max_pending=2, publish=lambda report: None,
        log=lambda level, text: logs.append((level, text)), clock_jumps=lambda: 0, swarm=swarm)
    try:
        segment = ev.submit("S1", 0.0, 12.0, "end", sim.traj)
        time.sleep(1.0)  # the segment's job is in the worker, its LLM hanging
        flight = threading.Thread(target=ev.close_flight)
        flight.start()
        segment.result(timeout=300)  # timed out at 8 s, redone with rules
        flight.join(timeout=300)
    finally:
        ev.close()
    assert not any("flight report failed" in text for _, text in logs), logs
    assert ev.flight_report is not None and ev.flight_report["verdict"]["label"]
    assert any("did not finish within 8 s" in text for _, text in logs), logs


def test_a_second_ctrl_c_skips_the_flight_report_and_keeps_the_poses(tmp_path: Path):
    import threading

    from uav_debate_eval.live.evaluator import SegmentEvaluator
    from uav_debate_eval.live.veto_history import VetoHistory

    swarm = StreamingSwarm(capacity=100)
    for k in range(50):
        swarm.add("uav1", 100.0 + 0.1 * k, (0.1 * k, 0.0, 1.0))
    logs = []
    ev = SegmentEvaluator(PanelSettings(output_dir=str(tmp_path)), parse_mission_text(), VetoHistory(), max_pending=2,
                          publish=lambda report: None, log=lambda level, text: logs.append((level, text)),
                          clock_jumps=lambda: 0, swarm=swarm)
    stop = threading.Event()
    stop.set()
    try:
        assert ev.close_flight(stop) is None and ev.flight_report is None
    finally:
        ev.close()
    assert list((tmp_path / "flight" / ".tape").glob("*.npy")) and not (tmp_path / "flight" / "report.json").exists()
    assert any("flight report skipped" in text for _, text in logs)


def parse_mission_text():
    from uav_debate_eval.core.mission_file import parse_mission

    return parse_mission("mission: {name: skip}\nconstraints: {min_separation_m: 0.5}\n", "test")


FROZEN_AT_SPIN = """
import gc, weakref
from rclpy.node import Node
from uav_debate_eval.nodes.run import run_node

class Cycle:
    pass

def make():
    loop = Cycle()
    loop.me = loop  # start-up garbage: collected before the freeze, not kept forever
    global dead
    dead = weakref.ref(loop)
    return Node("freeze_probe")

def spin(node):
    tracked = len(gc.get_objects())
    print(dead() is None, gc.get_freeze_count() > 20_000, tracked < 2_000)

run_node("probe", make, spin, args=[])
"""


def test_a_node_process_spins_with_its_start_up_objects_out_of_the_collectors_scans():
    """run_node (every node's own process, the verifier's too) collects the start-up's garbage and freezes what is
    left: a full collection during the flight walks only what the flight made (~30 ms for the verifier's start-up
    objects, inside a check or a breaking pose's callback)."""
    env = {**os.environ, "ROS_DOMAIN_ID": "97", "ROS_LOCALHOST_ONLY": "1"}
    out = subprocess.run([sys.executable, "-c", FROZEN_AT_SPIN], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True", "True"]


SIGNAL_AT_EXIT = """
import os, signal, sys, threading, time
from uav_debate_eval.commands.live import _stop_on_signals

hurry, interrupted, stop = threading.Event(), threading.Event(), threading.Event()
with _stop_on_signals(hurry, interrupted, stop):
    os.kill(os.getpid(), signal.SIGINT)  # the Ctrl-C that stops the session
    time.sleep(0.2)
assert interrupted.is_set() and stop.is_set()
threading.Thread(target=time.sleep, args=(30,)).start()  # a thread the interpreter joins at exit
print("stopping", flush=True)
"""


def test_a_ctrl_c_while_the_session_winds_down_exits_at_once_without_a_traceback():
    """After the stop, one more Ctrl-C (the interpreter joining a thread at exit) ends the process at once with 130,
    not a KeyboardInterrupt traceback from the join."""
    proc = subprocess.Popen([sys.executable, "-c", SIGNAL_AT_EXIT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "stopping"
    time.sleep(0.5)  # in the join at exit
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 130 and "Traceback" not in err, err


def test_a_session_without_an_evaluated_segment_says_why():
    from uav_debate_eval.commands.live import _why_none

    assert _why_none([], 0) == "no poses received? check the topics and the domain id"
    why = _why_none(["S3", "S4"], 1)
    assert why.startswith("2 skipped while the panel was busy (S3, S4); 1 still being evaluated at the stop")
    assert "poses" not in why
