"""MAVLink telemetry logs (`.tlog`, as Mission Planner / MAVProxy / QGroundControl record them): every vehicle the
ground station heard, one per MAVLink system id, each as a VehicleLog.

Positions: LOCAL_POSITION_NED (the EKF's, from its origin), else GLOBAL_POSITION_INT placed around its first fix.
Origin: GPS_GLOBAL_ORIGIN, else HOME_POSITION moved back by its local position, else the fixes minus the local
position. Clock: the vehicle's boot milliseconds; UTC from SYSTEM_TIME (the autopilot's GPS time), else the ground
station's receive stamps. Validity: EKF_STATUS_REPORT flags and test ratios (the rule of `io.ardupilot_log`).
Modes from HEARTBEAT, errors and failsafes from STATUSTEXT, progress from MISSION_ITEM_REACHED (named from the
MISSION_ITEM(_INT) the vehicle sent).
"""

from __future__ import annotations

import contextlib
import io
from collections import defaultdict
from pathlib import Path

import numpy as np

from uav_debate_eval.core.arming import LANDING_WORDS, landed_state
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.vehicle_limits import limit_params
from uav_debate_eval.io import ardupilot_codes as codes
from uav_debate_eval.io.ardupilot_log import LogEvent, LogSpan, VehicleLog, gaps, invalid_reasons
from uav_debate_eval.io.dataflash_columns import EKF_TYPE_SOURCES
from uav_debate_eval.io.log_series import hold_last
from uav_debate_eval.io.tlog_attitude import ATTITUDE_TYPES, attach_tlog_attitude
from uav_debate_eval.io.tlog_boots import rebase_boots
from uav_debate_eval.io.ulog import LogTrack, geodetic_to_enu, origin_from_fixes
from uav_debate_eval.io.vehicle import MAV_TYPE_CLASS, describe_vehicle

TLOG_TYPES = ["HEARTBEAT", "SYSTEM_TIME", "LOCAL_POSITION_NED", "GLOBAL_POSITION_INT", "GPS_RAW_INT",
              "EKF_STATUS_REPORT", "GPS_GLOBAL_ORIGIN", "HOME_POSITION", "STATUSTEXT", "MISSION_ITEM_REACHED",
              "MISSION_ITEM_INT", "MISSION_ITEM", "PARAM_VALUE", "EXTENDED_SYS_STATE", *ATTITUDE_TYPES]
#: STATUSTEXT severities up to MAV_SEVERITY_ERROR are errors; failsafes are announced up to MAV_SEVERITY_WARNING.
SEVERITY_ERROR, SEVERITY_WARNING = 3, 4
#: A home or origin moved by less than this (m) is the autopilot refining it, not a reset.
RESET_MIN_M = 1.0
GCS_SYSID = 255


def read_tlog(path: str | Path) -> list[VehicleLog]:
    """One VehicleLog per autopilot system id in the file (InputError when it holds no vehicle position)."""
    path = Path(path)
    rows, count, bad = _messages(path)
    logs = [_vehicle(path, sysid, msgs) for sysid, msgs in sorted(rows.items())
            if _autopilot_only(msgs).get("LOCAL_POSITION_NED") or _autopilot_only(msgs).get("GLOBAL_POSITION_INT")]
    if not logs:
        raise InputError(f"{path}: no vehicle position in the telemetry log ({count} MAVLink messages, {bad} "
                         "unreadable; expected LOCAL_POSITION_NED or GLOBAL_POSITION_INT)")
    for lg in logs:
        lg.messages = count
        if bad:
            lg.notes.append(f"{path.name}: {bad} unreadable bytes or packets skipped")
    return logs


def _messages(path: Path) -> tuple[dict[int, dict[str, list]], int, int]:
    """Every wanted message by system id and type, with its receive time: the type-filtered scan on a clean log,
    mavutil's robust parser on a damaged one."""
    if not path.is_file() or path.stat().st_size < 8:
        raise InputError(f"{path}: not a MAVLink telemetry log (empty or shorter than one timestamp)")
    fast = _filtered(path.read_bytes())
    return fast if fast is not None else _robust(path)


