"""`uav-debate-eval evaluate`: recorded flights (CSV, rosbag2, ROS 1 bag, PX4 ULog) -> reports (CONTRACT.md §4).

One flight: reports in --out. Several independent inputs: a batch in worker processes, one
sub-directory per input and summary.csv / summary.md in --out.
"""

from __future__ import annotations

import argparse
import csv
import glob
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from uav_debate_eval.commands import add_llm_options
from uav_debate_eval.core.errors import InputError

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_VIOLATION, EXIT_INCONCLUSIVE = 0, 1, 2, 3, 4
_KNOWN_SUFFIXES = (".csv", ".mcap", ".db3", ".bag", ".ulg")

HELP = """\
Inputs: trajectory CSV files, rosbag2 (directory, .mcap, .db3), ROS 1 .bag, PX4 .ulg.

One flight or a batch:
  * several inputs whose time spans overlap are ONE flight on one clock (per-drone bags, CSVs or
    PX4 logs recorded together; several .ulg files always are), unless --each is given;
  * inputs with disjoint spans (or that each hold the same vehicles on a relative clock), a folder
    that is not a rosbag2, or a glob pattern (quoted, e.g. 'flights/*.mcap') are a BATCH: each input
    is evaluated on its own, in --jobs worker processes, into --out/<input name>/, with summary.csv
    and summary.md in --out. --one-flight forces one flight. The terminal says which it chose.
Vehicles: every pose source counts, unless the mission's `vehicles:` globs or --vehicles REGEX
(matched against the vehicle id and the source topic or frame) say which; the report lists what was
taken and why.
Mission: --mission FILE; otherwise a mission.yaml beside the input is used; otherwise no constraint
is checked (the report says so).
Times: every time in the reports is flight time (seconds since the first sample); report.json's
mission.t0 keeps the input clock's value at flight time 0.
Exit status: 0 no violation, 3 at least one violation, 4 no violation but inconclusive (a checked
constraint could not be evaluated over a material part of the flight), 2 bad input or arguments (a
batch: 2 if any input failed, else 3 if any had a violation, else 4 if any was inconclusive), other
non-zero only for internal errors.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("evaluate", help="evaluate recorded flights and write reports",
                              description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="CSV, rosbag2 dir/.mcap/.db3, .bag, .ulg, folder, glob")
    p.add_argument("--out", required=True, help="report directory (created; a batch gets one sub-directory each)")
    p.add_argument("--mission", help="mission YAML (constraints, thresholds, vehicle names)")
    add_llm_options(p, "panel")
    p.add_argument("--topics", nargs="+", metavar="T",
                   help="pose topics to read from bags (TOPIC or TOPIC=name, also comma-separated); "
                   "give INPUT first or end the list with --")
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
    p.add_argument("--vehicles", metavar="REGEX",
                   help="which pose sources are vehicles (regex on the vehicle id or source topic/frame)")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary line")
    p.add_argument("--mcap-out", metavar="FILE", help="also write the evaluated flight as an annotated MCAP "
                   "(open it in Foxglove with config/foxglove_layout.json); one flight only")
    p.set_defaults(func=run)


def expand_inputs(raw: list[str]) -> tuple[list[Path], bool]:
    """Expand globs and non-bag folders; returns (paths, is_batch_by_shape)."""
    from uav_debate_eval.io.loader import input_kind

    out: list[Path] = []
    batch = False
    for item in raw:
        path = Path(item)
        if not path.exists() and any(ch in item for ch in "*?["):
            matches = sorted(Path(m) for m in glob.glob(item))
            if not matches:
                raise InputError(f"{item}: pattern matches no file")
            out.extend(matches)
            batch = True
        elif path.is_dir() and not _is_rosbag2_dir(path):
            found = sorted(p for p in path.iterdir() if (p.is_file() and p.suffix.lower() in _KNOWN_SUFFIXES)
                           or (p.is_dir() and _is_rosbag2_dir(p)))
            if not found:
                raise InputError(f"{path}: folder holds no input (.csv, .mcap, .db3, .bag, .ulg or rosbag2 folder)")
            out.extend(found)
            batch = True
        else:
            input_kind(path)  # raises InputError for missing paths and unknown types
            out.append(path)
    return out, batch


def _is_rosbag2_dir(path: Path) -> bool:
    """A recorded rosbag2 always has metadata.yaml; any other folder is a batch of inputs."""
    return (path / "metadata.yaml").is_file()


def _options(args: argparse.Namespace) -> dict:
    return {"mission": args.mission, "llm": args.llm, "model": args.model, "base_url": args.base_url,
            "topics": args.topics, "segment_mode": args.segment_mode, "window": args.window,
            "no_cache": args.no_cache, "vehicles": args.vehicles, "mcap_out": getattr(args, "mcap_out", None)}


def debate_config(opts: dict) -> Any:
    """The panel's config; the rules backend needs no LLM config (so the LLM client libraries never load)."""
    from uav_debate_eval.debate.config import DebateConfig

    if opts["llm"] == "rules":
        return DebateConfig(backend="rules", model=opts.get("model"))
    from uav_debate_eval.debate.llm.factory import LLMConfig

    llm = LLMConfig(backend=opts["llm"], model=opts.get("model"), base_url=opts.get("base_url"),
                    use_cache=not opts.get("no_cache", False))
    return DebateConfig(backend=opts["llm"], model=opts.get("model"), llm=llm)


