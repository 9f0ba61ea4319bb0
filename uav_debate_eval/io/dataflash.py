"""ArduPilot DataFlash logs (`.bin`): one vehicle's EKF track, GPS, origin, validity, modes, errors and events.

pymavlink's DFReader indexes the file (its Cython indexer records every message's offset by type). The bulk
streams (EKF and GPS, thousands of messages a minute) are then decoded column by column with numpy straight from
those offsets, one gather per field, instead of one Python object per message; the sparse ones (PARM, MODE,
ERR, EV, CMD, ORGN, MSG) go through DFReader's own type-filtered loop. `benchmarks/bench_ardupilot.py` measures
both against the unfiltered DFReader loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from uav_debate_eval.core.arming import first_and_changes
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.stamps import ahead_strays, behind_strays
from uav_debate_eval.core.vehicle_limits import limit_params
from uav_debate_eval.io import ardupilot_codes as codes
from uav_debate_eval.io.ardupilot_attitude import attach_attitude
from uav_debate_eval.io.ardupilot_log import (
    LogEvent,
    LogSpan,
    VehicleLog,
    gaps,
    gps_utc_offset_us,
    invalid_reasons,
    lane_switches,
)
from uav_debate_eval.io.dataflash_columns import (
    EKF_TYPE_SOURCES,
    ESTIMATOR_NAMES,
    SPARSE_TYPES,
    columns,
    message_time_us,
    pick_estimator,
)
from uav_debate_eval.io.dataflash_open import open_dataflash, silenced
from uav_debate_eval.io.log_series import hold_last
from uav_debate_eval.io.ulog import LogTrack, geodetic_to_enu, origin_from_fixes
from uav_debate_eval.io.vehicle import describe_vehicle

#: The fields the reader takes from each sparse message.
SPARSE_FIELDS = {"MODE": ("Mode",), "ERR": ("Subsys", "ECode"), "EV": ("Id",), "CMD": ("CTot", "CNum", "CId"),
                 "ORGN": ("Type", "Lat", "Lng", "Alt")}
GPS_3D_FIX = 3
#: A log that goes on this long after its last global position: the vehicle's position was lost, not the log over.
LOST_AFTER_US = 2e6


def read_dataflash(path: str | Path, name: str) -> VehicleLog:
    """Parse one `.bin` (or its text form, a `.log`) into a VehicleLog named `name` (the caller picks SYSID or the
    file name afterwards)."""
    path = Path(path)
    skipped = None
    if path.suffix.lower() == ".log":
        from uav_debate_eval.io.dataflash_text import text_to_binary

        binary, skipped = text_to_binary(path)
        try:
            reader = open_dataflash(binary, shown=path)
        finally:
            binary.unlink(missing_ok=True)  # mapped by the reader, or refused
    else:
        reader = open_dataflash(path)
    try:
        with silenced():
            log = _read(reader, path, name)
    finally:
        reader.close()
    if skipped is not None:
        log.notes.append(f"{path.name}: a DataFlash text log, read as its binary form"
                         + (f" ({skipped} line(s) that do not fit their format left out)" if skipped else ""))
    return log


def _read(reader, path: Path, name: str) -> VehicleLog:
    sparse = _sparse(reader)
    params = dict(reader.params)
    pos_type, status_type, why = pick_estimator(reader, params)
    shadow = pos_type == "EKF1" and params.get("AHRS_EKF_USE") == 0
    if shadow:  # ArduPilot 3.1-3.3 ran its first EKF beside the DCM the vehicle flew on, unless told to use it
        why = "AHRS_EKF_USE 0: the vehicle flew on its DCM and GPS, the EKF (EKF1) only ran beside them"
        pos_type = ""
    log = VehicleLog(LogTrack(name, np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), None, None, str(path)),
                     messages=int(reader._count))
    sysid = params.get("SYSID_THISMAV")
    log.sysid = int(sysid) if sysid is not None else None
    log.track.params = limit_params(params)
    describe_vehicle(log, params, [str(getattr(m, "Message", "")) for m in sparse if m.get_type() == "MSG"]
                     + [str(getattr(m, "FWS", "")) for m in sparse if m.get_type() == "VER"])
    gps = _gps_columns(reader, ["I", "Status", "GMS", "GWk", "Lat", "Lng", "Alt", "Spd", "GCrs", "VZ"])
    _gps(log, gps)
    if gps is not None and "GMS" not in gps and "Time" in gps:
        log.notes.append(f"{path.name}: the log's only clock is the GPS time of week (ArduCopter 3.0 stamps nothing "
                         "else): messages between two fixes take the earlier fix's time")
    ekf = None
    if pos_type:
        ekf = columns(reader, pos_type, ["C", "PN", "PE", "PD", "VN", "VE", "VD"])
        status = columns(reader, status_type, ["C", "SS", "SV", "SP", "SM", "SMX", "FS", "PI"])
        if status is not None and not len(status.get("TimeUS", ())):  # cut before its first whole message
            log.notes.append(f"{path.name}: {status_type} holds no whole timed message: the estimator's own "
                             "validity is not known")
            status = None
        if ekf is None or not len(ekf.get("PN", ())) or "TimeUS" not in ekf:
            raise InputError(f"{path}: {pos_type} holds no whole timed message (the log is cut inside it)")
        lacking = [k for k in ("PN", "PE", "PD", "VN", "VE", "VD") if k not in ekf]
        if lacking:
            raise InputError(f"{path}: {pos_type}'s format lacks {', '.join(lacking)} (a damaged format table)")
        log.estimator = f"{ESTIMATOR_NAMES[pos_type]} ({pos_type}; {why})"
        _estimator(log, ekf, status, params, pos_type)
    else:
        _global_track(log, reader, gps, path, why, ("POS",) if shadow else ("POS", "AHR2"))
    att = columns(reader, "ATT", ["Roll", "DesRoll", "Pitch", "DesPitch"])
    if not pos_type:
        _beyond_fixes(log, att)
    _origin(log, sparse)
    _events(log, sparse, ekf if ekf is not None else gps)  # the clock of messages that carry no time
    _status_arming(log, columns(reader, "STAT", ["Armed"]))
    attach_attitude(log, att)
    if reader.repaired_types:
        log.notes.append(f"{path.name}: the format table is damaged for {', '.join(reader.repaired_types)} (types the "
                         "evaluation does not read): their messages were skipped, the rest read as logged")
    ends = [offs[-1] + reader.formats[k].len for k, offs in enumerate(reader.offsets) if offs and k in reader.formats]
    # cut inside a message's body, or within its 3-byte header (too short for pymavlink to list: a real Copter 4.4
    # log); more bytes after the last message read are no cut but where pymavlink's index stopped
    tail = bytes(reader.data_map[max(ends):max(ends) + 4]) if ends and max(ends) < reader.data_len else b""
    if ends and (max(ends) > reader.data_len or (0 < len(tail) <= 3 and b"\xa3\x95".startswith(tail[:2]))):
        log.notes.append(f"{path.name}: the log ends inside a message (truncated); read up to its last whole message")
    elif len(tail) > 3:
        log.notes.append(f"{path.name}: read up to byte {max(ends):,} of {reader.data_len:,}, where a message no "
                         "format describes stopped the reader (a damaged log); the rest is not in the flight")
    return log


def _status_arming(log: VehicleLog, stat: dict[str, np.ndarray] | None) -> None:
    """Arming from the vehicle's STAT messages (`Armed`, written every ~0.2 s) when the log holds no EV ARMED or
    DISARMED: a real ArduPlane 4.5 SITL log never armed has none, and its ground time was checked as flight."""
    if stat is None or "Armed" not in stat or not len(stat.get("TimeUS", ())) or any(
            e.type == "autopilot_event" and e.label in ("ARMED", "DISARMED") for e in log.events):
        return
    order = np.argsort(stat["TimeUS"], kind="stable")
    states = first_and_changes(stat["TimeUS"][order].tolist(), (stat["Armed"][order] != 0).tolist())
    for k, (t, armed) in enumerate(states):
        log.events.append(LogEvent("autopilot_event", t, "ARMED" if armed else "DISARMED",
                                   extra={"source": "STAT", **({"initial": True} if k == 0 else {})}))


def _global_track(log: VehicleLog, reader, gps: dict | None, path: Path, why: str, kinds: tuple[str, ...]) -> None:
    """Without an EKF position: the autopilot's global position (POS, else AHR2), else (ArduCopter 3.1 and older log
    no estimate at all) the GPS receiver's 3-D fixes, on the tangent plane at the first sample, velocities from the
    differences. `kinds`: the autopilot's own messages to try (AHR2 holds the EKF when the EKF is not the one used)."""
    for kind, t, lla, vel in _global_positions(reader, gps, kinds):
        order = np.argsort(t, kind="stable")
        t, lla = t[order], lla[order]
        if len(t) < 2:
            continue
        tr = log.track
        tr.ref, tr.ref_how = (float(lla[0, 0]), float(lla[0, 1]), float(lla[0, 2])), f"the first {kind} sample"
        enu = geodetic_to_enu(lla[:, 0], lla[:, 1], lla[:, 2], *tr.ref)
        tr.t_us, tr.pos_ned = t, np.column_stack([enu[:, 1], enu[:, 0], -enu[:, 2]])
        tr.vel_ned = vel[order] if vel is not None else np.gradient(tr.pos_ned, t / 1e6, axis=0) \
            if len(np.unique(t)) == len(t) else np.zeros_like(tr.pos_ned)
        log.estimator = f"{kind} ({why})"
        log.notes.append(f"{path.name}: {why}; the track is the autopilot's {kind} position" if kind != "GPS" else
                         f"{path.name}: {why}, no {' or '.join(kinds)} position; the track is the GPS receiver's "
                         f"{len(t)} 3-D fixes{' and velocities' if vel is not None else ''} (noisier than an "
                         "estimate: no inertial smoothing)")
        return
    raise InputError(f"{path}: no position in the log: {why}, no {' or '.join(kinds)} position and no GPS fix")


