"""Transforms as poses: TransformStamped topics (vicon_bridge, motion_capture_tracking: one body per topic),
TFMessage topics (every child of a world frame is a vehicle), and /tf_static placing a vehicle's frame."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from uav_debate_eval.core.frames import rotate_many
from uav_debate_eval.io.rosbag.columns import Columns, VehicleMeta, stamp_ns, stamped_messages, stamps
from uav_debate_eval.io.rosbag.tf_tree import TfPoses
from uav_debate_eval.io.rosbag.topics import (
    TF,
    TF_STATIC,
    TRANSFORM,
    WORLD_FRAMES,
    frame_vehicle,
    vehicle_from_topic,
)

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader

    from uav_debate_eval.io.rosbag.raw_messages import Raw


def decode_transform(reader: AnyReader, topic: str, explicit: str | None, raw: Raw, cols: Columns,
                     notes: list[str]) -> None:
    """geometry_msgs/TransformStamped: the vehicle `explicit` names, else the namespace, else the child frame."""
    msgs, header, t, keep = stamped_messages(reader, raw, TRANSFORM, topic, notes)
    pos = np.array([(m.transform.translation.x, m.transform.translation.y, m.transform.translation.z) for m in msgs])
    quat = np.array([(m.transform.rotation.x, m.transform.rotation.y, m.transform.rotation.z, m.transform.rotation.w)
                     for m in msgs])
    uav = explicit or vehicle_from_topic(topic)
    if uav in ("uav", topic.strip("/")) and msgs and msgs[0].child_frame_id.strip("/"):
        uav = frame_vehicle(msgs[0].child_frame_id)
    cols.add(t[keep], uav, pos[keep], quat[keep], source=topic, receive_time=bool((header == 0).all()))


def wire_type(reader: AnyReader, topic: str) -> str:
    """The type a TF topic's messages were recorded as (ROS 1's tf/tfMessage, read as TFMessage, decodes as itself:
    the bag defines it, not tf2_msgs)."""
    return next((c.msgtype for c in reader.connections if c.topic == topic), TF)


def decode_tf(reader: AnyReader, topic: str, raw: Raw, cols: Columns, notes: list[str]) -> None:
    """tf2_msgs/TFMessage: every transform from a world frame to another frame is a pose of the vehicle its child
    frame names, carried to the root frame through the transforms between world frames (`TfPoses`).

    Gazebo through ros_gz_bridge (`/world/<w>/dynamic_pose/info`, `/model/<name>/pose`): the world is the frame named
    <w>, or the frame no transform of the message has as its child; a model's links (`x500_0::base_link` under
    `x500_0`) are not vehicles."""
    rows: list[tuple[Any, ...]] = []
    wire = wire_type(reader, topic)
    tree = TfPoses(topic)
    parents: set[str] = set()
    for i in range(len(raw)):
        m: Any = reader.deserialize(raw.message(i), wire)
        parents.update(tr.header.frame_id.strip("/") for tr in m.transforms)
        for tr, uav, p, q in tree.poses(m.transforms, raw.recv[i] * 1e-9) + (tree.flush() if i == len(raw) - 1 else []):
            ns = stamp_ns(tr.header.stamp)
            rows.append((ns if ns else None, int(raw.recv[i]), uav, *p, *q))
    if not rows:
        notes.append(f"{topic}: no transform from a world frame ({', '.join(sorted(WORLD_FRAMES))}); its parent "
                     f"frames: {', '.join(sorted(parents)[:8]) or 'none'}")
        return
    header = np.asarray([r[0] or 0 for r in rows], dtype=np.int64)
    t, keep = stamps(notes, topic, header, np.asarray([r[1] for r in rows], dtype=np.int64))
    vals = np.asarray([r[3:] for r in rows], dtype=float)
    ids = np.asarray([r[2] for r in rows], dtype=object)
    notes.append(f"{topic}: vehicles from tf child frames: {', '.join(sorted(set(ids.tolist())))}")
    if tree.linked:
        notes.append(f"{topic}: poses carried to the root frame through {', '.join(sorted(tree.linked))}")
    for uav, root in sorted(tree.roots.items()):
        if "/" in root:  # a root of the vehicle's own (uav1/odom): a local frame, as MAVROS's
            cols.meta[uav] = VehicleMeta(topic, False, "local", root)
    cols.add(t[keep], ids[keep], vals[keep, :3], vals[keep, 3:])


def place_by_tf_static(reader: AnyReader, raw: Raw, cols: Columns, notes: list[str]) -> None:
    """A static transform from a world frame to the frame a vehicle's poses are stamped in places that frame."""
    static: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    wire = wire_type(reader, TF_STATIC)
    for i in range(len(raw)):
        m: Any = reader.deserialize(raw.message(i), wire)
        for tr in m.transforms:
            parent, child = tr.header.frame_id.strip("/"), tr.child_frame_id.strip("/")
            if parent in WORLD_FRAMES and child not in WORLD_FRAMES:
                tv, q = tr.transform.translation, tr.transform.rotation
                static[child] = (np.array([tv.x, tv.y, tv.z]), np.array([q.x, q.y, q.z, q.w]), parent)
    for k, uav in cols.block_of.values():
        meta = cols.meta[uav]
        if meta.frame_id not in static:
            continue
        offset, quat, parent = static[meta.frame_id]
        rot = np.broadcast_to(quat, (len(cols.pos[k]), 4))
        cols.pos[k] = rotate_many(rot, cols.pos[k]) + offset
        if np.isfinite(cols.vel[k]).all():
            cols.vel[k] = rotate_many(rot, cols.vel[k])
        meta.frame = ""
        meta.fix = None  # placed: a global fix need not place it again
        notes.append(f"{uav}: frame {meta.frame_id} placed in {parent} by /tf_static (offset "
                     f"{', '.join(f'{x:+.2f}' for x in offset)} m)")
