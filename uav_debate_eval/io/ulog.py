"""PX4 ULog flights (one .ulg per vehicle) into one ENU world frame and one clock.

Positions come from `vehicle_local_position` (NED, metres from each log's own origin). Every log's
origin is placed in a local tangent plane at the first log's reference (ref_lat/ref_lon/ref_alt, else
derived from `vehicle_global_position` or the GPS fix), and boot-relative timestamps are moved to UTC
with the GPS time (`time_utc_usec`) when every log has it; otherwise the logs' starts are aligned.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from uav_debate_eval.core.arming import LANDING_WORDS, state_events
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.records import Event
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.core.vehicle_limits import limit_params
from uav_debate_eval.io.kept_reads import parsed

_TOPICS = ["vehicle_local_position", "vehicle_global_position", "vehicle_gps_position", "sensor_gps"]
_WGS84_A = 6378137.0
_WGS84_E2 = 6.69437999014e-3


@dataclass
class LogTrack:
    """One vehicle's log, still in its own frame and clock."""

    name: str
    t_us: np.ndarray  # boot-relative microseconds
    pos_ned: np.ndarray  # (n, 3)
    vel_ned: np.ndarray  # (n, 3)
    ref: tuple[float, float, float] | None  # lat deg, lon deg, alt m (AMSL) of the local origin
    utc_offset_us: float | None  # add to t_us to get UTC microseconds
    source: str = ""
    ref_how: str = ""
    valid: np.ndarray | None = None  # the estimator's own validity (PX4 xy_valid & z_valid): the track's est_valid
    valid_how: str = "xy_valid/z_valid = 0"  # what flags a sample invalid, for the note
    #: the altitude's and vertical velocity's own validity (PX4 z_valid & v_z_valid) where it may differ from
    #: `valid` (a position without GPS keeps its barometric altitude): the track's est_z_valid
    valid_z: np.ndarray | None = None
    #: what utc_offset_us puts t_us on, for the note (ROS 2 bags: the recorder's receive clock)
    clock: str = "clocks aligned with GPS UTC time (t = UTC seconds)"
    #: the autopilot's parameters that set limits (core.vehicle_limits.LIMIT_PARAMS), where the log holds them
    params: dict[str, float] = field(default_factory=dict)
    #: PX4: (boot µs, roll/pitch deg, targets deg, controlled) (io.px4_attitude), crash (boot µs, words), class
    attitude: tuple | None = None
    crash: tuple[float, str] | None = None
    #: PX4: each change of vehicle_status.arming_state (boot µs, armed), the first one as the log starts
    arming: list[tuple[float, bool]] = field(default_factory=list)
    #: PX4: each change of vehicle_status.nav_state (boot µs, nav_state), the first one as the log starts
    modes: list[tuple[float, int]] = field(default_factory=list)
    #: PX4: each change of vehicle_land_detected.landed (boot µs, landed), the first one as the log starts
    landing: list[tuple[float, bool]] = field(default_factory=list)
    vehicle_class: str = ""
    sitl: bool = False
    #: what the ULog parser skipped in a damaged file (a note), "" for a sound one
    damage: str = ""
    #: the samples' times (s) when the reader has put them on one clock itself (ROS 2 PX4 bags: as live, io.px4)
    t_s: np.ndarray | None = None


def ned_to_enu(v: np.ndarray) -> np.ndarray:
    """x_enu = y_ned, y_enu = x_ned, z_enu = -z_ned."""
    v = np.asarray(v, dtype=float)
    return np.column_stack([v[:, 1], v[:, 0], -v[:, 2]])


def _ecef(lat: np.ndarray, lon: np.ndarray, alt: np.ndarray) -> np.ndarray:
    lat, lon = np.radians(lat), np.radians(lon)
    n = _WGS84_A / np.sqrt(1.0 - _WGS84_E2 * np.sin(lat) ** 2)
    return np.stack([(n + alt) * np.cos(lat) * np.cos(lon), (n + alt) * np.cos(lat) * np.sin(lon),
                     (n * (1.0 - _WGS84_E2) + alt) * np.sin(lat)], axis=-1)


