"""A batch: every flight's offline job on its own, in worker processes (--jobs) or as Dask tasks (--scheduler,
runner.fleet), each into its report folder below --out; then summary.csv / summary.md. Rows keep the flights'
order either way, and a flight that fails is a row, never a lost batch."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.runner.discover import FlightInputs
from uav_debate_eval.runner.job import JobOptions, evaluate_flight
from uav_debate_eval.runner.summary import Row, failed_row, flight_row, write_summary

#: progress(flights done, flights in the batch)
BatchProgress = Callable[[int, int], None]


def run_batch(flights: list[FlightInputs], out: Path, options: JobOptions, *, jobs: int = 0,
              scheduler: str | None = None, progress: BatchProgress | None = None) -> list[Row]:
    """Evaluate each flight on its own; write the summary into `out`; the rows in flight order."""
    jobs = jobs or min(len(flights), os.cpu_count() or 1)
    calls = [(flight, out / flight.folder, options) for flight in flights]
    tick = progress or (lambda done, total: None)
    if scheduler:
        rows = _run_on_dask(calls, scheduler, tick)
    elif jobs <= 1 or len(flights) == 1:
        rows = []
        for call in calls:
            rows.append(evaluate_one(*call))
            tick(len(rows), len(calls))
    else:
        rows = _run_in_processes(calls, min(jobs, len(flights)), tick)
    out.mkdir(parents=True, exist_ok=True)
    write_summary(rows, out)
    return rows


def evaluate_one(flight: FlightInputs, out: Path, options: JobOptions) -> Row:
    """Worker: one flight's job and its row; never raises (the row says what failed)."""
    t0 = time.perf_counter()
    try:
        ev = evaluate_flight(list(flight.paths), out, options, notes=flight.left_out_notes())
        return flight_row(flight, ev.report, out, time.perf_counter() - t0)
    except InputError as exc:
        status, error = "failed", str(exc)
    except Exception as exc:  # a bug in one flight must not lose the batch; reported as internal error
        status, error = "error", f"internal error: {type(exc).__name__}: {exc}"
    return failed_row(flight, status, error, time.perf_counter() - t0)


Call = tuple[FlightInputs, Path, JobOptions]


def _run_on_dask(calls: list[Call], scheduler: str, tick: BatchProgress) -> list[Row]:
    """A local cluster's workers share this directory; a remote cluster's get absolute paths (a shared file system),
    and the summary still names the flights as given."""
    from uav_debate_eval.runner.fleet import run_on_dask

    remote = calls if scheduler == "local" else [_absolute(call) for call in calls]
    rows = run_on_dask(evaluate_one, remote, scheduler, lambda call, why: failed_row(call[0], "error", why),
                       progress=tick)
    for row, (flight, sub, _) in zip(rows, calls, strict=True):
        row.update(flight=flight.name, file=" ".join(str(p) for p in flight.paths),
                   mission="" if flight.mission is None else str(flight.mission),
                   report=str(sub) if row["report"] else "")
    return rows


def _absolute(call: Call) -> Call:
    flight, out, options = call
    mission = options.read.mission
    read = replace(options.read, mission=str(Path(mission).resolve())) if mission else options.read
    return (replace(flight, paths=tuple(p.resolve() for p in flight.paths)), out.resolve(),
            replace(options, read=read))


def _run_in_processes(calls: list[Call], jobs: int, tick: BatchProgress) -> list[Row]:
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures: dict[Future[Row], int] = {pool.submit(evaluate_one, *call): i for i, call in enumerate(calls)}
        rows: list[Row] = [{} for _ in calls]
        for n, future in enumerate(as_completed(futures), 1):
            i = futures[future]
            try:
                rows[i] = future.result()
            except Exception as exc:  # a worker process died (BrokenProcessPool): the row says so, the batch goes on
                rows[i] = failed_row(calls[i][0], "error", f"worker process lost: {type(exc).__name__}: {exc}")
            tick(n, len(calls))
    return rows
