"""Read vehicle poses from rosbag2 (dir, .mcap, .db3) and ROS 1 .bag files with `rosbags` (no ROS install).

Pose topics are detected by type (PoseStamped, Odometry, PoseArray, TFMessage) and vehicles by topic
namespace (`/uav1/pose`, `/uav1/mavros/local_position/pose`, `/cf1/odom` -> `uav1`, `cf1`).
Speed (a 300k-message bag in a fraction of a second): MCAP chunks (a `.mcap` file or a rosbag2 folder of
them) are decompressed with rosbags' own checks and their messages located with numpy through the chunks'
message indexes (verified against the records; else the records are walked), in the order rosbags yields
them, instead of one generator step per message; PoseStamped and Odometry messages of one serialised
length share a byte layout, so each length group is decoded as one numpy array (checked against the
library's own decoder). Anything else goes through rosbags message by message.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.frames import rotate_many, twist_is_in_body_frame
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.names import apply_names

POSE = "geometry_msgs/msg/PoseStamped"
ODOM = "nav_msgs/msg/Odometry"
POSE_ARRAY = "geometry_msgs/msg/PoseArray"
TF = "tf2_msgs/msg/TFMessage"
TF_STATIC = "/tf_static"
TRANSFORM = "geometry_msgs/msg/TransformStamped"
TWIST = "geometry_msgs/msg/TwistStamped"
FIX = "sensor_msgs/msg/NavSatFix"
#: Preferred first when one vehicle has several pose topics.
SUPPORTED = (POSE, ODOM, TRANSFORM, POSE_ARRAY, TF)
WORLD_FRAMES = {"world", "map", "odom", "earth", "enu"}
#: Namespaces of autopilot drivers (`/mavros/local_position/pose` alone is one unnamed vehicle) and of
#: motion-capture bridges (`/vicon/cf3/cf3`: the next level names the body).
_DRIVER_NS = {"mavros", "fmu", "px4"}
_MOCAP_NS = {"vicon", "vrpn_client_node", "natnet", "optitrack", "qualisys", "mocap", "motion_capture_tracking"}
#: Odometry whose position standard deviation exceeds this (m) is an estimate the estimator itself disowns.
MAX_POSITION_STD_M = 10.0
#: Header stamps below this (seconds) while others of the topic look like epoch time are treated as unset.
_EPOCH_S = 1e6


@dataclass
class _Columns:
    t: list[np.ndarray] = field(default_factory=list)
    ids: list[np.ndarray] = field(default_factory=list)
    pos: list[np.ndarray] = field(default_factory=list)
    vel: list[np.ndarray] = field(default_factory=list)
    quat: list[np.ndarray] = field(default_factory=list)
    valid: list[np.ndarray] = field(default_factory=list)
    #: per vehicle: source topic, receive-time stamps, local frame, measured velocity, global fix
    meta: dict[str, dict] = field(default_factory=dict)
    #: one vehicle's pose topic -> (its block index, vehicle)
    block_of: dict[str, tuple[int, str]] = field(default_factory=dict)

    def add(self, t: np.ndarray, uav: str | np.ndarray, pos: np.ndarray, quat: np.ndarray,
            vel: np.ndarray | None = None, valid: np.ndarray | None = None, source: str = "",
            receive_time: bool = False, frame: str = "") -> None:
        n = len(t)
        if isinstance(uav, str) and source:
            self.block_of[source] = (len(self.t), uav)
            self.meta[uav] = {"source": source, "receive_time": receive_time, "frame": frame}
        self.valid.append(np.ones(n, dtype=bool) if valid is None else np.asarray(valid, dtype=bool))
        self.t.append(np.asarray(t, dtype=float))
        self.ids.append(np.full(n, uav) if isinstance(uav, str) else np.asarray(uav, dtype=str))
        self.pos.append(np.asarray(pos, dtype=float).reshape(n, 3))
        self.quat.append(np.asarray(quat, dtype=float).reshape(n, 4))
        self.vel.append(np.full((n, 3), np.nan) if vel is None else np.asarray(vel, dtype=float).reshape(n, 3))


def vehicle_from_topic(topic: str) -> str:
    """`/uav1/pose` -> `uav1`; `/vicon/cf3/cf3` -> `cf3`; `/mavros/local_position/pose` -> `uav`; `/pose` -> `pose`."""
    parts = [p for p in topic.split("/") if p]
    if len(parts) >= 2 and parts[0] in _MOCAP_NS:
        return parts[1]
    if len(parts) >= 2 and parts[0] not in _DRIVER_NS:
        return parts[0]
    if len(parts) >= 2:
        return "uav"
    return parts[0] if parts else "uav"


def _frame_vehicle(frame: str) -> str:
    """tf child frame `uav1/base_link` or `/uav1` -> `uav1`."""
    parts = [p for p in frame.split("/") if p]
    if not parts:
        return frame
    if len(parts) >= 2 and re.fullmatch(r"base_link|base_footprint|body|fcu|imu", parts[-1]):
        return parts[-2]
    return parts[0] if len(parts) >= 2 else parts[0]


def _parse_topic_args(topics: list[str] | None) -> dict[str, str | None]:
    """`--topics /a/pose /b/pose=uav2` -> {topic: explicit vehicle name or None}."""
    out: dict[str, str | None] = {}
    for item in topics or []:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            topic, _, name = part.partition("=")
            out[topic if topic.startswith("/") else "/" + topic] = name or None
    return out


def read_bag(path: str | Path, topics: list[str] | None = None, names: list[str] | None = None) -> SwarmTrajectory:
    """Read one bag into a SwarmTrajectory; `topics` restricts (and may name: `/t=uav1`), `names` are
    the mission's vehicles (PoseArray order, and the subset/renaming applied at the end)."""
    path = Path(path)
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import Stores, get_typestore
    except ImportError as exc:  # pragma: no cover - rosbags is a hard dependency
        raise InputError(f"{path}: reading bags needs the 'rosbags' package ({exc})") from None
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    is_ros1 = path.suffix.lower() == ".bag" and path.is_file()
    store = get_typestore(Stores.ROS1_NOETIC if is_ros1 else Stores.ROS2_JAZZY)
    wanted = _parse_topic_args(topics)
    cols = _Columns()
    notes: list[str] = []
    try:
        with AnyReader([path], default_typestore=store) as reader:
            types = {c.topic: c.msgtype for c in reader.connections}
            selected = _select_topics(path, types, wanted)
            companions = _companions(selected, types)
            if types.get(TF_STATIC) == TF and TF_STATIC not in selected:
                companions[TF_STATIC] = TF_STATIC
            raws = _mcap_raws(reader, {**selected, **dict.fromkeys(companions)}, types)
            if raws is None:
                raws = _library_raws(reader, {**selected, **dict.fromkeys(companions)})
            for topic in selected:
                if not len(raws[topic]):
                    notes.append(f"topic {topic} has no messages")
                    continue
                _decode_topic(reader, topic, types[topic], selected[topic], raws[topic], is_ros1, names, cols, notes)
            _apply_companions(reader, selected, companions, types, raws, cols, notes)
    except InputError:
        raise
    except Exception as exc:  # corrupt or truncated files raise many library-specific types; all mean bad input
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: cannot read bag ({type(exc).__name__}: {reason})") from None
    if not cols.t:
        raise InputError(f"{path}: no pose samples in the selected topics")
    t_all = np.concatenate(cols.t)
    traj = SwarmTrajectory.from_columns(
        t_all, np.concatenate(cols.ids).astype(str), np.concatenate(cols.pos),
        vel=np.concatenate(cols.vel), quat=np.concatenate(cols.quat), est_valid=np.concatenate(cols.valid),
        name=path.name.split(".")[0] or path.name)
    traj.ingest.notes.extend(notes)
    end = float(np.nanmax(t_all)) - traj.t0  # this file's recorder ran until its last message
    for uav, tr in traj.tracks.items():
        meta = cols.meta.get(uav, {})
        tr.source = meta.get("source", str(path))
        tr.receive_time = bool(meta.get("receive_time", False))
        tr.frame = meta.get("frame", "")
        tr.recording_end = end
        if tr.est_valid is not None and tr.est_valid.all():
            tr.est_valid = None
    return apply_names(traj, names, str(path))


