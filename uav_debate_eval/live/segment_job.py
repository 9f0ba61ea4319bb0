"""One live segment's evaluation, run in the panel's worker process: evaluate, apply the live veto,
validate, write the rotated report folder. A failing LLM backend falls back to the rules agents."""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from uav_debate_eval.core.mission import Mission, RouteSoFar
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.live.veto_history import VetoEpisode, apply_live_veto
from uav_debate_eval.report.schema import ReportSchemaError, validate_report

if TYPE_CHECKING:  # the pipeline, debate and figures load in the worker process only (the node stays light)
    from uav_debate_eval.debate.config import DebateConfig
    from uav_debate_eval.runner.pipeline import Evaluation

#: Report folders are named `NNNNN_<segment id>`; `latest` points at the newest.
REPORT_DIR_GLOB = "[0-9]" * 5 + "_*"
#: Segments that end the flight: every waypoint not reached by then is missed.
FINAL_REASONS = ("end", "idle")


@dataclass
class PanelSettings:
    """What the worker process needs to evaluate a segment (picklable, no ROS)."""

    backend: str = "rules"
    model: str = ""
    base_url: str = ""
    debate_config: str = ""
    max_layer: int = 3
    max_rounds: int = 0
    max_tokens: int = 0
    token_budget: int = 0
    output_dir: str = "out/live"
    keep_reports: int = 20
    write_files: bool = True
    llm_timeout_s: float = 0.0


@dataclass
class PanelJob:
    """One segment to evaluate: its samples, its stream-time bounds and the live veto history."""

    settings: PanelSettings
    mission: Mission
    traj: SwarmTrajectory
    seg_id: str
    t0: float
    t1: float
    reason: str
    episodes: list[VetoEpisode]
    seq: int
    skipped: list[str]
    clock_jumps: int
    forced_fallback: str | None = None  # evaluate with `rules` for this reason (the LLM timed out)
    #: the flight before this segment: how close to each waypoint, how many passed in order (segments judge what
    #: was due by their end)
    route: RouteSoFar = field(default_factory=RouteSoFar)


@dataclass
class JobResult:
    report: dict | None
    path: str | None
    log: list[tuple[str, str]] = field(default_factory=list)  # (logger level, text)
    route: RouteSoFar | None = None  # the flight so far, this segment included


#: Set in the worker process once the LLM backend failed, so later segments go straight to `rules`.
_LLM_DOWN: str | None = None


def debate_config(s: PanelSettings, backend: str) -> DebateConfig:
    """The DebateConfig for one segment: the protocol file, the backend, and the live caps."""
    from uav_debate_eval.debate.config import DebateConfig
    from uav_debate_eval.debate.llm.factory import LLMConfig
    cfg = DebateConfig.from_yaml(s.debate_config) if s.debate_config else DebateConfig()
    cfg.backend = backend
    if backend != "rules":
        llm = cfg.llm if cfg.llm is not None else LLMConfig(backend=backend)
        llm.backend = backend
        if s.model:
            llm.model = cfg.model = s.model
        if s.base_url:
            llm.base_url = s.base_url
        if s.max_tokens > 0:
            llm.max_tokens = s.max_tokens
        cfg.llm = llm
    if s.max_layer < 3:
        t1 = cfg.router_thresholds[0] if s.max_layer == 2 else 2.0
        cfg.router_thresholds = (t1, 2.0)  # complexity is in [0, 1]: layers above max_layer are never chosen
    if s.max_rounds > 0:
        cfg.max_rounds = {k: min(v, s.max_rounds) for k, v in cfg.max_rounds.items()}
    if s.max_tokens > 0:
        cfg.max_tokens = s.max_tokens
    if s.token_budget > 0:
        cfg.token_budget = s.token_budget
    return cfg