def _beyond_fixes(log: VehicleLog, att: dict | None) -> None:
    """A track of global positions that stops while the log goes on (the GPS lost, then a crash): the track goes on
    at the attitude record's times with no position (invalid, held), so what the vehicle did then stays in the
    flight."""
    tr = log.track
    if att is None or "TimeUS" not in att or not len(tr.t_us):
        return
    later = np.unique(att["TimeUS"][att["TimeUS"] > tr.t_us[-1]])
    if not len(later) or later[-1] - tr.t_us[-1] < LOST_AFTER_US:
        return
    n = len(later)
    valid = np.ones(len(tr.t_us), bool) if tr.valid is None else tr.valid
    tr.t_us = np.concatenate([tr.t_us, later])
    tr.pos_ned = np.concatenate([tr.pos_ned, np.repeat(tr.pos_ned[-1:], n, axis=0)])
    tr.vel_ned = np.concatenate([tr.vel_ned, np.zeros((n, 3))])
    tr.valid = np.concatenate([valid, np.zeros(n, bool)])
    tr.valid_how = "no position after the last one the log holds"
    log.notes.append(f"{tr.name}: its {log.estimator.split(' ')[0]} positions end at {tr.t_us[-n - 1] / 1e6:.1f} s of "
                     f"boot and the log at {later[-1] / 1e6:.1f} s: the track goes on with its attitude, its position "
                     "unknown (invalid)")