def _companions(selected: dict[str, str | None], types: dict[str, str]) -> dict[str, str]:
    """MAVROS topics beside a pose topic of the same namespace: velocity (world or body) and global fix."""
    out = {}
    for topic in selected:
        if "/mavros/" not in topic + "/":
            continue
        ns = topic[:topic.index("/mavros") + len("/mavros")] if "/mavros" in topic else ""
        for suffix, kind in (("/local_position/velocity_local", TWIST), ("/local_position/velocity_body", TWIST),
                             ("/global_position/global", FIX)):
            cand = ns + suffix
            if types.get(cand) == kind:
                out[cand] = topic
    return out


def _apply_companions(reader, selected: dict[str, str | None], companions: dict[str, str], types: dict[str, str],
                      raws: dict, cols: _Columns, notes: list[str]) -> None:
    """Measured velocity replaces derived velocity (local beats body); a global fix places the local frame."""
    for comp, topic in sorted(companions.items(), key=lambda kv: "velocity_body" in kv[0]):
        if comp == TF_STATIC:
            continue
        raw = raws.get(comp)
        if topic not in cols.block_of or raw is None or not len(raw):
            continue
        k, uav = cols.block_of[topic]
        msgs = [reader.deserialize(raw.message(i), types[comp]) for i in range(len(raw))]
        header = np.array([_stamp_ns(m.header.stamp) for m in msgs], dtype=np.int64)
        t, keep = _stamps(notes, comp, header, raw.recv)
        t = t[keep]
        msgs = [m for m, ok in zip(msgs, keep, strict=True) if ok]
        if len(t) < 2:
            continue
        t_pose = cols.t[k]
        if types[comp] == TWIST:
            if cols.meta[uav].get("velocity"):
                continue
            v = np.array([(m.twist.linear.x, m.twist.linear.y, m.twist.linear.z) for m in msgs])
            order = np.argsort(t, kind="stable")
            vel = np.column_stack([np.interp(t_pose, t[order], v[order, c]) for c in range(3)])
            if comp.endswith("velocity_body"):
                vel = rotate_many(cols.quat[k], vel)
            cols.vel[k] = vel
            cols.meta[uav]["velocity"] = comp
            notes.append(f"{uav}: velocity measured by {comp}")
        elif cols.meta[uav].get("frame") == "local":
            fix = np.array([(m.latitude, m.longitude, m.altitude) for m in msgs])
            ok = np.isfinite(fix).all(axis=1) & (np.abs(fix[:, 0]) > 1e-6)
            if ok.any():
                cols.meta[uav]["fix"] = (float(t[ok][0]), fix[ok][0])
    if TF_STATIC in companions and raws.get(TF_STATIC) is not None:
        _place_by_tf_static(reader, raws[TF_STATIC], cols, notes)
    _place_by_fix(cols, notes)


