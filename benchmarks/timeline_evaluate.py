"""Where the wall time of `evaluate` goes on two cores: a timeline of the parent's stages and of each forked child.

Runs the CLI in this process with the pipeline's stage functions wrapped; every call appends (process, name, start,
end, CPU seconds) to a log that the forked children (figures, segment windows, the checker's second half) share, and
the timeline is printed in start order, one row per call, P0 being the parent. The stages are imported before the
run (to be wrapped), so the read shows without the import work that normally overlaps it; everything else runs as
in `uav-debate-eval evaluate`. A gap in a row's CPU against its wall time is time spent waiting for a core.

    python benchmarks/timeline_evaluate.py INPUT --out DIR [evaluate options...]
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

#: (module, attribute) of the calls on the timeline.
TRACED = (
    ("uav_debate_eval.io.loader", "load_inputs"), ("uav_debate_eval.quality.assessment", "assess"),
    ("uav_debate_eval.safety.checker", "check_trajectory"), ("uav_debate_eval.safety.grid_pairs", "_second_half"),
    ("uav_debate_eval.dsl.segments", "mission_segments"), ("uav_debate_eval.metrics.compute", "compute_metrics"),
    ("uav_debate_eval.dsl.events", "detect_events"), ("uav_debate_eval.dsl.builder", "build_dsl"),
    ("uav_debate_eval.runner.segment_work", "SegmentWork.contexts"),
    ("uav_debate_eval.runner.segment_work", "SegmentWork._send"),
    ("uav_debate_eval.runner.segment_work", "_child"), ("uav_debate_eval.runner.flight_helper", "_helper_child"),
    ("uav_debate_eval.runner.forked", "Forked.result"), ("uav_debate_eval.runner.pipeline", "_run_debate"),
    ("uav_debate_eval.report.figure_job", "_draw"), ("uav_debate_eval.report.figures", "render_figures"),
    ("uav_debate_eval.report.writer", "write_reports"),
)


def traced(fn, name: str, log: Path, t0: float):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        start, cpu = time.time(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            row = {"pid": os.getpid(), "name": name, "start": start - t0, "end": time.time() - t0,
                   "cpu": time.process_time() - cpu}
            with log.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
    return call


def wrap_all(log: Path, t0: float) -> None:
    for module, attr in TRACED:
        owner = importlib.import_module(module)
        *path, last = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, last, traced(getattr(owner, last), attr, log, t0))


def print_timeline(log: Path) -> None:
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    first = {}
    for r in sorted(rows, key=lambda r: r["start"]):
        first.setdefault(r["pid"], len(first))
    print(f"{'proc':<5}{'start':>8}{'end':>8}{'wall':>8}{'cpu':>8}  call")
    for r in sorted(rows, key=lambda r: r["start"]):
        print(f"P{first[r['pid']]:<4}{r['start']:8.3f}{r['end']:8.3f}{r['end'] - r['start']:8.3f}{r['cpu']:8.3f}  "
              f"{r['name']}")


def main() -> int:
    from uav_debate_eval.cli import main as cli

    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "timeline.jsonl"
        wrap_all(log, t0)
        status = cli(["evaluate", "--quiet", *sys.argv[1:]])
        print(f"exit {status}, wall {time.time() - t0:.3f} s, CPU of this process {time.process_time():.3f} s")
        print_timeline(log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
