"""One evaluation, the same for the offline command and the live debate node.

Order matters: the deterministic safety verifier runs first and on its own; its label is final for
`risky` (CONTRACT.md §3) whatever the debate says. Then metrics, mission segments with their DSL,
the debate, and the report dict.
"""

from __future__ import annotations

import functools
import gc
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.runner.segment_work import SegmentWork, heap_trimmer, start_helper

if TYPE_CHECKING:  # the stages load on first use (the CLI starts fast; live nodes never load the debate)
    from uav_debate_eval.debate.engine import DebateResult
    from uav_debate_eval.dsl.builder import DslDocument
    from uav_debate_eval.dsl.segments import MissionSegment
    from uav_debate_eval.metrics.compute import MetricsResult
    from uav_debate_eval.safety.result import SafetyResult

#: progress(stage, done, total): stage is "safety", "metrics", "segments", "debate" or "report"; for "debate",
#: done counts rounds and total is the most rounds still possible until the last call (done == total).
ProgressFn = Callable[[str, int, int], None]


class EvaluationError(RuntimeError):
    """A stage failed on input that passed ingest (names the stage); a bug, not bad input."""


@dataclass
class Evaluation:
    """The report dict plus the parts it was built from (figures and the live node read the parts)."""

    report: dict
    traj: SwarmTrajectory
    mission: Mission
    safety: SafetyResult
    metrics: MetricsResult
    dsl: DslDocument
    segments: list[MissionSegment]
    debate: DebateResult | None
    transcript: list[dict] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    findings: list = field(default_factory=list)  # findings.VerifiedFinding of the whole flight, ranked
    figure_job: Any = None  # report.figure_job.FigureJob drawing the figures beside the evaluation, if started

    @property
    def label(self) -> str:
        return self.report["verdict"]["label"]

    @property
    def n_violations(self) -> int:
        return len(self.report["violations"])


#: The garbage collector's thresholds while an evaluation runs: a full collection every 100 middle-generation ones
#: (the default is 10). An evaluation makes many objects that live until its report exists (a show's vehicle
#: segments, their DSL lines, its events), and each full collection walks all of them: ten of them took 0.9 s of a
#: 2,000-vehicle flight's 10 s; one took 0.13 s. Young collections run as before.
EVALUATION_GC_THRESHOLDS = (700, 10, 100)
P = ParamSpec("P")
R = TypeVar("R")


class _Collector:
    """The evaluations under way in this process and the thresholds before the first of them."""

    lock = threading.Lock()
    users = 0
    before: tuple[int, ...] = (700, 10, 10)


def _fewer_full_collections(fn: Callable[P, R]) -> Callable[P, R]:
    """fn under EVALUATION_GC_THRESHOLDS while any evaluation of this process runs (threads may overlap), then the
    thresholds as they were."""
    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with _Collector.lock:
            if _Collector.users == 0:
                _Collector.before = gc.get_threshold()
                gc.set_threshold(*EVALUATION_GC_THRESHOLDS)
            _Collector.users += 1
        try:
            return fn(*args, **kwargs)
        finally:
            with _Collector.lock:
                _Collector.users -= 1
                if _Collector.users == 0:
                    gc.set_threshold(*_Collector.before)

    return run


@_fewer_full_collections
def evaluate(traj: SwarmTrajectory, mission: Mission, debate_config: Any = None, *, segment_mode: str = "phase",
             window_s: float = 30.0, progress: ProgressFn | None = None, backend: Any = None,
             inputs: list[str] | None = None, notes: list[str] | None = None, figures: bool = False,
             figure_job: Any = None) -> Evaluation:
    """Safety -> metrics -> mission segments -> per-segment DSL/metrics/safety -> debate -> report.

    `debate_config` is a debate.config.DebateConfig (None: the offline rules backend); `backend` an
    optional ready LLM backend (tests, the live node). `inputs` and `notes` only go into the report.
    `figures`: start drawing the report figures in a child process as soon as their data is known
    (report.writer.write_reports collects them); large flights also evaluate their segments on two cores.
    `figure_job`: that child, started before the input was read (report.figure_job; owned from here on).
    """
    try:
        if not traj.tracks:
            raise InputError(f"{traj.name or 'input'}: no vehicle samples to evaluate")
        if segment_mode not in ("phase", "window"):
            raise InputError(f"--segment-mode: expected phase or window, got {segment_mode!r}")
        if window_s <= 0:
            raise InputError(f"--window: must be > 0 s, got {window_s}")
        trim_heap = heap_trimmer(traj)
        trim_heap()  # the read's freed buffers: a child forked now would keep a copy of every resident page
        if figure_job is not None:
            figure_job.flight_ready(traj, mission)
        elif figures:  # first: the child loads the plotting library on the other core while this one loads stages
            from uav_debate_eval.report.figure_job import start_figure_job

            figure_job = start_figure_job(traj, mission)
        return _evaluate(traj, mission, debate_config, segment_mode, window_s, progress, backend, inputs, notes,
                         figure_job, trim_heap)
    except BaseException:
        if figure_job is not None:
            figure_job.cancel()
        raise