def _place_by_tf_static(reader, raw: _Raw, cols: _Columns, notes: list[str]) -> None:
    """A static transform from a world frame to the frame a vehicle's poses are stamped in places that frame."""
    static: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    for i in range(len(raw)):
        for tr in reader.deserialize(raw.message(i), TF).transforms:
            parent, child = tr.header.frame_id.strip("/"), tr.child_frame_id.strip("/")
            if parent in WORLD_FRAMES and child not in WORLD_FRAMES:
                tv, q = tr.transform.translation, tr.transform.rotation
                static[child] = (np.array([tv.x, tv.y, tv.z]), np.array([q.x, q.y, q.z, q.w]), parent)
    for k, uav in cols.block_of.values():
        frame_id = cols.meta[uav].get("frame_id", "")
        if frame_id not in static:
            continue
        offset, q, parent = static[frame_id]
        rot = np.broadcast_to(q, (len(cols.pos[k]), 4))
        cols.pos[k] = rotate_many(rot, cols.pos[k]) + offset
        if np.isfinite(cols.vel[k]).all():
            cols.vel[k] = rotate_many(rot, cols.vel[k])
        cols.meta[uav]["frame"] = ""
        cols.meta[uav].pop("fix", None)  # placed: a global fix need not place it again
        notes.append(f"{uav}: frame {frame_id} placed in {parent} by /tf_static (offset "
                     f"{', '.join(f'{x:+.2f}' for x in offset)} m)")


def _place_by_fix(cols: _Columns, notes: list[str]) -> None:
    """Put every local frame with a global fix into the first such vehicle's local frame (the world frame)."""
    from uav_debate_eval.io.ulog import geodetic_to_enu

    fixed = [(k, u) for k, u in cols.block_of.values() if "fix" in cols.meta[u]]
    if len(fixed) < 2:
        return
    k0, u0 = fixed[0]
    t0, anchor = cols.meta[u0]["fix"]
    origin = np.array([np.interp(t0, cols.t[k0], cols.pos[k0][:, c]) for c in range(3)])
    for k, u in fixed:
        t_fix, geo = cols.meta[u]["fix"]
        here = geodetic_to_enu(*geo, *anchor) + origin
        local = np.array([np.interp(t_fix, cols.t[k], cols.pos[k][:, c]) for c in range(3)])
        cols.pos[k] = cols.pos[k] + (here - local)
        cols.meta[u]["frame"] = ""
        notes.append(f"{u}: local frame placed in {u0}'s by the global position fixes (offset "
                     f"E{here[0] - local[0]:+.2f} N{here[1] - local[1]:+.2f} U{here[2] - local[2]:+.2f} m)")


