"""What the message decoders fill: one block of samples per topic (or per vehicle of a multi-body topic), what
each vehicle's samples came from, and the stamps they carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uav_debate_eval.core.stamps import tape_seconds

#: Header stamps below this (seconds) while others of the topic look like epoch time are treated as unset.
_EPOCH_S = 1e6


@dataclass
class VehicleMeta:
    """Where one vehicle's poses came from, and what placed them in the world frame."""

    source: str  #: the pose topic
    receive_time: bool  #: stamped with the bag's receive time (the header stamps were unset)
    frame: str  #: "local" for a MAVROS local frame not yet placed, else ""
    frame_id: str = ""  #: the header frame the poses are stamped in
    velocity: str = ""  #: the topic that measured the velocity (else it is derived)
    fix: tuple[float, np.ndarray] | None = None  #: first global fix (t, lat/lon/alt) of a local frame
    #: the autopilot's arming (t, armed) at its first state and at each change (MAVROS /state)
    arming: list[tuple[float, bool]] = field(default_factory=list)
    #: its land detector (t, landed) at the first extended state and at each change (MAVROS /extended_state)
    landing: list[tuple[float, bool]] = field(default_factory=list)


@dataclass
class Columns:
    t: list[np.ndarray] = field(default_factory=list)
    ids: list[np.ndarray] = field(default_factory=list)
    pos: list[np.ndarray] = field(default_factory=list)
    vel: list[np.ndarray] = field(default_factory=list)
    quat: list[np.ndarray] = field(default_factory=list)
    valid: list[np.ndarray] = field(default_factory=list)
    #: per vehicle read from a topic of its own
    meta: dict[str, VehicleMeta] = field(default_factory=dict)
    #: one vehicle's pose topic -> (its block index, vehicle)
    block_of: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: lat, lon, alt of the first GPS fix read as a position (io.rosbag.fix): the tangent plane of every fix
    geo_anchor: tuple[float, ...] | None = None

    def add(self, t: np.ndarray, uav: str | np.ndarray, pos: np.ndarray, quat: np.ndarray,
            vel: np.ndarray | None = None, valid: np.ndarray | None = None, source: str = "",
            receive_time: bool = False, frame: str = "") -> None:
        n = len(t)
        if isinstance(uav, str) and source:
            self.block_of[source] = (len(self.t), uav)
            self.meta[uav] = VehicleMeta(source, receive_time, frame)
        self.valid.append(np.ones(n, dtype=bool) if valid is None else np.asarray(valid, dtype=bool))
        self.t.append(np.asarray(t, dtype=float))
        self.ids.append(np.full(n, uav) if isinstance(uav, str) else np.asarray(uav, dtype=str))
        self.pos.append(np.asarray(pos, dtype=float).reshape(n, 3))
        self.quat.append(np.asarray(quat, dtype=float).reshape(n, 4))
        self.vel.append(np.full((n, 3), np.nan) if vel is None else np.asarray(vel, dtype=float).reshape(n, 3))


def stamp_ns(stamp: Any) -> int:
    """A ROS 2 (sec, nanosec) or ROS 1 (sec, nsec) time in nanoseconds."""
    nsec = getattr(stamp, "nanosec", None)
    return int(stamp.sec) * 1_000_000_000 + int(nsec if nsec is not None else stamp.nsec)


def stamped_messages(reader: Any, raw: Any, msgtype: str, topic: str, notes: list[str]
                     ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray]:
    """A topic's messages decoded one by one (rosbags), their header stamps (ns), and `stamps` of them: (messages,
    header ns, seconds, keep mask)."""
    msgs: list[Any] = [reader.deserialize(raw.message(i), msgtype) for i in range(len(raw))]
    header = np.array([stamp_ns(m.header.stamp) for m in msgs], dtype=np.int64)
    t, keep = stamps(notes, topic, header, raw.recv)
    return msgs, header, t, keep


def stamps(notes: list[str], topic: str, header_ns: np.ndarray, recv_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seconds from header stamps, or receive time when they are unset; returns (t, keep mask). The seconds the
    live flight's tape holds (core.stamps.tape_seconds): a recorded session replays as it was evaluated live."""
    zero = header_ns == 0
    keep = np.ones(len(header_ns), dtype=bool)
    if zero.all():
        notes.append(f"{topic}: header stamps are zero; used the bag receive time")
        return tape_seconds(recv_ns), keep
    t = tape_seconds(header_ns)
    if zero.any() and np.median(t[~zero]) > _EPOCH_S:
        keep = ~zero
        notes.append(f"{topic}: {int(zero.sum())} message(s) with a zero header stamp dropped")
    return t, keep