def _filtered(data: bytes) -> tuple[dict[int, dict[str, list]], int, int] | None:
    """Walk the (8-byte timestamp, MAVLink packet) records by their headers and decode only the wanted message
    ids (pymavlink decodes and checks the CRC of those); None when a record does not start with a MAVLink magic."""
    from pymavlink.dialects.v20 import ardupilotmega as mavlink

    wanted = {getattr(mavlink, f"MAVLINK_MSG_ID_{name}") for name in TLOG_TYPES}
    mav = mavlink.MAVLink(None)
    rows: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    count = bad = i = 0
    size = len(data)
    while i + 8 + 10 <= size:
        magic, mlen = data[i + 8], data[i + 9]
        if magic == 0xFD:
            total = mlen + 12 + (13 if data[i + 10] & 1 else 0)
            msgid = data[i + 15] | data[i + 16] << 8 | data[i + 17] << 16
        elif magic == 0xFE:
            total, msgid = mlen + 8, data[i + 13]
        else:
            return None
        end = i + 8 + total
        if end > size:
            break  # the log ends inside a packet
        count += 1
        if msgid in wanted:
            try:
                m = mav.decode(bytearray(data[i + 8:end]))
            except mavlink.MAVError:
                bad += 1
            else:
                m._timestamp = int.from_bytes(data[i:i + 8], "big") * 1.0e-6  # as mavutil computes it
                if m.get_srcSystem() != GCS_SYSID:
                    rows[m.get_srcSystem()][m.get_type()].append(m)
        i = end
    return rows, count, bad


def _robust(path: Path) -> tuple[dict[int, dict[str, list]], int, int]:
    """mavutil's reader, which resynchronises after garbage (and counts it as BAD_DATA)."""
    from pymavlink import mavutil

    rows: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    count = bad = 0
    wanted = set(TLOG_TYPES)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            mlog = mavutil.mavlink_connection(str(path), dialect="ardupilotmega", robust_parsing=True)
            while True:
                m = mlog.recv_msg()
                if m is None:
                    break
                kind = m.get_type()
                if kind == "BAD_DATA":
                    bad += 1
                    continue
                count += 1
                if kind in wanted and m.get_srcSystem() != GCS_SYSID:
                    rows[m.get_srcSystem()][kind].append(m)
            mlog.close()
        except Exception as exc:  # pymavlink raises assorted types on damaged files; all mean bad input
            raise InputError(f"{path}: cannot read MAVLink telemetry log ({type(exc).__name__}: {exc})") from None
    return rows, count, bad


def _autopilot_only(msgs: dict[str, list]) -> dict[str, list]:
    """The messages of the system's autopilot component(s) (its heartbeat names an autopilot): a companion
    computer or a camera of the same system may send positions of its own."""
    from pymavlink import mavutil

    comps = {m.get_srcComponent() for m in msgs.get("HEARTBEAT", [])
             if m.autopilot != mavutil.mavlink.MAV_AUTOPILOT_INVALID}
    if not comps:
        return msgs
    return {kind: [m for m in ms if m.get_srcComponent() in comps] for kind, ms in msgs.items()}