def run(args: argparse.Namespace) -> int:
    if args.window <= 0:
        raise InputError(f"--window: must be > 0 s, got {args.window}")
    if args.jobs < 0:
        raise InputError(f"--jobs: must be >= 0, got {args.jobs}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: --out exists and is not a directory")
    paths, batch = expand_inputs(args.inputs)
    if len(paths) > 1 and not (args.each or args.one_flight or batch):
        from uav_debate_eval.io.loader import one_flight

        together, why = one_flight(paths)
        if not args.quiet:
            print(f"{len(paths)} inputs: {'one flight' if together else 'evaluated one by one'} ({why}); "
                  f"{'--each' if together else '--one-flight'} overrides", file=sys.stderr)
        batch = not together
    if args.each or (batch and not args.one_flight):
        if args.mcap_out:
            raise InputError("--mcap-out: takes one flight, not a batch")
        return run_batch(paths, out, _options(args), jobs=args.jobs, quiet=args.quiet, scheduler=args.scheduler)
    show = not args.quiet and sys.stderr.isatty()
    row = evaluate_flight(paths, out, _options(args), show_progress=show)
    if not args.quiet:
        print(f"{row['label']}: {row['violations']} violation(s), overall score {_fmt(row['overall'])}; "
              f"reports in {out}")
        for line in row.get("words") or []:
            print(line)
    return flight_exit_status([row])


def evaluate_flight(paths: list[Path], out: Path, opts: dict, show_progress: bool = False) -> dict:
    """Read, evaluate and write one flight; returns its summary row. Raises InputError for bad input."""
    from uav_debate_eval.findings import top_findings, verdict_sentence

    t0 = time.perf_counter()
    ev = evaluate_and_write(paths, out, opts, show_progress)
    r = ev.report
    return {"file": " ".join(str(p) for p in paths), "status": "ok", "label": r["verdict"]["label"],
            "violations": len(r["violations"]), **{k: r["scores"].get(k) for k in _SCORES},
            "dsl_tokens": r["dsl"]["tokens"],
            "debate_tokens": r["debate"]["tokens"]["prompt"] + r["debate"]["tokens"]["completion"],
            "time_s": round(time.perf_counter() - t0, 3), "report": str(out), "error": "",
            "words": [verdict_sentence(r), *("  " + line for line in top_findings(r, 3))]}


