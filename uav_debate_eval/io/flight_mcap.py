"""The raw poses inside the annotated flight MCAP (`evaluate --mcap-out`, `live`'s OUT/flight/flight.mcap).

Beside the Foxglove channels the file carries every sample as it was evaluated: one topic per vehicle,
`/<uav>/pose` (geometry_msgs/PoseStamped) or `/<uav>/odom` (nav_msgs/Odometry when the source measured the
velocity), CDR-encoded as a ROS 2 recorder would, stamps in the input clock. Such a file is not a rosbag2 (its
profile is Foxglove's, with JSON and protobuf channels rosbags cannot read), so `read_flight_mcap` reads it back
with the `mcap` library: `evaluate flight.mcap` re-evaluates exactly the samples the report came from. The
autopilot's own events of the flight (arming, modes, errors: what the log or the live session's vehicle_status and
MAVROS state said) go on `/autopilot_events` as JSON, one event a message, times in the input clock, and come
back with the samples (two parked vehicles stay parked in the replay). So does each vehicle's frame where it is not
the world frame (`/vehicle_frames`: MAVROS's local frames, a frame the live input placed already), and what an
autopilot log gives beside its positions (`/autopilot_log`, one JSON message: the limit parameters, the vehicle
class, the attitude and its targets, the GPS fixes, the estimator's invalid spans, where each log ended, and the
findings its reader made), so the replay of a log's flight MCAP checks what the log's own evaluation checked.

Messages of the one layout this module writes (frame "map") are encoded and decoded a whole array at a time;
any other layout of those types goes through rosbags' CDR decoder.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.records import Event
from uav_debate_eval.core.stamps import stamp_ns, stamp_s
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.flight_mcap_autopilot import plain_json, put_autopilot

if TYPE_CHECKING:
    from uav_debate_eval.io.rosbag.raw_messages import Raw

POSE = "geometry_msgs/msg/PoseStamped"
ODOM = "nav_msgs/msg/Odometry"
TOPICS = {POSE: "/{uav}/pose", ODOM: "/{uav}/odom"}
#: The autopilot's events of the flight (JSON, an event a message: EVENT_SCHEMA).
EVENTS_TOPIC = "/autopilot_events"
EVENT_SCHEMA = {"title": "autopilot_event", "type": "object", "required": ["type", "t", "uavs"], "properties": {
    "type": {"type": "string"}, "t": {"type": "number", "description": "input clock, s"},
    "t_end": {"type": ["number", "null"]}, "uavs": {"type": "array", "items": {"type": "string"}},
    "value": {"type": ["number", "null"]}, "unit": {"type": ["string", "null"]}, "extra": {"type": "object"}}}
#: Each vehicle's frame where it is not the world frame (Track.frame), one JSON message {"frames": {uav: frame}}.
FRAMES_TOPIC = "/vehicle_frames"
FRAMES_SCHEMA = {"title": "vehicle_frames", "type": "object", "required": ["frames"],
                 "properties": {"frames": {"type": "object", "additionalProperties": {"type": "string"}}}}
#: What an autopilot log gives beside its positions and events (one JSON message; flight times since `t0`).
AUTOPILOT_TOPIC = "/autopilot_log"
AUTOPILOT_SCHEMA = {"title": "autopilot_log", "type": "object", "required": ["t0"], "properties": {
    "t0": {"type": "number", "description": "the flight's origin (input clock, s): every time here is since it"},
    "params": {"type": "object"}, "autopilot": {"type": "object"}, "attitude": {"type": "object"},
    "gnss": {"type": "object"}, "tracks": {"type": "object"}, "findings": {"type": "array"},
    "not_evaluable": {"type": "array"}}}
#: The mission the flight was evaluated against (one JSON message: the mission file's text and where it was read), so
#: `evaluate flight.mcap` without --mission checks what the flight was checked against.
MISSION_TOPIC = "/mission"
MISSION_SCHEMA = {"title": "mission", "type": "object", "required": ["yaml"], "properties": {
    "yaml": {"type": "string", "description": "the mission file's text"},
    "source": {"type": "string", "description": "the file it was read from"}}}
#: What comes back beside the raw poses (JSON).
_SIDE_TOPICS = (EVENTS_TOPIC, FRAMES_TOPIC, AUTOPILOT_TOPIC)
#: The flight MCAP's Foxglove channels (viz.scene.TOPICS) all start so.
FOXGLOVE_PREFIX = "/swarm/"
FRAME_ID, CHILD_FRAME_ID = b"map\0", b"base_link\0"
_CDR_LE = b"\x00\x01\x00\x00"
_HEADER = [("enc", "S4"), ("sec", "<i4"), ("nanosec", "<u4"), ("frame_len", "<u4"), ("frame", "S4")]
#: CDR (little endian) of the two messages with frame "map" (and child frame "base_link"), byte for byte.
LAYOUTS = {
    POSE: np.dtype([*_HEADER, ("pos", "<f8", (3,)), ("quat", "<f8", (4,))]),
    ODOM: np.dtype([*_HEADER, ("child_len", "<u4"), ("child", "S10"), ("pad", "S2"), ("pos", "<f8", (3,)),
                    ("quat", "<f8", (4,)), ("pose_cov", "<f8", (36,)), ("vel", "<f8", (3,)), ("ang", "<f8", (3,)),
                    ("twist_cov", "<f8", (36,))]),
}


def poses_trajectory(ns: np.ndarray, uav: np.ndarray, pos: np.ndarray, vel: np.ndarray | None,
                     name: str, validity: tuple[np.ndarray, np.ndarray] | None = None) -> SwarmTrajectory:
    """The trajectory of raw samples (stamps in ns, velocity NaN where not measured; `validity`: the estimator's
    (position, altitude) flags): the one way both the live flight and its replay from the MCAP become a trajectory,
    so both are the same to the last bit."""
    valid, altitude = validity if validity is not None else (None, None)
    return SwarmTrajectory.from_columns(stamp_s(ns), uav, pos, vel=vel, est_valid=valid, est_z_valid=altitude,
                                        name=name)


def encode(msgtype: str, ns: np.ndarray, pos: np.ndarray, vel: np.ndarray | None = None) -> np.ndarray:
    """One CDR message per row (a structured array: `.tobytes()` of a row is the message)."""
    rows = np.zeros(len(ns), dtype=LAYOUTS[msgtype])
    rows["enc"], rows["sec"], rows["nanosec"] = _CDR_LE, ns // 1_000_000_000, ns % 1_000_000_000
    rows["frame_len"], rows["frame"] = len(FRAME_ID), FRAME_ID
    rows["pos"], rows["quat"][:, 3] = pos, 1.0
    if msgtype == ODOM:
        rows["child_len"], rows["child"] = len(CHILD_FRAME_ID), CHILD_FRAME_ID
        rows["vel"] = vel
    return rows


def messages(traj: SwarmTrajectory) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    """Per vehicle: (topic, message type, stamps in ns, encoded rows) of every sample in the input clock."""
    for u, tr in traj.tracks.items():
        msgtype = POSE if tr.vel_derived else ODOM
        ns = stamp_ns(tr.t + traj.t0)
        yield TOPICS[msgtype].format(uav=u), msgtype, ns, encode(msgtype, ns, tr.pos, tr.vel)


def event_messages(traj: SwarmTrajectory) -> Iterator[tuple[int, bytes]]:
    """(stamp ns, JSON message) of each autopilot event of the flight, times moved into the input clock."""
    for e in traj.ingest.log_events:
        t = e.t + traj.t0
        msg = {"type": e.type, "t": t, "t_end": None if e.t_end is None else e.t_end + traj.t0, "uavs": list(e.uavs),
               "value": e.value, "unit": e.unit, "extra": e.extra}
        yield max(0, int(stamp_ns(np.array([t]))[0])), json.dumps(msg, default=plain_json).encode()


def frames_message(traj: SwarmTrajectory) -> bytes | None:
    """The tracks' own frames (MAVROS `local`, `mission` placed), or None when every track is in the world frame."""
    frames = {u: tr.frame for u, tr in traj.tracks.items() if tr.frame}
    return json.dumps({"frames": frames}).encode() if frames else None