def _vehicle(path: Path, sysid: int, msgs: dict[str, list]) -> VehicleLog:
    params = _params(msgs.get("PARAM_VALUE", []))  # any component of the system may relay them
    msgs = _autopilot_only(msgs)
    reboots = rebase_boots(msgs, str(path))
    local = msgs.get("LOCAL_POSITION_NED", [])
    glob = msgs.get("GLOBAL_POSITION_INT", [])
    tr = LogTrack(f"sysid{sysid}", np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), None, None, str(path))
    log = VehicleLog(tr, sysid=sysid)
    if reboots:
        log.notes.append(f"{path.name}: system {sysid} rebooted {reboots} time(s) during the log (its boot clock "
                         "started again); each boot placed on the log's receive clock, one after the other")
    tr.params = limit_params(params)
    stream = local or glob
    t_us = np.array([m.time_boot_ms * 1000.0 for m in stream])
    recv_us = np.array([m._timestamp * 1e6 for m in stream])
    recv_offset = float(np.median(recv_us - t_us))  # receive clock minus boot clock

    def boot(m) -> float:
        return m._timestamp * 1e6 - recv_offset

    order = np.argsort(t_us, kind="stable")
    keep = order[np.concatenate([[True], np.diff(t_us[order]) > 0])]  # a vehicle sends each estimate once
    tr.t_us = t_us[keep]
    if local:
        tr.pos_ned = np.array([[m.x, m.y, m.z] for m in local], dtype=float)[keep]
        tr.vel_ned = np.array([[m.vx, m.vy, m.vz] for m in local], dtype=float)[keep]
    fixes = _fixes(glob, msgs.get("GPS_RAW_INT", []), boot)
    log.gps_t_us, log.gps_lla = fixes
    placed = None
    if not local:
        lla = np.array([[m.lat * 1e-7, m.lon * 1e-7, m.alt * 1e-3] for m in glob])[keep]
        placed = (lla[:, 0] != 0) | (lla[:, 1] != 0)  # 0°, 0°: sent before the vehicle had a position
        k = int(np.argmax(placed))
        tr.ref, tr.ref_how = (float(lla[k, 0]), float(lla[k, 1]), float(lla[k, 2])), "the first GLOBAL_POSITION_INT"
        lla[~placed, :2] = tr.ref[:2]  # held at the origin, and no horizontal position (below)
        enu = geodetic_to_enu(lla[:, 0], lla[:, 1], lla[:, 2], *tr.ref)
        tr.pos_ned = np.column_stack([enu[:, 1], enu[:, 0], -enu[:, 2]])
        tr.vel_ned = np.array([[m.vx, m.vy, m.vz] for m in glob], dtype=float)[keep] / 100.0
    else:
        _origin(tr, msgs, fixes)
    tr.utc_offset_us = _utc_offset(msgs.get("SYSTEM_TIME", []), recv_offset, log)
    _describe(log, msgs, params)
    if _flags_meaningful(log, msgs.get("EKF_STATUS_REPORT", []), params):
        _validity(log, msgs.get("EKF_STATUS_REPORT", []), boot)
    if placed is not None and not placed.all():
        _unplaced(log, placed)
    _events(log, msgs, boot)
    attach_tlog_attitude(log, msgs, boot)
    _resets(log, msgs, boot)
    for a, b in gaps(tr.t_us):
        log.spans.append(LogSpan("logging_gap", a, b, f"the telemetry log holds no position for {(b - a) / 1e6:.2f} "
                                 "s: the link or the recorder, not necessarily the vehicle, was silent",
                                 ["stale_data"], {"duration_s": round((b - a) / 1e6, 3)}))
    return log


def _params(values: list) -> dict[str, float]:
    """The vehicle's parameters as the ground station received them (the last value of each)."""
    out: dict[str, float] = {}
    for m in values:
        name = m.param_id.decode(errors="replace") if isinstance(m.param_id, bytes) else str(m.param_id)
        out[name.rstrip("\x00")] = float(m.param_value)
    return out


def _describe(log: VehicleLog, msgs: dict[str, list], params: dict[str, float]) -> None:
    """Vehicle class from the firmware string (STATUSTEXT) and Q_ENABLE, else the HEARTBEAT type; SITL from SIM_*."""
    texts = [str(getattr(m, "text", "")) for m in msgs.get("STATUSTEXT", [])]
    describe_vehicle(log, params, texts)
    if log.vehicle_class == "unknown":
        types = [int(m.type) for m in msgs.get("HEARTBEAT", []) if int(m.type) in MAV_TYPE_CLASS]
        if types:
            log.vehicle_class = MAV_TYPE_CLASS[max(set(types), key=types.count)]
    log.estimator = "EKF (EKF_STATUS_REPORT, LOCAL_POSITION_NED)" if msgs.get("LOCAL_POSITION_NED") else \
        "GLOBAL_POSITION_INT"


