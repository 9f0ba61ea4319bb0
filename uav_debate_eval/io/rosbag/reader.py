"""The reader facade: one bag (rosbag2 folder, .mcap, .db3, ROS 1 .bag) -> a SwarmTrajectory, with `rosbags`
(no ROS install).

Steps, each in its own module: pick the topics and their companions (topics), fetch their serialised messages
(raw_messages), decode each message family (stamped, transforms, pose_array), pair MAVROS velocity and fixes and
place frames (mavros, transforms), then the mission's vehicle names (io.names).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from uav_debate_eval.core.arming import LANDING_WORDS, state_events
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io import px4
from uav_debate_eval.io.names import apply_names
from uav_debate_eval.io.rosbag import mavros, raw_messages
from uav_debate_eval.io.rosbag.columns import Columns
from uav_debate_eval.io.rosbag.fix import decode_fix
from uav_debate_eval.io.rosbag.point import decode_point
from uav_debate_eval.io.rosbag.pose_array import decode_pose_array
from uav_debate_eval.io.rosbag.px4 import px4_sources, read_px4
from uav_debate_eval.io.rosbag.recover import whole_part
from uav_debate_eval.io.rosbag.stamped import decode_stamped
from uav_debate_eval.io.rosbag.topics import (
    FIX,
    ODOM,
    POINT,
    POSE,
    POSE_ARRAY,
    POSE_COV,
    SUPPORTED,
    TF,
    TF_STATIC,
    TRANSFORM,
    companions,
    parse_topic_args,
    pose_vehicles,
    same_type,
    select_topics,
    vehicle_from_topic,
)
from uav_debate_eval.io.rosbag.transforms import decode_tf, decode_transform, place_by_tf_static

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader

    from uav_debate_eval.io.rosbag.raw_messages import Raw


def read_bag(path: str | Path, topics: list[str] | None = None, names: list[str] | None = None) -> SwarmTrajectory:
    """Read one bag into a SwarmTrajectory; `topics` restricts (and may name: `/t=uav1`), `names` are
    the mission's vehicles (PoseArray order, and the subset/renaming applied at the end)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    notes: list[str] = []
    if path.is_dir() and not (path / "metadata.yaml").exists() and len(files := list(path.glob("*.mcap"))) == 1:
        notes.append(f"{path.name}: a rosbag2 folder without metadata.yaml (its recorder did not close it): read its "
                     f"storage file {files[0].name}")
        path = files[0]
    with whole_part(path) as (source, cut):
        return _read(source, path, topics, names, [*notes, *cut])


def _read(source: Path, path: Path, topics: list[str] | None, names: list[str] | None,
          notes: list[str]) -> SwarmTrajectory:
    """read_bag of the file `source` (the bag itself, or its recovered copy), named `path` in what it says."""
    is_ros1 = _is_ros1(path)
    wanted = parse_topic_args(topics)
    cols = Columns()
    try:
        with _open(source, is_ros1) as reader:
            types = {c.topic: same_type(c.msgtype) for c in reader.connections}
            px4_topics = px4_sources(types, wanted)
            if px4_topics and (all(t in px4.POSE_TYPES for t in map(types.get, wanted)) if wanted
                               else not any(ty in SUPPORTED for ty in types.values())):
                return apply_names(read_px4(reader, path, px4_topics, types), names, str(path))
            selected = select_topics(path, types, wanted, notes)
            extra = companions(selected, types)
            raws = raw_messages.read_raws(reader, [*selected, *extra], types, notes)
            for topic in selected:
                if not len(raws[topic]):
                    notes.append(f"topic {topic} has no messages")
                    continue
                _decode_topic(reader, topic, types[topic], selected[topic], raws[topic], is_ros1, names, cols, notes)
            if not wanted:
                _without_a_pose(path, cols, types, notes)
            mavros.apply_companions(reader, extra, types, raws, cols, notes)
            if TF_STATIC in extra:
                place_by_tf_static(reader, raws[TF_STATIC], cols, notes)
            mavros.place_by_fix(cols, notes)
    except InputError:
        raise
    except Exception as exc:  # corrupt or truncated files raise many library-specific types; all mean bad input
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: cannot read bag ({type(exc).__name__}: {reason})") from None
    return apply_names(_trajectory(path, cols, notes), names, str(path))


