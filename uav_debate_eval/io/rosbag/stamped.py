"""PoseStamped and Odometry topics: one vehicle each, decoded with numpy.

Messages of one serialised length share a byte layout (a frame id of another length shifts it), so each length
group is decoded as one numpy array and checked against rosbags' own decoder; a group that does not fit the
fixed layout sends the whole topic through the library, message by message.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from uav_debate_eval.core.frames import rotate_many, twist_is_in_body_frame
from uav_debate_eval.io.rosbag.columns import Columns, stamp_ns, stamps
from uav_debate_eval.io.rosbag.topics import ODOM, POSE_COV, vehicle_from_topic

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader

    from uav_debate_eval.io.rosbag.raw_messages import Raw

#: Odometry whose position standard deviation exceeds this (m) is an estimate the estimator itself disowns.
MAX_POSITION_STD_M = 10.0
#: The types whose pose comes with its covariance (msg.pose.pose, msg.pose.covariance).
COVARIANT = (ODOM, POSE_COV)


class Decoded(NamedTuple):
    """A topic's samples: header stamps (ns), positions, quaternions (x, y, z, w); Odometry also its twist
    (world frame), Odometry and PoseWithCovarianceStamped their position standard deviation."""

    header_ns: np.ndarray
    pos: np.ndarray
    quat: np.ndarray
    vel: np.ndarray | None
    std: np.ndarray | None


class _Layout(NamedTuple):
    """Byte offsets of one serialised message's fields."""

    sec_off: int
    sec_dtype: str
    pose_off: int
    twist_off: int | None
    frame_bytes: tuple[int, int]


def decode_stamped(reader: AnyReader, topic: str, msgtype: str, explicit: str | None, raw: Raw, is_ros1: bool,
                   cols: Columns, notes: list[str]) -> None:
    """Add a PoseStamped, Odometry or PoseWithCovarianceStamped topic's samples as the vehicle `explicit` names,
    else its namespace."""
    uav = explicit or vehicle_from_topic(topic)
    arr = _fast_decode(reader, raw, msgtype, is_ros1)
    if arr is None:
        arr = _slow_decode(reader, raw, msgtype)
    t, keep = stamps(notes, topic, arr.header_ns, raw.recv)
    valid = None if arr.std is None else ~(arr.std > MAX_POSITION_STD_M)
    frame = "local" if "/local_position/" in topic else ""
    cols.add(t[keep], uav, arr.pos[keep], arr.quat[keep], None if arr.vel is None else arr.vel[keep],
             None if valid is None else valid[keep], source=topic, receive_time=bool((arr.header_ns == 0).all()),
             frame=frame)
    if uav in cols.meta:
        first: Any = reader.deserialize(raw.message(0), msgtype)
        cols.meta[uav].frame_id = first.header.frame_id.strip("/")


def _empty(n: int, msgtype: str) -> Decoded:
    """Arrays for a topic's n samples (twist for Odometry only, position spread with a covariance), filled by a
    decoder."""
    return Decoded(np.empty(n, dtype=np.int64), np.empty((n, 3)), np.empty((n, 4)),
                   np.empty((n, 3)) if msgtype == ODOM else None, np.empty(n) if msgtype in COVARIANT else None)


def _slow_decode(reader: AnyReader, raw: Raw, msgtype: str) -> Decoded:
    header_ns, pos, quat, vel, std = _empty(len(raw), msgtype)
    for i in range(len(raw)):
        m: Any = reader.deserialize(raw.message(i), msgtype)
        header_ns[i] = stamp_ns(m.header.stamp)
        p = m.pose.pose if msgtype in COVARIANT else m.pose
        pos[i] = (p.position.x, p.position.y, p.position.z)
        quat[i] = (p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w)
        if vel is not None:
            v = m.twist.twist.linear
            vel[i] = (v.x, v.y, v.z)
        if std is not None:
            std[i] = _position_std(np.asarray(m.pose.covariance, dtype=float)[None, :])[0]
    if vel is not None:
        vel = _twist_to_world(reader.deserialize(raw.message(0), msgtype), quat, vel)
    return Decoded(header_ns, pos, quat, vel, std)


def _position_std(cov: np.ndarray) -> np.ndarray:
    """Horizontal-or-vertical position standard deviation (m) from row-major 6x6 covariances (n, 36);
    negative or non-finite variances (\"unknown\") count as enormous."""
    var = cov[:, [0, 7, 14]]
    var = np.where(np.isfinite(var) & (var >= 0), var, np.inf)
    std: np.ndarray = np.sqrt(var.max(axis=1))
    return std