def geodetic_to_enu(lat, lon, alt, lat0: float, lon0: float, alt0: float) -> np.ndarray:
    """WGS84 geodetic points -> ENU metres in the tangent plane at (lat0, lon0, alt0)."""
    d = _ecef(np.asarray(lat, float), np.asarray(lon, float), np.asarray(alt, float)) - _ecef(
        np.asarray(lat0, float), np.asarray(lon0, float), np.asarray(alt0, float))
    la, lo = np.radians(lat0), np.radians(lon0)
    east = -np.sin(lo) * d[..., 0] + np.cos(lo) * d[..., 1]
    north = -np.sin(la) * np.cos(lo) * d[..., 0] - np.sin(la) * np.sin(lo) * d[..., 1] + np.cos(la) * d[..., 2]
    up = np.cos(la) * np.cos(lo) * d[..., 0] + np.cos(la) * np.sin(lo) * d[..., 1] + np.sin(la) * d[..., 2]
    return np.stack([east, north, up], axis=-1)


def read_ulog(path: str | Path, name: str) -> LogTrack:
    """Parse one .ulg into a LogTrack (raises InputError for unreadable logs or no local position)."""
    from uav_debate_eval.io.px4_attitude import (
        ATTITUDE_TOPICS,
        px4_arming,
        px4_attitude,
        px4_crash,
        px4_landing,
        px4_modes,
        px4_vehicle_class,
    )

    path = Path(path)
    try:
        from pyulog import ULog

        printed = io.StringIO()  # pyulog prints what it skips in a damaged file: told once, as a note
        with contextlib.redirect_stdout(printed):
            ulog = ULog(str(path), _TOPICS + ATTITUDE_TOPICS)
    except Exception as exc:  # pyulog raises assorted types on damaged files; all mean bad input
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: cannot read ULog ({type(exc).__name__}: {reason})") from None
    data = {d.name: d.data for d in sorted(ulog.data_list, key=lambda d: d.multi_id, reverse=True)}
    lp = data.get("vehicle_local_position")
    if lp is None or len(lp["timestamp"]) == 0:
        raise InputError(f"{path}: no vehicle_local_position in the log (topics: {', '.join(sorted(data)) or 'none'})")
    lacking = [k for k in ("x", "y", "z", "vx", "vy", "vz") if k not in lp]
    if lacking:
        raise InputError(f"{path}: vehicle_local_position lacks {', '.join(lacking)} (a damaged format definition)")
    t_us = lp["timestamp"].astype(np.float64)
    pos = np.column_stack([lp["x"], lp["y"], lp["z"]]).astype(float)
    vel = np.column_stack([lp["vx"], lp["vy"], lp["vz"]]).astype(float)
    valid, valid_z = px4_validity(lp)
    ref, how = _reference(lp, data, t_us, pos)
    track = LogTrack(name, t_us, pos, vel, ref, _utc_offset(data), str(path), how, valid, valid_z=valid_z)
    track.params = limit_params(ulog.initial_parameters)
    track.attitude = px4_attitude(data)
    track.crash = px4_crash(data, track.attitude)
    track.arming = px4_arming(data)
    track.landing = px4_landing(data)
    track.modes = px4_modes(data)
    track.vehicle_class = px4_vehicle_class(data)
    track.sitl = str(ulog.msg_info_dict.get("ver_hw", "")).upper().endswith("SITL")
    track.damage = _damage(printed.getvalue())
    return track


def px4_validity(fields: dict) -> tuple[np.ndarray, np.ndarray]:
    """(position valid, altitude valid) per vehicle_local_position sample, from its columns of flags: xy_valid &
    z_valid, and z_valid & v_z_valid (a flag a firmware does not log counts as set)."""
    n = len(fields["timestamp"])
    flag = {k: np.asarray(fields[k]) != 0 if k in fields else np.ones(n, dtype=bool)
            for k in ("xy_valid", "z_valid", "v_z_valid")}
    return flag["xy_valid"] & flag["z_valid"], flag["z_valid"] & flag["v_z_valid"]


