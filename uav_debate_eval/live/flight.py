"""The flight-level report of a live session: `evaluate` on the whole flight, plus what only live knows.

At the end of the session (the flight is over, Ctrl-C, SIGTERM) the panel's worker process reads the taped
poses (live.tape), runs runner.pipeline.evaluate on them with the session's mission and the rules panel (the
same code and defaults as `uav-debate-eval evaluate`), and writes OUT/flight/report.{json,md,html}, its
figures and OUT/flight/flight.mcap (the annotated MCAP with the raw poses: `evaluate flight.mcap --mission M`
gives the same violations, findings and label). The live record goes under `report["live"]`: the veto
episodes as published, the segments with their reports and panel verdicts (finding ids `S1/F2`), the data
quality found live, the dropped poses (live.flight_record).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.live.flight_record import headline, live_record
from uav_debate_eval.live.segment_job import JobResult, PanelSettings
from uav_debate_eval.live.veto_history import VetoEpisode

_FINDING_ID = re.compile(r"\bF(\d+)\b")


def segment_summary(report: dict, path: str | None) -> dict:
    """What the flight report keeps of one segment's report: its window (stream time), verdict, panel and
    findings, every finding id prefixed with the segment's (`S1/F2`), in its sentences too."""
    seg = report.get("live", {}).get("segment", {})
    sid = str(seg.get("id", "S?"))
    t0 = float(report["mission"].get("t0") or 0.0)

    def flight_ids(text: str) -> str:
        return _FINDING_ID.sub(lambda m: f"{sid}/F{m.group(1)}", text)

    debate, verdict = report["debate"], report["verdict"]
    tokens = debate.get("tokens") or {}
    return {
        "id": sid, "reason": seg.get("reason"), "path": path, "t0_stream": t0,
        "t_start_stream": t0 + float(seg.get("t_start", report["mission"].get("t_start", 0.0))),
        "t_end_stream": t0 + float(seg.get("t_end", report["mission"].get("t_end", 0.0))),
        "label": verdict["label"], "vetoed": bool(verdict["vetoed"]), "summary": flight_ids(verdict["summary"]),
        "panel": {"backend": debate.get("backend"), "model": debate.get("model"),
                  "label": verdict.get("panel_label"), "consensus": (debate.get("consensus") or {}).get("overall"),
                  "tokens": int(tokens.get("prompt", 0)) + int(tokens.get("completion", 0)),
                  "fallback": report.get("live", {}).get("llm_fallback")},
        "findings": [{"id": f"{sid}/{f['id']}", "kind": f["kind"], "severity": f["severity"],
                      "sentence": flight_ids(f["sentence"]), "uavs": list(f.get("uavs", [])),
                      "panel": f.get("panel")} for f in report.get("findings") or []],
        "data_quality": [{**f, "segment": sid} for f in report.get("data_quality", {}).get("findings", [])],
    }


@dataclass
class FlightRecord:
    """The live session's segments as their reports arrive (small summaries; the poses are on the tape)."""

    segments: list[dict] = field(default_factory=list)

    def add(self, report: dict, path: str | None = None) -> None:
        self.segments.append(segment_summary(report, path))


@dataclass
class FlightJob:
    """The end of the session, for the worker process: the tape, the live record and where to write."""

    settings: PanelSettings
    mission: Mission
    chunks: list[Path]
    vehicles: list[str]
    segments: list[dict]
    episodes: list[VetoEpisode]
    session: dict
    tape: dict
    dropped: dict[str, int]
    skipped: list[str]
    clock_jumps: int
    out_dir: Path | None  # None: files are off
    record: bool = True
    lost_before_verifier: dict[str, int] = field(default_factory=dict)  # poses the verifier never processed
    #: vehicles whose clock restarted alone: (poses dropped as `clock_back`, how far the clock went back, s)
    clock_back: dict[str, tuple[int, float]] = field(default_factory=dict)


def session_inputs(session: dict) -> list[str]:
    """The report's Inputs: the live session (topics, vehicles, clock)."""
    topics = session.get("topics") or []
    shown = ", ".join(topics[:6]) + (f" and {len(topics) - 6} more" if len(topics) > 6 else "")
    return [f"live ROS 2 session: {len(session.get('vehicles') or [])} vehicles "
            f"({', '.join(session.get('vehicles') or []) or 'discovered'}) on {shown or 'the pose topics'}; "
            f"clock: {session.get('clock', 'system time')}"]


def evaluate_flight(job: FlightJob) -> JobResult:
    """Worker-process side: the whole flight through `evaluate` (rules panel), the live record added, the files
    written (report folder, figures, flight.mcap)."""
    from uav_debate_eval.debate.config import DebateConfig
    from uav_debate_eval.io.live_tape import SIDE_KEYS, session_trajectory, tape_columns
    from uav_debate_eval.report.schema import validate_report
    from uav_debate_eval.runner.pipeline import evaluate

    columns = tape_columns(job.chunks, job.vehicles)
    if columns is None:
        return JobResult(None, None, [("warning", "flight report: no pose was received")])
    # the side streams go on the poses (the tape of a killed session does the same), and out of the live record
    traj = session_trajectory(columns, {k: job.session.pop(k) for k in SIDE_KEYS if k in job.session})
    write = job.out_dir is not None
    evaluation = evaluate(traj, job.mission, DebateConfig(backend="rules"), inputs=session_inputs(job.session),
                          figures=write)
    report = evaluation.report
    report["live"] = live_record(report, job, traj.t0)
    report["live"]["headline"] = headline(report)
    validate_report(report)
    if not write:
        if evaluation.figure_job is not None:
            evaluation.figure_job.cancel()
        return JobResult(report, None)
    from uav_debate_eval.report.writer import write_reports

    assert job.out_dir is not None
    write_reports(evaluation, job.out_dir)
    if job.record:
        from uav_debate_eval.viz.mcap_export import write_mcap

        write_mcap(evaluation, job.out_dir / "flight.mcap", poses=traj)
        if job.mission.source and Path(job.mission.source).is_file():  # `evaluate flight.mcap` finds it beside
            shutil.copyfile(job.mission.source, job.out_dir / "mission.yaml")
    return JobResult(report, str(job.out_dir))


def final_lines(report: dict, where: Path, top: int = 3) -> list[str]:
    """The end of the demo's terminal: the verdict in words, one line per broken constraint, the most important
    findings, the report's place."""
    lines = [f"flight verdict: {report['verdict']['summary']}"]
    lines += [f"  {sentence}" for sentence in report.get("live", {}).get("headline", [])]
    for f in report.get("findings", [])[:top]:
        lines.append(f"  {f['id']} [{f['severity']}] t={f['t_start']:.1f}-{f['t_end']:.1f} s: {f['sentence']}")
    if not report.get("findings"):
        lines.append("  no findings")
    files = "report.json, report.md" + (", flight.mcap" if (where / "flight.mcap").is_file() else "") + (
        ", rosbag2/ (the pose messages as received)" if (where / "rosbag2" / "metadata.yaml").is_file() else "")
    lines.append(f"flight report: {where / 'report.html'} (also {files})")
    return lines