def mission_message(source: str) -> bytes | None:
    """The mission file `source` as the flight MCAP carries it (None: no file, a default mission)."""
    path = Path(source) if source else None
    if path is None or not path.is_file():
        return None
    try:
        return json.dumps({"yaml": path.read_text(encoding="utf-8"), "source": str(path)}).encode()
    except (OSError, UnicodeDecodeError):
        return None


def flight_mission(path: Path) -> tuple[str, str] | None:
    """(mission text, where it was read) carried by a flight MCAP, or None (none carried, or not a flight MCAP)."""
    if not is_flight_mcap(path):
        return None
    from mcap.reader import NonSeekingReader, make_reader

    from uav_debate_eval.io.rosbag.recover import cut_short

    cut = cut_short(path) == ".mcap"  # no footer to seek from: read from the start (the mission is logged first)
    try:
        with path.open("rb") as fh:
            reader = NonSeekingReader(fh) if cut else make_reader(fh)
            for _, channel, message in reader.iter_messages(topics=[MISSION_TOPIC], log_time_order=False):
                if channel.message_encoding == "json":
                    body = json.loads(message.data)
                    return str(body["yaml"]), str(body.get("source", ""))
    except Exception:  # noqa: BLE001  (a damaged file: its reader says why when it is read)
        return None
    return None


