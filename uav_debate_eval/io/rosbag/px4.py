"""px4_msgs topics of a rosbag2 (PX4 over uXRCE-DDS) -> one trajectory in one world frame, on one clock.

Types come from the bag's embedded definitions (rosbag2 writes them), else from the px4_msgs the project ships
(uav_debate_eval/msgs/px4_msgs: main, v1.16, v1.15, the first whose layout decodes the bag's messages exactly), so
no generated package is needed. Each vehicle's pose is its `vehicle_local_position` (else `vehicle_odometry`);
`vehicle_global_position` gives the origin when the local position has no reference, `vehicle_status` the arming
state, the navigation state and the vehicle type. Placement and clock rules: io/px4.py; io.ulog.combine does the
rest as for ULog flights.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.stamps import stamp_ns, stamp_s
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io import px4
from uav_debate_eval.io.rosbag import raw_messages
from uav_debate_eval.io.ulog import LogTrack, combine, origin_from_fixes

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader
    from rosbags.typesys.store import Typestore

    from uav_debate_eval.io.rosbag.raw_messages import Raw

MSGS = Path(__file__).resolve().parent.parent.parent / "msgs" / "px4_msgs"
#: Shipped definitions, tried in this order when the bag carries none.
SHIPPED = ("main", "v1.16", "v1.15")
_KINDS = {"vehicle_local_position": px4.LOCAL_POSITION, "vehicle_odometry": px4.ODOMETRY,
          "vehicle_status": px4.STATUS, "vehicle_global_position": px4.GLOBAL_POSITION,
          "vehicle_land_detected": px4.LAND_DETECTED}


def px4_sources(types: dict[str, str], wanted: dict[str, str | None]) -> dict[str, dict[str, str]]:
    """vehicle -> {message type: topic} for the PX4 output topics of the bag (only `wanted` poses when given)."""
    out: dict[str, dict[str, str]] = {}
    for topic, msgtype in sorted(types.items()):
        parsed = px4.px4_topic(topic)
        if parsed is None or _KINDS.get(parsed[1]) != msgtype:
            continue
        if wanted and msgtype in px4.POSE_TYPES and topic not in wanted:
            continue
        out.setdefault(wanted.get(topic) or parsed[0], {})[msgtype] = topic
    return {u: kinds for u, kinds in sorted(out.items(), key=lambda kv: px4.natural_key(kv[0]))
            if any(k in kinds for k in px4.POSE_TYPES)}


def read_px4(reader: AnyReader, path: Path, sources: dict[str, dict[str, str]], types: dict[str, str]
             ) -> SwarmTrajectory:
    """Every vehicle's pose topic (and companions) decoded, placed in one world frame and put on one clock."""
    topics = [t for kinds in sources.values() for t in kinds.values()]
    notes: list[str] = []
    raws = raw_messages.read_raws(reader, topics, types, notes)
    # the land detector is read if it decodes (a companion: it never decides which definitions the poses take)
    decode = _decoder(reader, path, {types[t]: raws[t] for t in topics
                                     if len(raws[t]) and types[t] != px4.LAND_DETECTED})
    logs, statuses, landings = [], {}, {}
    first_ref: dict[str, int | None] = {}
    for uav, kinds in sources.items():
        pose_type = next(k for k in px4.POSE_TYPES if k in kinds)
        raw = raws[kinds[pose_type]]
        if not len(raw):
            notes.append(f"topic {kinds[pose_type]} has no messages")
            continue
        msgs = [decode(raw.message(i), pose_type) for i in range(len(raw))]
        log = _local_log(uav, msgs, kinds[pose_type]) if pose_type == px4.LOCAL_POSITION else \
            _odometry_log(uav, msgs, kinds[pose_type])
        stamps, keep, off_s = px4.receive_stamps(log.t_us, raw.recv)
        if log.ref is None and px4.GLOBAL_POSITION in kinds and len(raws[kinds[px4.GLOBAL_POSITION]]):
            _ref_from_global(log, [decode(raws[kinds[px4.GLOBAL_POSITION]].message(i), px4.GLOBAL_POSITION)
                                   for i in range(len(raws[kinds[px4.GLOBAL_POSITION]]))])
        first_ref[uav] = _first_referenced(log, raw.recv[keep], [m for m, k in zip(msgs, keep, strict=True) if k],
                                           pose_type)
        _on_receive_clock(log, stamps, keep)
        if not keep.all():
            notes.append(f"{uav}: {int((~keep).sum())} samples left out, as live: the clock's offset fell (they "
                         "came in a burst after a late first message) and stamped them out of PX4's pace")
        logs.append(log)
        if px4.STATUS in kinds and len(raws[kinds[px4.STATUS]]):
            status = raws[kinds[px4.STATUS]]
            statuses[uav] = ([decode(status.message(i), px4.STATUS) for i in range(len(status))], off_s)
        if px4.LAND_DETECTED in kinds and len(landed := raws[kinds[px4.LAND_DETECTED]]):
            landings[uav] = (_landing(decode, landed, kinds[px4.LAND_DETECTED], notes), off_s)
    if not logs:
        raise InputError(f"{path}: no PX4 pose messages ({', '.join(px4.POSE_TYPES)})")
    # the world frame: the origin of the vehicle whose referenced position was received first, as live (io.px4)
    referenced = sorted((ns, k) for k, lg in enumerate(logs) if lg.ref is not None
                        and (ns := first_ref.get(lg.name)) is not None)
    traj = combine(logs, anchor=logs[referenced[0][1]].ref if referenced else None)
    traj.name = path.name.split(".")[0] or path.name
    traj.ingest.notes.extend(notes)
    for uav, (msgs, off_s) in statuses.items():
        px4.apply_status(traj, uav, msgs, off_s)
    for uav, (rows, off_s) in landings.items():
        px4.apply_landing(traj, uav, rows, off_s)
    return traj


