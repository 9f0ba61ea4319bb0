"""ArduPilot DataFlash logs (`.bin`): one vehicle's EKF track, GPS, origin, validity, modes, errors and events.

pymavlink's DFReader indexes the file (its Cython indexer records every message's offset by type). The bulk
streams (EKF and GPS, thousands of messages a minute) are then decoded column by column with numpy straight from
those offsets, one gather per field, instead of one Python object per message; the sparse ones (PARM, MODE,
ERR, EV, CMD, ORGN, MSG) go through DFReader's own type-filtered loop. `benchmarks/bench_ardupilot.py` measures
both against the unfiltered DFReader loop.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io import ardupilot_codes as codes
from uav_debate_eval.io.ardupilot_log import (
    LogEvent,
    LogSpan,
    VehicleLog,
    gaps,
    gps_utc_offset_us,
    hold_last,
    invalid_reasons,
    lane_switches,
)
from uav_debate_eval.io.ulog import LogTrack, origin_from_fixes

#: numpy types of DataFlash format characters (pymavlink DFReader.FORMAT_TO_STRUCT), and their scale.
_NP = {"b": "i1", "B": "u1", "h": "<i2", "H": "<u2", "i": "<i4", "I": "<u4", "f": "<f4", "d": "<f8", "n": "S4",
       "N": "S16", "Z": "S64", "a": "S64", "c": "<i2", "C": "<u2", "e": "<i4", "E": "<u4", "L": "<i4", "M": "u1",
       "q": "<i8", "Q": "<u8", "g": "<f2"}
_SCALE = {"c": 0.01, "C": 0.01, "e": 0.01, "E": 0.01, "L": 1e-7}
#: EKF position messages by preference (EKF3, EKF2, the first EKF) and their status companions.
POSITION_TYPES = (("XKF1", "XKF4"), ("NKF1", "NKF4"), ("EKF1", "EKF4"))
SPARSE_TYPES = ["PARM", "MODE", "ERR", "EV", "CMD", "ORGN", "MSG", "VER"]
#: The message types the reader needs at all (the benchmark's type filter).
NEEDED_TYPES = sorted({t for pair in POSITION_TYPES for t in pair} | {"GPS"} | set(SPARSE_TYPES))
GPS_3D_FIX = 3


def open_dataflash(path: Path):
    """DFReader on the file (InputError when it is not a DataFlash log); pymavlink's prints are swallowed."""
    from pymavlink import DFReader

    try:
        with open(path, "rb") as f:
            head = f.read(3)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    if len(head) < 3 or head[0] != 0xA3 or head[1] != 0x95:
        raise InputError(f"{path}: not an ArduPilot DataFlash log (no 0xA3 0x95 message header at the start)")
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return DFReader.DFReader_binary(str(path), zero_time_base=True)
    except Exception as exc:  # DFReader raises assorted types on damaged files; all mean bad input
        raise InputError(f"{path}: cannot read DataFlash log ({type(exc).__name__}: {exc})") from None


def columns(reader, name: str, fields: list[str]) -> dict[str, np.ndarray] | None:
    """The given fields of every whole `name` message as float arrays (scaled as DFReader scales them), or None
    when the log has no such message. Fields the format lacks are left out."""
    mtype = reader.name_to_id.get(name)
    if mtype is None or not reader.offsets[mtype]:
        return None
    fmt = reader.formats[mtype]
    if sum(np.dtype(_NP[ch]).itemsize for ch in fmt.format) != fmt.len - 3:
        raise InputError(f"{reader.filehandle.name}: {name} format '{fmt.format}' does not match its length {fmt.len}")
    offs = np.asarray(reader.offsets[mtype], dtype=np.int64)
    offs = offs[offs + fmt.len <= reader.data_len] + 3  # a message cut by the end of the file is not read
    raw = np.frombuffer(reader.data_map, dtype=np.uint8)
    out: dict[str, np.ndarray] = {}
    start = 0
    for col, ch in zip(fmt.columns, fmt.format, strict=False):
        dt = np.dtype(_NP[ch])
        if col in fields and dt.kind != "S":
            block = np.stack([raw[offs + start + j] for j in range(dt.itemsize)], axis=1)
            out[col] = block.view(dt)[:, 0].astype(np.float64) * _SCALE.get(ch, 1.0)
        start += dt.itemsize
    del raw  # the mmap closes only once no array looks into it
    return out


def read_dataflash(path: str | Path, name: str) -> VehicleLog:
    """Parse one `.bin` into a VehicleLog named `name` (the caller picks SYSID or the file name afterwards)."""
    path = Path(path)
    reader = open_dataflash(path)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return _read(reader, path, name)
    finally:
        reader.close()