def _flags_meaningful(log: VehicleLog, reports: list, params: dict[str, float]) -> bool:
    """EKF_STATUS_REPORT judges the position only when the EKF is the source and reports flags at all."""
    ekf_type = params.get("AHRS_EKF_TYPE")
    source = EKF_TYPE_SOURCES.get(int(ekf_type)) if ekf_type is not None else None
    if source is not None:
        log.estimator = f"{source} (AHRS_EKF_TYPE {int(ekf_type)})"  # type: ignore[arg-type]
        log.notes.append(f"{log.track.name}: the autopilot's position source is {source}; the EKF's status flags "
                         "say nothing about it and are not used")
        return False
    if reports and not any(m.flags for m in reports):
        log.notes.append(f"{log.track.name}: EKF_STATUS_REPORT flags are 0 throughout: validity not reported")
        return False
    return True


#: A GPS_RAW_INT time_usec under this (11.6 days) counts from boot; above it, it is UNIX time (PX4).
BOOT_US_MAX = 1e12
#: Fixes delivered out of their order by up to this (µs) are reordered; a clock going back further is a reboot.
REORDER_US = 10e6


def _fixes(glob: list, raw: list, boot) -> tuple[np.ndarray, np.ndarray]:
    """GPS fixes with a 3D fix (GPS_RAW_INT; else GLOBAL_POSITION_INT), boot microseconds and lat/lon/alt."""
    good = [m for m in raw if m.fix_type >= 3 and m.lat != 0]
    if good:
        lla = np.array([[m.lat * 1e-7, m.lon * 1e-7, m.alt * 1e-3] for m in good])
        own = np.array([float(m.time_usec) for m in good])
        if (own > 0).all() and own.max() < BOOT_US_MAX and np.diff(own, prepend=own[0]).min() > -REORDER_US:
            # each fix's own boot time (ArduPilot): a ground station receives fixes in bursts, 1 ms apart, and a
            # link may deliver them out of order; not over a reboot (its clock starts again)
            order = np.argsort(own, kind="stable")
            own, lla = own[order], lla[order]
            last = np.concatenate([np.diff(own) > 0, [True]])  # a fix sent twice is one fix
            return own[last], lla[last]
        return np.array([boot(m) for m in good]), lla
    good = [m for m in glob if m.lat != 0]
    return (np.array([m.time_boot_ms * 1000.0 for m in good]),
            np.array([[m.lat * 1e-7, m.lon * 1e-7, m.alt * 1e-3] for m in good]).reshape(-1, 3))


def _origin(tr: LogTrack, msgs: dict[str, list], fixes: tuple[np.ndarray, np.ndarray]) -> None:
    if msgs.get("GPS_GLOBAL_ORIGIN"):
        m = msgs["GPS_GLOBAL_ORIGIN"][-1]
        tr.ref, tr.ref_how = (m.latitude * 1e-7, m.longitude * 1e-7, m.altitude * 1e-3), "GPS_GLOBAL_ORIGIN"
        return
    home = msgs.get("HOME_POSITION", [])
    if home and np.isfinite([home[-1].x, home[-1].y, home[-1].z]).all():  # ArduPilot 4.7 sends NaN: not placed
        m = home[-1]
        at = np.array([tr.t_us[0], tr.t_us[-1]])
        tr.ref = origin_from_fixes(at[:1], np.array([m.latitude * 1e-7]), np.array([m.longitude * 1e-7]),
                                   np.array([m.altitude * 1e-3]), at, np.array([[m.x, m.y, m.z]] * 2))
        tr.ref_how = "HOME_POSITION minus its local position"
        return
    t, lla = fixes
    if len(t):
        tr.ref = origin_from_fixes(t, lla[:, 0], lla[:, 1], lla[:, 2], tr.t_us, tr.pos_ned)
    tr.ref_how = "GPS minus local position" if tr.ref is not None else "no global reference"