def _global_positions(reader, gps: dict | None, kinds: tuple[str, ...]
                      ) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray | None]]:
    """(kind, boot µs, lat/lon/alt, NED velocity or None) of each global position the log may hold, the best
    first: last the GPS fixes (`gps`: its columns) with the receiver's velocity (ground speed and course; VZ is NED,
    down positive)."""
    for kind in kinds:
        cols = columns(reader, kind, ["Lat", "Lng", "Alt"])
        if cols is None or "Lat" not in cols or "TimeUS" not in cols:
            continue
        ok = (np.abs(cols["Lat"]) > 1e-6) & np.isfinite(cols["Alt"])
        yield kind, cols["TimeUS"][ok], np.column_stack([cols["Lat"][ok], cols["Lng"][ok], cols["Alt"][ok]]), None
    if gps is None or not all(k in gps for k in ("TimeUS", "Lat", "Lng", "Alt")):
        return
    ok = _fixes(gps)
    ok[ok] = np.concatenate([[True], np.diff(gps["TimeUS"][ok]) != 0])  # one fix per stamp
    lla = np.column_stack([gps["Lat"][ok], gps["Lng"][ok], gps["Alt"][ok]])
    vel = None
    if all(k in gps for k in ("Spd", "GCrs", "VZ")):
        course = np.radians(gps["GCrs"][ok])
        vel = np.column_stack([gps["Spd"][ok] * np.cos(course), gps["Spd"][ok] * np.sin(course), gps["VZ"][ok]])
    yield "GPS", gps["TimeUS"][ok], lla, vel