def _events(traj: SwarmTrajectory, messages: list[dict]) -> None:
    """The autopilot events read back, times onto the trajectory's origin as the readers put them."""
    def since(t: float) -> float:
        return max(round(t - traj.t0, 6), 0.0)

    for m in messages:
        traj.ingest.log_events.append(Event("", str(m["type"]), since(float(m["t"])), [str(u) for u in m["uavs"]],
                                            None if m.get("t_end") is None else since(float(m["t_end"])),
                                            m.get("value"), m.get("unit"), dict(m.get("extra") or {})))


def schema_text(msgtype: str) -> str:
    """The ros2msg definition (with its dependencies) a Foxglove or ROS 2 reader decodes the messages with."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_JAZZY).generate_msgdef(msgtype, ros_version=2)[0]


def is_flight_mcap(path: Path) -> bool:
    """An MCAP file whose profile is not rosbag2's (Foxglove's annotated flight)."""
    if path.suffix.lower() != ".mcap" or not path.is_file():
        return False
    from mcap.reader import make_reader

    try:
        with path.open("rb") as fh:
            return make_reader(fh).get_header().profile != "ros2"
    except Exception:  # not readable as MCAP at all: the bag reader says why
        return False


def read_flight_mcap(path: str | Path, names: list[str] | None = None) -> SwarmTrajectory:
    """The raw poses of an annotated flight MCAP as a trajectory (InputError when it has none). A file cut short (no
    footer: a copy cut off, a disk full) is read as far as it goes, as a cut bag is (io.rosbag.recover)."""
    from uav_debate_eval.io.rosbag.recover import whole_part

    path = Path(path)
    with whole_part(path) as (source, notes):
        return _read_flight_mcap(source, path, names, notes)


def _read_flight_mcap(source: Path, path: Path, names: list[str] | None, notes: list[str]) -> SwarmTrajectory:
    """read_flight_mcap of the file `source` (the flight MCAP, or its recovered copy), named `path` in what it says."""
    from mcap.reader import make_reader

    from uav_debate_eval.io.names import apply_names
    from uav_debate_eval.io.rosbag import vehicle_from_topic

    events: list[dict] = []
    frames: dict[str, str] = {}
    autopilot: dict = {}
    try:
        with source.open("rb") as fh:
            reader = make_reader(fh)
            summary = reader.get_summary()
            side: list[tuple[str, bytes]] = []  # (topic, JSON) of the side channels, in file order
            if summary is None or not summary.chunk_indexes:  # no index: record by record
                walked, topics = _walk_messages(reader, side)
                samples = {key: _decode(key[1], data) for key, data in walked.items()}
            else:
                schemas = {c.id: summary.schemas[c.schema_id].name if c.schema_id in summary.schemas else ""
                           for c in summary.channels.values()}
                topics = {c.topic: schemas[c.id] or c.message_encoding for c in summary.channels.values()}
                samples = _raw_poses(fh, summary, schemas, notes)
                side = _side_messages(reader, notes)
            for topic, data in side:
                if topic == EVENTS_TOPIC:
                    events.append(json.loads(data))
                elif topic == FRAMES_TOPIC:
                    frames.update(json.loads(data)["frames"])
                else:
                    autopilot = json.loads(data)
    except Exception as exc:  # a truncated or corrupt file
        raise InputError(f"{path}: cannot read MCAP ({type(exc).__name__}: {exc})") from None
    if not samples:  # both ways keep only the channels that hold a sample
        raise InputError(_no_poses(path, topics))
    uav = np.concatenate([np.full(len(got[0]), vehicle_from_topic(topic)) for (topic, _), got in samples.items()])
    ns, pos, vel = (np.concatenate([got[k] for got in samples.values()]) for k in range(3))
    traj = poses_trajectory(ns, uav, pos, vel, path.name.split(".")[0] or path.name)
    _events(traj, events)
    for vehicle, frame in frames.items():
        if vehicle in traj.tracks:
            traj.tracks[vehicle].frame = str(frame)
    put_autopilot(traj, autopilot)
    traj.ingest.notes.extend(notes)
    return apply_names(traj, names, str(path))


def _side_messages(reader: Any, notes: list[str]) -> list[tuple[str, bytes]]:
    """(topic, JSON) of the side channels in file order; a damaged chunk among them loses them, said in `notes`."""
    try:
        return [(channel.topic, message.data) for _, channel, message in reader.iter_messages(
            topics=list(_SIDE_TOPICS), log_time_order=False) if channel.message_encoding == "json"]
    except Exception as exc:  # noqa: BLE001  (the mcap library's many damage errors)
        notes.append(f"the autopilot's events, the vehicles' frames and the autopilot log could not be read "
                     f"({type(exc).__name__}): the replay goes without them")
        return []


def _raw_poses(fh: Any, summary: Any, schemas: dict[int, str], notes: list[str]
               ) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each raw pose channel's samples (stamps ns, positions, velocities), decoded chunk by chunk as the chunks'
    message indexes locate them with numpy. The mcap library's time-ordered merge held the whole file (37 s and
    3.4 GB for 1,024 vehicles x 120 s); keeping the messages until the end held 700 bytes per Odometry sample. A
    damaged chunk costs its own samples, said in `notes`, as in a bag."""
    from uav_debate_eval.io.rosbag.raw_messages import Raw, chunk_messages, lost_note

    channels = [c for c in summary.channels.values() if schemas[c.id] in LAYOUTS and c.message_encoding == "cdr"]
    keys = {c.id: (c.topic, schemas[c.id]) for c in channels}
    chunks = [chunk for chunk in summary.chunk_indexes if keys.keys() & chunk.message_index_offsets.keys()]
    lost: list[tuple[int, int]] = []
    pieces: dict[tuple[str, str], list[tuple[np.ndarray, ...]]] = {key: [] for key in keys.values()}
    wanted = {cid: k for k, cid in enumerate(keys)}  # channel id -> its index among the raw channels
    for _, chunk, data, cid, log, start, end in chunk_messages([(fh, chunks, wanted)], lost):
        buf = np.frombuffer(data, dtype=np.uint8)
        by_channel = np.argsort(cid, kind="stable")
        cid, log, start, end = cid[by_channel], log[by_channel], start[by_channel], end[by_channel]
        bounds = np.flatnonzero(np.diff(cid)) + 1
        for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), len(cid)], strict=True):
            key = keys[int(cid[a])]
            ns, pos, vel = _decode(key[1], Raw(log[a:b], buf, start[a:b], end[a:b]))
            pieces[key].append((log[a:b], np.full(b - a, chunk.chunk_start_offset), start[a:b], ns, pos, vel))
    if lost and not any(pieces.values()):
        raise ValueError(f"every chunk of the raw poses is damaged ({len(lost)})")
    if lost:
        notes.append(lost_note(lost, "the input clock"))
    out = {}
    for key, got in pieces.items():
        if got:  # a channel of no message in any readable chunk holds no sample
            log, offset, start_, ns, pos, vel = (np.concatenate([p[k] for p in got]) for k in range(6))
            order = np.lexsort((start_, offset, log))  # the order of the file's log times, as the bag reader's
            out[key] = (ns[order], pos[order], vel[order])
    return out


