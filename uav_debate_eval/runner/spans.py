"""Many per-drone autopilot logs read on every core: a show's drones each write their own log.

Several ArduPilot or PX4 logs (or per-drone CSVs) given together are one flight when their spans overlap
(io.loader.one_flight), and a span comes only from parsing the file (and placing a log's clock): 500 two-minute
logs took 1.9 s of planning on one core. PX4 logs given as one flight (--one-flight) are parsed when the flight
is read. Either way the logs are shared out between this process and forked workers (one per further core); each
worker sends back its parses (and spans), which this process keeps for the flight's read (io.kept_reads), so every
log is still parsed once. A log a worker cannot read is read again here, where its error is reported as before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io import kept_reads
from uav_debate_eval.io.loader import Span, input_kind, readable_spans
from uav_debate_eval.runner.forked import Forked, can_fork, cores

#: Logs (bytes, together) worth sharing out: below, a fork and its pickled answer cost more than they save.
MIN_BYTES = 16_000_000


def spans_ahead(paths: list[Path]) -> dict[Path, Span]:
    """The spans of the ArduPilot and PX4 logs and CSVs among `paths`, read on every core (with their parses kept,
    inside `kept_reads.keeping()`); empty when there is one core, one log, little to read or nothing kept to share."""
    return _on_every_core([p for p in paths if _kind(p) in ("ardupilot", "csv", "ulog")], _spans)


def parse_ahead(paths: list[Path]) -> None:
    """Parse the PX4 logs among `paths` on every core for the flight's read (inside `kept_reads.keeping()`); call
    it before any thread starts (a forked child must not inherit a held lock)."""
    _on_every_core([p for p in paths if _kind(p) == "ulog"], _ulog_parses)


def _on_every_core(logs: list[Path], work: Callable[[list[Path]], dict[Path, Span]]) -> dict[Path, Span]:
    """`work` on the logs dealt out to this process and one forked worker per further core (nothing when there is
    one core, one log, little to read or nothing kept to share); the workers' answers merged, their parses kept
    here."""
    workers = min(cores(), len(logs))
    if workers < 2 or not can_fork() or not kept_reads.active() or sum(p.stat().st_size for p in logs) < MIN_BYTES:
        return {}
    shares = [logs[k::workers] for k in range(workers)]
    children = [Forked(_worker, work, share) for share in shares[1:]]
    try:
        answer = work(shares[0])  # this process's share: its parses are kept here directly
        for child in children:
            theirs, parses = child.result()
            answer.update(theirs)
            kept_reads.adopt(parses)
    finally:
        for child in children:
            child.cancel()
    return answer


def _worker(_inbox: Any, work: Callable[[list[Path]], dict[Path, Span]], share: list[Path]) -> tuple[dict, dict]:
    with kept_reads.keeping():
        return work(share), kept_reads.held()


def _spans(share: list[Path]) -> dict[Path, Span]:
    return readable_spans(share)[0]  # a file that cannot be read is read again by the planner, which says why


def _ulog_parses(share: list[Path]) -> dict[Path, Span]:
    from uav_debate_eval.io.ulog import ulog_track

    for path in share:
        try:
            kept_reads.ahead(path, ulog_track)
        except InputError:  # read again by the flight's reader, which says why
            continue
    return {}


def _kind(path: Path) -> str:
    try:
        return input_kind(path)
    except InputError:
        return ""