def evaluate_and_write(paths: list[Path], out: Path, opts: dict, show_progress: bool = False) -> Any:
    """Read, evaluate and write one flight; returns the pipeline Evaluation (compare-flights reads its parts)."""
    from uav_debate_eval.commands.preload import preload_stages
    from uav_debate_eval.io.loader import load_inputs
    from uav_debate_eval.runner.pipeline import evaluate, load_mission_for

    t0 = time.perf_counter()
    preload = preload_stages(paths)  # joined once the input is read (or failed), before anything forks
    try:
        mission, notes = load_mission_for(paths, opts.get("mission"))
    except BaseException:
        if preload is not None:
            preload.join()
        raise
    with _Progress(show_progress) as bar:
        bar("read", 0, 1)
        try:
            traj = load_inputs(paths, topics=opts.get("topics"), names=mission.uavs or None,
                               vehicles=mission.vehicles, vehicle_regex=opts.get("vehicles"))
        finally:
            if preload is not None:
                preload.join()
        bar("read", 1, 1)
        read_s = time.perf_counter() - t0
        ev = evaluate(traj, mission, debate_config(opts), segment_mode=opts.get("segment_mode", "phase"),
                      window_s=float(opts.get("window", 30.0)), progress=bar, inputs=[str(p) for p in paths],
                      notes=notes, figures=True)
        ev.report["timing"] = {"read": round(read_s, 4), **ev.report.get("timing", {})}
        bar("write", 0, 1)
        from uav_debate_eval.report.writer import write_reports  # matplotlib loads once there is a flight to draw

        write_reports(ev, out)
        if opts.get("mcap_out"):
            from uav_debate_eval.viz.mcap_export import write_mcap

            write_mcap(ev, Path(opts["mcap_out"]), poses=traj)  # the samples as read: the file replays
        bar("write", 1, 1)
    return ev


_SCORES = ("flight_control", "coordination", "safety", "overall")
SUMMARY_COLUMNS = ("file", "status", "label", "violations", *_SCORES, "dsl_tokens", "debate_tokens", "time_s",
                   "report", "error")


