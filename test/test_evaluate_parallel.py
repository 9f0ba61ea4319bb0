"""Issue 15: the second core. Segments evaluated in a forked child and figures drawn beside the evaluation must
give exactly what one process gives; a failing child loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.report import figure_job
from uav_debate_eval.report.figures import FIGURES, render_figures
from uav_debate_eval.runner import flight_helper, pipeline, segment_work
from uav_debate_eval.runner.forked import ChildLost, Forked
from uav_debate_eval.sim.scenarios import simulate


@pytest.fixture(scope="module")
def flight():
    sim = simulate("formation", seed=0, faults=["near_miss"])
    return sim.traj, sim.mission


def _evaluate(traj, mission, **kw):
    return pipeline.evaluate(traj, mission, DebateConfig(), **kw)


def _sections(ev) -> dict:
    report = dict(ev.report)
    report.pop("timing")
    report["debate"] = {k: v for k, v in report["debate"].items() if k != "elapsed_s"}
    return report


def _child_claims_first(monkeypatch):
    """The parent hands over the flight's events only once the child has claimed a segment (deterministic test)."""
    real = segment_work.SegmentWork.events_ready

    def ready(self, events):
        deadline = time.monotonic() + 20
        while self.child is not None and self.counter.value < 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        real(self, events)

    monkeypatch.setattr(segment_work.SegmentWork, "events_ready", ready)


def test_segments_in_a_child_equal_one_process(flight, monkeypatch, tmp_path):
    traj, mission = flight
    serial = _evaluate(traj, mission)
    assert len(serial.segments) > 1
    monkeypatch.setattr(segment_work, "PARALLEL_MIN_SAMPLES", 0)
    _child_claims_first(monkeypatch)
    real = segment_work._child
    seen = tmp_path / "child.pid"

    def spy(*args):
        out = real(*args)
        seen.write_text(f"{os.getpid()} {len(out)}")
        return out

    monkeypatch.setattr(segment_work, "_child", spy)
    here = []
    one = segment_work.segment_context
    monkeypatch.setattr(segment_work, "segment_context", lambda *a: here.append(a[2].id) or one(*a))
    parallel = _evaluate(traj, mission)
    pid, made = map(int, seen.read_text().split())
    assert pid != os.getpid() and made >= 1  # the child made segments
    assert len(here) == len(serial.segments) - made  # and they were not made again here
    assert _sections(parallel) == _sections(serial)
    for a, b in zip(parallel.segments, serial.segments, strict=True):
        assert (a.id, a.t_start, a.t_end) == (b.id, b.t_start, b.t_end)


def _claim_one_and_die(_inbox, *args):
    segment_work._claim(args[-1], args[2])
    os._exit(9)


@pytest.mark.parametrize("child", [lambda *a: os._exit(9), _claim_one_and_die])
def test_a_lost_segment_child_is_made_up_here(flight, monkeypatch, child):
    traj, mission = flight
    serial = _evaluate(traj, mission)
    monkeypatch.setattr(segment_work, "PARALLEL_MIN_SAMPLES", 0)
    monkeypatch.setattr(segment_work, "_child", child)
    assert _sections(_evaluate(traj, mission)) == _sections(serial)


def test_figures_drawn_beside_equal_figures_drawn_after(flight, tmp_path, monkeypatch):
    from uav_debate_eval.report import figures
    from uav_debate_eval.report.writer import write_reports

    traj, mission = flight
    ev = _evaluate(traj, mission, figures=True)
    assert ev.figure_job is not None and ev.figure_job.child is not None
    expected = render_figures(ev)
    drawn_here: list = []  # the child was forked before this: only a fallback in this process would call it
    monkeypatch.setattr(figures, "render_figures", lambda *a, **k: drawn_here.append(a) or {})
    write_reports(ev, tmp_path / "out")
    assert not drawn_here, "the figure child failed: the figures were drawn here instead"
    assert ev.figure_job is None
    written = {p.stem: p.read_bytes() for p in (tmp_path / "out" / "figures").glob("*.png")}
    assert set(written) == set(FIGURES) - {"rules"}
    assert written == expected  # byte for byte: the child drew from the same data