def _damage(printed: str) -> str:
    """What pyulog said while reading around damage, in a line ("" when it said nothing). It warns once per unknown
    message id, so the ids are counted, not the messages."""
    lines = [line for line in printed.splitlines() if line.strip()]
    if not lines:
        return ""
    unknown = sum("no subscription found" in line for line in lines)
    corrupt = [line.rstrip("!") for line in lines if "corruption detected" in line]
    said = ([f"messages under {unknown} unknown id(s) skipped"] if unknown else []) + sorted(set(corrupt))
    return f"the log is damaged ({'; '.join(said) if said else lines[0]}): what the damage held is lost"


def _reference(lp: dict, data: dict, t_us: np.ndarray, pos_ned: np.ndarray):
    """The local origin's lat/lon/alt and how it was found, or (None, reason)."""
    if "xy_global" in lp and "ref_lat" in lp:
        ok = (lp["xy_global"] != 0) & np.isfinite(lp["ref_lat"]) & np.isfinite(lp["ref_lon"])
        if ok.any():
            i = int(np.flatnonzero(ok)[0])
            alt = float(lp["ref_alt"][i]) if np.isfinite(lp["ref_alt"][i]) else 0.0
            return (float(lp["ref_lat"][i]), float(lp["ref_lon"][i]), alt), "vehicle_local_position ref_lat/lon/alt"
    for topic in ("vehicle_global_position", "vehicle_gps_position", "sensor_gps"):
        d = data.get(topic)
        if d is None or len(d["timestamp"]) == 0:
            continue
        lat, lon, alt = _latlonalt(d)
        if lat is None:
            continue
        good = np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) > 1e-6)
        good &= (d["timestamp"] >= t_us[0]) & (d["timestamp"] <= t_us[-1])
        ref = origin_from_fixes(d["timestamp"][good], lat[good], lon[good], alt[good], t_us, pos_ned)
        if ref is not None:
            return ref, f"{topic} minus local position"
    return None, "no global reference"


def origin_from_fixes(t_fix, lat, lon, alt, t_us: np.ndarray, pos_ned: np.ndarray
                      ) -> tuple[float, float, float] | None:
    """The local frame's origin from the first good fix within the local track, moved back by the local offset
    there (a small-distance shift on the tangent plane); None when no fix falls within the track."""
    inside = np.flatnonzero((t_fix >= t_us[0]) & (t_fix <= t_us[-1]))
    if not len(inside):
        return None
    i = int(inside[0])
    local = np.array([np.interp(t_fix[i], t_us, pos_ned[:, k]) for k in range(3)])
    if not np.isfinite(local).all():
        return None
    dn, de, dd = local
    lat0 = lat[i] - np.degrees(dn / _WGS84_A)
    lon0 = lon[i] - np.degrees(de / (_WGS84_A * np.cos(np.radians(lat[i]))))
    return float(lat0), float(lon0), float(alt[i] + dd)


def _latlonalt(d: dict):
    if "lat" in d and "lon" in d:
        lat, lon = np.asarray(d["lat"], float), np.asarray(d["lon"], float)
        if np.issubdtype(d["lat"].dtype, np.integer):
            lat, lon = lat * 1e-7, lon * 1e-7
        alt = np.asarray(d.get("alt", np.zeros(len(lat))), float)
        if np.issubdtype(d.get("alt", np.zeros(1)).dtype, np.integer):
            alt = alt * 1e-3
        return lat, lon, alt
    if "latitude_deg" in d:
        alt = d.get("altitude_msl_m", np.zeros(len(d["latitude_deg"])))
        return np.asarray(d["latitude_deg"], float), np.asarray(d["longitude_deg"], float), np.asarray(alt, float)
    return None, None, None