def _evaluate(traj: SwarmTrajectory, mission: Mission, debate_config: Any, segment_mode: str, window_s: float,
              progress: ProgressFn | None, backend: Any, inputs: list[str] | None, notes: list[str] | None,
              figure_job: Any, trim_heap: Callable[[], None]) -> Evaluation:
    from uav_debate_eval.debate.config import DebateConfig
    from uav_debate_eval.dsl.builder import build_dsl
    from uav_debate_eval.dsl.events import detect_events
    from uav_debate_eval.dsl.segments import mission_segments
    from uav_debate_eval.metrics.compute import compute_metrics
    from uav_debate_eval.metrics.kinematics import forget_kinematics
    from uav_debate_eval.quality.assessment import assess
    from uav_debate_eval.safety.checker import check_trajectory

    cfg = debate_config if debate_config is not None else DebateConfig()
    report_notes = list(notes or [])
    report_notes.extend(mission.warnings)
    if not mission.constraints.checked:
        msg = "the mission has no constraints: no hard constraint was checked"
        if not any("no constraints" in n for n in report_notes):
            report_notes.append(msg)
    tick = progress or (lambda stage, done, total: None)
    timing: dict[str, float] = {}

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return fn()
        except InputError:
            raise
        except Exception as exc:
            raise EvaluationError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            trim_heap()  # the stage's temporaries go back to the OS, not into the pages a forked child shares
            timing[name] = timing.get(name, 0.0) + time.perf_counter() - t0

    work = helper = None
    try:
        quality = stage("safety", lambda: assess(traj, mission))
        traj = quality.traj  # the checks, metrics, DSL and figures all see the trajectory without recording artefacts
        if figure_job is not None:
            figure_job.clean_ready(traj)
        helper = stage("metrics", lambda: start_helper(traj, mission))  # beside the checker
        safety = stage("safety", lambda: check_trajectory(traj, mission, quality=quality))
        tick("safety", 1, 1)
        if figure_job is not None:
            figure_job.safety_ready(safety)
        segments = stage("dsl", lambda: mission_segments(traj, mission, mode=segment_mode, window_s=window_s,
                                                         safety=safety))
        if helper is not None:  # the flight's kinematics, smoothed by the helper while the checker ran here
            stage("metrics", lambda: helper.adopt_kinematics(traj))
        work = stage("metrics", lambda: SegmentWork(traj, mission, segments, safety,  # a large flight: a child
                                                    cfg.segment_dsl_budget, helper))
        # the events first: the windows' DSL (segment child) and two figures need them, not the metrics
        events = stage("dsl", lambda: detect_events(traj, mission, safety))
        stage("dsl", lambda: work.events_ready(events))  # with the flight's raw-token counts
        if figure_job is not None:
            figure_job.events_ready(events)
        metrics = stage("metrics", lambda: compute_metrics(traj, mission, safety))
        tick("metrics", 1, 1)
        work.metrics_ready(metrics)
        if figure_job is not None:
            figure_job.scores_ready(metrics)
        dsl = stage("dsl", lambda: build_dsl(traj, mission, metrics, safety, events=events))
        if not work.whole_flight and work.hold:
            forget_kinematics(list(traj.tracks.values()))  # a show: the windows smooth their own
        contexts = stage("dsl", lambda: work.contexts(metrics, dsl.events,
                                                      lambda done, total: tick("segments", done, total)))
        if not work.whole_flight:
            forget_kinematics(list(traj.tracks.values()))  # the windows took theirs inside (metrics.kinematics)
        evaluation = _finish(stage, tick, timing, traj, mission, safety, metrics, dsl, segments, contexts, cfg,
                             backend, report_notes, inputs)
    except BaseException:
        if work is not None:
            work.cancel()
        elif helper is not None:
            helper.cancel()
        raise
    evaluation.figure_job = figure_job
    return evaluation