def _fmt(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def _batch_one(path: str, out: str, opts: dict) -> dict:
    """Worker: one input, never raises (the row says what failed)."""
    t0 = time.perf_counter()
    try:
        return evaluate_flight([Path(path)], Path(out), opts)
    except InputError as exc:
        status, error = "failed", str(exc)
    except Exception as exc:  # a bug in one input must not lose the batch; reported as internal error
        status, error = "error", f"internal error: {type(exc).__name__}: {exc}"
    return _failed_row(path, status, error, time.perf_counter() - t0)


def _failed_row(path: str, status: str, error: str, seconds: float = 0.0) -> dict:
    return {"file": path, "status": status, "label": "", "violations": "", **dict.fromkeys(_SCORES),
            "dsl_tokens": "", "debate_tokens": "", "time_s": round(seconds, 3), "report": "",
            "error": " ".join(error.split())}


def _sub_names(paths: list[Path]) -> list[str]:
    names, seen = [], {}
    for p in paths:
        base = p.name.replace(".", "_") or "input"
        n = seen.get(base, 0)
        seen[base] = n + 1
        names.append(base if n == 0 else f"{base}_{n + 1}")
    return names


def run_batch(paths: list[Path], out: Path, opts: dict, jobs: int = 0, quiet: bool = False,
              scheduler: str | None = None) -> int:
    """Evaluate each input on its own (worker processes, or Dask tasks with `scheduler`); write summary.csv/.md;
    batch exit status. Rows keep the input order either way."""
    import os

    jobs = jobs or min(len(paths), os.cpu_count() or 1)
    calls = [(str(p), str(out / name), opts) for p, name in zip(paths, _sub_names(paths), strict=True)]
    with _Progress(not quiet and sys.stderr.isatty()) as bar:
        def tick(done: int, total: int) -> None:
            bar("flights", done, total)

        if scheduler:
            rows = _run_on_dask(calls, scheduler, tick)
        elif jobs <= 1 or len(paths) == 1:
            rows = []
            for call in calls:
                rows.append(_batch_one(*call))
                tick(len(rows), len(calls))
        else:
            rows = _run_in_processes(calls, min(jobs, len(paths)), tick)
    out.mkdir(parents=True, exist_ok=True)
    write_summary(rows, out)
    failed = [r for r in rows if r["status"] != "ok"]
    for r in failed:
        print(f"uav-debate-eval evaluate: {r['status']}: {r['error']}", file=sys.stderr)
    if not quiet:
        n_viol = sum(1 for r in rows if r["status"] == "ok" and r["violations"])
        print(f"batch: {len(rows)} input(s), {len(rows) - len(failed)} evaluated, {n_viol} with violations, "
              f"{len(failed)} failed; summary in {out / 'summary.md'}")
    if any(r["status"] == "error" for r in rows):
        return EXIT_INTERNAL
    if failed:
        return EXIT_BAD_INPUT
    return flight_exit_status([r for r in rows if r["status"] == "ok"])


def _run_on_dask(calls: list[tuple], scheduler: str, tick) -> list[dict]:
    """A local cluster's workers share this directory; a remote cluster's get absolute paths (a shared file system),
    and the summary still names the inputs as given."""
    from uav_debate_eval.runner.fleet import run_on_dask

    remote = calls if scheduler == "local" else [
        (str(Path(f).resolve()), str(Path(o).resolve()), _absolute_mission(opts)) for f, o, opts in calls]
    rows = run_on_dask(_batch_one, remote, scheduler, lambda call, why: _failed_row(call[0], "error", why),
                       progress=tick)
    for row, (given, sub, _) in zip(rows, calls, strict=True):
        row["file"] = given
        row["report"] = sub if row["report"] else ""
    return rows


def _absolute_mission(opts: dict) -> dict:
    return {**opts, "mission": str(Path(opts["mission"]).resolve())} if opts.get("mission") else opts


def _run_in_processes(calls: list[tuple], jobs: int, tick) -> list[dict]:
    from concurrent.futures import as_completed

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_batch_one, *call): i for i, call in enumerate(calls)}
        rows: list = [None] * len(calls)
        for n, future in enumerate(as_completed(futures), 1):
            i = futures[future]
            try:
                rows[i] = future.result()
            except Exception as exc:  # a worker process died (BrokenProcessPool): the row says so, the batch goes on
                rows[i] = _failed_row(calls[i][0], "error", f"worker process lost: {type(exc).__name__}: {exc}")
            tick(n, len(calls))
    return rows


def flight_exit_status(rows: list[dict]) -> int:
    """CONTRACT.md §4: 3 with any violation, else 4 when any flight is inconclusive, else 0."""
    if any(r["violations"] for r in rows):
        return EXIT_VIOLATION
    return EXIT_INCONCLUSIVE if any(r["label"] == "inconclusive" for r in rows) else EXIT_OK


def write_summary(rows: list[dict], out: Path) -> None:
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=SUMMARY_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in SUMMARY_COLUMNS})
    from uav_debate_eval.report.escape import md

    lines = ["# Batch summary", "", "| " + " | ".join(SUMMARY_COLUMNS) + " |",
             "|" + "---|" * len(SUMMARY_COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(md(_fmt(r.get(k))) if k in _SCORES else md(r.get(k, ""))
                                       for k in SUMMARY_COLUMNS) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


class _Progress:
    """rich progress over read, segments, debate rounds and write; a no-op callable when stderr is not a terminal.

    The debate's total is the most rounds still possible (segments may stop early), so it can shrink.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.progress = None
        self.tasks: dict[str, Any] = {}

    def __enter__(self):
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

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