def _utc_offset(data: dict) -> float | None:
    for topic in ("vehicle_gps_position", "sensor_gps"):
        d = data.get(topic)
        if d is None or "time_utc_usec" not in d:
            continue
        ok = d["time_utc_usec"] > 0
        if ok.any():
            return float(np.median(d["time_utc_usec"][ok].astype(np.float64) - d["timestamp"][ok].astype(np.float64)))
    return None


def anchor_of(logs: list[LogTrack]) -> tuple[float, float, float] | None:
    """The world frame's origin: the first referenced log's local origin."""
    return next((lg.ref for lg in logs if lg.ref is not None), None)


def clock_offsets(logs: list[LogTrack]) -> tuple[list[float], str]:
    """Microseconds to add to each log's t_us for one clock (GPS UTC when every log has it), and the note."""
    offsets = [lg.utc_offset_us for lg in logs]
    if all(off is not None for off in offsets):
        clocks = sorted({lg.clock for lg in logs})  # GPS UTC, a ground station's receive times, a recorder's
        return [float(off) for off in offsets if off is not None], "; ".join(clocks)
    missing = [lg.name for lg in logs if lg.utc_offset_us is None]
    return [-float(lg.t_us[0]) for lg in logs], f"no GPS UTC time in {', '.join(missing)}: log starts aligned to t = 0"


def combine(logs: list[LogTrack], anchor: tuple[float, float, float] | None = None) -> SwarmTrajectory:
    """Place every log in the tangent plane at `anchor` (default: the first referenced log's origin) and on one
    clock."""
    anchor = anchor or anchor_of(logs)
    offsets, clock_note = clock_offsets(logs)
    notes = [clock_note]
    t_all, ids, pos_all, vel_all, ok_all, z_ok_all = [], [], [], [], [], []
    local: set[str] = set()
    for lg, off in zip(logs, offsets, strict=True):
        origin = np.zeros(3)
        if len(logs) > 1 and (anchor is None or lg.ref is None):
            local.add(lg.name)
        if anchor is not None and lg.ref is not None:
            origin = geodetic_to_enu(*lg.ref, *anchor)
            if len(logs) > 1:
                notes.append(f"{lg.name}: origin at E{origin[0]:+.2f} N{origin[1]:+.2f} U{origin[2]:+.2f} m "
                             f"({lg.ref_how})")
        elif len(logs) > 1:
            notes.append(f"{lg.name}: no global reference; its local frame is not placed among the others")
        elif lg.ref is None:
            notes.append(f"{lg.name}: no global reference; positions in the log's local frame")
        t_all.append((lg.t_us + off) / 1e6 if lg.t_s is None else lg.t_s)
        ids.append(np.full(len(lg.t_us), lg.name, dtype=object))
        pos_all.append(ned_to_enu(lg.pos_ned) + origin)
        vel_all.append(ned_to_enu(lg.vel_ned))
        valid = np.ones(len(lg.t_us), dtype=bool) if lg.valid is None else lg.valid
        ok_all.append(valid.astype(float))
        z_ok_all.append(valid if lg.valid_z is None else valid | lg.valid_z)
        if lg.damage:
            notes.append(f"{lg.name}: {lg.damage}")
        if not valid.all():
            altitude = int((z_ok_all[-1] & ~valid).sum())
            kept = (f"; {altitude} of them with a valid altitude and vertical velocity: the vertical checks hold "
                    "there") if altitude else ""
            notes.append(f"{lg.name}: {int((~valid).sum())} of {len(valid)} samples flagged not valid by the "
                         f"estimator ({lg.valid_how}){kept}")
    ends = {lg.name: float((lg.t_us[-1] + off) / 1e6 if lg.t_s is None else lg.t_s[-1])
            for lg, off in zip(logs, offsets, strict=True)}
    traj = SwarmTrajectory.from_columns(np.concatenate(t_all), np.concatenate(ids).astype(str),
                                        np.concatenate(pos_all), vel=np.concatenate(vel_all),
                                        est_valid=np.concatenate(ok_all).astype(bool),
                                        est_z_valid=np.concatenate(z_ok_all),
                                        name=logs[0].name if len(logs) == 1 else "px4_swarm")
    traj.ingest.notes.extend(notes)
    sources = {lg.name: lg.source for lg in logs}
    for u, tr in traj.tracks.items():
        tr.source, tr.recording_end = sources.get(u, ""), ends[u] - traj.t0 if u in ends else None
        tr.frame = "local" if u in local else ""
        tr.drop_redundant_validity()
    for lg, off in zip(logs, offsets, strict=True):
        if lg.name in traj.tracks:
            _px4_extras(traj, lg, off)
    return traj