def _read(reader, path: Path, name: str) -> VehicleLog:
    sparse = _sparse(reader)
    params = dict(reader.params)
    pos_type, status_type = next(((p, s) for p, s in POSITION_TYPES if p in reader.name_to_id), ("", ""))
    if not pos_type:
        raise InputError(f"{path}: no EKF position in the log (none of XKF1, NKF1, EKF1; "
                         f"{len(reader.name_to_id)} message types, {reader._count} messages)")
    ekf = columns(reader, pos_type, ["TimeUS", "TimeMS", "C", "PN", "PE", "PD", "VN", "VE", "VD"])
    status = columns(reader, status_type, ["TimeUS", "TimeMS", "C", "SS", "SV", "SP", "SM", "SMX", "FS", "PI"])
    gps = columns(reader, "GPS", ["TimeUS", "I", "Status", "GMS", "GWk", "Lat", "Lng", "Alt"])
    if ekf is None or not len(ekf.get("PN", ())):
        raise InputError(f"{path}: {pos_type} holds no whole message (the log is truncated)")
    if "TimeUS" not in ekf and "TimeMS" not in ekf:
        raise InputError(f"{path}: {pos_type} has no time column (TimeUS or TimeMS)")
    log = VehicleLog(LogTrack(name, np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), None, None, str(path)),
                     messages=int(reader._count))
    sysid = params.get("SYSID_THISMAV")
    log.sysid = int(sysid) if sysid is not None else None
    _estimator(log, ekf, status, float(params.get("FS_EKF_THRESH", codes.FS_EKF_THRESH_DEFAULT)), pos_type)
    _gps(log, gps)
    _origin(log, sparse)
    _events(log, sparse, reader)
    ends = [offs[-1] + reader.formats[k].len for k, offs in enumerate(reader.offsets) if offs and k in reader.formats]
    if max(ends) > reader.data_len:
        log.notes.append(f"{path.name}: the log ends inside a message (truncated); read up to its last whole message")
    return log


def _time_us(cols: dict[str, np.ndarray]) -> np.ndarray:
    return cols["TimeUS"] if "TimeUS" in cols else cols["TimeMS"] * 1000.0


def _estimator(log: VehicleLog, ekf: dict, status: dict | None, threshold: float, pos_type: str) -> None:
    """The primary lane's positions and velocities, its validity, lane switches and logging gaps."""
    t = _time_us(ekf)
    core = ekf.get("C", np.zeros(len(t)))
    lane_t, lane = np.array([t[0]]), np.array([core.min()])
    if status is not None and "PI" in status:
        first = status["C"] == status["C"].min() if "C" in status else np.ones(len(status["PI"]), bool)
        lane_t, lane = _time_us(status)[first], status["PI"][first]
        for at, old, new in lane_switches(lane_t, lane):
            log.spans.append(LogSpan(
                "ekf_lane_switch", at, at,
                f"the EKF switched its primary lane from {old} to {new}; the position may step at the switch",
                ["max_speed", "max_vertical_speed"], {"from_lane": old, "to_lane": new}))
    keep = core == hold_last(lane_t, lane, t)
    order = np.argsort(t[keep], kind="stable")
    t_k = t[keep][order]
    pick = {k: ekf[k][keep][order] for k in ("PN", "PE", "PD", "VN", "VE", "VD")}
    tr = log.track
    tr.t_us = t_k
    tr.pos_ned = np.column_stack([pick["PN"], pick["PE"], pick["PD"]])
    tr.vel_ned = np.column_stack([pick["VN"], pick["VE"], pick["VD"]])
    if status is not None and "SS" in status:
        rows = (status["C"] == hold_last(lane_t, lane, _time_us(status))) if "C" in status else slice(None)
        st_t = _time_us(status)[rows]
        flags_ok = np.array([codes.position_ok(int(f)) for f in status["SS"][rows]])
        mag = status.get("SM", status.get("SMX"))
        ratios = np.column_stack([status[k][rows] if k in status else np.zeros(len(st_t)) for k in ("SV", "SP")]
                                 + [mag[rows] if mag is not None else np.zeros(len(st_t))])
        bad = invalid_reasons(flags_ok, ratios, threshold)
        tr.valid = ~hold_last(st_t, bad, t_k)
        tr.valid_how = (f"{pos_type[:3]}4 status flags without a position, or two innovation test ratios at or "
                        f"above FS_EKF_THRESH {threshold:g}")
    for a, b in gaps(t_k):
        log.spans.append(LogSpan(
            "logging_gap", a, b, f"the log holds no {pos_type} for {(b - a) / 1e6:.2f} s: the recorder, not "
            "necessarily the vehicle, was silent", ["stale_data"], {"duration_s": round((b - a) / 1e6, 3)}))