def _estimator(log: VehicleLog, ekf: dict, status: dict | None, params: dict, pos_type: str) -> None:
    """The primary lane's positions and velocities, its validity, lane switches and logging gaps."""
    t = ekf["TimeUS"]
    core = ekf.get("C", np.zeros(len(t)))
    lane_t, lane = np.array([t[0]]), np.array([core.min()])
    if status is not None and "PI" in status:
        first = status["C"] == status["C"].min() if "C" in status else np.ones(len(status["PI"]), bool)
        lane_t, lane = status["TimeUS"][first], status["PI"][first]
        for at, old, new in lane_switches(lane_t, lane):
            log.spans.append(LogSpan(
                "ekf_lane_switch", at, at,
                f"the EKF switched its primary lane from {old} to {new}; the position may step at the switch",
                ["max_speed", "max_vertical_speed"], {"from_lane": old, "to_lane": new}))
    keep = core == hold_last(lane_t, lane, t)
    _off_clock(log, t, keep, pos_type)
    order = np.argsort(t[keep], kind="stable")
    t_k = t[keep][order]
    pick = {k: ekf[k][keep][order] for k in ("PN", "PE", "PD", "VN", "VE", "VD")}
    tr = log.track
    tr.t_us = t_k
    tr.pos_ned = np.column_stack([pick["PN"], pick["PE"], pick["PD"]])
    tr.vel_ned = np.column_stack([pick["VN"], pick["VE"], pick["VD"]])
    _validity(log, status, lane_t, lane, params, pos_type)
    for a, b in gaps(t_k):
        log.spans.append(LogSpan(
            "logging_gap", a, b, f"the log holds no {pos_type} for {(b - a) / 1e6:.2f} s: the recorder, not "
            "necessarily the vehicle, was silent", ["stale_data"], {"duration_s": round((b - a) / 1e6, 3)}))


def _off_clock(log: VehicleLog, t: np.ndarray, keep: np.ndarray, pos_type: str) -> None:
    """Leave out (from `keep`, in place) the estimator rows stamped off the log's clock in recording order, which
    then goes on where it was (core.stamps: fewer than 5 rows more than 1 s ahead or behind); sorted in, one row at
    0.06 s among rows at 125 s (a real ArduCopter SITL log) became the flight's start, 89.5 s early."""
    rows = np.flatnonzero(keep)
    bounds = np.array([0, len(rows)])
    strays = [m for m in (ahead_strays(t[rows], bounds), behind_strays(t[rows], bounds)) if m is not None]
    if not strays:
        return
    off = rows[np.logical_or.reduce(strays)]
    keep[off] = False
    at = float(t[rows[max(0, int(np.searchsorted(rows, off[0])) - 1)]])  # where it sat in the recording
    log.spans.append(LogSpan(
        "stray_stamp", at, at, f"{len(off)} {pos_type} record(s) stamped off the log's clock (at "
        f"{t[off[0]] / 1e6:.2f} s among records at {at / 1e6:.2f} s): a corrupted stamp, not data; left out", [],
        {"samples": len(off)}))


