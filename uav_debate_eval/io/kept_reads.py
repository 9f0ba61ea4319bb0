"""Files parsed while planning, kept for the flight's own read: several per-drone logs or CSVs given together are
read once for their time spans (io.loader.one_flight decides whether they are one flight) and once more for the
flight; within `keeping()` the second read takes the first's result instead of parsing the file again.

A kept result is a copy made before anyone changed it (readers name and shift what they return) and is taken once;
it is keyed by the file's identity (its real path, size and modification time), so a file changed in between is
parsed again. Outside `keeping()` nothing is kept: a batch's workers and library callers parse as before.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_kept: dict[tuple[str, str, int, int], Any] | None = None


@contextlib.contextmanager
def keeping() -> Iterator[None]:
    """Keep what `parsed(..., keep=True)` reads until the block ends (or `drop()`)."""
    global _kept
    outer, _kept = _kept, {}
    try:
        yield
    finally:
        _kept = outer


def active() -> bool:
    """Whether parses are kept now (inside `keeping()`)."""
    return _kept is not None


def drop() -> None:
    """Forget what was kept (the inputs became a batch: each worker reads its own)."""
    if _kept is not None:
        _kept.clear()


def held() -> dict:
    """What is kept (a forked worker's parses, sent to the planning process: `adopt`)."""
    return dict(_kept or {})


def adopt(parses: dict) -> None:
    """Keep parses made in another process (`held` there) for this one's reads; nothing outside `keeping()`."""
    if _kept is not None:
        _kept.update(parses)


def ahead(path: Path, parse: Callable[[Path], T]) -> None:
    """Parse now for the next read of the file (a run reading many logs on every core); nothing outside
    `keeping()`, no copy (nothing else holds the result)."""
    key = _identity(path, parse)
    if _kept is not None and key is not None and key not in _kept:
        _kept[key] = parse(path)


def parsed(path: Path, parse: Callable[[Path], T], *, keep: bool = False) -> T:
    """`parse(path)`, or the result kept for this very file (taken, or a copy of it when `keep`: a later read takes
    it); `keep`: keep a copy of a new parse for the next read of the file."""
    key = _identity(path, parse)
    if _kept is not None and key is not None and key in _kept:
        return copy.deepcopy(_kept[key]) if keep else _kept.pop(key)
    result = parse(path)
    if keep and _kept is not None and key is not None:
        _kept[key] = copy.deepcopy(result)
    return result


def _identity(path: Path, parse: Callable) -> tuple[str, str, int, int] | None:
    """The file as it is now, and the reader (one file may be read by two readers, into different results)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{parse.__module__}.{parse.__qualname__}", os.path.realpath(path), st.st_size, st.st_mtime_ns