def _px4_extras(traj: SwarmTrajectory, lg: LogTrack, offset_us: float) -> None:
    """What a log says beside its positions, in flight time: limit parameters, attitude, crash, vehicle class."""
    u = lg.name
    if lg.params:
        traj.ingest.params[u] = lg.params
    if lg.attitude is not None:
        t_att, actual, target, controlled = lg.attitude
        traj.ingest.attitude[u] = ((t_att + offset_us) / 1e6 - traj.t0, actual, target, controlled)
    # as io.px4.apply_status gives them from a bag's vehicle_status
    state_events(traj.ingest.log_events, u, [((at + offset_us) / 1e6, armed) for at, armed in lg.arming], traj.t0,
                 "vehicle_status", ("armed", "disarmed"))
    state_events(traj.ingest.log_events, u, [((at + offset_us) / 1e6, on) for at, on in lg.landing], traj.t0,
                 "vehicle_land_detected", LANDING_WORDS)
    if lg.modes:
        from uav_debate_eval.io.px4_attitude import mode_event

        traj.ingest.log_events.extend(
            mode_event(u, max(round((at + offset_us) / 1e6 - traj.t0, 6), 0.0), state, k == 0)
            for k, (at, state) in enumerate(lg.modes))  # as io.px4.apply_status gives them from a bag
    if lg.crash is not None:
        t = max(round((lg.crash[0] + offset_us) / 1e6 - traj.t0, 6), 0.0)
        traj.ingest.log_events.append(Event("", "crash", t, [u], None, None, None,
                                            {"label": lg.crash[1], "evidence": lg.crash[1].split("; ")}))
    if lg.vehicle_class:
        traj.ingest.autopilot[u] = {"vehicle_class": lg.vehicle_class, "firmware": "PX4", "estimator": "",
                                    "sitl": lg.sitl}


def read_ulogs(paths: Sequence[str | Path], names: list[str] | None = None) -> SwarmTrajectory:
    """One .ulg per vehicle -> one SwarmTrajectory; `names` (the mission's uavs) name them in order."""
    files = [Path(p) for p in paths]
    if names and len(names) != len(files):
        names = None
    if names is None:
        stems = [f.stem for f in files]
        names = [s if stems.count(s) == 1 else f"{s}_{i + 1}" for i, s in enumerate(stems)]
    logs = [parsed(f, ulog_track) for f in files]  # parsed ahead on every core by a run (runner.spans)
    for log, name in zip(logs, names, strict=True):
        log.name = name
    return combine(logs)


def ulog_span(path: Path) -> tuple[float, float, list[str]]:
    """(first, last stamp, its vehicle) of a .ulg, on GPS UTC where the log has it (else its boot clock); the parse is
    kept for the flight's read (io.kept_reads)."""
    lg = parsed(path, ulog_track, keep=True)
    offset = lg.utc_offset_us or 0.0
    return (float(lg.t_us[0]) + offset) / 1e6, (float(lg.t_us[-1]) + offset) / 1e6, [path.stem]


def ulog_track(path: Path) -> LogTrack:
    """read_ulog named after the file (read_ulogs names it)."""
    return read_ulog(path, path.stem)