def _validity(log: VehicleLog, status: dict | None, lane_t, lane, params: dict, pos_type: str) -> None:
    """The EKF's own verdict on its position, where it means something: not under a source other than the EKF
    (AHRS_EKF_TYPE 0, 10 = SITL, 11 = external), and not when the flags are 0 throughout (not reported)."""
    ekf_type = params.get("AHRS_EKF_TYPE")
    source = EKF_TYPE_SOURCES.get(int(ekf_type)) if ekf_type is not None else None
    name = log.track.name
    if source is not None:
        log.notes.append(f"{name}: the autopilot's position source is {source}; the EKF's status flags say "
                         "nothing about it and are not used")
        return
    if status is None or "SS" not in status or "TimeUS" not in status:
        return
    if not status["SS"].any():
        log.notes.append(f"{name}: {pos_type[:3]}4 status flags are 0 throughout: validity not reported")
        return
    threshold = float(params.get("FS_EKF_THRESH", codes.FS_EKF_THRESH_DEFAULT))
    rows = (status["C"] == hold_last(lane_t, lane, status["TimeUS"])) if "C" in status else slice(None)
    st_t = status["TimeUS"][rows]
    flags_ok = np.array([codes.position_ok(int(f)) for f in status["SS"][rows]], dtype=bool)
    mag = status.get("SM", status.get("SMX"))
    ratios = np.column_stack([status[k][rows] if k in status else np.zeros(len(st_t)) for k in ("SV", "SP")]
                             + [mag[rows] if mag is not None else np.zeros(len(st_t))])
    bad = invalid_reasons(flags_ok, ratios, threshold)
    log.track.valid = ~hold_last(st_t, bad, log.track.t_us)
    vertical = np.array([codes.vertical_ok(int(f)) for f in status["SS"][rows]], dtype=bool)
    log.track.valid_z = ~hold_last(st_t, invalid_reasons(vertical, ratios, threshold), log.track.t_us)
    log.track.valid_how = (f"{pos_type[:3]}4 status flags without a position, or two innovation test ratios at "
                           f"or above FS_EKF_THRESH {threshold:g}")


def _gps(log: VehicleLog, gps: dict | None) -> None:
    if gps is None or not all(k in gps for k in ("TimeUS", "Lat", "Lng", "Alt")):
        log.notes.append(f"{log.track.name}: no GPS in the log")
        return
    first = gps["I"] == gps["I"].min() if "I" in gps else np.ones(len(gps["Lat"]), bool)
    t = gps["TimeUS"]
    fix = _fixes(gps)
    log.gps_t_us = t[fix]
    log.gps_lla = np.column_stack([gps["Lat"][fix], gps["Lng"][fix], gps["Alt"][fix]])
    if "GWk" in gps and "GMS" in gps:
        log.track.utc_offset_us = gps_utc_offset_us(t[first], gps["GWk"][first], gps["GMS"][first])


def _gps_columns(reader, fields: list[str]) -> dict[str, np.ndarray] | None:
    """columns() of GPS; ArduCopter 3.0 stamps its fixes only with the GPS time of week (`Time`, ms), the one clock
    such a log has: it stands for the boot time."""
    gps = columns(reader, "GPS", [*fields, "Time"])
    if gps is not None and "TimeUS" not in gps and "Time" in gps:
        gps["TimeUS"] = gps["Time"] * 1000.0
    return gps


