"""Serialized geometry_msgs/PoseArray and PoseStamped (CDR, as DDS delivers them) read with numpy, without ROS.

rclpy turns a PoseArray of 1,000 poses into 4,000 Python objects: 13 ms per message in each subscriber, a sixth
of a core at a show's 10 Hz before a single pose is checked. The positions are 1,000 runs of seven float64 at a
fixed stride, so one `np.frombuffer` reads them (tens of microseconds).

Layout (XCDR1, OMG DDS-XTypes 7.4.3, what ROS 2's rmw writes): a 4-byte encapsulation header (0x00 0x01 little
endian, 0x00 0x00 big endian), then, aligned to their size from the end of that header: Header (int32 sec, uint32
nanosec, string frame_id as uint32 length with the terminating NUL + bytes), uint32 pose count, and per pose
Point (x, y, z) and Quaternion (x, y, z, w) as float64.
"""

from __future__ import annotations

import struct

import numpy as np

_ENCAPSULATIONS = {b"\x00\x01": "<", b"\x00\x00": ">"}  # CDR_LE, CDR_BE


def _align(offset: int, size: int) -> int:
    return (offset + size - 1) // size * size


def _header(data: bytes, kind: str) -> tuple[str, memoryview, float, str, int]:
    """(byte order, body, stamp s, frame_id, offset after the header) of a message that starts with a Header."""
    order = _ENCAPSULATIONS.get(bytes(data[:2]))
    if order is None:
        raise ValueError(f"{kind}: unknown CDR encapsulation {bytes(data[:2])!r} (expected plain CDR)")
    body = memoryview(data)[4:]
    try:
        sec, nanosec, length = struct.unpack_from(order + "iII", body, 0)
    except struct.error as exc:
        raise ValueError(f"{kind}: truncated header ({len(body)} bytes)") from exc
    end = 12 + length
    if length < 1 or end > len(body):
        raise ValueError(f"{kind}: frame_id of {length} bytes runs past the message")
    return order, body, sec + nanosec * 1e-9, bytes(body[12:end - 1]).decode("utf-8", errors="replace"), end


def pose_array_positions(data: bytes) -> tuple[float, str, np.ndarray]:
    """(stamp s, frame_id, positions (N, 3)) of a serialized PoseArray; ValueError when it is not one."""
    order, body, stamp, frame_id, end = _header(data, "PoseArray")
    at = _align(end, 4)
    try:
        (count,) = struct.unpack_from(order + "I", body, at)
    except struct.error as exc:
        raise ValueError(f"PoseArray: truncated header ({len(body)} bytes)") from exc
    if count == 0:
        return stamp, frame_id, np.zeros((0, 3))
    at = _align(at + 4, 8)
    if at + 56 * count > len(body):
        raise ValueError(f"PoseArray: {count} poses need {56 * count} bytes, {len(body) - at} left")
    poses = np.frombuffer(body, dtype=order + "f8", count=7 * count, offset=at).reshape(count, 7)
    return stamp, frame_id, poses[:, :3].astype(float)


def pose_stamped_position(data: bytes) -> tuple[float, str, tuple[float, float, float]]:
    """(stamp s, frame_id, (x, y, z)) of a serialized PoseStamped; ValueError when it is not one."""
    order, body, stamp, frame_id, end = _header(data, "PoseStamped")
    try:
        x, y, z, *_ = struct.unpack_from(order + "7d", body, _align(end, 8))  # the orientation must be there too
    except struct.error as exc:
        raise ValueError(f"PoseStamped: truncated pose ({len(body)} bytes)") from exc
    return stamp, frame_id, (x, y, z)


def _header_cdr(stamp: float, frame_id: str) -> bytes:
    sec = int(stamp // 1)
    nanosec = min(int(round((stamp - sec) * 1e9)), 999_999_999)
    name = frame_id.encode() + b"\x00"
    return struct.pack("<iiI", sec, nanosec, len(name)) + name


def _pad(head: bytes, size: int) -> bytes:
    return head + b"\x00" * (_align(len(head), size) - len(head))


def pose_array_cdr(stamp: float, frame_id: str, positions: np.ndarray) -> bytes:
    """A PoseArray serialized as rmw does (little-endian CDR, identity orientations): a publisher of 1,000 poses at
    10 Hz that builds no Python message per pose (rclpy's `Publisher.publish` takes the bytes)."""
    head = _pad(_header_cdr(stamp, frame_id), 4) + struct.pack("<I", len(positions))
    if len(positions):
        head = _pad(head, 8)
    poses = np.zeros((len(positions), 7), dtype="<f8")
    poses[:, :3] = positions
    poses[:, 6] = 1.0
    return b"\x00\x01\x00\x00" + head + poses.tobytes()


def pose_stamped_cdr(stamp: float, frame_id: str, position: tuple[float, float, float]) -> bytes:
    """A PoseStamped serialized as rmw does (identity orientation)."""
    return b"\x00\x01\x00\x00" + _pad(_header_cdr(stamp, frame_id), 8) + struct.pack("<7d", *position, 0.0, 0.0,
                                                                                        0.0, 1.0)