def _resets(log: VehicleLog, msgs: dict[str, list], boot) -> None:
    """One data-quality finding per reference the autopilot set again during the log: home (HOME_POSITION, set
    again at each arming) and the EKF origin (GPS_GLOBAL_ORIGIN: the local positions jump with it). Moves under
    RESET_MIN_M are the autopilot refining its estimate, not a reset."""
    positions = ["max_speed", "max_vertical_speed", "geofence"]
    for kind, what, affects in (("HOME_POSITION", "home", ["geofence"]),
                                ("GPS_GLOBAL_ORIGIN", "the EKF origin", positions)):
        sent = msgs.get(kind, [])
        if len(sent) < 2:
            continue
        lla = np.array([[m.latitude * 1e-7, m.longitude * 1e-7, m.altitude * 1e-3] for m in sent])
        enu = geodetic_to_enu(lla[:, 0], lla[:, 1], lla[:, 2], *lla[0])
        moves, ref = [], enu[0]
        for m, p in zip(sent[1:], enu[1:], strict=True):
            if float(np.linalg.norm(p - ref)) >= RESET_MIN_M:
                moves.append((boot(m), float(np.linalg.norm(p - ref))))
                ref = p
        if moves:
            big = max(d for _, d in moves)
            log.spans.append(LogSpan(
                "home_reset", moves[0][0], moves[-1][0],
                f"the autopilot set {what} again {len(moves)} time(s) ({kind}, largest move {big:.1f} m; it does at "
                f"arming): positions relative to {what} before and after refer to different points", affects,
                {"source": kind, "resets": len(moves), "largest_move_m": round(big, 2)}))


def _utc_offset(system_time: list, recv_offset: float, log: VehicleLog) -> float:
    good = [m for m in system_time if m.time_unix_usec > 0]
    if good:
        return float(np.median([m.time_unix_usec - m.time_boot_ms * 1000.0 for m in good]))
    log.notes.append(f"{log.track.name}: no SYSTEM_TIME with GPS time; clock from the ground station's receive times")
    log.track.clock = "clocks from the ground station's receive times (t = its unix seconds)"
    return recv_offset


def _unplaced(log: VehicleLog, placed: np.ndarray) -> None:
    """GLOBAL_POSITION_INT at 0°, 0° (ArduPilot sends them until it has a position: a real ArduCopter 3.2 log without
    GPS held nothing else, and its altitude and vertical speed still told of its crash) is no horizontal position: the
    altitude stays (the barometer's); a bench log that never had a fix read as a vehicle at rest, safe."""
    tr = log.track
    if tr.valid_z is None:
        tr.valid_z = np.ones(len(placed), dtype=bool) if tr.valid is None else tr.valid.copy()
    tr.valid = placed if tr.valid is None else tr.valid & placed
    tr.valid_how = "GLOBAL_POSITION_INT at 0°, 0° (no position yet)" + (
        f"; {tr.valid_how}" if tr.valid_how != LogTrack.valid_how else "")


def _validity(log: VehicleLog, reports: list, boot) -> None:
    if not reports:
        return
    t = np.array([boot(m) for m in reports])
    flags_ok = np.array([codes.position_ok(m.flags) and not m.flags & codes.MAV_EKF_UNINITIALIZED for m in reports])
    ratios = np.array([[m.velocity_variance, m.pos_horiz_variance, m.compass_variance] for m in reports])
    bad = invalid_reasons(flags_ok, ratios, codes.FS_EKF_THRESH_DEFAULT)
    log.track.valid = ~hold_last(t, bad, log.track.t_us)
    vertical = np.array([codes.vertical_ok(m.flags) and not m.flags & codes.MAV_EKF_UNINITIALIZED for m in reports])
    log.track.valid_z = ~hold_last(t, invalid_reasons(vertical, ratios, codes.FS_EKF_THRESH_DEFAULT), log.track.t_us)
    log.track.valid_how = ("EKF_STATUS_REPORT flags without a position, or two test ratios at or above "
                           f"{codes.FS_EKF_THRESH_DEFAULT:g}")
    glitch = np.array([bool(m.flags & codes.MAV_EKF_GPS_GLITCH) for m in reports])
    for i in np.flatnonzero(glitch & ~np.concatenate([[False], glitch[:-1]])):
        j = i + int(np.argmin(glitch[i:])) if not glitch[i:].all() else len(t) - 1
        log.spans.append(LogSpan("gps_glitch", float(t[i]), float(t[j]), "the EKF flagged its GPS as glitching",
                                 ["geofence", "max_speed"], {"source": "EKF_STATUS_REPORT"}))