def bag_span(path: Path) -> tuple[float, float, list[str]]:
    """The bag's recorded span (receive clock, s) and the vehicles its pose topics name, without reading messages."""
    try:
        with _open(path, _is_ros1(path)) as reader:
            types = {c.topic: same_type(c.msgtype) for c in reader.connections}
            start, end = reader.start_time / 1e9, reader.end_time / 1e9
    except Exception as exc:  # corrupt files raise library-specific types; all mean bad input
        raise InputError(f"{path}: cannot read bag ({type(exc).__name__}: {exc})") from exc
    return start, end, pose_vehicles(types)


def _is_ros1(path: Path) -> bool:
    return path.is_file() and path.name.lower().endswith((".bag", ".bag.active"))


def _open(path: Path, is_ros1: bool) -> AnyReader:
    """rosbags' reader with the type store of the bag's ROS version (messages without embedded definitions)."""
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import Stores, get_typestore
    except ImportError as exc:  # pragma: no cover - rosbags is a hard dependency
        raise InputError(f"{path}: reading bags needs the 'rosbags' package ({exc})") from None
    store = get_typestore(Stores.ROS1_NOETIC if is_ros1 else Stores.ROS2_JAZZY)
    if not is_ros1:  # a bag before Iron holds no definitions: MAVROS's states decode with the shipped ones
        store.register(mavros.shipped_types())
    return AnyReader([path], default_typestore=store)


def _decode_topic(reader: AnyReader, topic: str, msgtype: str, explicit: str | None, raw: Raw, is_ros1: bool,
                  names: list[str] | None, cols: Columns, notes: list[str]) -> None:
    if msgtype in (POSE, ODOM, POSE_COV):
        decode_stamped(reader, topic, msgtype, explicit, raw, is_ros1, cols, notes)
    elif msgtype == TRANSFORM:
        decode_transform(reader, topic, explicit, raw, cols, notes)
    elif msgtype == POSE_ARRAY:
        decode_pose_array(reader, topic, raw, names, cols, notes)
    elif msgtype == TF:
        decode_tf(reader, topic, raw, cols, notes)
    elif msgtype == FIX:
        decode_fix(reader, topic, explicit, raw, cols, notes)
    elif msgtype == POINT:
        decode_point(reader, topic, explicit, raw, cols, notes)


def _without_a_pose(path: Path, cols: Columns, types: dict[str, str], notes: list[str]) -> None:
    """A topic chosen for its vehicle whose poses are all NaN (a driver's odometry before its first fix) is
    named with the vehicle's other pose topics: which one is the vehicle is the user's call (`--topics`)."""
    empty = []
    for topic, (block, uav) in cols.block_of.items():
        if np.isfinite(cols.pos[block]).all(axis=1).any():
            continue
        others = [f"{t} ({types[t].rsplit('/', 1)[-1]})" for t in sorted(types)
                  if t != topic and types[t] in (POSE, ODOM, POSE_COV) and vehicle_from_topic(t) == uav]
        empty.append(f"{topic}, chosen for {uav}, holds no finite pose ({len(cols.t[block])} message(s))"
                     + (f"; its other pose topics: {', '.join(others)}: name one with --topics" if others else ""))
    if empty and all(not np.isfinite(p).all(axis=1).any() for p in cols.pos):
        raise InputError(f"{path}: {'; '.join(empty)}")
    notes.extend(empty)


def _trajectory(path: Path, cols: Columns, notes: list[str]) -> SwarmTrajectory:
    """The decoded samples as one trajectory; each track says where its poses came from."""
    if not cols.t:
        why = [n for n in notes if "no transform from a world frame" in n or n.endswith("has no messages")]
        raise InputError(f"{path}: no pose samples in the selected topics" + (f" ({'; '.join(why)})" if why else ""))
    t_all = np.concatenate(cols.t)
    traj = SwarmTrajectory.from_columns(
        t_all, np.concatenate(cols.ids).astype(str), np.concatenate(cols.pos),
        vel=np.concatenate(cols.vel), quat=np.concatenate(cols.quat), est_valid=np.concatenate(cols.valid),
        name=path.name.split(".")[0] or path.name)
    traj.ingest.notes.extend(notes)
    end = float(np.nanmax(t_all)) - traj.t0  # this file's recorder ran until its last message
    for uav, tr in traj.tracks.items():
        meta = cols.meta.get(uav)
        tr.source = meta.source if meta is not None else str(path)
        tr.receive_time = meta.receive_time if meta is not None else False
        tr.frame = meta.frame if meta is not None else ""
        tr.recording_end = end
        tr.drop_redundant_validity()
        if meta is not None:
            state_events(traj.ingest.log_events, uav, meta.arming, traj.t0, "mavros/state")
            state_events(traj.ingest.log_events, uav, meta.landing, traj.t0, "mavros/extended_state", LANDING_WORDS)
    return traj
