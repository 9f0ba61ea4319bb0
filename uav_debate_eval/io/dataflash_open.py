"""Opening an ArduPilot DataFlash log with pymavlink's DFReader: the header checked, damaged format records of
types the evaluation does not read repaired in a copy (io.dataflash_repair), pymavlink's prints swallowed."""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io.dataflash_columns import NEEDED_TYPES
from uav_debate_eval.io.dataflash_repair import READER_TYPES, damaged_type, lengthened, repaired_copy, write_temporary


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """pymavlink's prints swallowed, its C indexer's too: it writes "bad header ..." for every damaged byte straight
    to the process's stderr descriptor, past sys.stderr (2,771 lines for one damaged 1-MB log)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        ctypes.CDLL(None).fflush(None)  # what C stdio still buffers goes to /dev/null, not to the user
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def open_dataflash(path: Path, shown: Path | None = None):
    """DFReader on the file (InputError when it is not a DataFlash log; `shown`: the name errors give, when `path`
    is a binary copy of a text log); pymavlink's prints are swallowed."""
    from pymavlink import DFReader

    label = shown or path
    try:
        with open(path, "rb") as f:
            head = f.read(3)
    except OSError as exc:
        raise InputError(f"{label}: cannot read ({exc.strerror})") from None
    if len(head) < 3 or head[0] != 0xA3 or head[1] != 0x95:
        raise InputError(f"{label}: not an ArduPilot DataFlash log (no 0xA3 0x95 message header at the start)")
    data, repaired = lengthened(path, label, set(NEEDED_TYPES))  # a type of length 0 kept DFReader on one message
    source = path if data is None else write_temporary(data)
    while True:
        tried = source
        try:
            with silenced():
                reader = DFReader.DFReader_binary(str(tried), zero_time_base=True)
            break
        except Exception as exc:  # DFReader raises assorted types on damaged files; all mean bad input
            name = damaged_type(exc)
            if name in NEEDED_TYPES:
                raise InputError(f"{label}: the format of {name} is damaged (an unknown format character): its "
                                 "messages cannot be read") from None
            if name is not None and name not in repaired and name not in READER_TYPES:
                data = bytearray(path.read_bytes()) if data is None else data
                if repaired_copy(data, name, set(DFReader.FORMAT_TO_STRUCT)):
                    repaired.append(name)
                    source = write_temporary(data)
                    continue
            raise InputError(f"{label}: cannot read DataFlash log ({type(exc).__name__}: {exc})") from None
        finally:
            if tried != path:  # a repaired copy: mapped by the reader, or refused
                tried.unlink(missing_ok=True)
    reader.repaired_types = repaired
    return reader
