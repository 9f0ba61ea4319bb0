"""`uav-debate-eval evaluate`: recorded flights (CSV, rosbag2, ROS 1 bag, PX4 ULog) -> reports (CONTRACT.md §4).

The command turns its arguments into the runner's options and flights (runner.job, runner.discover), runs one
flight or a batch (runner.batch) under a progress bar, prints the outcome and maps it to the exit status.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uav_debate_eval.commands import add_llm_options, add_read_options, read_options
from uav_debate_eval.core.errors import InputError

if TYPE_CHECKING:  # the runner loads with the command, not with --help
    from rich.progress import Progress

    from uav_debate_eval.runner.discover import FlightInputs
    from uav_debate_eval.runner.job import JobOptions

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_VIOLATION, EXIT_INCONCLUSIVE = 0, 1, 2, 3, 4

HELP = """\
Inputs: trajectory CSV files, rosbag2 (directory, .mcap, .db3), ROS 1 .bag, PX4 .ulg, ArduPilot DataFlash .bin
(or its text form, .log) and MAVLink .tlog.

One flight or a batch:
  * several inputs whose time spans overlap are ONE flight on one clock (per-drone bags, CSVs or
    PX4 logs recorded together; several .ulg files always are), unless --each is given;
  * inputs with disjoint spans (or that each hold the same vehicles on a relative clock), a folder
    that is not a rosbag2, or a glob pattern (quoted, e.g. 'flights/*.mcap') are a BATCH: each flight
    is evaluated on its own, in --jobs worker processes, into --out/<flight>/, with summary.csv
    and summary.md in --out. --one-flight forces one flight. The terminal says which it chose.
  * a folder of flights, as operators keep them: each recording at its top is a flight, and each
    folder below (to any depth) holding recordings is one flight when they overlap in time (else
    one flight per recording); summary.csv names each flight by its path in the folder. One
    flight's own folder given alone is a folder of flights too: add --one-flight to read it as one.
Vehicles: every pose source counts, unless the mission's `vehicles:` globs or --vehicles REGEX
(matched against the vehicle id and the source topic or frame) say which; the report lists what was
taken and why.
Mission: --mission FILE for every flight; otherwise each flight's nearest mission.yaml (in its own
folder, then in the folders above); otherwise no constraint is checked (the report says so).
Times: every time in the reports is flight time (seconds since the first sample); report.json's
mission.t0 keeps the input clock's value at flight time 0.
Exit status: 0 no violation, 3 at least one violation, 4 no violation but inconclusive (a checked
constraint could not be evaluated over a material part of the flight), 2 bad input or arguments (a
batch: 2 if any input failed, else 3 if any had a violation, else 4 if any was inconclusive), other
non-zero only for internal errors.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("evaluate", help="evaluate recorded flights and write reports",
                              description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="CSV, rosbag2 dir/.mcap/.db3, .bag, .ulg, .bin, .log, .tlog, folder, glob")
    p.add_argument("--out", required=True, help="report directory (created; a batch gets one sub-directory each)")
    add_read_options(p)
    add_llm_options(p, "panel")
    p.add_argument("--segment-mode", choices=("phase", "window"), default="phase",
                   help="mission segments by flight phase or fixed windows (default phase)")
    p.add_argument("--window", type=float, default=30.0, metavar="S", help="window length for --segment-mode window")
    p.add_argument("--no-cache", action="store_true", help="do not use the LLM response cache")
    p.add_argument("--jobs", type=int, default=0, metavar="N", help="batch worker processes (default: CPU count)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run a batch on a Dask distributed cluster: a scheduler address (tcp://host:8786) or "
                   "'local' for a local cluster sized to this machine; the reports are the same as with --jobs")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--each", "--batch", dest="each", action="store_true",
                       help="treat every input (also each .ulg) as its own flight")
    group.add_argument("--one-flight", action="store_true", help="treat all inputs as one flight on one clock")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary line")
    p.add_argument("--mcap-out", metavar="FILE", help="also write the evaluated flight as an annotated MCAP "
                   "(open it in Foxglove with config/foxglove_layout.json); one flight only")
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> JobOptions:
    """The job's options from the command line (a bad value is an InputError before anything is read)."""
    from uav_debate_eval.runner.job import JobOptions

    return JobOptions(read=read_options(args), llm=args.llm, model=args.model, base_url=args.base_url,
                      no_cache=args.no_cache, segment_mode=args.segment_mode, window_s=args.window,
                      mcap_out=args.mcap_out)