@pytest.mark.parametrize("send_up_to", [0, figure_job.SEND_CLEAN_SAMPLES])
def test_a_figure_child_cleans_a_trajectory_the_assessment_changed(flight, tmp_path, monkeypatch, send_up_to):
    """A one-frame position excursion is left out by the assessment: the child, forked with the trajectory as read,
    must draw what this process draws from the clean trajectory, which it gets (a small one) or makes itself."""
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.report import figures
    from uav_debate_eval.report.writer import write_reports

    monkeypatch.setattr(figure_job, "SEND_CLEAN_SAMPLES", send_up_to)

    traj, mission = flight
    tracks = dict(traj.tracks)
    u = next(iter(tracks))
    pos = tracks[u].pos.copy()
    pos[len(pos) // 2] += (40.0, 0.0, 0.0)  # a motion-capture swap for one frame
    tracks[u] = tracks[u].select(slice(None))
    tracks[u].pos = pos
    raw = SwarmTrajectory(tracks, traj.ingest, traj.name, traj.t0)
    ev = _evaluate(raw, mission, figures=True)
    assert any(f.kind == "position_jump" for f in ev.safety.data_quality.findings)
    assert ev.traj.tracks[u] is not raw.tracks[u]
    expected = render_figures(ev)
    drawn_here: list = []
    monkeypatch.setattr(figures, "render_figures", lambda *a, **k: drawn_here.append(a) or {})
    write_reports(ev, tmp_path / "out")
    assert not drawn_here
    assert {p.stem: p.read_bytes() for p in (tmp_path / "out" / "figures").glob("*.png")} == expected


def test_a_killed_figure_child_costs_no_figure(flight, tmp_path):
    from uav_debate_eval.report.writer import write_reports

    traj, mission = flight
    ev = _evaluate(traj, mission, figures=True)
    os.kill(ev.figure_job.child._proc.pid, signal.SIGKILL)
    write_reports(ev, tmp_path / "out")
    assert {p.stem for p in (tmp_path / "out" / "figures").glob("*.png")} == set(FIGURES) - {"rules"}


def _boom(_inbox):
    raise ValueError("bad segment")


def _echo_twice(inbox, x):
    return (x, inbox.recv())


def test_forked_returns_raises_and_reports_a_lost_child():
    with Forked(_echo_twice, 3) as child:
        child.send("more")
        assert child.result() == (3, "more")
    with pytest.raises(ValueError, match="bad segment"), Forked(_boom) as child:
        child.result()
    with Forked(lambda _inbox: time.sleep(30)) as child:
        os.kill(child._proc.pid, signal.SIGKILL)
        with pytest.raises(ChildLost):
            child.result()


def test_forked_child_dies_with_its_parent(tmp_path):
    """A child of a process that is SIGKILLed does not live on (PR_SET_PDEATHSIG)."""
    import subprocess
    import sys

    pid_file = tmp_path / "child.pid"
    code = ("import os, time\nfrom uav_debate_eval.runner.forked import Forked\n"
            f"def wait(_inbox):\n    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n    time.sleep(60)\n"
            "c = Forked(wait)\ntime.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        child = int(pid_file.read_text())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        for _ in range(100):
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail("the child outlived its parent")
    finally:
        parent.kill()


def test_stages_load_beside_the_read_of_a_large_input_only(tmp_path, monkeypatch):
    import json

    from uav_debate_eval.cli import main
    from uav_debate_eval.runner import preload

    sim = simulate("formation", seed=0, duration_s=20.0)
    sim.write(tmp_path / "f", formats=("csv",))
    csv_path = tmp_path / "f" / "trajectory.csv"
    assert preload.preload_stages([csv_path]) is None  # small: read first, load after
    started = []
    real = preload.preload_stages
    monkeypatch.setattr(preload, "PRELOAD_MIN_BYTES", 0)
    monkeypatch.setattr(preload, "preload_stages", lambda paths: started.append(real(paths)) or started[-1])
    assert main(["evaluate", str(csv_path), "--out", str(tmp_path / "a"), "--quiet"]) in (0, 3, 4)
    assert started and started[0] is not None and not started[0].is_alive()
    monkeypatch.setattr(preload, "PRELOAD_MIN_BYTES", 10**12)
    assert main(["evaluate", str(csv_path), "--out", str(tmp_path / "b"), "--quiet"]) in (0, 3, 4)

    def report(name):
        r = json.loads((tmp_path / name / "report.json").read_text())
        r.pop("timing")
        r["debate"].pop("elapsed_s", None)
        return r

    assert report("a") == report("b")


def test_segments_are_claimed_longest_first():
    from multiprocessing import get_context
    from types import SimpleNamespace

    segs = [SimpleNamespace(t_start=0.0, t_end=1.0), SimpleNamespace(t_start=1.0, t_end=6.0),
            SimpleNamespace(t_start=6.0, t_end=9.0), SimpleNamespace(t_start=9.0, t_end=10.0)]
    counter = get_context("fork").Value("i", 0)
    claims = []
    while (i := segment_work._claim(counter, segs)) is not None:
        claims.append(i)
    assert claims == [1, 2, 0, 3]


def test_the_segment_child_finishes_a_window_before_it_cuts_the_next(flight, monkeypatch, tmp_path):
    """Issue 35 (memory): a window's kinematics and grids live in the child one window at a time, even while the
    flight's events are late; the contexts stay those of one process."""
    traj, mission = flight
    serial = _evaluate(traj, mission)
    monkeypatch.setattr(segment_work, "PARALLEL_MIN_SAMPLES", 0)
    real = segment_work.SegmentWork.events_ready

    def late(self, events):  # the events come once the child claimed a second segment (at most 2 s late)
        deadline = time.monotonic() + 2.0
        while self.child is not None and self.counter.value < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        real(self, events)

    monkeypatch.setattr(segment_work.SegmentWork, "events_ready", late)
    log = tmp_path / "calls.log"
    cut, finish = segment_work.window_metrics, segment_work._evidence

    def note(what, fn):
        def spy(*args):
            with log.open("a") as fh:
                fh.write(f"{os.getpid()} {what} {args[2].id}\n")
            return fn(*args)
        return spy

    monkeypatch.setattr(segment_work, "window_metrics", note("cut", cut))
    monkeypatch.setattr(segment_work, "_evidence", note("done", finish))
    parallel = _evaluate(traj, mission)
    calls = [line.split() for line in log.read_text().splitlines()]
    child = [(what, seg) for pid, what, seg in calls if int(pid) != os.getpid()]
    assert child and child[0][0] == "cut"
    assert all(child[k] == ("cut", child[k + 1][1]) and child[k + 1][0] == "done" for k in range(0, len(child), 2))
    assert _sections(parallel) == _sections(serial)


def test_the_flight_kinematics_are_let_go_once_the_segments_are_done(flight):
    """The flight's smoothed kinematics (the windows take theirs inside) are dropped once the segments' evidence
    exists; asked again they are the same numbers."""
    import numpy as np

    from uav_debate_eval.metrics.kinematics import forget_kinematics, smooth_tracks

    traj, mission = flight
    ev = _evaluate(traj, mission)
    tracks = list(ev.traj.tracks.values())
    assert not any("_smoothed" in tr.__dict__ for tr in tracks)
    first = smooth_tracks(tracks)
    forget_kinematics(tracks)
    again = smooth_tracks(tracks)
    assert all(a is not b and np.array_equal(a.vel, b.vel) and np.array_equal(a.jerk, b.jerk)
               for a, b in zip(first, again, strict=True))


def test_a_show_sized_flights_child_cuts_no_window_before_the_segments_begin(flight, monkeypatch, tmp_path):
    """Issue 35 (memory): from HOLD_MIN_SAMPLES on the child's windows wait for the parent's segments, so they are
    not held beside the flight's events, metrics and DSL; the contexts stay those of one process."""
    traj, mission = flight
    serial = _evaluate(traj, mission)
    monkeypatch.setattr(segment_work, "PARALLEL_MIN_SAMPLES", 0)
    monkeypatch.setattr(segment_work, "HOLD_MIN_SAMPLES", 0)
    log = tmp_path / "calls.log"
    cut, contexts = segment_work.window_metrics, segment_work.SegmentWork.contexts

    def note(line: str) -> None:
        with log.open("a") as fh:
            fh.write(f"{os.getpid()} {line}\n")

    def spy_cut(*args):
        note("cut")
        return cut(*args)

    def spy_contexts(self, *args):
        time.sleep(0.5)  # a child that did not wait would have cut its first window by now
        note("segments")
        return contexts(self, *args)

    monkeypatch.setattr(segment_work, "window_metrics", spy_cut)
    monkeypatch.setattr(segment_work.SegmentWork, "contexts", spy_contexts)
    parallel = _evaluate(traj, mission)
    calls = [line.split() for line in log.read_text().splitlines()]
    child_cuts = [k for k, (pid, what) in enumerate(calls) if what == "cut" and int(pid) != os.getpid()]
    start = next(k for k, (_, what) in enumerate(calls) if what == "segments")
    assert child_cuts and min(child_cuts) > start
    assert _sections(parallel) == _sections(serial)


def test_a_single_segment_over_the_flight_reuses_the_flights_evidence(flight, monkeypatch):
    """One segment over the whole flight: its window would be the flight, so its metrics are the flight's (not cut
    and computed again) and its kinematics are kept for its DSL; the report is the one the window gives."""
    traj, mission = flight
    cut = []
    real = segment_work.window_metrics
    monkeypatch.setattr(segment_work, "window_metrics", lambda *a: cut.append(a[2].id) or real(*a))
    reused = _evaluate(traj, mission, segment_mode="window", window_s=1e6)
    assert len(reused.segments) == 1 and cut == []
    assert any("_smoothed" in tr.__dict__ for tr in reused.traj.tracks.values())  # kept for the segment's DSL
    monkeypatch.setattr(segment_work, "covers_flight", lambda *a: False)
    windowed = _evaluate(traj, mission, segment_mode="window", window_s=1e6)
    assert cut == [windowed.segments[0].id]
    assert not any("_smoothed" in tr.__dict__ for tr in windowed.traj.tracks.values())
    assert _sections(reused) == _sections(windowed)
    split = _evaluate(traj, mission, segment_mode="window", window_s=10.0)
    assert len(split.segments) > 1 and len(cut) == 1 + len(split.segments)  # a part of the flight is still cut


ONE_SEGMENT = {"segment_mode": "window", "window_s": 1e6}


@pytest.mark.parametrize("split", [ONE_SEGMENT, {}], ids=["one segment", "segments"])
def test_the_flights_formation_errors_and_token_counts_come_from_a_helper(flight, monkeypatch, tmp_path, split):
    """Issue 35: a large flight computes its formation errors and raw-token counts in a helper on the second core
    while this process finds the events (one segment, a light show: the core is free; several: the segment child
    gets the errors from it); the report is the one process's."""
    traj, mission = flight
    serial = _evaluate(traj, mission, **split)
    monkeypatch.setattr(segment_work, "PARALLEL_MIN_SAMPLES", 0)
    real, seen = flight_helper._helper_child, tmp_path / "helper.pid"

    def spy(*args):
        seen.write_text(str(os.getpid()))
        return real(*args)

    monkeypatch.setattr(flight_helper, "_helper_child", spy)
    here = []
    from uav_debate_eval.dsl import tokens
    from uav_debate_eval.metrics import swarm

    own, count = swarm._formation_error, tokens._per_number
    steps = len(swarm.snapshots(serial.traj).t)

    def formation(snap, *args):
        if len(snap.t) == steps:  # the flight's (a window this process evaluates computes its own)
            here.append("formation")
        return own(snap, *args)

    monkeypatch.setattr(swarm, "_formation_error", formation)
    monkeypatch.setattr(tokens, "_per_number", lambda *a: here.append("tokens") or count(*a))
    beside = _evaluate(traj, mission, **split)
    assert (len(beside.segments) == 1) == (split == ONE_SEGMENT)
    assert int(seen.read_text()) != os.getpid() and here == []  # the helper's, not computed here
    assert _sections(beside) == _sections(serial)


def test_the_helper_is_forked_before_the_checker_and_stopped_when_the_checker_fails(flight, monkeypatch):
    """Issue 35: the helper needs no safety result, so it runs beside the checker (the second core was idle then but
    for the checker's short second half) rather than beside the events, the segment child and the figures."""
    from uav_debate_eval.safety import checker

    traj, mission = flight
    serial = _evaluate(traj, mission)
    monkeypatch.setattr(segment_work, "PARALLEL_MIN_SAMPLES", 0)
    order, made = [], []

    class Spy(flight_helper.FlightHelper):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            order.append("helper")
            made.append(self)

    real = checker.check_trajectory
    monkeypatch.setattr(segment_work, "FlightHelper", Spy)
    monkeypatch.setattr(checker, "check_trajectory", lambda *a, **k: order.append("checker") or real(*a, **k))
    assert _sections(_evaluate(traj, mission)) == _sections(serial)
    assert order[:2] == ["helper", "checker"] and order.count("helper") == 1

    def broken(*args, **kwargs):
        raise RuntimeError("checker down")

    monkeypatch.setattr(checker, "check_trajectory", broken)
    with pytest.raises(pipeline.EvaluationError, match="checker down"):
        _evaluate(traj, mission)
    assert len(made) == 2 and not made[1]._forked._proc.is_alive()  # killed, not left running


@pytest.mark.parametrize("split", [ONE_SEGMENT, {}], ids=["one segment", "segments"])
def test_the_flights_kinematics_are_smoothed_by_the_helper(flight, monkeypatch, split):
    """Issue 35: the helper, forked before the checker, smooths the flight's kinematics first (this process adopts
    them, views of shared memory, after the checker) rather than this process between the checker and the events."""
    from uav_debate_eval.metrics import kinematics

    traj, mission = flight
    serial = _evaluate(traj, mission, **split)
    points = {kinematics.grid_length(tr) for tr in serial.traj.tracks.values()}
    monkeypatch.setattr(segment_work, "PARALLEL_MIN_SAMPLES", 0)
    here, own = [], kinematics._filtered

    def filtered(vel, *args, **kwargs):
        if vel.shape[-2] in points and os.getpid() == parent:  # a whole track's grid, in this process
            here.append(vel.shape)
        return own(vel, *args, **kwargs)

    def evaluate():  # a whole flight's kinematics stay on its tracks (the flight is its one segment): let them go
        kinematics.forget_kinematics([*traj.tracks.values(), *serial.traj.tracks.values()])
        return _evaluate(traj, mission, **split)

    parent = os.getpid()
    monkeypatch.setattr(kinematics, "_filtered", filtered)
    beside = evaluate()
    assert here == []
    assert _sections(beside) == _sections(serial)
    monkeypatch.setattr(segment_work, "PARALLEL_MIN_SAMPLES", 10**9)  # no helper: smoothed here (the spy sees it)
    evaluate()
    assert here


def test_the_helpers_kinematics_keep_one_grid_per_stamps_array(monkeypatch):
    """Issue 35: vehicles sampled at the same instants (one stamps array) get one grid array from the helper, as
    smooth_tracks gives them here, so a window's kinematics are cut from the flight's a block of vehicles at a time
    (each vehicle alone before: 2,048 calls for two windows of a 1,024-vehicle flight), to the numbers the window
    gives filtered on its own."""
    import numpy as np

    from uav_debate_eval.metrics import kinematics
    from uav_debate_eval.runner.flight_helper import FlightHelper

    sim = simulate("grid", seed=0, n_uavs=12, duration_s=30.0)
    traj, mission = sim.traj, sim.mission
    assert len({id(tr.t) for tr in traj.tracks.values()}) == 1
    helper = FlightHelper(traj, mission, kinematics=True)
    try:
        helper.adopt_kinematics(traj)
    finally:
        helper.cancel()
    adopted = [tr.__dict__["_smoothed"][(kinematics.SMOOTH_WINDOW_S, None)] for tr in traj.tracks.values()]
    assert len({id(k.t) for k in adopted}) == 1
    blocks, own = [], kinematics._block_from_flight

    def block_from_flight(tracks, *args, **kwargs):
        blocks.append(len(tracks))
        return own(tracks, *args, **kwargs)

    monkeypatch.setattr(kinematics, "_block_from_flight", block_from_flight)
    cut = kinematics.smooth_tracks(list(traj.window(10.0, 20.0).tracks.values()))
    assert blocks == [12]
    kinematics.forget_kinematics(list(traj.tracks.values()))  # now the window is filtered from its own samples
    alone = kinematics.smooth_tracks(list(traj.window(10.0, 20.0).tracks.values()))
    assert blocks == [12]
    for a, b in zip(cut, alone, strict=True):
        for name in ("t", "pos", "vel", "acc", "jerk"):
            np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("split", [ONE_SEGMENT, {}], ids=["one segment", "segments"])
def test_a_lost_helper_is_made_up_here(flight, monkeypatch, split):
    traj, mission = flight
    serial = _evaluate(traj, mission, **split)
    monkeypatch.setattr(segment_work, "PARALLEL_MIN_SAMPLES", 0)
    monkeypatch.setattr(flight_helper, "_helper_child", lambda *a: os._exit(9))
    assert _sections(_evaluate(traj, mission, **split)) == _sections(serial)


_FORK_SPY = """
import sys
from uav_debate_eval.report import figure_job
start, draw = figure_job.start_figure_job, figure_job._draw
def spy_start(traj=None, mission=None):
    print("fork, scipy loaded:", "scipy" in sys.modules, flush=True)
    return start(traj, mission)
def spy_draw(inbox, traj, mission):
    out = draw(inbox, traj, mission)
    print("drawn, scipy loaded:", "scipy" in sys.modules, len(out), flush=True)
    return out
figure_job.start_figure_job, figure_job._draw = spy_start, spy_draw
from uav_debate_eval.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_figure_child_loads_matplotlib_while_this_process_loads_the_stages(tmp_path):
    """A small flight's figures took longer than its evaluation: the child was forked once the stages (scipy) were
    loaded, then loaded matplotlib alone. It is forked first now, and draws without the stages' libraries (the
    clean trajectory sent, the safety result plain data): it loads matplotlib while this process loads scipy."""
    rows = ["t,uav_id,x,y,z"] + [f"{i / 10:.1f},uav{k},{2.0 * k + 0.1 * i:.3f},{1.0 * k:.3f},10.0"
                                 for i in range(300) for k in range(3)]
    rows[1 + 3 * 150] = "15.0,uav0,40.0,0.0,10.0"  # a one-frame excursion: the assessment changes uav0
    csv = tmp_path / "flight.csv"
    csv.write_text("\n".join(rows) + "\n")
    mission = tmp_path / "mission.yaml"  # a failing rule: its result reaches the child, which draws it
    mission.write_text("name: spy\ntype: formation\nconstraints: {min_separation_m: 0.5}\nrules:\n- id: apart\n"
                       "  severity: soft\n  over: swarm\n  stl: always (min_separation >= 5.0)\n")
    done = subprocess.run([sys.executable, "-c", _FORK_SPY, "evaluate", str(csv), "--mission", str(mission), "--out",
                           str(tmp_path / "out"), "--quiet"], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 3, 4), done.stderr
    lines = done.stdout.splitlines()
    assert "fork, scipy loaded: False" in lines
    assert f"drawn, scipy loaded: False {len(FIGURES)}" in lines  # every figure, the rules' too


@pytest.mark.parametrize("content", ["t,uav_id,x\n0,a,1\n", "t,uav_id,x,y,z\n"])
def test_bad_input_stops_the_figure_child_started_before_the_read(tmp_path, monkeypatch, content):
    """A small input's figure child is forked before the read: a file that cannot be read (or holds no sample)
    still ends in the one-line error, and the child is stopped, not left behind."""
    from uav_debate_eval.cli import main as cli

    started: list = []
    real = figure_job.start_figure_job

    def spy(traj=None, mission=None):
        job = real(traj, mission)
        started.append((job, job.child._proc))
        return job

    monkeypatch.setattr(figure_job, "start_figure_job", spy)
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    assert cli(["evaluate", str(bad), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    ((job, process),) = started
    assert job.child is None and not process.is_alive() and process.exitcode is not None