def evaluate_segment(job: PanelJob) -> JobResult:
    """Worker-process side: evaluate, apply the live veto, validate, write the files (rotated)."""
    from uav_debate_eval.metrics.coordination import route_progress, waypoint_status
    from uav_debate_eval.runner.pipeline import evaluate
    global _LLM_DOWN
    s, log = job.settings, []
    # the segment judges only the waypoints due by its end (reached, passed, or the flight is over)
    mission = replace(job.mission, route_so_far=replace(job.route, final=job.reason in FINAL_REASONS))
    origin = job.traj.t0  # stream clock at flight time 0: job times are stream times, the report's flight times
    window = max(job.t1 - origin - job.traj.t_start, 1.0) + 1.0  # one debate context for the whole live segment
    fallback = job.forced_fallback
    evaluation = None
    inputs = [f"live pose stream: segment {job.seg_id} of {len(job.traj.tracks)} vehicles (stream clock at flight "
              f"time 0: {origin:.3f})"]
    if s.backend != "rules" and _LLM_DOWN is None and fallback is None:
        try:
            evaluation = evaluate(job.traj, mission, debate_config(s, s.backend), segment_mode="window",
                                  window_s=window, inputs=inputs)
        except Exception as exc:  # the LLM (server, model, bindings) is down: keep evaluating with rules
            _LLM_DOWN = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            log.append(("warning", f"LLM backend {s.backend} unavailable ({_LLM_DOWN}); using the rules backend"))
    if evaluation is None:
        if s.backend != "rules" and fallback is None:
            fallback = f"LLM backend {s.backend} unavailable ({_LLM_DOWN}); rules backend used"
        evaluation = evaluate(job.traj, mission, debate_config(s, "rules"), segment_mode="window",
                              window_s=window, inputs=inputs)
    report = evaluation.report
    # pipeline.evaluate may have fallen back to the rules agents itself (a backend that fails mid-debate)
    fallback = fallback or report["debate"].get("fallback")
    t_lo = job.traj.t_start + origin if not math.isfinite(job.t0) else job.t0
    apply_live_veto(report, job.episodes, t_lo, job.t1, origin)
    report["live"].update({
        "segment": {"id": job.seg_id, "t_start": t_lo - origin, "t_end": job.t1 - origin, "reason": job.reason},
        "llm_fallback": fallback, "skipped_segments": job.skipped, "clock_jumps": job.clock_jumps,
        "eval_s": round(sum(evaluation.timing.values()), 3),
    })
    if fallback and fallback not in report["verdict"]["summary"]:
        report["verdict"]["summary"] = f"[{fallback}] " + report["verdict"]["summary"]
    try:
        validate_report(report)
    except ReportSchemaError as exc:
        log.append(("error", f"segment {job.seg_id}: report not published: {exc}"))
        return JobResult(None, None, log)
    path = write_rotated(evaluation, Path(s.output_dir), f"{job.seq:05d}_{job.seg_id}", s.keep_reports) \
        if s.write_files else None
    route = RouteSoFar({u: [d for _, d in status] for u, status in waypoint_status(evaluation.traj, mission).items()},
                       route_progress(evaluation.traj, mission, job.route.passed))
    return JobResult(report, str(path) if path else None, log, route)


def write_rotated(evaluation: Evaluation, out_dir: Path, name: str, keep: int) -> Path:
    """Write one report directory, point `latest` at it, and keep only the newest `keep` directories."""
    from uav_debate_eval.report.writer import write_reports
    out = out_dir / name
    write_reports(evaluation, out)
    latest = out_dir / "latest"
    tmp = out_dir / ".latest.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(out.name)
    tmp.replace(latest)  # atomic: a reader never sees `latest` missing
    for old in sorted(out_dir.glob(REPORT_DIR_GLOB))[:-max(1, keep)]:
        shutil.rmtree(old, ignore_errors=True)
    return out


def next_seq(out_dir: Path) -> int:
    """Continue numbering after the newest directory on disk, so a restarted panel never overwrites."""
    dirs = sorted(out_dir.glob(REPORT_DIR_GLOB)) if out_dir.is_dir() else []
    return int(dirs[-1].name[:5]) + 1 if dirs else 1