def _finish(stage, tick, timing, traj, mission, safety, metrics, dsl, segments, contexts, cfg, backend,
            report_notes, inputs) -> Evaluation:
    """The debate, the findings and the report dict."""
    debate, transcript, fallback = stage("debate", lambda: _run_debate(contexts, mission, cfg, backend, tick))
    if fallback:
        report_notes.append(fallback)
    from uav_debate_eval.findings import build_findings
    from uav_debate_eval.findings.panel import apply_panel
    from uav_debate_eval.report.build import build_report

    t0 = time.perf_counter()
    findings = stage("report", lambda: build_findings(safety, dsl, metrics, mission, (traj.t_start, traj.t_end)))
    apply_panel(findings, debate)
    evaluation = Evaluation({}, traj, mission, safety, metrics, dsl, segments, debate, transcript, timing,
                            report_notes, findings)
    evaluation.report = build_report(evaluation, inputs=inputs or [], fallback=fallback)
    timing["report"] = time.perf_counter() - t0  # findings and report
    evaluation.report["timing"] = {k: round(v, 4) for k, v in timing.items()}
    tick("report", 1, 1)
    return evaluation


def _run_debate(contexts: list, mission: Mission, cfg: Any, backend: Any, tick: ProgressFn):
    """Run the panel; if the LLM backend fails outright, rerun with the rules agents and say so."""
    from dataclasses import replace
    from functools import partial

    from uav_debate_eval.debate.engine import run_debate

    rounds = partial(tick, "debate")
    llm = backend is not None or getattr(cfg, "backend", "rules") != "rules"
    fallback = None
    try:
        result = run_debate(contexts, mission, cfg, backend=backend, progress=rounds)
    except InputError:
        raise
    except Exception as exc:
        if not llm:
            raise
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        fallback = f"LLM backend '{getattr(cfg, 'backend', '?')}' failed ({type(exc).__name__}: {reason})"
        result = None
    attempts: list[dict] = []  # the failed backend's calls, kept in the transcript before the rules agents'
    if result is not None and llm and _all_failed(result):
        fallback = (f"every agent of the LLM backend '{result.backend}' failed in every segment "
                    f"({_why_failed(result.failures)})")
        attempts = [{**row, "fell_back": True} for row in result.transcript or [] if row.get("kind") == "agent"]
    if fallback:
        result = run_debate(contexts, mission, replace(cfg, backend="rules", llm=None), backend=None,
                            progress=rounds)
        fallback += "; the debate fell back to the deterministic rules agents"
    elif result is not None and getattr(result, "fallback", None):
        fallback = str(result.fallback)
    assert result is not None  # no result only after a failure, and then the rules agents ran
    tick("debate", len(result.rounds), len(result.rounds))
    return result, [*attempts, *(result.transcript or [])], fallback


def _all_failed(result: Any) -> bool:
    segments = getattr(result, "segments", [])
    return bool(segments) and all(s.stop_reason == "all_agents_failed" for s in segments)


#: How much of one agent's error the fallback note quotes (an exception's text can run to pages).
ERROR_CHARS = 120


def _why_failed(failures: list[dict]) -> str:
    """The agents' errors, most frequent first, each once with its count: a fallback a user can act on
    ("connection refused", "timeout after 120 s", "unparseable response") instead of a bare "failed"."""
    errors: Counter[str] = Counter()
    for f in failures:
        text = str(f.get("error") or "no response").strip()
        line = text.splitlines()[0] if text else "no response"
        errors[line if len(line) <= ERROR_CHARS else line[:ERROR_CHARS - 1] + "…"] += 1
    answers = sum(errors.values())  # one per agent's turn, its repair call included
    said = "; ".join(f"{e} x{n}" if n > 1 else e for e, n in errors.most_common(3))
    more = f"; {len(errors) - 3} other errors" if len(errors) > 3 else ""
    return f"{answers} failed answer{'s' if answers != 1 else ''}: {said}{more}" if answers else "no answer"
