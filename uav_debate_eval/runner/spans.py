"""Many per-drone autopilot logs read on every core: a show's drones each write their own log.

Several ArduPilot logs (or per-drone CSVs) given together are one flight when their spans overlap
(io.loader.one_flight), and a span comes only from parsing the file (and placing a log's clock): 500 two-minute
logs took 1.9 s of planning on one core.
PX4 logs are one flight without a span (one vehicle each) and are parsed when the flight is read. Either way the
logs are shared out between this process and forked workers (one per further core); each worker sends back its
parses (and spans), which this process keeps for the flight's read (io.kept_reads), so every log is still parsed
once. A log a worker cannot read is read again here, where its error is reported as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io import kept_reads
from uav_debate_eval.io.loader import Span, input_kind, span
from uav_debate_eval.runner.forked import Forked, can_fork, cores

#: Logs (bytes, together) worth sharing out: below, a fork and its pickled answer cost more than they save.
MIN_BYTES = 16_000_000


def spans_ahead(paths: list[Path]) -> dict[Path, Span]:
    """The spans of the ArduPilot logs and CSVs among `paths`, read on every core (with their parses kept, inside
    `kept_reads.keeping()`); empty when there is one core, one log, little to read or nothing kept to share."""
    shares = _shares([p for p in paths if _kind(p) in ("ardupilot", "csv")])
    if not shares:
        return {}
    children = [Forked(_worker, share) for share in shares[1:]]
    try:
        spans = _spans_of(shares[0])  # this process's share: its parses are kept here directly
        for child in children:
            theirs, parses = child.result()
            spans.update(theirs)
            kept_reads.adopt(parses)
    finally:
        for child in children:
            child.cancel()
    return spans


def parse_ahead(paths: list[Path]) -> None:
    """Parse the PX4 logs among `paths` on every core for the flight's read (inside `kept_reads.keeping()`); call
    it before any thread starts (a forked child must not inherit a held lock)."""
    from uav_debate_eval.io.ulog import ulog_track

    shares = _shares([p for p in paths if _kind(p) == "ulog"])
    if not shares:
        return
    children = [Forked(_parse_worker, share) for share in shares[1:]]
    try:
        for path in shares[0]:
            _ahead(path, ulog_track)
        for child in children:
            kept_reads.adopt(child.result())
    finally:
        for child in children:
            child.cancel()


def _shares(logs: list[Path]) -> list[list[Path]]:
    """The logs dealt out to this process and one worker per further core; empty when there is one core, one
    log, little to read or nothing kept to share."""
    workers = min(cores(), len(logs))
    if workers < 2 or not can_fork() or not kept_reads.active() or sum(p.stat().st_size for p in logs) < MIN_BYTES:
        return []
    return [logs[k::workers] for k in range(workers)]


def _parse_worker(_inbox: Any, share: list[Path]) -> dict:
    from uav_debate_eval.io.ulog import ulog_track

    with kept_reads.keeping():
        for path in share:
            _ahead(path, ulog_track)
        return kept_reads.held()


def _ahead(path: Path, parse: Any) -> None:
    try:
        kept_reads.ahead(path, parse)
    except InputError:  # read again by the flight's reader, which says why
        return


def _worker(_inbox: Any, share: list[Path]) -> tuple[dict[Path, Span], dict]:
    with kept_reads.keeping():
        return _spans_of(share), kept_reads.held()


def _spans_of(share: list[Path]) -> dict[Path, Span]:
    out = {}
    for path in share:
        try:
            out[path] = span(path)
        except InputError:  # read again by the planner, which says why
            continue
    return out


def _kind(path: Path) -> str:
    try:
        return input_kind(path)
    except InputError:
        return ""
