"""The time spans of many per-drone autopilot logs, read on every core.

Several ArduPilot logs given together are one flight when their spans overlap (io.loader.one_flight), and a span
comes only from parsing the log and placing its clock. A show's drones each write their own log: 500 two-minute
logs took 1.9 s of planning on one core. The logs are shared out between this process and forked workers (one
per further core); each worker sends back its spans and its parses, which this process keeps for the flight's
read (io.kept_reads), so every log is still parsed once. A log a worker cannot read is read again here, where its
error is reported as before.
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
    """The spans of the ArduPilot logs among `paths`, read on every core (with their parses kept, inside
    `kept_reads.keeping()`); empty when there is one core, one log, little to read or nothing kept to share."""
    logs = [p for p in paths if _kind(p) == "ardupilot"]
    workers = min(cores(), len(logs))
    if workers < 2 or not can_fork() or not kept_reads.active() or sum(p.stat().st_size for p in logs) < MIN_BYTES:
        return {}
    shares = [logs[k::workers] for k in range(workers)]
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