def _twist_to_world(first_msg: Any, quat: np.ndarray, vel: np.ndarray) -> np.ndarray:
    """The topic's twists in the world frame (core.frames: the one REP 105 rule, also used live)."""
    if not twist_is_in_body_frame(first_msg.child_frame_id, first_msg.header.frame_id):
        return vel
    return rotate_many(quat, vel)


def _fast_decode(reader: AnyReader, raw: Raw, msgtype: str, is_ros1: bool) -> Decoded | None:
    """Decode a topic with numpy, one group per serialised length; None when a group does not fit the fixed
    layout, so the library decodes the topic."""
    header_ns, pos, quat, vel, std = _empty(len(raw), msgtype)
    sizes = raw.end - raw.start
    for size in np.unique(sizes):
        idx = np.flatnonzero(sizes == size)
        group = _decode_group(reader, raw, idx, int(size), msgtype, is_ros1)
        if group is None:
            return None
        header_ns[idx], pos[idx], quat[idx] = group.header_ns, group.pos, group.quat
        if vel is not None and group.vel is not None:
            vel[idx] = group.vel
        if std is not None and group.std is not None:
            std[idx] = group.std
    if vel is not None:
        vel = _twist_to_world(reader.deserialize(raw.message(0), msgtype), quat, vel)
    return Decoded(header_ns, pos, quat, vel, std)


def _decode_group(reader: AnyReader, raw: Raw, idx: np.ndarray, size: int, msgtype: str,
                  is_ros1: bool) -> Decoded | None:
    """Messages idx, all `size` bytes long (their twist still in the message's frame)."""
    first = raw.message(int(idx[0]))
    try:
        layout = _layout_ros1(first, msgtype) if is_ros1 else _layout_cdr(first, msgtype)
    except (struct.error, IndexError):
        return None
    if layout is None:
        return None
    sec_off, sec_dtype, pose_off, twist_off, (frame_a, frame_b) = layout
    covariant = msgtype in COVARIANT
    if pose_off + 56 + (288 if covariant else 0) > size or (twist_off is not None and twist_off + 24 > size):
        return None
    buf = raw.rows(idx, size)
    if not (buf[:, frame_a:frame_b] == buf[0, frame_a:frame_b]).all():
        return None  # frame ids differ in content at equal length: still fine for poses, but be strict
    sec = buf[:, sec_off:sec_off + 4].copy().view(sec_dtype).ravel().astype(np.int64)
    nsec = buf[:, sec_off + 4:sec_off + 8].copy().view("<u4").ravel().astype(np.int64)
    pose = buf[:, pose_off:pose_off + 56].copy().view("<f8").reshape(-1, 7)
    vel = None if twist_off is None else buf[:, twist_off:twist_off + 24].copy().view("<f8").reshape(-1, 3)
    std = None if not covariant else _position_std(
        buf[:, pose_off + 56:pose_off + 56 + 288].copy().view("<f8").reshape(-1, 36))
    header_ns = sec * 1_000_000_000 + nsec
    # Cross-check the group's first and last message against the library's decoder.
    for i in (0, len(idx) - 1):
        m: Any = reader.deserialize(raw.message(int(idx[i])), msgtype)
        p = m.pose.pose if covariant else m.pose
        ref = (stamp_ns(m.header.stamp), p.position.x, p.position.y, p.position.z, p.orientation.w)
        got = (int(header_ns[i]), pose[i, 0], pose[i, 1], pose[i, 2], pose[i, 6])
        if ref[0] != got[0] or not np.allclose(ref[1:], got[1:], equal_nan=True):
            return None
        if vel is not None and not np.allclose(vel[i], (m.twist.twist.linear.x, m.twist.twist.linear.y,
                                                        m.twist.twist.linear.z), equal_nan=True):
            return None
    return Decoded(header_ns, pose[:, :3], pose[:, 3:7], vel, std)


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _layout_cdr(raw: bytes, msgtype: str) -> _Layout | None:
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
    return _Layout(base, "<i4", base + p, twist, frame)


def _layout_ros1(raw: bytes, msgtype: str) -> _Layout:
    """Byte offsets in a ROS 1 message (packed, little-endian; header = seq, stamp, frame_id)."""
    flen = struct.unpack_from("<I", raw, 12)[0]
    p = 16 + flen
    frame = (12, 16 + flen)
    twist = None
    if msgtype == ODOM:
        clen = struct.unpack_from("<I", raw, p)[0]
        p += 4 + clen
        twist = p + (7 + 36) * 8
    return _Layout(4, "<u4", p, twist, frame)