def _walk_messages(reader: Any, side: list[tuple[str, bytes]]) -> tuple[dict[tuple[str, str], Raw], dict[str, str]]:
    """The raw pose channels' messages and every channel's kind, record by record (a file without a summary); the
    side channels' JSON messages go to `side`."""
    from uav_debate_eval.io.rosbag.raw_messages import Raw

    lists: dict[tuple[str, str], tuple[list[int], list[bytes]]] = {}
    topics: dict[str, str] = {}
    for schema, channel, message in reader.iter_messages(log_time_order=False):
        topics.setdefault(channel.topic, schema.name if schema is not None else channel.message_encoding)
        if schema is not None and schema.name in LAYOUTS and channel.message_encoding == "cdr":
            got = lists.setdefault((channel.topic, schema.name), ([], []))
            got[0].append(message.log_time)
            got[1].append(message.data)
        elif channel.topic in _SIDE_TOPICS and channel.message_encoding == "json":
            side.append((channel.topic, message.data))
    return {key: Raw.from_list(*got) for key, got in lists.items()}, topics


def _no_poses(path: Path, topics: dict[str, str]) -> str:
    """Why an MCAP that is not a rosbag2 holds nothing to evaluate: an old flight MCAP of this tool (its Foxglove
    channels without the raw poses), or another tool's file (named by what it carries)."""
    if any(topic.startswith(FOXGLOVE_PREFIX) for topic in topics):
        return (f"{path}: no raw pose channel (/<uav>/pose or /<uav>/odom) in this flight MCAP; it was written "
                "before the flight MCAP carried its poses, evaluate the original recording instead")
    listed = ", ".join(f"{topic} ({kind})" for topic, kind in list(topics.items())[:6]) or "no messages"
    more = f" and {len(topics) - 6} more" if len(topics) > 6 else ""
    return (f"{path}: not a rosbag2 MCAP (its profile is not 'ros2') and no PoseStamped or Odometry channel "
            f"({listed}{more}); record ROS 2 topics with `ros2 bag record -s mcap`")