def bag_span(path: Path) -> tuple[float, float, list[str]]:
    """The bag's recorded span (receive clock, s) and the vehicles its pose topics name, without reading messages."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    is_ros1 = path.suffix.lower() == ".bag" and path.is_file()
    try:
        with AnyReader([path], default_typestore=get_typestore(Stores.ROS1_NOETIC if is_ros1
                                                                else Stores.ROS2_JAZZY)) as reader:
            types = {c.topic: c.msgtype for c in reader.connections}
            start, end = reader.start_time / 1e9, reader.end_time / 1e9
    except Exception as exc:  # corrupt files raise library-specific types; all mean bad input
        raise InputError(f"{path}: cannot read bag ({type(exc).__name__}: {exc})") from exc
    poses = [t for t, ty in types.items() if ty in (POSE, ODOM, TRANSFORM)]
    return start, end, sorted({vehicle_from_topic(t) for t in poses})


@dataclass
class _Raw:
    """One topic's serialised messages without a Python object per message: message i is
    buf[start[i]:end[i]], received at recv[i] (ns)."""

    recv: np.ndarray
    buf: np.ndarray  # uint8
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def from_list(cls, recv: list[int], data: list[bytes]) -> _Raw:
        lengths = np.array([len(d) for d in data], dtype=np.int64)
        end = np.cumsum(lengths)
        return cls(np.asarray(recv, dtype=np.int64), np.frombuffer(b"".join(data), dtype=np.uint8), end - lengths, end)

    def __len__(self) -> int:
        return len(self.start)

    def message(self, i: int) -> bytes:
        return self.buf[self.start[i]:self.end[i]].tobytes()

    def rows(self, idx: np.ndarray, size: int) -> np.ndarray:
        """Messages idx, all `size` bytes long, as one (len(idx), size) array."""
        return np.lib.stride_tricks.sliding_window_view(self.buf, size)[self.start[idx]]


def _library_raws(reader, selected: dict[str, str | None]) -> dict[str, _Raw]:
    """Every topic's messages through rosbags' generic message iterator."""
    lists: dict[str, tuple[list[int], list[bytes]]] = {t: ([], []) for t in selected}
    for conn, stamp, raw in reader.messages(connections=[c for c in reader.connections if c.topic in selected]):
        lst = lists[conn.topic]
        lst[0].append(stamp)
        lst[1].append(bytes(raw))
    return {t: _Raw.from_list(*lst) for t, lst in lists.items()}


def _mcap_storages(reader) -> list | None:
    """The MCAP storages behind a single bag, or None when rosbags must iterate (other storage, per-message
    compression, a file without chunk index)."""
    from rosbags.rosbag2.reader import DirectoryReader, Reader
    from rosbags.rosbag2.storage_mcap import McapReader

    if len(reader.readers) != 1 or not isinstance(reader.readers[0], Reader):
        return None
    storage = reader.readers[0].storage
    if isinstance(storage, DirectoryReader):
        if storage.metadata.compression_mode == "message":
            return None
        storages = list(storage.storages)
    else:
        storages = [storage]
    if not all(isinstance(st, McapReader) and st.chunks for st in storages):
        return None
    return storages


def _mcap_raws(reader, selected: dict[str, str | None], types: dict[str, str]) -> dict[str, _Raw] | None:
    """What `_library_raws` returns, read chunk by chunk from MCAP storages (None: not applicable).

    Per topic the messages come in rosbags' order: storage files in turn, each by (log time, chunk, position).
    """
    storages = _mcap_storages(reader)
    if storages is None:
        return None
    topics = list(selected)
    bufs: list[np.ndarray] = []
    parts: list[np.ndarray] = []  # rows (topic, file, log time, chunk, start, end)
    base = 0
    for k, st in enumerate(storages):
        wanted = {c.id: topics.index(c.topic) for c in st.connections
                  if c.topic in selected and c.msgtype == types[c.topic]}
        ids = np.array(sorted(wanted), dtype=np.int64)
        topic_of = np.array([wanted[c] for c in ids.tolist()], dtype=np.int64)
        for chunk in st.chunks:
            if not any(chunk.channel_count.get(cid, 0) for cid in wanted):
                continue
            data = _chunk_data(st.bio, chunk)
            cid, log, start, end = _chunk_messages(st.bio, chunk, data, wanted)
            n = len(cid)
            parts.append(np.column_stack([topic_of[np.searchsorted(ids, cid)], np.full(n, k), log,
                                          np.full(n, chunk.chunk_start_offset), start + base, end + base]))
            bufs.append(np.frombuffer(data, dtype=np.uint8))
            base += len(data)
    rows = np.concatenate(parts) if parts else np.zeros((0, 6), dtype=np.int64)
    rows = rows[np.lexsort((rows[:, 4], rows[:, 3], rows[:, 2], rows[:, 1], rows[:, 0]))]
    bounds = np.searchsorted(rows[:, 0], np.arange(len(topics) + 1))
    buf = np.concatenate(bufs) if bufs else np.zeros(0, dtype=np.uint8)
    return {t: _Raw(rows[a:b, 2].copy(), buf, rows[a:b, 4].copy(), rows[a:b, 5].copy())
            for t, a, b in zip(topics, bounds[:-1], bounds[1:], strict=True)}


def _chunk_data(bio, chunk) -> bytes:
    """One chunk's records, decompressed and checked (size, CRC) by rosbags."""
    from rosbags.rosbag2.storage_mcap import decompress, read_exact

    bio.seek(chunk.chunk_start_offset + 9 + 24)
    crc = struct.unpack("<I", read_exact(bio, 4))[0]
    bio.seek(chunk.chunk_start_offset + 9 + 40 + len(chunk.compression))
    return decompress(read_exact(bio, chunk.compressed_size), chunk.compression, chunk.uncompressed_size, crc)


