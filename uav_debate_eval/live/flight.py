"""The flight-level report of a live session: every evaluated segment folded into one report (schema v2).

Written at the end of the session (Ctrl-C, SIGTERM, the end of the demo) to OUT/flight/ beside the
per-segment folders. It holds what a post-flight review needs without keeping every segment's full
report in memory: all violations, events and findings (flight time), duration-weighted scores, the
worst label, and the debate of the worst segment.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from uav_debate_eval.report.html import render_html
from uav_debate_eval.report.markdown import render_markdown
from uav_debate_eval.report.precision import rounded
from uav_debate_eval.report.schema import validate_report

#: Worst last: the flight's label is its worst segment's.
LABEL_ORDER = ("safe", "borderline", "inconclusive", "risky")
SEVERITY_ORDER = ("hazard", "data_quality", "warning", "info")
SCORES = ("flight_control", "coordination", "safety", "overall")
DQ_ORDER = ("good", "degraded", "poor")


@dataclass
class SegmentSummary:
    id: str
    t_start: float
    t_end: float
    label: str
    vetoed: bool
    path: str | None

    def to_dict(self) -> dict:
        return self.__dict__.copy()


def _violation_finding(v: dict) -> dict:
    """A findings-catalogue entry for a violation, for reports made before the catalogue existed."""
    worst = f"{v['worst_value']:.3g}" if isinstance(v.get("worst_value"), float) else "n/a"
    limit = f"{v['limit']:g}" if isinstance(v.get("limit"), float | int) else "n/a"
    who = ", ".join(v["uavs"]) or "the swarm"
    return {"kind": v["constraint"], "severity": "hazard",
            "sentence": f"{v['constraint'].replace('_', ' ')} broken by {who}: worst {worst} (limit {limit})",
            "t_start": v["t_start"], "t_end": v["t_end"], "uavs": list(v["uavs"]), "refs": [],
            "recommendations": []}


@dataclass
class FlightRecord:
    """Folds each segment's report into the flight's (call `add` as reports arrive; `report()` at the end)."""

    segments: list[SegmentSummary] = field(default_factory=list)
    violations: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    dq_findings: list[dict] = field(default_factory=list)
    not_evaluable: list[dict] = field(default_factory=list)
    dq_status: str = "good"
    uavs: set[str] = field(default_factory=set)
    dsl_lines: list[str] = field(default_factory=list)
    dsl_tokens: int = 0
    raw_tokens: int = 0
    rules: list[list[dict]] = field(default_factory=list)  # each segment's `rules` (CONTRACT.md §2a)
    _score_sums: dict[str, list[float]] = field(default_factory=dict)
    _worst: dict | None = None

    def add(self, report: dict, path: str | None = None) -> None:
        seg = report.get("live", {}).get("segment", {})
        sid = str(seg.get("id", f"S{len(self.segments) + 1}"))
        t0, t1 = float(seg.get("t_start", 0.0)), float(seg.get("t_end", report["mission"]["duration_s"]))
        verdict = report["verdict"]
        self.segments.append(SegmentSummary(sid, t0, t1, verdict["label"], bool(verdict["vetoed"]), path))
        self.uavs.update(report["mission"]["uavs"])
        self.violations += [{**v, "detail": f"[{sid}] {v.get('detail', '')}".strip()} for v in report["violations"]]
        self.events += [{**e, "id": f"{sid}/{e['id']}"} for e in report["events"]]
        found = report.get("findings")
        for f in (found if found is not None else [_violation_finding(v) for v in report["violations"]]):
            self.findings.append({**f, "segment": sid, "refs": [f"{sid}/{r}" for r in f.get("refs", [])]})
        dq = report.get("data_quality", {})
        status = dq.get("status")
        if status in DQ_ORDER and DQ_ORDER.index(status) > DQ_ORDER.index(self.dq_status):
            self.dq_status = status
        self.dq_findings += [{**f, "detail": f"[{sid}] {f.get('detail', '')}"} for f in dq.get("findings", [])]
        self.not_evaluable += dq.get("not_evaluable", [])
        if report.get("rules"):
            self.rules.append(report["rules"])
        weight = max(t1 - t0, 1e-6)
        for name in SCORES:
            value = report["scores"].get(name)
            if isinstance(value, float | int):
                acc = self._score_sums.setdefault(name, [0.0, 0.0])
                acc[0] += weight * value
                acc[1] += weight
        dsl = report["dsl"]
        self.dsl_lines.append(f"# segment {sid} t=[{t0:.1f},{t1:.1f}] {verdict['label']}")
        self.dsl_tokens += int(dsl["tokens"])
        self.raw_tokens += int(dsl["raw_tokens"])
        if self._worst is None or LABEL_ORDER.index(verdict["label"]) > LABEL_ORDER.index(
                self._worst["verdict"]["label"]):
            self._worst = copy.deepcopy(report)

    def ranked_findings(self) -> list[dict]:
        """Most important first (severity, then flight time), numbered F1..."""
        ranked = sorted(self.findings, key=lambda f: (SEVERITY_ORDER.index(f["severity"])
                                                      if f.get("severity") in SEVERITY_ORDER else 9, f["t_start"]))
        return [{**f, "id": f"F{i}"} for i, f in enumerate(ranked, 1)]

    def report(self) -> dict | None:
        """The flight-level report (validated), or None when no segment was evaluated."""
        if self._worst is None:
            return None
        worst = self._worst
        label = worst["verdict"]["label"]
        vetoed = [s for s in self.segments if s.vetoed]
        t_start, t_end = min(s.t_start for s in self.segments), max(s.t_end for s in self.segments)
        worst_id = worst.get("live", {}).get("segment", {}).get("id", "?")
        report = {
            "schema_version": worst["schema_version"],
            "mission": {**worst["mission"], "uavs": sorted(self.uavs), "duration_s": max(t_end - t_start, 0.0)},
            "scores": {n: (a[0] / a[1] if (a := self._score_sums.get(n)) else None) for n in SCORES},
            "verdict": {"label": label, "vetoed": bool(vetoed), "summary": self.summary()},
            "events": self.events,
            "violations": self.violations,
            "findings": self.ranked_findings(),
            "dsl": {"text": "\n".join(self.dsl_lines) + f"\n# worst segment {worst_id}\n" + worst["dsl"]["text"],
                    "tokens": self.dsl_tokens, "raw_tokens": self.raw_tokens},
            "debate": worst["debate"],
            "data_quality": {"status": self.dq_status, "findings": self.dq_findings,
                             "not_evaluable": self.not_evaluable},
            "live": {"flight": True, "t_start": t_start, "t_end": t_end, "worst_segment": worst_id,
                     "segments": [s.to_dict() for s in self.segments]},
        }
        if self.rules:
            from uav_debate_eval.rules.check import merge_entries

            report["rules"] = merge_entries(self.rules)
        validate_report(report)
        return report

    def summary(self) -> str:
        """The flight's verdict in an engineer's words."""
        n = len(self.segments)
        label = self._worst["verdict"]["label"] if self._worst else "inconclusive"
        vetoed = [s for s in self.segments if s.vetoed]
        kinds = sorted({v["constraint"] for v in self.violations})
        span = f"{n} segment{'s' if n != 1 else ''} over flight t={self.segments[0].t_start:.1f}-" \
               f"{self.segments[-1].t_end:.1f} s" if n else "no segment"
        if label == "safe":
            return f"Safe flight: no hard constraint broken in {span}."
        parts = [f"{label.capitalize()} flight"]
        if vetoed:
            parts.append(f"the live safety veto fired in {len(vetoed)} of {n} segments "
                         f"({', '.join(s.id for s in vetoed)})")
        if kinds:
            parts.append(f"hard constraints broken: {', '.join(k.replace('_', ' ') for k in kinds)}")
        return "; ".join(parts) + f" ({span})."


def write_flight_report(report: dict, out_dir: Path) -> Path:
    """report.json, report.md and report.html in out_dir (each replaced atomically)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = rounded(report)
    texts = {"report.json": json.dumps(report, indent=2, allow_nan=False) + "\n",
             "report.md": render_markdown(report, []), "report.html": render_html(report, {})}
    for name, text in texts.items():
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out_dir)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, out_dir / name)
    return out_dir


def final_lines(report: dict, where: Path, top: int = 3) -> list[str]:
    """The end of the demo's terminal: the verdict in words, the most important findings, the report's place."""
    lines = [f"flight verdict: {report['verdict']['summary']}"]
    for f in report.get("findings", [])[:top]:
        lines.append(f"  {f['id']} [{f['severity']}] t={f['t_start']:.1f}-{f['t_end']:.1f} s: {f['sentence']}")
    if not report.get("findings"):
        lines.append("  no findings")
    lines.append(f"flight report: {where / 'report.html'} (also report.json, report.md)")
    return lines