def _landing(decode: Callable[[bytes, str], Any], raw: Raw, topic: str, notes: list[str]) -> list[tuple[int, bool]]:
    """(timestamp µs, landed) of each vehicle_land_detected message; none, with a note, when they do not decode."""
    try:
        return [(int(m.timestamp), bool(m.landed)) for m in (decode(raw.message(i), px4.LAND_DETECTED)
                                                             for i in range(len(raw)))]
    except Exception:  # noqa: BLE001  (another layout: rosbags raises SerdeError, KeyError or struct errors)
        notes.append(f"{topic}: its messages do not decode with the poses' px4_msgs; the land detector is not read")
        return []


def _decoder(reader: AnyReader, path: Path, samples: dict[str, Raw]) -> Callable[[bytes, str], Any]:
    """Deserialise with the bag's own definitions, else with the first shipped px4_msgs that fits every type."""
    if all(t in reader.typestore.fielddefs for t in samples):
        return lambda data, t: reader.deserialize(data, t)
    for version in SHIPPED:
        store = shipped_store(version)
        if all(_fits(store, raw, t) for t, raw in samples.items()):
            return store.deserialize_cdr
    raise InputError(f"{path}: the bag carries no definitions of {', '.join(sorted(samples))} and none of the "
                     f"shipped px4_msgs ({', '.join(SHIPPED)}) decodes them")


def shipped_store(version: str) -> Typestore:
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    typs: dict[str, Any] = {}
    for f in sorted((MSGS / version / "msg").glob("*.msg")):
        typs.update(get_types_from_msg(f.read_text(), f"px4_msgs/msg/{f.stem}"))
    store.register(typs)
    return store


