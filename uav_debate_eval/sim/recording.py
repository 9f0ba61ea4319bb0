"""Record a simulated flight the way real stacks record it, to test ingest on what real data looks like.

- `write_mavros_bag`: one ROS 1 bag of a MAVROS swarm: `/<uav>/mavros/local_position/pose` with zero header
  stamps (receive time only, with jitter), an estimate that updates at `update_hz` but is republished unchanged at
  `message_hz`, `velocity_local` (TwistStamped) beside it, positions in each vehicle's own local frame (origin at
  its start), optionally `global_position/global` (NavSatFix) that places those frames, and optionally the bare
  `/mavros/local_position/pose` of the first vehicle in yet another frame (a constant offset).
- `write_mocap_bags`: one ROS 1 bag per drone of `geometry_msgs/TransformStamped` from a Vicon bridge
  (`/vicon/<uav>/<uav>`), optionally with a one-frame swap of two bodies and recordings that end at different times.
Clocks are unix time (`EPOCH`), as a recorder writes them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rosbags.rosbag1 import Writer
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

from uav_debate_eval.core.trajectory import SwarmTrajectory

EPOCH = 1_795_462_900.0
#: Reference point of the simulated field (WGS84) for NavSatFix messages.
FIELD_LAT, FIELD_LON, FIELD_ALT = 47.397742, 8.545594, 488.0
_EARTH_R = 6378137.0


def _stamp(ts, ns: int):
    return ts.types["builtin_interfaces/msg/Time"](sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _header(ts, ns: int, frame: str, seq: int = 0):
    return ts.types["std_msgs/msg/Header"](seq=seq, stamp=_stamp(ts, ns), frame_id=frame)


def _pose_msg(ts, ns: int, p: np.ndarray):
    t = ts.types
    pose = t["geometry_msgs/msg/Pose"](position=t["geometry_msgs/msg/Point"](x=float(p[0]), y=float(p[1]),
                                                                               z=float(p[2])),
                                       orientation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))
    return t["geometry_msgs/msg/PoseStamped"](header=_header(ts, ns, "map"), pose=pose)


def write_mavros_bag(traj: SwarmTrajectory, path: str | Path, *, update_hz: float = 10.0, message_hz: float = 38.0,
                     jitter_s: float = 0.004, global_fix: bool = False, bare_offset: tuple | None = None,
                     velocity: bool = True, velocity_topic: str = "velocity_local", seed: int = 0) -> Path:
    """See the module docstring. Each vehicle's local frame has its origin at the vehicle's first position;
    `velocity_topic`: `velocity` as MAVROS named its world-frame velocity before 0.28 (ROS 1 bags of 2018)."""
    path = Path(path)
    ts = get_typestore(Stores.ROS1_NOETIC)
    rng = np.random.default_rng(seed)
    msgs: list[tuple[int, str, str, object]] = []
    ids = traj.uav_ids
    for j, u in enumerate(ids):
        tr = traj.tracks[u]
        origin = tr.pos[0].copy()
        t_msg = np.arange(tr.t[0], tr.t[-1], 1.0 / message_hz)
        t_upd = np.floor(t_msg * update_hz) / update_hz  # the estimate the bridge holds at each message
        pos = np.column_stack([np.interp(t_upd, tr.t, tr.pos[:, k]) for k in range(3)])
        vel = np.column_stack([np.interp(t_upd, tr.t, tr.vel[:, k]) for k in range(3)])
        recv = np.round((EPOCH + t_msg + np.abs(rng.normal(0.0, jitter_s, len(t_msg)))) * 1e9).astype(np.int64)
        ns = f"/{u}/mavros"
        for r, p, v in zip(recv.tolist(), pos - origin, vel, strict=True):
            msgs.append((r, f"{ns}/local_position/pose", "geometry_msgs/msg/PoseStamped", _pose_msg(ts, 0, p)))
            if not velocity:
                continue
            vec = ts.types["geometry_msgs/msg/Vector3"]
            twist = ts.types["geometry_msgs/msg/Twist"](linear=vec(x=float(v[0]), y=float(v[1]), z=float(v[2])),
                                                        angular=vec(x=0.0, y=0.0, z=0.0))
            msgs.append((r + 1000, f"{ns}/local_position/{velocity_topic}", "geometry_msgs/msg/TwistStamped",
                         ts.types["geometry_msgs/msg/TwistStamped"](header=_header(ts, 0, "map"), twist=twist)))
        for r, p in zip(recv.tolist(), pos - origin, strict=True):
            if j == 0 and bare_offset is not None:
                msgs.append((r + 2000, "/mavros/local_position/pose", "geometry_msgs/msg/PoseStamped",
                             _pose_msg(ts, 0, p + np.asarray(bare_offset))))
        if global_fix:
            for r, p in zip(recv[::8].tolist(), pos[::8], strict=True):
                msgs.append((r + 3000, f"{ns}/global_position/global", "sensor_msgs/msg/NavSatFix",
                             _fix_msg(ts, r, p)))
    return _write(path, ts, msgs)


def _fix_msg(ts, ns: int, enu: np.ndarray):
    t = ts.types
    lat = FIELD_LAT + np.degrees(enu[1] / _EARTH_R)
    lon = FIELD_LON + np.degrees(enu[0] / (_EARTH_R * np.cos(np.radians(FIELD_LAT))))
    status = t["sensor_msgs/msg/NavSatStatus"](status=0, service=1)
    return t["sensor_msgs/msg/NavSatFix"](header=_header(ts, ns, "base_link"), status=status, latitude=float(lat),
                                          longitude=float(lon), altitude=float(FIELD_ALT + enu[2]),
                                          position_covariance=np.zeros(9), position_covariance_type=0)


def write_mocap_bags(traj: SwarmTrajectory, out_dir: str | Path, *, swap: tuple[str, str, float] | None = None,
                     end_early: dict[str, float] | None = None) -> list[Path]:
    """One bag per vehicle, `<uav>.bag`; `swap=(a, b, t)` exchanges a's and b's positions in one frame at t;
    `end_early={uav: s}` stops that vehicle's recorder s seconds before the flight's end."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ts = get_typestore(Stores.ROS1_NOETIC)
    t = ts.types
    end_early = end_early or {}
    paths = []
    for u in traj.uav_ids:
        tr = traj.tracks[u]
        pos = tr.pos.copy()
        if swap is not None and u in swap[:2]:
            other = traj.tracks[swap[1] if u == swap[0] else swap[0]]
            k = int(np.argmin(np.abs(tr.t - swap[2])))
            pos[k] = other.position_at(tr.t[k:k + 1])[0]
        keep = tr.t <= traj.t_end - end_early.get(u, 0.0) + 1e-9
        msgs = []
        for ti, p in zip(tr.t[keep].tolist(), pos[keep], strict=True):
            ns = int(round((EPOCH + ti) * 1e9))
            tf = t["geometry_msgs/msg/Transform"](
                translation=t["geometry_msgs/msg/Vector3"](x=float(p[0]), y=float(p[1]), z=float(p[2])),
                rotation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))
            msg = t["geometry_msgs/msg/TransformStamped"](header=_header(ts, ns, "world"), child_frame_id=u,
                                                          transform=tf)
            msgs.append((ns + 500_000, f"/vicon/{u}/{u}", "geometry_msgs/msg/TransformStamped", msg))
        paths.append(_write(out_dir / f"{u}.bag", ts, msgs))
    return paths


def write_bag(path: Path, msgs: list[tuple[str, str, int, object]], typestore, fmt: str = "ros1") -> Path:
    """Write msgs (topic, msgtype, receive ns, message) in the given order: a ROS 1 bag, or a rosbag2 of storage
    "mcap" or "sqlite3" (`typestore` must match: ROS 1 or ROS 2 types)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer: Writer | Writer2
    if fmt == "ros1":
        writer, serialize = Writer(path), typestore.serialize_ros1
    else:
        plugin = StoragePlugin.MCAP if fmt == "mcap" else StoragePlugin.SQLITE3
        writer, serialize = Writer2(path, version=9, storage_plugin=plugin), typestore.serialize_cdr
    with writer:
        conns = {}
        for topic, msgtype, ns, msg in msgs:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=typestore)
            writer.write(conns[topic], ns, serialize(msg, msgtype))
    return path


def _write(path: Path, ts, msgs: list) -> Path:
    """A recorder's bag: messages (receive ns, topic, msgtype, message) in receive order."""
    msgs.sort(key=lambda m: m[0])
    return write_bag(path, [(topic, msgtype, recv, msg) for recv, topic, msgtype, msg in msgs], ts)