@functools.cache
def _typestore() -> Any:
    """rosbags' ROS 2 types, built once (a file of another writer's layout is decoded a chunk at a time)."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_JAZZY)


def _decode(msgtype: str, data: Raw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stamps ns, positions, velocities NaN for poses) of one topic's messages."""
    layout = LAYOUTS[msgtype]
    if ((data.end - data.start) == layout.itemsize).all():
        rows = data.rows(np.arange(len(data)), layout.itemsize).copy().view(layout).ravel()
        if (rows["frame_len"] == len(FRAME_ID)).all() and (msgtype == POSE or (rows["child_len"] == 10).all()):
            ns = rows["sec"].astype(np.int64) * 1_000_000_000 + rows["nanosec"]
            vel = rows["vel"] if msgtype == ODOM else np.full((len(rows), 3), np.nan)
            return ns, rows["pos"].astype(float), vel.astype(float)  # copies: no view keeps the messages alive
    store = _typestore()
    msgs: list[Any] = [store.deserialize_cdr(data.message(i), msgtype) for i in range(len(data))]
    ns = np.array([m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for m in msgs], dtype=np.int64)
    poses = [m.pose.pose if msgtype == ODOM else m.pose for m in msgs]
    pos = np.array([[p.position.x, p.position.y, p.position.z] for p in poses], dtype=float).reshape(-1, 3)
    vel = (np.array([[m.twist.twist.linear.x, m.twist.twist.linear.y, m.twist.twist.linear.z] for m in msgs],
                    dtype=float).reshape(-1, 3) if msgtype == ODOM else np.full((len(msgs), 3), np.nan))
    return ns, pos, vel
