"""ArduPilot DataFlash logs in their text form (`.log`: "FMT, 130, 45, GPS, BIHBcLLeeEefI, Status,TimeMS,...").

Mission Planner saved the logs it downloaded over MAVLink as text (APM 2.x, ArduCopter 3.1 and older), and converts
`.bin` logs to it. The text holds the same messages as the binary log, its values printed in the log's units, so it
is turned back into a binary log (the FMT lines give each message's layout, pymavlink's table the packing and the
scales) and read as one: the same reader, the same numbers. The lines before the first message (the firmware's
banner, "ArduCopter V3.1 (5c6503e2)") become MSG messages, as a binary log holds them.
"""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

from uav_debate_eval.core.errors import InputError

#: A text log is recognised by an FMT line among its first bytes.
SNIFF_BYTES = 65_536
_FMT_ID, _MSG = 128, "MSG"


def is_text_dataflash(path: Path) -> bool:
    """Whether the file is a DataFlash text log (an "FMT, <id>, <length>, <name>, <format>" line near its start)."""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return False
    for line in head.splitlines():
        parts = [p.strip() for p in line.split(b",")]
        if len(parts) >= 5 and parts[0] == b"FMT" and parts[1].isdigit() and parts[2].isdigit():
            return True
    return False


def text_to_binary(path: Path) -> tuple[Path, int]:
    """The text log as a temporary binary DataFlash log (the caller unlinks it) and how many of its lines could not
    be packed (a value its format cannot hold, a cut line); InputError when it declares no message."""
    from pymavlink.DFReader import FORMAT_TO_STRUCT

    formats: dict[str, tuple[int, str, str]] = {}
    out = bytearray()
    banner: list[str] = []
    modes: dict[str, int] = {}
    skipped = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            parts = [p.strip() for p in raw.rstrip("\r\n").split(",")]
            name = parts[0]
            if name == "FMT" and len(parts) >= 5 and parts[1].isdigit():
                tid, mname, fmt = int(parts[1]), parts[3], parts[4]
                if not all(ch in FORMAT_TO_STRUCT for ch in fmt):
                    skipped += 1
                    continue
                formats[mname] = (tid, fmt, ",".join(parts[5:]))
                if mname != "FMT":
                    out += _fmt_message(tid, mname, fmt, formats[mname][2], FORMAT_TO_STRUCT)
                if mname == _MSG:
                    for text in banner:
                        out += _message(formats[_MSG], [text], FORMAT_TO_STRUCT, modes)
                    banner.clear()
            elif name in formats and name != "FMT":
                try:
                    out += _message(formats[name], parts[1:], FORMAT_TO_STRUCT, modes)
                except (ValueError, struct.error, OverflowError):
                    skipped += 1
            elif not formats and raw.strip() and len(banner) < 8:
                banner.append(raw.strip())
                modes = modes or _mode_numbers(raw)
    if not formats:
        raise InputError(f"{path}: not an ArduPilot DataFlash log (no FMT line)")
    fd, name = tempfile.mkstemp(suffix=".bin", prefix="uav_dataflash_text_")
    with os.fdopen(fd, "wb") as f:
        f.write(out)
    return Path(name), skipped


def _struct(fmt: str, table: dict) -> str:
    return "<" + "".join(table[ch][0] for ch in fmt)


def _fmt_message(tid: int, name: str, fmt: str, columns: str, table: dict) -> bytes:
    length = 3 + struct.calcsize(_struct(fmt, table))
    body = struct.pack("<BB4s16s64s", tid, length, name.encode()[:4], fmt.encode()[:16], columns.encode()[:64])
    return bytes([0xA3, 0x95, _FMT_ID]) + body


def _mode_numbers(banner: str) -> dict[str, int]:
    """Flight mode name -> number of the vehicle the banner names (a text log prints MODE's number as its name)."""
    from pymavlink import mavutil

    for word, mapping in (("Copter", mavutil.mode_mapping_acm), ("Plane", mavutil.mode_mapping_apm),
                          ("Rover", mavutil.mode_mapping_rover), ("rover", mavutil.mode_mapping_rover),
                          ("Sub", mavutil.mode_mapping_sub), ("Tracker", mavutil.mode_mapping_tracker)):
        if word in banner:
            return {name: number for number, name in mapping.items()}
    return {}


def _message(layout: tuple[int, str, str], values: list[str], table: dict, modes: dict[str, int]) -> bytes:
    """One binary message from its printed values (a string last in the format may hold commas; a flight mode
    printed by name is its number again)."""
    tid, fmt, columns = layout
    if len(values) > len(fmt) and table[fmt[-1]][2] is str:
        values = values[:len(fmt) - 1] + [",".join(values[len(fmt) - 1:])]
    if len(values) != len(fmt):
        raise ValueError(f"{len(values)} values for {len(fmt)} fields")
    packed: list = []
    for ch, v in zip(fmt, values, strict=True):
        code, scale, kind = table[ch]
        if kind is str:
            packed.append(v.encode())
        elif ch == "M" and not _is_number(v):
            packed.append(_mode_number(v, modes, columns, values))
        elif code in ("f", "d", "e"):
            packed.append(float(v))
        else:
            packed.append(int(round(float(v) / scale)) if scale else int(round(float(v))))
    return bytes([0xA3, 0x95, tid]) + struct.pack(_struct(fmt, table), *packed)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _mode_number(name: str, modes: dict[str, int], columns: str, values: list[str]) -> int:
    """A flight mode printed by name as its number: the banner's vehicle's name, else the message's own ModeNum
    (Mission Planner's exports print `MODE, 116353326, Loiter, 5` without a banner, in mixed case), else the name
    without case and underscores (AltHold, ALT_HOLD); ValueError when none says."""
    if name in modes:
        return modes[name]
    names = columns.split(",")
    if "ModeNum" in names and _is_number(number := values[names.index("ModeNum")]):
        return int(float(number))
    plain = {key.replace("_", "").upper(): number for key, number in modes.items()}
    if (key := name.replace("_", "").replace(" ", "").upper()) in plain:
        return plain[key]
    raise ValueError(f"flight mode {name!r} has no number here")
