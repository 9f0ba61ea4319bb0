"""The flights of a comparison: parsing `KEY=f1,f2` arguments, evaluating each run, and each flight's findings.

A flight is one or more runs. A folder given for a flight stands for the recordings in it (a show's per-drone logs).
Several autopilot logs (`.ulg`, or ArduPilot `.bin`/`.tlog`) are one run (one log per vehicle, as `evaluate` reads
them), and so are several other recordings that are one flight by `evaluate`'s rule (their time spans overlap and
they hold different vehicles: per-drone CSVs or bags); any other several files of one flight are repeated runs of
the same mission, each evaluated on its own, so the deltas can carry effect sizes. Each run's own report is written
by the offline job (runner.job) under DIR/KEY/.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uav_debate_eval.core.errors import InputError

if TYPE_CHECKING:
    from uav_debate_eval.runner.job import JobOptions

HARD_SEVERITY = "hazard"
_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")


@dataclass
class Flight:
    """One side of a comparison: its key (A, B, ...), inputs, and one pipeline Evaluation per run."""

    key: str
    inputs: list[str]
    runs: list[Any] = field(default_factory=list)
    #: each run's report folder below DIR/KEY/ (several runs)
    run_names: list[str] = field(default_factory=list)
    #: inputs that cannot be read, left out of the run the others make (each its one-line reason)
    left_out: list[str] = field(default_factory=list)

    @property
    def reports(self) -> list[dict]:
        return [ev.report for ev in self.runs]

    @property
    def label(self) -> str:
        """The worst label over the runs (a single risky run makes the flight risky)."""
        order = ("risky", "inconclusive", "borderline", "safe")
        labels = [r["verdict"]["label"] for r in self.reports]
        return next(lbl for lbl in order if lbl in labels)

    @property
    def n_violations(self) -> int:
        return sum(len(r["violations"]) for r in self.reports)

    @property
    def vetoed(self) -> bool:
        """A hard-constraint violation in any run: this flight can never beat one without."""
        return self.n_violations > 0


def parse_flight_args(raw: list[str]) -> list[tuple[str, list[Path]]]:
    """`KEY=f1,f2` or `f1[,f2]` (keys A, B, C, ... by position) -> [(key, paths)]; InputError on bad input."""
    out: list[tuple[str, list[Path]]] = []
    for i, item in enumerate(raw):
        key, _, files = item.partition("=") if "=" in item else ("", "", item)
        if key and not _KEY_RE.match(key):
            raise InputError(f"{item}: flight key must be a letter then letters, digits, '_' or '-'")
        key = key or (string.ascii_uppercase[i] if i < 26 else f"F{i + 1}")
        paths = [Path(p) for p in files.split(",") if p]
        if not paths:
            raise InputError(f"{item}: no input file for flight {key}")
        for p in paths:
            if not p.exists():
                raise InputError(f"{p}: no such file or directory")
        out.append((key, [r for p in paths for r in _recordings(p)]))
    keys = [k for k, _ in out]
    if len(set(keys)) != len(keys):
        raise InputError(f"flight keys must differ, got {', '.join(keys)}")
    if len(out) < 2:
        raise InputError("compare-flights needs at least two flights")
    return out


def _recordings(path: Path) -> list[Path]:
    """An input as recordings: a folder that is not one recording (a rosbag2 folder, a live tape) stands for every
    recording in it, at any depth."""
    from uav_debate_eval.runner.discover import is_recording, recordings_in

    if not path.is_dir() or is_recording(path):
        return [path]
    if not (found := recordings_in(path)):
        raise InputError(f"{path}: folder holds no input (.csv, .mcap, .db3, .bag, .ulg, .bin, .log, .tlog, rosbag2 "
                         "folder or live tape, at any depth)")
    return found


def runs_of(paths: list[Path]) -> tuple[list[list[Path]], list[str]]:
    """Group a flight's files into runs: all autopilot logs (.ulg, or ArduPilot .bin/.tlog) are one run (one log per
    vehicle), as are recordings that are one flight by `evaluate`'s rule (io.loader.one_flight: per-drone CSVs or
    bags); else one run per file (repeated runs). Returns the runs and why each input left out cannot be read: a
    run of several recordings leaves out one that cannot be read (a show's damaged log), as `evaluate` does."""
    if len(paths) < 2:
        return [paths], []
    from uav_debate_eval.runner.discover import readable_flight

    logs = all(p.suffix.lower() == ".ulg" for p in paths) or all(p.suffix.lower() in (".bin", ".tlog") for p in paths)
    readable, unread, (together, _), _ = readable_flight(paths)
    if readable and (logs or together):
        return [readable], unread
    return [[p] for p in paths], []  # repeated runs: one that cannot be read fails with its own line


def evaluate_flight_runs(key: str, paths: list[Path], out: Path, options: JobOptions) -> Flight:
    """Evaluate each run with the offline job (runner.job); reports in out/KEY/ (out/KEY/<run>/ for several). Files
    read for their time spans are parsed once (io.kept_reads)."""
    from uav_debate_eval.io import kept_reads
    from uav_debate_eval.runner.discover import folder_names
    from uav_debate_eval.runner.job import evaluate_flight

    flight = Flight(key, [str(p) for p in paths])
    with kept_reads.keeping():
        runs, unread = runs_of(paths)
        flight.left_out = [f"{why}: left out of flight {key}" for why in unread]
        flight.run_names = folder_names([run[0].name for run in runs])  # named as a batch names them
        for run, name in zip(runs, flight.run_names, strict=True):
            target = out / key if len(runs) == 1 else out / key / name
            flight.runs.append(evaluate_flight(run, target, options, notes=flight.left_out))
    return flight


def findings_of(report: dict) -> list[dict]:
    """The report's findings catalogue (issue 12) when present; else built from violations, events and data quality.

    Each: {id, kind, severity, sentence, t_start, t_end, uavs} with flight times.
    """
    if report.get("findings"):
        return [dict(f) for f in report["findings"]]
    items: list[dict] = []
    for v in report.get("violations", []):
        items.append({"kind": f"violation:{v['constraint']}", "severity": HARD_SEVERITY,
                      "sentence": f"Hard-constraint violation {v['constraint']}: worst {_g(v.get('worst_value'))} "
                                  f"against limit {_g(v.get('limit'))} from {v['t_start']:.1f} s to "
                                  f"{v['t_end']:.1f} s",
                      "t_start": v["t_start"], "t_end": v["t_end"], "uavs": list(v.get("uavs", []))})
    for e in report.get("events", []):
        if str(e.get("type", "")).startswith("violation:"):
            continue  # the violation itself is already a hazard finding
        t_end = e.get("t_end") if e.get("t_end") is not None else e["t"]
        value = f" ({_g(e.get('value'))} {e.get('unit') or ''})".rstrip() if e.get("value") is not None else ""
        items.append({"kind": e["type"], "severity": "warning",
                      "sentence": f"Event {e['type']}{value} from {e['t']:.1f} s to {t_end:.1f} s",
                      "t_start": e["t"], "t_end": t_end, "uavs": list(e.get("uavs", []))})
    for f in (report.get("data_quality") or {}).get("findings", []):
        items.append({"kind": f.get("kind", "data_quality"), "severity": "data_quality",
                      "sentence": f"Data quality: {f.get('detail') or f.get('kind')}",
                      "t_start": f.get("t_start", 0.0), "t_end": f.get("t_end", 0.0), "uavs": list(f.get("uavs", []))})
    rank = {HARD_SEVERITY: 0, "warning": 1, "data_quality": 2, "info": 3}
    items.sort(key=lambda f: (rank.get(f["severity"], 4), f["t_start"]))
    return [{"id": f"F{i + 1}", **f} for i, f in enumerate(items)]


def flight_findings(flight: Flight) -> list[dict]:
    """Findings over the flight's runs; with several runs the ids say which (R2.F1)."""
    if len(flight.runs) == 1:
        return findings_of(flight.reports[0])
    out = []
    for i, report in enumerate(flight.reports):
        for f in findings_of(report):
            out.append({**f, "id": f"R{i + 1}.{f['id']}"})
    return out


def _g(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3g}" if isinstance(v, (int, float)) else str(v)
