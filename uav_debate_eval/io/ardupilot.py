"""ArduPilot flights: DataFlash `.bin` and MAVLink `.tlog` logs (one per vehicle, or a ground station's log of
several) into one ENU world frame and one clock, as for PX4 (`io.ulog.combine` places the EKF origins and moves
the boot clocks to GPS UTC time).

Vehicle ids: `sysid<N>` from SYSID_THISMAV (the parameter in a `.bin`) or the MAVLink system id (a `.tlog`); the
file name (or the folder that tells equally named files apart) when the id is missing or two logs share it (SITL
instances all default to SYSID_THISMAV 1). What the autopilot logged (modes, errors, failsafes, events, mission
commands) goes to `ingest.log_events`, the spans the log shows about itself (GPS glitch, EKF lane switch, logging
gap) to `ingest.findings`, the GPS fixes to `ingest.gnss` (the data-quality pass checks their jumps against the
vehicle class), all in flight time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from uav_debate_eval.core.arming import ARMING_LABELS, LANDING_LABELS
from uav_debate_eval.core.records import Event, Finding
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.ardupilot_log import VehicleLog
from uav_debate_eval.io.kept_reads import parsed
from uav_debate_eval.io.names import apply_names, few
from uav_debate_eval.io.ulog import anchor_of, clock_offsets, combine, geodetic_to_enu, read_ulog

#: Two logs of one system id whose horizontal positions stay this close (m, median) are one vehicle twice.
TWICE_M = 1.0


def read_vehicle_logs(path: str | Path) -> list[VehicleLog]:
    """The vehicles of one log file (a `.bin` or `.ulg` holds one; a `.tlog` one per autopilot system id)."""
    path = Path(path)
    if path.suffix.lower() == ".ulg":  # a PX4 vehicle flown with ArduPilot ones: placed and clocked alike
        return [VehicleLog(read_ulog(path, path.stem))]
    if path.suffix.lower() == ".tlog":
        from uav_debate_eval.io.tlog import read_tlog

        return read_tlog(path)
    from uav_debate_eval.io.dataflash import read_dataflash

    return [read_dataflash(path, path.stem)]


def read_ardupilot_logs(paths: Sequence[str | Path], names: list[str] | None = None, *,
                        keep: bool = False) -> SwarmTrajectory:
    """Several logs of vehicles flown together -> one SwarmTrajectory. `names` (the mission's uavs): one per
    vehicle names them in the order of the logs; otherwise they select vehicles by id (io.names.apply_names).
    `keep`: keep each file's parse for the flight's read (io.kept_reads)."""
    files_in = [Path(p) for p in paths]
    logs: list[VehicleLog] = []
    files: list[Path] = []
    for p in files_in:
        found = parsed(p, read_vehicle_logs, keep=keep)
        logs += found
        files += [p] * len(found)
    twice = _recorded_twice(logs, files)
    _name(logs, files)
    if names and len(names) == len(logs) and not set(names) <= {lg.track.name for lg in logs}:
        for lg, name in zip(logs, names, strict=True):  # in the order of the files, as for PX4 (not id order)
            lg.notes.append(f"{lg.track.name} ({lg.track.source}) named {name} from the mission's uavs")
            lg.track.name = name
        names = None
    tracks = [lg.track for lg in logs]
    traj = combine(tracks)
    if len(logs) > 1:
        traj.name = "ardupilot_swarm"
    offsets, _ = clock_offsets(tracks)
    anchor = anchor_of(tracks)
    for lg, off in zip(logs, offsets, strict=True):
        _flight_time(traj, lg, off, anchor)
    for lg, left_out, apart in twice:
        tr = traj.tracks[lg.track.name]
        traj.ingest.findings.append(Finding(
            "duplicate_vehicle", [lg.track.name], float(tr.t[0]), float(tr.t[-1]),
            f"{left_out.name} holds {lg.track.name} ({Path(lg.track.source).name}) again: the same system id "
            f"{lg.sysid}, {apart:.2f} m apart horizontally (median) over their common time; one vehicle, read "
            f"once, from {Path(lg.track.source).name}", ["min_separation"], {"median_m": apart}))
    return apply_names(traj, names, few([p.name for p in files_in])) if names else traj


def _recorded_twice(logs: list[VehicleLog], files: list[Path]) -> list[tuple[VehicleLog, Path, float]]:
    """One vehicle given twice (its .bin and the ground station's .tlog of the same flight): the same system id
    and horizontal positions within TWICE_M of each other over most of their common time (altitudes may differ by
    a reference). The second is left out of `logs` (the onboard log is kept before the telemetry: it holds more);
    returned as (the log kept, the file left out, the median distance) for the finding."""
    out = []
    gone: set[int] = set()
    for i, j in _same_id_pairs(logs, files):
        a, b = logs[i], logs[j]
        if {i, j} & gone:
            continue
        pair = combine([dataclasses.replace(a.track, name="a"), dataclasses.replace(b.track, name="b")])
        if set(pair.tracks) != {"a", "b"}:
            continue
        ta, tb = pair.tracks["a"], pair.tracks["b"]
        common = ta.t[(ta.t >= tb.t[0]) & (ta.t <= tb.t[-1])]
        if len(common) < 10 or common[-1] - common[0] < 0.5 * min(ta.t[-1] - ta.t[0], tb.t[-1] - tb.t[0]):
            continue
        apart = float(np.nanmedian(np.linalg.norm((ta.position_at(common) - tb.position_at(common))[:, :2],
                                                  axis=1)))
        if not apart < TWICE_M:
            continue
        keep, drop = (i, j) if _rank(a, files[i]) >= _rank(b, files[j]) else (j, i)
        out.append((logs[keep], files[drop], apart))
        gone.add(drop)
    logs[:] = [lg for k, lg in enumerate(logs) if k not in gone]
    files[:] = [f for k, f in enumerate(files) if k not in gone]
    return out


def _same_id_pairs(logs: list[VehicleLog], files: list[Path]) -> list[tuple[int, int]]:
    """The pairs (i < j, in order) of logs of one system id from different files that their median GPS fixes do not
    tell apart (within 3 x TWICE_M horizontally; a log without fixes pairs with every log of its id). A show's
    drones all on the default system id: a k-d tree of the fixes, not every pair placed (500 logs: 7 s -> 0.1 s)."""
    from scipy.spatial import cKDTree

    by_id: dict[int, list[int]] = {}
    for k, lg in enumerate(logs):
        if lg.sysid is not None:
            by_id.setdefault(lg.sysid, []).append(k)
    pairs: set[tuple[int, int]] = set()
    for members in by_id.values():
        if len(members) < 2:
            continue
        placed = [k for k in members if len(logs[k].gps_t_us)]
        if placed:
            centres = np.array([np.median(logs[k].gps_lla, axis=0) for k in placed])
            east_north = geodetic_to_enu(*centres.T, *centres[0])[:, :2]
            pairs |= {(placed[a], placed[b]) for a, b in cKDTree(east_north).query_pairs(3 * TWICE_M)}
        pairs |= {(min(u, k), max(u, k)) for u in set(members) - set(placed) for k in members if k != u}
    return sorted((i, j) for i, j in pairs if files[i] != files[j])


def _rank(lg: VehicleLog, path: Path) -> tuple:
    return (path.suffix.lower() != ".tlog", len(lg.track.t_us))


def _name(logs: list[VehicleLog], files: list[Path]) -> None:
    """sysid<N> when every log's id is known and unique, else the file name (with the sysid within a .tlog)."""
    ids = [f"sysid{lg.sysid}" if lg.sysid is not None else None for lg in logs]
    unique = None not in ids and len(set(ids)) == len(ids)
    stems = _file_names(files)
    for i, (lg, path, sid) in enumerate(zip(logs, files, ids, strict=True)):
        if unique:
            lg.track.name = str(sid)
            continue
        if files.count(path) > 1:
            lg.track.name = f"{stems[i]}_{sid or i + 1}"
        else:
            lg.track.name = stems[i] if stems.count(stems[i]) == 1 else f"{stems[i]}_{i + 1}"
        if sid is not None:
            lg.notes.append(f"{lg.track.name}: named after its file ({sid} is not unique among the logs)")


def _file_names(files: list[Path]) -> list[str]:
    """Each file's stem; files of one stem (SITL instances each write logs/00000001.BIN) are named after the
    nearest folder whose names tell them apart (sitl1/logs/00000001.BIN -> sitl1)."""
    out = [p.stem for p in files]
    for stem in set(out):
        same = sorted({p.resolve() for p in files if p.stem == stem})
        if len(same) < 2:
            continue
        for depth in range(1, max(len(p.parts) for p in same)):
            names = [p.parents[depth - 1].name if depth <= len(p.parents) else "" for p in same]
            if all(names) and len(set(names)) == len(names):
                rename = dict(zip(same, names, strict=True))
                out = [rename.get(p.resolve(), o) for p, o in zip(files, out, strict=True)]
                break
    return out


#: The autopilot's state events by what they set: the last one before the flight is the state the flight starts in.
_STATE_OF = {**dict.fromkeys(ARMING_LABELS, "arming"), **dict.fromkeys(LANDING_LABELS, "landing")}


def _flight_time(traj: SwarmTrajectory, lg: VehicleLog, offset_us: float, anchor) -> None:
    """The log's events, spans and GPS fixes in flight time on the trajectory's ingest report."""
    u = lg.track.name
    if u not in traj.tracks:
        return

    def ft(t_us: float) -> float:
        return round((t_us + offset_us) / 1e6 - traj.t0, 6)

    starts: dict[str, Event] = {}  # the mode, arming and landed state set before the flight's first sample
    early = 0
    for e in lg.events:
        t, t_end = ft(e.t_us), None if e.t_end_us is None else ft(e.t_end_us)
        extra = {"label": e.label, **e.extra}
        state = "mode" if e.type == "flight_mode" else _STATE_OF.get(e.label) if e.type == "autopilot_event" else None
        if t < 0 and state is not None:  # the state it starts in (a telemetry log's first heartbeat, an EV ARMED
            starts[state] = Event("", e.type, 0.0, [u], None, None, None,  # a moment before the first EKF sample)
                                  {**extra, "set_at": t, **({"initial": True} if state != "mode" else {})})
        elif t < 0 and (t_end is None or t_end < 0):
            early += 1
        else:
            traj.ingest.log_events.append(Event("", e.type, max(t, 0.0), [u], t_end, None, None, extra))
    traj.ingest.log_events.extend(starts.values())
    if early:
        traj.ingest.notes.append(f"{u}: {early} autopilot log entries before the flight's first sample left out")
    for s in lg.spans:
        if ft(s.t_end_us) >= 0:
            traj.ingest.findings.append(Finding(s.kind, [u], max(ft(s.t_us), 0.0), ft(s.t_end_us),
                                                f"{u}: {s.detail}", list(s.affects), dict(s.values)))
    if lg.firmware or lg.estimator or lg.vehicle_class != "unknown":
        traj.ingest.autopilot[u] = {"vehicle_class": lg.vehicle_class, "firmware": lg.firmware,
                                    "estimator": lg.estimator, "sitl": lg.sitl}
        traj.ingest.notes.append(f"{u}: {lg.firmware or 'firmware not named'}, {lg.vehicle_class.replace('_', ' ')}"
                                 f"{' (SITL)' if lg.sitl else ''}; position from {lg.estimator or 'the log'}")
    if lg.attitude is not None:
        t_att, actual, target, controlled = lg.attitude
        traj.ingest.attitude[u] = ((t_att + offset_us) / 1e6 - traj.t0, actual, target, controlled)
    if len(lg.gps_t_us) and anchor is not None and lg.track.ref is not None:
        enu = geodetic_to_enu(lg.gps_lla[:, 0], lg.gps_lla[:, 1], lg.gps_lla[:, 2], *anchor)
        traj.ingest.gnss[u] = ((lg.gps_t_us + offset_us) / 1e6 - traj.t0, enu)
    traj.ingest.notes.extend(lg.notes)
