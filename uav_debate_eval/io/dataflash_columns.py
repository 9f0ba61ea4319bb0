"""Column access for DataFlash logs of every ArduPilot generation (3.2 to 4.6+), in one place.

Fields are named as today's logs name them, whatever the log's generation: `TimeUS` (boot microseconds, from
`TimeMS` x 1000 in logs before 3.4), and for GPS `GMS`/`GWk` (older logs write the ms-of-week as `TimeMS`, the
week as `Week` and the boot time as `T`). The estimator is the one the autopilot used: `AHRS_EKF_TYPE`, else the
one whose messages exist, never one whose format is merely declared.
"""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.errors import InputError

#: numpy types of DataFlash format characters (pymavlink DFReader.FORMAT_TO_STRUCT), and their scale.
_NP = {"b": "i1", "B": "u1", "h": "<i2", "H": "<u2", "i": "<i4", "I": "<u4", "f": "<f4", "d": "<f8", "n": "S4",
       "N": "S16", "Z": "S64", "a": "S64", "c": "<i2", "C": "<u2", "e": "<i4", "E": "<u4", "L": "<i4", "M": "u1",
       "q": "<i8", "Q": "<u8", "g": "<f2"}
_SCALE = {"c": 0.01, "C": 0.01, "e": 0.01, "E": 0.01, "L": 1e-7}
#: GPS before ArduPilot 3.4: its columns under today's names.
_OLD_GPS = {"TimeMS": "GMS", "Week": "GWk", "T": "TimeMS"}
#: EKF position messages by preference (EKF3, EKF2, the first EKF) and their status companions.
POSITION_TYPES = (("XKF1", "XKF4"), ("NKF1", "NKF4"), ("EKF1", "EKF4"))
ESTIMATOR_NAMES = {"XKF1": "EKF3", "NKF1": "EKF2", "EKF1": "EKF1"}
#: The sparse messages (read through DFReader's type-filtered loop) and every type the reader needs at all (the
#: benchmark's type filter; a damaged format of one of them is an error, not a repair).
SPARSE_TYPES = ["PARM", "MODE", "ERR", "EV", "CMD", "ORGN", "MSG", "VER"]
NEEDED_TYPES = sorted({t for pair in POSITION_TYPES for t in pair} | {"GPS", "POS", "AHR2"} | set(SPARSE_TYPES))
#: AHRS_EKF_TYPE values: the EKF whose position the autopilot used, or a source without EKF flags.
EKF_BY_TYPE = {2: "NKF1", 3: "XKF1"}
EKF_TYPE_SOURCES = {0: "the DCM attitude estimator (no EKF)", 10: "the simulator's own state (SITL)",
                    11: "an external navigation source"}


def count(reader, name: str) -> int:
    """Whole or partial messages of `name` in the log (0 when the type is only declared or absent)."""
    mtype = reader.name_to_id.get(name)
    return 0 if mtype is None else len(reader.offsets[mtype])


def field_names(reader, name: str) -> list[str]:
    """The message's fields under today's names ([] when the log does not declare it)."""
    mtype = reader.name_to_id.get(name)
    if mtype is None:
        return []
    cols = list(reader.formats[mtype].columns)
    return [_OLD_GPS.get(c, c) for c in cols] if name.startswith("GPS") and "Week" in cols else cols


def columns(reader, name: str, fields: list[str]) -> dict[str, np.ndarray] | None:
    """The given fields (today's names) of every whole `name` message as float arrays, scaled as DFReader scales
    them, plus `TimeUS` in boot microseconds when the message is timed; None when the log holds no such message.
    Fields the format lacks are left out; `offset` holds each message's place in the file."""
    mtype = reader.name_to_id.get(name)
    if mtype is None or not reader.offsets[mtype]:
        return None
    fmt = reader.formats[mtype]
    if any(ch not in _NP for ch in fmt.format) or sum(
            np.dtype(_NP[ch]).itemsize for ch in fmt.format) != fmt.len - 3:
        raise InputError(f"{reader.filehandle.name}: {name} format '{fmt.format}' does not match its length {fmt.len}")
    offs = np.asarray(reader.offsets[mtype], dtype=np.int64)
    offs = offs[offs + fmt.len <= reader.data_len] + 3  # a message cut by the end of the file is not read
    raw = np.frombuffer(reader.data_map, dtype=np.uint8)
    want = set(fields) | {"TimeUS", "TimeMS"}
    out: dict[str, np.ndarray] = {}
    start = 0
    for col, ch in zip(field_names(reader, name), fmt.format, strict=False):
        dt = np.dtype(_NP[ch])
        if col in want and dt.kind != "S":
            block = np.stack([raw[offs + start + j] for j in range(dt.itemsize)], axis=1)
            with np.errstate(invalid="ignore"):  # a flipped bit's signalling NaN stays a NaN, without a warning
                out[col] = block.view(dt)[:, 0].astype(np.float64) * _SCALE.get(ch, 1.0)
        start += dt.itemsize
    del raw  # the mmap closes only once no array looks into it
    out["offset"] = (offs - 3).astype(np.float64)  # where each message starts (orders untimed messages)
    if "TimeUS" not in out and "TimeMS" in out:
        out["TimeUS"] = out["TimeMS"] * 1000.0
    out.pop("TimeMS", None)
    return out


def message_time_us(m, clock: dict[str, np.ndarray] | None) -> float:
    """A sparse message's boot time in microseconds. Messages without a time field (EV and ERR before 3.4) take
    the time of the last `clock` message (the estimator's, with its offsets) written before them in the file."""
    if "TimeUS" in m._fieldnames:
        return float(m.TimeUS)
    if "TimeMS" in m._fieldnames:
        return float(m.TimeMS) * 1000.0
    if clock is None or not len(clock.get("offset", ())) or "TimeUS" not in clock:
        return 0.0
    i = int(np.searchsorted(clock["offset"], float(getattr(m, "_offset", 0)), side="right")) - 1
    return float(clock["TimeUS"][max(i, 0)])


def pick_estimator(reader, params: dict) -> tuple[str, str, str]:
    """(position type, status type, why): the EKF AHRS_EKF_TYPE names when its messages exist, else the first
    by preference whose messages exist; ("", "", why) when no EKF position was logged."""
    present = [(p, s) for p, s in POSITION_TYPES if count(reader, p)]
    ekf_type = params.get("AHRS_EKF_TYPE")
    wanted = EKF_BY_TYPE.get(int(ekf_type)) if ekf_type is not None else None
    for p, s in present:
        if p == wanted:
            return p, s, f"AHRS_EKF_TYPE {int(ekf_type)}"  # type: ignore[arg-type]
    declared = [p for p, _ in POSITION_TYPES if p in reader.name_to_id and not count(reader, p)]
    if present:
        why = "the EKF whose messages the log holds"
        if wanted:
            why += f" (AHRS_EKF_TYPE {int(ekf_type)} names {wanted}, which the log does not hold)"  # type: ignore[arg-type]
        elif declared:
            why += f" ({', '.join(declared)} only declared)"
        return present[0][0], present[0][1], why
    return "", "", f"no EKF position logged ({', '.join(declared) or 'none'} declared without messages)"