def _chunk_messages(bio, chunk, data: bytes, wanted: dict[int, int]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(channel id, log time, data start, data end) of the chunk's messages on `wanted` channels that rosbags
    yields (logged within the chunk's time range)."""
    rows = _indexed_messages(bio, chunk, data)
    if rows is None:
        rows = _walk(data, 0, len(data))
    keep = np.isin(rows[:, 0], list(wanted)) & (rows[:, 1] >= chunk.message_start_time)
    keep &= rows[:, 1] <= chunk.message_end_time
    return rows[keep, 0], rows[keep, 1], rows[keep, 2], rows[keep, 3]


def _indexed_messages(bio, chunk, data: bytes) -> np.ndarray | None:
    """The chunk's messages from its message indexes, as strict as walking the records: every entry must
    point at a message record of its channel and log time, and the indexed records plus the other records
    between them (walked) must tile the chunk. None when they do not (the caller walks the chunk)."""
    from rosbags.rosbag2.storage_mcap import read_exact

    if not chunk.message_index_offsets:
        return None
    buf = np.frombuffer(data, dtype=np.uint8)
    parts = []
    for cid, offset in chunk.message_index_offsets.items():
        bio.seek(offset)
        op, length, rec_cid, nbytes = struct.unpack("<BQHI", read_exact(bio, 15))
        if op != 0x07 or rec_cid != cid or nbytes % 16 or length != 6 + nbytes:
            return None
        index = np.frombuffer(read_exact(bio, nbytes), dtype="<u8").reshape(-1, 2).astype(np.int64)
        pos = index[:, 1]
        if len(pos) and (pos.min() < 0 or pos.max() + 31 > len(data)):
            return None
        head = np.lib.stride_tricks.sliding_window_view(buf, 31)[pos]
        size = head[:, 1:9].copy().view("<u8").ravel().astype(np.int64)
        ok = (head[:, 0] == 0x05) & (size >= 22) & (head[:, 9:11].copy().view("<u2").ravel() == cid)
        if not (ok & (head[:, 15:23].copy().view("<u8").ravel().astype(np.int64) == index[:, 0])).all():
            return None
        parts.append(np.column_stack([np.full(len(pos), cid), index[:, 0], pos + 31, pos + 9 + size]))
    rows = np.concatenate(parts)
    rows = rows[np.argsort(rows[:, 2], kind="stable")]
    gap_start, gap_end = np.concatenate([[0], rows[:, 3]]), np.concatenate([rows[:, 2] - 31, [len(data)]])
    if (gap_end < gap_start).any():
        return None  # overlapping records
    gaps = gap_end > gap_start
    for a, b in zip(gap_start[gaps].tolist(), gap_end[gaps].tolist(), strict=True):
        try:
            if len(_walk(data, a, b)):
                return None  # a message the index does not list
        except ValueError:
            return None  # records that do not tile: walking the whole chunk decides
    return rows


_RECORD = struct.Struct("<BQ")  # opcode, content length
_MESSAGE = struct.Struct("<HIQ")  # channel id, sequence, log time (then publish time, data)


def _walk(data: bytes, pos: int, end: int) -> np.ndarray:
    """(channel id, log time, data start, data end) of the message records in data[pos:end], record by record;
    raises on a record that does not fit."""
    rows: list[tuple[int, int, int, int]] = []
    while pos < end:
        if pos + 9 > end:
            raise ValueError(f"truncated record at chunk offset {pos}")
        op, length = _RECORD.unpack_from(data, pos)
        stop = pos + 9 + length
        if stop > end:
            raise ValueError(f"truncated record at chunk offset {pos}")
        if op == 0x05:
            if length < 22:
                raise ValueError(f"invalid message record length {length}")
            cid, _, log = _MESSAGE.unpack_from(data, pos + 9)
            rows.append((cid, log, pos + 31, stop))
        pos = stop
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def _select_topics(path: Path, types: dict[str, str], wanted: dict[str, str | None]) -> dict[str, str | None]:
    """Topics to read, each with its explicit vehicle name (None: from namespace / frame)."""
    if wanted:
        missing = [t for t in wanted if t not in types]
        if missing:
            raise InputError(f"{path}: topic(s) not in bag: {', '.join(missing)} (has: {', '.join(sorted(types))})")
        bad = [f"{t} ({types[t]})" for t in wanted if types[t] not in SUPPORTED]
        if bad:
            raise InputError(f"{path}: unsupported pose topic type: {', '.join(bad)}; expected one of "
                             f"{', '.join(SUPPORTED)}")
        return dict(wanted)
    found = {t: ty for t, ty in types.items() if ty in SUPPORTED}
    if not found:
        listed = ", ".join(f"{t} ({ty})" for t, ty in sorted(types.items())[:8]) or "none"
        raise InputError(f"{path}: no pose topic (PoseStamped, Odometry, PoseArray or TFMessage); topics: {listed}")
    direct = {t: ty for t, ty in found.items() if ty in (POSE, ODOM)}
    if direct:
        # One topic per vehicle: PoseStamped before Odometry, then the shortest name.
        best: dict[str, str] = {}
        for t in sorted(direct, key=lambda t: (SUPPORTED.index(direct[t]), len(t), t)):
            best.setdefault(vehicle_from_topic(t), t)
        return {t: None for t in sorted(best.values())}
    arrays = sorted(t for t, ty in found.items() if ty == POSE_ARRAY)
    if arrays:
        return {arrays[0]: None}
    return {t: None for t in sorted(found)}


def _stamps(path_note: list[str], topic: str, header_ns: np.ndarray,
            recv_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seconds from header stamps, or receive time when they are unset; returns (t, keep mask)."""
    zero = header_ns == 0
    keep = np.ones(len(header_ns), dtype=bool)
    if zero.all():
        path_note.append(f"{topic}: header stamps are zero; used the bag receive time")
        return recv_ns / 1e9, keep
    t = header_ns / 1e9
    if zero.any() and np.median(t[~zero]) > _EPOCH_S:
        keep = ~zero
        path_note.append(f"{topic}: {int(zero.sum())} message(s) with a zero header stamp dropped")
    return t, keep


def _decode_topic(reader, topic: str, msgtype: str, explicit: str | None, raw: _Raw, is_ros1: bool,
                  names: list[str] | None, cols: _Columns, notes: list[str]) -> None:
    if msgtype in (POSE, ODOM):
        uav = explicit or vehicle_from_topic(topic)
        arr = _fast_decode(reader, raw, msgtype, is_ros1)
        if arr is None:
            arr = _slow_decode(reader, raw, msgtype)
        header_ns, pos, quat, vel, std = arr
        t, keep = _stamps(notes, topic, header_ns, raw.recv)
        valid = None if std is None else ~(std > MAX_POSITION_STD_M)
        frame = "local" if "/local_position/" in topic else ""
        cols.add(t[keep], uav, pos[keep], quat[keep], None if vel is None else vel[keep],
                 None if valid is None else valid[keep], source=topic, receive_time=bool((header_ns == 0).all()),
                 frame=frame)
        if uav in cols.meta:
            cols.meta[uav]["frame_id"] = reader.deserialize(raw.message(0), msgtype).header.frame_id.strip("/")
    elif msgtype == TRANSFORM:
        _decode_transform(reader, topic, explicit, raw, cols, notes)
    elif msgtype == POSE_ARRAY:
        _decode_pose_array(reader, topic, raw, names, cols, notes)
    elif msgtype == TF:
        _decode_tf(reader, topic, raw, cols, notes)


def _decode_transform(reader, topic: str, explicit: str | None, raw: _Raw, cols: _Columns, notes: list[str]) -> None:
    """geometry_msgs/TransformStamped (vicon_bridge, motion_capture_tracking): one body per topic."""
    msgs = [reader.deserialize(raw.message(i), TRANSFORM) for i in range(len(raw))]
    header = np.array([_stamp_ns(m.header.stamp) for m in msgs], dtype=np.int64)
    t, keep = _stamps(notes, topic, header, raw.recv)
    pos = np.array([(m.transform.translation.x, m.transform.translation.y, m.transform.translation.z) for m in msgs])
    quat = np.array([(m.transform.rotation.x, m.transform.rotation.y, m.transform.rotation.z, m.transform.rotation.w)
                     for m in msgs])
    uav = explicit or vehicle_from_topic(topic)
    if uav in ("uav", topic.strip("/")) and msgs and msgs[0].child_frame_id.strip("/"):
        uav = _frame_vehicle(msgs[0].child_frame_id)
    cols.add(t[keep], uav, pos[keep], quat[keep], source=topic, receive_time=bool((header == 0).all()))


def _slow_decode(reader, raw: _Raw, msgtype: str):
    n = len(raw)
    header_ns = np.empty(n, dtype=np.int64)
    pos = np.empty((n, 3))
    quat = np.empty((n, 4))
    vel = np.empty((n, 3)) if msgtype == ODOM else None
    std = np.empty(n) if msgtype == ODOM else None
    for i in range(n):
        m = reader.deserialize(raw.message(i), msgtype)
        header_ns[i] = _stamp_ns(m.header.stamp)
        p = m.pose.pose if msgtype == ODOM else m.pose
        pos[i] = (p.position.x, p.position.y, p.position.z)
        quat[i] = (p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w)
        if vel is not None:
            v = m.twist.twist.linear
            vel[i] = (v.x, v.y, v.z)
            assert std is not None  # Odometry: both are set
            std[i] = _position_std(np.asarray(m.pose.covariance, dtype=float)[None, :])[0]
    if vel is not None:
        vel = _twist_to_world(reader.deserialize(raw.message(0), msgtype), quat, vel)
    return header_ns, pos, quat, vel, std


def _position_std(cov: np.ndarray) -> np.ndarray:
    """Horizontal-or-vertical position standard deviation (m) from row-major 6x6 covariances (n, 36);
    negative or non-finite variances (\"unknown\") count as enormous."""
    var = cov[:, [0, 7, 14]]
    var = np.where(np.isfinite(var) & (var >= 0), var, np.inf)
    return np.sqrt(var.max(axis=1))


def _stamp_ns(stamp) -> int:
    nsec = getattr(stamp, "nanosec", None)
    return int(stamp.sec) * 1_000_000_000 + int(nsec if nsec is not None else stamp.nsec)


def _twist_to_world(first_msg, quat: np.ndarray, vel: np.ndarray) -> np.ndarray:
    """The topic's twists in the world frame (core.frames: the one REP 105 rule, also used live)."""
    if not twist_is_in_body_frame(first_msg.child_frame_id, first_msg.header.frame_id):
        return vel
    return rotate_many(quat, vel)


def _fast_decode(reader, raw: _Raw, msgtype: str, is_ros1: bool):
    """Decode a topic with numpy, one group per serialised length (a frame id of another length shifts the
    layout); None when a group does not fit the fixed layout, so the library decodes the topic."""
    n = len(raw)
    header_ns = np.empty(n, dtype=np.int64)
    pose = np.empty((n, 7))
    vel = np.empty((n, 3)) if msgtype == ODOM else None
    std = np.empty(n) if msgtype == ODOM else None
    sizes = raw.end - raw.start
    for size in np.unique(sizes):
        idx = np.flatnonzero(sizes == size)
        group = _decode_group(reader, raw, idx, int(size), msgtype, is_ros1)
        if group is None:
            return None
        header_ns[idx], pose[idx] = group[0], group[1]
        if vel is not None:
            vel[idx] = group[2]
            assert std is not None  # Odometry: both are set
            std[idx] = group[3]
    pos, quat = pose[:, :3], pose[:, 3:7]
    if vel is not None:
        vel = _twist_to_world(reader.deserialize(raw.message(0), msgtype), quat, vel)
    return header_ns, pos, quat, vel, std


def _decode_group(reader, raw: _Raw, idx: np.ndarray, size: int, msgtype: str, is_ros1: bool):
    """(header ns, pose xyz+xyzw, twist linear or None) of messages idx, all `size` bytes long."""
    first = raw.message(int(idx[0]))
    try:
        layout = _layout_ros1(first, msgtype) if is_ros1 else _layout_cdr(first, msgtype)
    except (struct.error, IndexError):
        return None
    if layout is None:
        return None
    sec_off, sec_dtype, pose_off, twist_off, frame_bytes = layout
    if pose_off + 56 > size or (twist_off is not None and twist_off + 24 > size):
        return None
    buf = raw.rows(idx, size)
    if not (buf[:, frame_bytes[0]:frame_bytes[1]] == buf[0, frame_bytes[0]:frame_bytes[1]]).all():
        return None  # frame ids differ in content at equal length: still fine for poses, but be strict
    sec = buf[:, sec_off:sec_off + 4].copy().view(sec_dtype).ravel().astype(np.int64)
    nsec = buf[:, sec_off + 4:sec_off + 8].copy().view("<u4").ravel().astype(np.int64)
    pose = buf[:, pose_off:pose_off + 56].copy().view("<f8").reshape(-1, 7)
    vel = None if twist_off is None else buf[:, twist_off:twist_off + 24].copy().view("<f8").reshape(-1, 3)
    std = None if twist_off is None else _position_std(
        buf[:, pose_off + 56:pose_off + 56 + 288].copy().view("<f8").reshape(-1, 36))
    header_ns = sec * 1_000_000_000 + nsec
    # Cross-check the group's first and last message against the library's decoder.
    for i in (0, len(idx) - 1):
        m = reader.deserialize(raw.message(int(idx[i])), msgtype)
        p = m.pose.pose if msgtype == ODOM else m.pose
        ref = (_stamp_ns(m.header.stamp), p.position.x, p.position.y, p.position.z, p.orientation.w)
        got = (int(header_ns[i]), pose[i, 0], pose[i, 1], pose[i, 2], pose[i, 6])
        if ref[0] != got[0] or not np.allclose(ref[1:], got[1:], equal_nan=True):
            return None
        if vel is not None and not np.allclose(vel[i], (m.twist.twist.linear.x, m.twist.twist.linear.y,
                                                        m.twist.twist.linear.z), equal_nan=True):
            return None
    return header_ns, pose, vel, std


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _layout_cdr(raw: bytes, msgtype: str):
    """Byte offsets in a little-endian CDR message (4-byte encapsulation header, alignment from byte 4)."""
    if raw[:2] != b"\x00\x01":
        return None  # big-endian or XCDR2: let the library decode it
    base = 4
    flen = struct.unpack_from("<I", raw, base + 8)[0]
    p = 12 + flen
    frame = (base + 8, base + 12 + flen)
    twist = None
    if msgtype == ODOM:
        p = _align(p, 4)
        clen = struct.unpack_from("<I", raw, base + p)[0]
        p = _align(p + 4 + clen, 8)
        twist = base + p + (7 + 36) * 8
    else:
        p = _align(p, 8)
    return base, "<i4", base + p, twist, frame


def _layout_ros1(raw: bytes, msgtype: str):
    """Byte offsets in a ROS 1 message (packed, little-endian; header = seq, stamp, frame_id)."""
    flen = struct.unpack_from("<I", raw, 12)[0]
    p = 16 + flen
    frame = (12, 16 + flen)
    twist = None
    if msgtype == ODOM:
        clen = struct.unpack_from("<I", raw, p)[0]
        p += 4 + clen
        twist = p + (7 + 36) * 8
    return 4, "<u4", p, twist, frame


def _decode_pose_array(reader, topic: str, raw: _Raw, names: list[str] | None, cols: _Columns,
                       notes: list[str]) -> None:
    t_list, id_list, pos_list, quat_list, header = [], [], [], [], []
    width = 0
    for i in range(len(raw)):
        m = reader.deserialize(raw.message(i), POSE_ARRAY)
        header.append(_stamp_ns(m.header.stamp))
        width = max(width, len(m.poses))
        for k, p in enumerate(m.poses):
            t_list.append(i)
            id_list.append(names[k] if names and k < len(names) else f"uav{k + 1}")
            pos_list.append((p.position.x, p.position.y, p.position.z))
            quat_list.append((p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w))
    if not t_list:
        notes.append(f"{topic}: PoseArray messages hold no poses")
        return
    t, keep = _stamps(notes, topic, np.asarray(header, dtype=np.int64), raw.recv)
    idx = np.asarray(t_list)
    mask = keep[idx]
    how = "named by the mission's uavs" if names and len(names) >= width else "named uav1..uavN by index"
    notes.append(f"{topic}: PoseArray of up to {width} vehicle(s), {how}")
    cols.add(t[idx][mask], np.asarray(id_list, dtype=object)[mask], np.asarray(pos_list)[mask],
             np.asarray(quat_list)[mask])


def _decode_tf(reader, topic: str, raw: _Raw, cols: _Columns, notes: list[str]) -> None:
    rows: list[tuple] = []
    for i in range(len(raw)):
        m = reader.deserialize(raw.message(i), TF)
        for tr in m.transforms:
            parent = tr.header.frame_id.strip("/")
            if parent not in WORLD_FRAMES:
                continue
            ns = _stamp_ns(tr.header.stamp)
            tv, q = tr.transform.translation, tr.transform.rotation
            rows.append((ns if ns else None, int(raw.recv[i]), _frame_vehicle(tr.child_frame_id),
                         tv.x, tv.y, tv.z, q.x, q.y, q.z, q.w))
    if not rows:
        notes.append(f"{topic}: no transform from a world frame ({', '.join(sorted(WORLD_FRAMES))})")
        return
    header = np.asarray([r[0] or 0 for r in rows], dtype=np.int64)
    t, keep = _stamps(notes, topic, header, np.asarray([r[1] for r in rows], dtype=np.int64))
    vals = np.asarray([r[3:] for r in rows], dtype=float)
    ids = np.asarray([r[2] for r in rows], dtype=object)
    notes.append(f"{topic}: vehicles from tf child frames: {', '.join(sorted(set(ids.tolist())))}")
    cols.add(t[keep], ids[keep], vals[keep, :3], vals[keep, 3:])