def _fixes(gps: dict) -> np.ndarray:
    """The rows of the first receiver's 3-D fixes."""
    first = gps["I"] == gps["I"].min() if "I" in gps else np.ones(len(gps["Lat"]), bool)
    status = gps.get("Status", np.full(len(gps["Lat"]), GPS_3D_FIX))
    return first & (status >= GPS_3D_FIX) & (np.abs(gps["Lat"]) > 1e-6)


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
        if not all(f in m._fieldnames for f in SPARSE_FIELDS.get(m.get_type(), ())) or len(m.fmt.columns) > min(
                len(m.fmt.msg_fmts), len(m._elements)):
            continue  # its format lost a field the reader needs, or names more columns than it holds: left out
        if m.get_type() == "MODE":
            m.mode_name = reader.flightmode  # DFReader names the mode from the vehicle type it read in MSG/VER
        elif m.get_type() == "ERR" and int(m.Subsys) == codes.ERR_FLIGHT_MODE:  # its code is the mode refused
            from pymavlink import mavutil

            names = mavutil.mode_mapping_bynumber(reader.mav_type) or {}
            m.mode_name = names.get(int(m.ECode), f"mode {int(m.ECode)}")
        m._offset = reader.offset  # just past the message: places the untimed ones among the timed
        out.append(m)


def _events(log: VehicleLog, sparse: list, clock: dict | None) -> None:
    """MODE, ERR, EV and CMD as log events; the autopilot's own GPS-glitch reports as data-quality spans."""
    from pymavlink import mavutil

    open_err: dict[int, LogEvent] = {}
    untimed = 0
    for m in sparse:
        kind = m.get_type()
        t = message_time_us(m, clock)
        if kind == "MODE":
            last_mode = next((e for e in reversed(log.events) if e.type == "flight_mode"), None)
            if last_mode is not None and last_mode.extra.get("mode") == m.mode_name and t - last_mode.t_us < 1e6:
                continue  # the logger writes one mode change twice (as several firmware versions do): one event
            initial = last_mode is None  # the first MODE is written when logging starts: the mode it starts in
            if last_mode is not None and t == last_mode.t_us and "TimeUS" not in m._fieldnames:
                log.events.remove(last_mode)  # untimed changes after the last clock message share its time
                initial = bool(last_mode.extra.get("initial"))
                untimed += 1
            reason = codes.MODE_REASONS.get(int(getattr(m, "Rsn", 0)), str(getattr(m, "Rsn", 0)))
            log.events.append(LogEvent("flight_mode", t, f"mode={m.mode_name} reason={reason.lower()}",
                                       extra={"mode": m.mode_name, "reason": reason.lower(),
                                              **({"initial": True} if initial else {})}))
        elif kind == "ERR":
            sub, code = int(m.Subsys), int(m.ECode)
            if sub == codes.ERR_EKF_PRIMARY:
                continue  # lane switches come from the status messages' primary index (and agree with this)
            if code == codes.ERR_RESOLVED:
                if sub in open_err:
                    open_err.pop(sub).t_end_us = t
                continue
            if sub == codes.ERR_FLIGHT_MODE:  # a mode change the autopilot refused: an instant, never "resolved"
                log.events.append(LogEvent("autopilot_error", t, f"refused_{m.mode_name}", t_end_us=t,
                                           extra={"subsystem": "FLIGHT_MODE", "refused_mode": m.mode_name}))
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
    if untimed:
        log.notes.append(f"{log.track.name}: {untimed + 1} flight mode changes carry no time of their own after the "
                         "log's last timed message: one event, the last of them, at that time")
    end = float(log.track.t_us[-1])
    for ev in log.events:
        if ev.type in ("failsafe", "autopilot_error") and ev.t_end_us is None:
            ev.t_end_us = max(end, ev.t_us)  # never resolved within the log
        if ev.extra.get("subsystem") == "GPS" and ev.extra.get("code") == codes.ERR_GPS_GLITCH:
            log.spans.append(LogSpan(
                "gps_glitch", ev.t_us, ev.t_end_us or ev.t_us,
                "the autopilot reported a GPS glitch (ERR GPS 2): its EKF rejected the GPS meanwhile",
                ["geofence", "max_speed"], {"source": "ERR"}))
