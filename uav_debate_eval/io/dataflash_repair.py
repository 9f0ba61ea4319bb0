"""A DataFlash log whose format table is damaged in a message type the evaluation does not read.

pymavlink's DFReader refuses the whole log when one FMT record carries a format character it does not know (a flipped
bit on the card: "Unsupported format char: '\\n' in message PSCD"), although every other message type is intact. The
FMT record still gives the damaged type's length, so its format can be replaced by filler of the same size: the type's
messages are then skipped as opaque bytes, and every other type reads as logged. A damaged type the evaluation needs
stays an error: its values cannot be trusted.
"""

from __future__ import annotations

import os
import re
import tempfile
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
    at = data.find(_FMT_HEAD)
    while at >= 0:
        record = data[at:at + _FMT_LEN]
        if len(record) == _FMT_LEN and bytes(record[_NAME_AT:_FORMAT_AT]) == key:
            fmt = bytes(record[_FORMAT_AT:_COLUMNS_AT]).split(b"\0")[0].decode("latin-1")
            if any(c not in known for c in fmt):
                fill = filler(record[4] - 3)
                columns = ",".join(f"c{k}" for k in range(len(fill))).encode()
                data[at + _FORMAT_AT:at + _COLUMNS_AT] = fill.encode().ljust(16, b"\0")
                data[at + _COLUMNS_AT:at + _FMT_LEN] = columns[:64].ljust(64, b"\0")
                changed = True
        at = data.find(_FMT_HEAD, at + 1)
    return changed


def write_temporary(data: bytearray) -> Path:
    """`data` as a temporary .bin (DFReader reads a file); the caller unlinks it once the reader has mapped it."""
    fd, name = tempfile.mkstemp(suffix=".bin", prefix="uav_dataflash_")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name)