def _events(log: VehicleLog, msgs: dict[str, list], boot) -> None:
    from pymavlink import mavutil

    mode, armed = None, None
    for m in msgs.get("HEARTBEAT", []):
        if m.autopilot == mavutil.mavlink.MAV_AUTOPILOT_INVALID:
            continue
        name = mavutil.mode_string_v10(m)
        if name != mode:
            log.events.append(LogEvent("flight_mode", boot(m), f"mode={name}", extra={
                "mode": name, "reason": "", **({"initial": True} if mode is None else {})}))
            mode = name
        now_armed = bool(m.base_mode & mavutil.mavlink.MAV_MODE_FLAG_SAFETY_ARMED)
        if now_armed != armed:  # the first heartbeat says how it started; a change, what the autopilot did
            log.events.append(LogEvent("autopilot_event", boot(m), "ARMED" if now_armed else "DISARMED",
                                       extra={"initial": True} if armed is None else {}))
            armed = now_armed
    landed = None
    for m in msgs.get("EXTENDED_SYS_STATE", []):  # the land detector: armed on its pad a vehicle is parked
        if (now_landed := landed_state(m.landed_state)) is not None and now_landed != landed:
            log.events.append(LogEvent("autopilot_event", boot(m), LANDING_WORDS[0] if now_landed else LANDING_WORDS[1],
                                       extra={"initial": True} if landed is None else {}))
            landed = now_landed
    glitch_at, glitch_text = None, ""
    failsafe: dict[str, LogEvent] = {}
    for m in msgs.get("STATUSTEXT", []):
        text, t = m.text.strip(), boot(m)
        low = text.lower()
        ended = "cleared" in low or "resolved" in low
        if low.startswith(("prearm", "arm:")):
            continue  # pre-flight checks, repeated until arming: no in-flight error
        if "failsafe" in low and m.severity <= SEVERITY_WARNING:
            what = low.split("failsafe")[0].strip() or "failsafe"
            if ended and what in failsafe:
                failsafe.pop(what).t_end_us = t
            elif not ended:
                failsafe[what] = LogEvent("failsafe", t, text.replace(" ", "_"), extra={"subsystem": text})
                log.events.append(failsafe[what])
        elif low.startswith("gps glitch"):
            if "cleared" in low and glitch_at is not None:
                log.spans.append(LogSpan("gps_glitch", glitch_at, t, f"the autopilot reported '{glitch_text}' "
                                         f"until '{text}'", ["geofence", "max_speed"], {"source": "STATUSTEXT"}))
                glitch_at = None
            elif "cleared" not in low:
                glitch_at, glitch_text = t, text
        elif "lane switch" in low or "primary changed" in low:
            log.spans.append(LogSpan("ekf_lane_switch", t, t, f"the autopilot reported '{text}'; the position may "
                                     "step at the switch", ["max_speed", "max_vertical_speed"]))
        elif m.severity <= SEVERITY_ERROR and not low.startswith("crash"):  # a crash: io.tlog_attitude's event
            log.events.append(LogEvent("autopilot_error", t, text.replace(" ", "_")))
    if glitch_at is not None:
        log.spans.append(LogSpan("gps_glitch", glitch_at, float(log.track.t_us[-1]), "the autopilot reported a GPS "
                                 "glitch, never cleared in the log", ["geofence", "max_speed"]))
    items = {}  # the mission as the vehicle sent it (a download): seq -> command name
    for m in msgs.get("MISSION_ITEM_INT", []) + msgs.get("MISSION_ITEM", []):
        cmd = mavutil.mavlink.enums["MAV_CMD"].get(int(m.command))
        items[int(m.seq)] = cmd.name.removeprefix("MAV_CMD_") if cmd is not None else f"CMD_{int(m.command)}"
    for m in msgs.get("MISSION_ITEM_REACHED", []):
        name = items.get(int(m.seq), "ITEM")
        log.events.append(LogEvent("mission_command", boot(m), f"{name}#{m.seq}",
                                   extra={"command": name, "seq": int(m.seq), "reached": True}))