def _fits(store: Typestore, raw: Raw, msgtype: str) -> bool:
    try:
        for i in {0, len(raw) // 2, len(raw) - 1}:
            store.deserialize_cdr(raw.message(i), msgtype)
    except Exception:  # noqa: BLE001  (another layout: rosbags raises SerdeError, KeyError or struct errors)
        return False
    return True


def _on_receive_clock(log: LogTrack, stamps: np.ndarray, keep: np.ndarray) -> None:
    """The log's samples on the receive clock (io.px4.BootClock's stamps), the ones live drops left out."""
    log.t_us = stamps[keep] * 1e6
    log.t_s = stamp_s(stamp_ns(stamps[keep]))  # the live tape's stamps to the last bit (nanoseconds, as a message)
    log.pos_ned, log.vel_ned = log.pos_ned[keep], log.vel_ned[keep]
    if log.valid is not None:
        log.valid = log.valid[keep]
    if log.valid_z is not None:
        log.valid_z = log.valid_z[keep]
    log.utc_offset_us = 0.0


def _first_referenced(log: LogTrack, recv: np.ndarray, msgs: list[Any], pose_type: str) -> int | None:
    """Receive time (ns) of the vehicle's first message that carries its reference (its own or, for odometry
    placed by vehicle_global_position, its first message)."""
    if log.ref is None:
        return None
    if pose_type != px4.LOCAL_POSITION:
        return int(recv[0])
    return next((int(ns) for ns, m in zip(recv, msgs, strict=True) if m.xy_valid and m.z_valid
                 and px4.reference_of(m.xy_global, m.z_global, m.ref_lat, m.ref_lon, m.ref_alt) is not None), None)


def _local_log(uav: str, msgs: list[Any], topic: str) -> LogTrack:
    t_us = np.array([m.timestamp_sample or m.timestamp for m in msgs], dtype=np.float64)
    pos = np.array([(m.x, m.y, m.z) for m in msgs], dtype=float)
    vel = np.array([(m.vx, m.vy, m.vz) for m in msgs], dtype=float)
    valid = np.array([bool(m.xy_valid and m.z_valid) for m in msgs])
    valid_z = np.array([bool(m.z_valid and getattr(m, "v_z_valid", True)) for m in msgs])
    ref = next((r for m in msgs if (r := px4.reference_of(m.xy_global, m.z_global, m.ref_lat, m.ref_lon,
                                                          m.ref_alt)) is not None), None)
    return LogTrack(uav, t_us, pos, vel, None if ref is None else (ref.lat, ref.lon, ref.alt), None, topic,
                    "vehicle_local_position ref_lat/ref_lon/ref_alt" if ref else "no global reference", valid,
                    clock=px4.CLOCK_NOTE, valid_z=valid_z)


def _odometry_log(uav: str, msgs: list[Any], topic: str) -> LogTrack:
    t_us = np.array([m.timestamp_sample or m.timestamp for m in msgs], dtype=np.float64)
    pos = np.array([tuple(m.position) for m in msgs], dtype=float)
    q = np.array([tuple(m.q) for m in msgs], dtype=float)
    vel = px4.odometry_velocity_ned(np.array([m.velocity_frame for m in msgs]), q,
                                    np.array([tuple(m.velocity) for m in msgs], dtype=float))
    valid = np.isfinite(pos).all(axis=1)
    return LogTrack(uav, t_us, np.nan_to_num(pos), vel, None, None, topic, "no global reference", valid,
                    "position NaN", clock=px4.CLOCK_NOTE)


def _ref_from_global(log: LogTrack, msgs: list[Any]) -> None:
    """The local origin from vehicle_global_position fixes minus the local position at the same instant."""
    ok = [m for m in msgs if m.lat_lon_valid and np.isfinite(m.lat) and abs(m.lat) > 1e-6]
    if not ok:
        return
    t = np.array([m.timestamp_sample or m.timestamp for m in ok], dtype=np.float64)
    ref = origin_from_fixes(t, np.array([m.lat for m in ok]), np.array([m.lon for m in ok]),
                            np.array([m.alt for m in ok]), log.t_us, log.pos_ned)
    if ref is not None:
        log.ref, log.ref_how = ref, "vehicle_global_position minus local position"