def _gps(log: VehicleLog, gps: dict | None) -> None:
    if gps is None or "Lat" not in gps:
        log.notes.append(f"{log.track.name}: no GPS in the log")
        return
    first = gps["I"] == gps["I"].min() if "I" in gps else np.ones(len(gps["Lat"]), bool)
    t = _time_us(gps)
    fix = first & (gps.get("Status", np.full(len(t), GPS_3D_FIX)) >= GPS_3D_FIX) & (np.abs(gps["Lat"]) > 1e-6)
    log.gps_t_us = t[fix]
    log.gps_lla = np.column_stack([gps["Lat"][fix], gps["Lng"][fix], gps["Alt"][fix]])
    if "GWk" in gps:
        log.track.utc_offset_us = gps_utc_offset_us(t[first], gps["GWk"][first], gps["GMS"][first])


def _origin(log: VehicleLog, sparse: list) -> None:
    """The EKF origin (ORGN type 0), else the first GPS fix moved back by the local position."""
    tr = log.track
    for m in sparse:
        if m.get_type() == "ORGN" and int(m.Type) == 0 and abs(m.Lat) > 1e-6:
            tr.ref, tr.ref_how = (float(m.Lat), float(m.Lng), float(m.Alt)), "ORGN (the EKF origin)"
            return
    if len(log.gps_t_us):
        g = log.gps_lla
        tr.ref = origin_from_fixes(log.gps_t_us, g[:, 0], g[:, 1], g[:, 2], tr.t_us, tr.pos_ned)
        tr.ref_how = "GPS minus local position" if tr.ref is not None else "no global reference"


def _sparse(reader) -> list:
    """The few messages that are read one by one, in log order (DFReader's type-filtered loop)."""
    reader._rewind()
    out: list = []
    while True:
        m = reader.recv_match(type=SPARSE_TYPES, strict=True)
        if m is None:
            return out
        if m.get_type() == "MODE":
            m.mode_name = reader.flightmode  # DFReader names the mode from the vehicle type it read in MSG/VER
        out.append(m)


def _events(log: VehicleLog, sparse: list, reader) -> None:
    """MODE, ERR, EV and CMD as log events; the autopilot's own GPS-glitch reports as data-quality spans."""
    from pymavlink import mavutil

    open_err: dict[int, LogEvent] = {}
    for m in sparse:
        kind = m.get_type()
        t = float(m.TimeUS) if "TimeUS" in m._fieldnames else float(m.TimeMS) * 1000.0
        if kind == "MODE":
            reason = codes.MODE_REASONS.get(int(getattr(m, "Rsn", 0)), str(getattr(m, "Rsn", 0)))
            log.events.append(LogEvent("flight_mode", t, f"mode={m.mode_name} reason={reason.lower()}",
                                       extra={"mode": m.mode_name, "reason": reason.lower()}))
        elif kind == "ERR":
            sub, code = int(m.Subsys), int(m.ECode)
            if sub == codes.ERR_EKF_PRIMARY:
                continue  # lane switches come from the status messages' primary index (and agree with this)
            if code == codes.ERR_RESOLVED:
                if sub in open_err:
                    open_err.pop(sub).t_end_us = t
                continue
            name = codes.ERR_SUBSYSTEMS.get(sub, f"SUBSYSTEM_{sub}")
            ev = LogEvent("failsafe" if name.startswith("FAILSAFE_") else "autopilot_error", t,
                          codes.err_name(sub, code).replace(" ", "_"), extra={"subsystem": name, "code": code})
            open_err[sub] = ev
            log.events.append(ev)
        elif kind == "EV":
            log.events.append(LogEvent("autopilot_event", t, codes.EV_IDS.get(int(m.Id), f"EV_{int(m.Id)}")))
        elif kind == "CMD":
            cmd = mavutil.mavlink.enums["MAV_CMD"].get(int(m.CId))
            label = cmd.name.removeprefix("MAV_CMD_") if cmd is not None else f"CMD_{int(m.CId)}"
            last = log.events[-1] if log.events else None
            if last is not None and last.type == "mission_command" and last.t_us == t:
                # the logger writes the whole mission at once when the vehicle arms: one event for the lot
                n = int(last.extra.get("items", 1)) + 1
                last.label, last.extra = f"mission_of_{n}_items", {"items": n, "total": int(m.CTot)}
                continue
            log.events.append(LogEvent("mission_command", t, f"{label}#{int(m.CNum)}",
                                       extra={"command": label, "seq": int(m.CNum)}))
    end = float(log.track.t_us[-1])
    for ev in log.events:
        if ev.type in ("failsafe", "autopilot_error") and ev.t_end_us is None:
            ev.t_end_us = max(end, ev.t_us)  # never resolved within the log
        if ev.extra.get("subsystem") == "GPS" and ev.extra.get("code") == codes.ERR_GPS_GLITCH:
            log.spans.append(LogSpan(
                "gps_glitch", ev.t_us, ev.t_end_us or ev.t_us,
                "the autopilot reported a GPS glitch (ERR GPS 2): its EKF rejected the GPS meanwhile",
                ["geofence", "max_speed"], {"source": "ERR"}))
