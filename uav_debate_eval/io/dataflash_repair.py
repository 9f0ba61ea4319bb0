"""A DataFlash log whose format table is damaged in a message type the evaluation does not read.

pymavlink's DFReader refuses the whole log when one FMT record carries a format character it does not know (a flipped
bit on the card: "Unsupported format char: '\\n' in message PSCD"), although every other message type is intact. The
FMT record still gives the damaged type's length, so its format can be replaced by filler of the same size: the type's
messages are then skipped as opaque bytes, and every other type reads as logged. A damaged type the evaluation needs
stays an error: its values cannot be trusted.
"""

from __future__ import annotations

import mmap
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: Types DFReader itself interprets while indexing (units, multipliers, formats): never replaced by filler.
READER_TYPES = frozenset({"FMT", "FMTU", "UNIT", "MULT"})
#: One FMT record: header, type, length, name (4), format (16), columns (64).
_FMT_HEAD = b"\xa3\x95\x80"
_NAME_AT, _FORMAT_AT, _COLUMNS_AT, _FMT_LEN = 5, 9, 25, 89
_DAMAGED = re.compile(r"Unsupported format char: '(.*)' in message (.+)$", re.DOTALL)
#: Filler format characters and their sizes, largest first (struct sizes of DFReader.FORMAT_TO_STRUCT).
_FILLER = (("Z", 64), ("N", 16), ("n", 4), ("b", 1))


def damaged_type(exc: Exception) -> str | None:
    """The message type DFReader's exception names as having an unknown format character, else None."""
    m = _DAMAGED.match(str(exc))
    return m.group(2).strip() if m else None


def filler(body_len: int) -> str:
    """Format characters of `body_len` bytes in all (a record is at most 252 bytes: at most 12 characters, within
    the FMT's 16)."""
    out = []
    for char, size in _FILLER:
        k, body_len = divmod(body_len, size)
        out.append(char * k)
    return "".join(out)


def repaired_copy(data: bytearray, name: str, known: set[str]) -> bool:
    """Replace, in `data`, the format of every FMT record of type `name` that holds a character not in `known` by
    filler of its length (columns c0, c1, ...). False when there is none to replace."""
    key = name.encode("ascii", "replace")[:4].ljust(4, b"\0")
    changed = False
    for at in _fmt_records(data):
        if bytes(data[at + _NAME_AT:at + _FORMAT_AT]) == key and any(c not in known for c in _format(data, at)):
            fill = filler(data[at + 4] - 3)
            columns = ",".join(f"c{k}" for k in range(len(fill))).encode()
            data[at + _FORMAT_AT:at + _COLUMNS_AT] = fill.encode().ljust(16, b"\0")
            data[at + _COLUMNS_AT:at + _FMT_LEN] = columns[:64].ljust(64, b"\0")
            changed = True
    return changed


def lengthened(path: Path, label: Path, needed: set[str]) -> tuple[bytearray | None, list[str]]:
    """The log with its too-short format lengths given lengths that hold their headers (`lengthened_copy`) and the
    types lengthened, or (None, []) when none is; InputError when one is a type the evaluation (or DFReader
    itself) reads: its messages cannot be trusted."""
    import struct

    from pymavlink.DFReader import FORMAT_TO_STRUCT

    from uav_debate_eval.core.errors import InputError

    if not has_short_format(path):
        return None, []
    data = bytearray(path.read_bytes())
    names = lengthened_copy(data, {c: struct.calcsize(code[0]) for c, code in FORMAT_TO_STRUCT.items()})
    if bad := sorted(set(names) & (needed | READER_TYPES)):
        raise InputError(f"{label}: the format of {bad[0]} is damaged (a length shorter than its header): its "
                         "messages cannot be read")
    return data, names


def has_short_format(path: Path) -> bool:
    """Whether the log holds an FMT record whose length cannot hold its own header (the file mapped, not read)."""
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size < _FMT_LEN:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return any(view[at + 4] < 3 and _named(view, at) for at in _fmt_records(view))


def lengthened_copy(data: bytearray, sizes: dict[str, int]) -> list[str]:
    """Give, in `data`, every FMT record whose length cannot hold its own 3-byte header a length that can: 3 plus
    its format's size (`sizes`: format character -> bytes; an unknown one counts 0). A type of length 0 sent
    DFReader back to the same message for ever (its offset advances by the length minus the header it read):
    `evaluate` hung on a flipped byte. Returns the names of the types lengthened."""
    names = []
    for at in _fmt_records(data):
        if data[at + 4] < 3 and _named(data, at):
            data[at + 4] = min(255, 3 + sum(sizes.get(c, 0) for c in _format(data, at)))
            names.append(bytes(data[at + _NAME_AT:at + _FORMAT_AT]).rstrip(b"\0").decode("latin-1"))
    return names


def _fmt_records(buf: bytearray | mmap.mmap) -> Iterator[int]:
    """Where each whole FMT record starts in `buf` (its header found; `buf` may change inside a record meanwhile)."""
    at = buf.find(_FMT_HEAD)
    while at >= 0 and at + _FMT_LEN <= len(buf):
        yield at
        at = buf.find(_FMT_HEAD, at + 1)


def _format(buf: bytearray | mmap.mmap, at: int) -> str:
    """The format characters of the FMT record at `at`."""
    return bytes(buf[at + _FORMAT_AT:at + _COLUMNS_AT]).split(b"\0")[0].decode("latin-1")


def _named(buf: bytearray | mmap.mmap, at: int) -> bool:
    """An FMT record, not the header's three bytes met inside another message: a name of letters and digits."""
    name = bytes(buf[at + _NAME_AT:at + _FORMAT_AT]).rstrip(b"\0")
    return bool(name) and name.isalnum() and name.isascii()


def write_temporary(data: bytearray) -> Path:
    """`data` as a temporary .bin (DFReader reads a file); the caller unlinks it once the reader has mapped it."""
    fd, name = tempfile.mkstemp(suffix=".bin", prefix="uav_dataflash_")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name)