def run(args: argparse.Namespace) -> int:
    from uav_debate_eval.io import kept_reads
    from uav_debate_eval.runner.discover import plan_flights

    if args.jobs < 0:
        raise InputError(f"--jobs: must be >= 0, got {args.jobs}")
    opts = options(args)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: --out exists and is not a directory")
    if args.mcap_out and Path(args.mcap_out).is_dir():
        raise InputError(f"{args.mcap_out}: --mcap-out is a directory; give the file to write (e.g. flight.mcap)")
    with kept_reads.keeping():  # files parsed for their time spans while planning are not parsed again
        plan = plan_flights(args.inputs, each=args.each, one_flight=args.one_flight, mission=args.mission, out=out)
        if not args.quiet:
            for line in plan.messages:
                print(line, file=sys.stderr)
        if plan.batch:
            if args.mcap_out:
                raise InputError("--mcap-out: takes one flight, not a batch")
            if len(plan.flights) > 1:  # each worker reads its own flight; the parent holds none of them
                kept_reads.drop()
            return _run_batch(plan.flights, out, opts, args)
        return _run_one(plan.flights[0], out, opts, show_progress=not args.quiet and sys.stderr.isatty(),
                        quiet=args.quiet)


def _run_one(flight: FlightInputs, out: Path, opts: JobOptions, *, show_progress: bool, quiet: bool) -> int:
    from uav_debate_eval.runner.job import evaluate_flight
    from uav_debate_eval.runner.summary import flight_row, fmt

    t0 = time.perf_counter()
    left_out = flight.left_out_notes()
    with _Progress(show_progress) as bar:
        ev = evaluate_flight(list(flight.paths), out, opts, progress=bar, notes=left_out)
    row = flight_row(flight, ev.report, out, time.perf_counter() - t0)
    if not quiet:
        spend = f"; {row['budget']}" if row.get("budget") else ""
        print(f"{row['label']}: {row['violations']} violation(s), overall score {fmt(row['overall'])}{spend}; "
              f"reports in {out}")
        for line in row["words"]:
            print(line)
    for line in left_out:  # bad input, as a batch's failed flight is: the report stands, the status says it
        print(f"uav-debate-eval evaluate: failed: {line}", file=sys.stderr)
    return EXIT_BAD_INPUT if left_out else flight_exit_status([row])


def _run_batch(flights: list[FlightInputs], out: Path, opts: JobOptions, args: argparse.Namespace) -> int:
    """The batch's rows, its failures on stderr and its exit status (CONTRACT.md §4)."""
    from uav_debate_eval.runner.batch import run_batch

    with _Progress(not args.quiet and sys.stderr.isatty()) as bar:
        rows = run_batch(flights, out, opts, jobs=args.jobs, scheduler=args.scheduler,
                         progress=lambda done, total: bar("flights", done, total))
    failed = [r for r in rows if r["status"] in ("failed", "error")]
    evaluated = [r for r in rows if r["status"] in ("ok", "partial")]
    for r in rows:
        if r["status"] != "ok":  # a partial flight's inputs left out are bad input too (its report stands)
            print(f"uav-debate-eval evaluate: {'failed' if r['status'] == 'partial' else r['status']}: {r['error']}",
                  file=sys.stderr)
    if not args.quiet:
        n_viol = sum(1 for r in evaluated if r["violations"])
        partial = sum(r["status"] == "partial" for r in rows)
        print(f"batch: {len(rows)} flight(s), {len(evaluated)} evaluated"
              + (f" ({partial} with an input left out)" if partial else "")
              + f", {n_viol} with violations, {len(failed)} failed; summary in {out / 'summary.md'}")
    if any(r["status"] == "error" for r in rows):
        return EXIT_INTERNAL
    if any(r["status"] != "ok" for r in rows):
        return EXIT_BAD_INPUT
    return flight_exit_status(evaluated)


def flight_exit_status(rows: list[dict[str, Any]]) -> int:
    """CONTRACT.md §4: 3 with any violation, else 4 when any flight is inconclusive, else 0."""
    if any(r["violations"] for r in rows):
        return EXIT_VIOLATION
    return EXIT_INCONCLUSIVE if any(r["label"] == "inconclusive" for r in rows) else EXIT_OK


class _Progress:
    """rich progress over read, segments, debate rounds and write; a no-op callable when stderr is not a terminal.

    The debate's total is the most rounds still possible (segments may stop early), so it can shrink.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.progress: Progress | None = None
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.progress.__enter__()
        return self

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.progress is None:
            return
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=max(total, 1))
        self.progress.update(self.tasks[stage], completed=done, total=max(total, 1))

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

