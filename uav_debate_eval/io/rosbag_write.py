"""Write a swarm trajectory as a ROS bag (rosbag2 MCAP or SQLite3, or ROS 1) with `rosbags`.

One topic per vehicle (`/{uav}/pose` by default), `geometry_msgs/msg/PoseStamped` or
`nav_msgs/msg/Odometry` (which also carries the velocity), header stamps = sample times, frame "map".
A path ending in `.mcap` / `.db3` becomes that single self-contained storage file (it embeds the
rosbag2 metadata; `ros2 bag play` opens it directly); any other path becomes a rosbag2 directory.
Orientation is the recorded quaternion when present, else yaw along the horizontal velocity.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.track import Track
from uav_debate_eval.core.trajectory import SwarmTrajectory

MSGTYPES = {"PoseStamped": "geometry_msgs/msg/PoseStamped", "Odometry": "nav_msgs/msg/Odometry"}
FORMATS = ("mcap", "sqlite3", "ros1")
FRAME_ID = "map"


def write_bag(traj: SwarmTrajectory, path: str | Path, fmt: str = "mcap", topic_pattern: str = "/{uav}/pose",
              msgtype: str = "PoseStamped") -> Path:
    """Write every sample of every vehicle; returns the path written. Refuses to overwrite."""
    path = Path(path)
    if fmt not in FORMATS:
        raise InputError(f"unknown bag format '{fmt}' (known: {', '.join(FORMATS)})")
    if msgtype not in MSGTYPES:
        raise InputError(f"unknown message type '{msgtype}' (known: {', '.join(MSGTYPES)})")
    if "{uav}" not in topic_pattern:
        raise InputError(f"topic pattern '{topic_pattern}' must contain {{uav}}")
    if path.exists():
        raise InputError(f"{path}: exists already, not overwriting")
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "ros1":
        typestore = get_typestore(Stores.ROS1_NOETIC)
        with Writer1(path) as writer:
            _write_all(traj, writer, typestore, topic_pattern, MSGTYPES[msgtype], typestore.serialize_ros1)
        return path
    suffix = ".mcap" if fmt == "mcap" else ".db3"
    if path.suffix != suffix:
        _write2(traj, path, fmt, topic_pattern, msgtype)
        return path
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.stem}.") as tmp:
        bag_dir = Path(tmp) / path.stem
        _write2(traj, bag_dir, fmt, topic_pattern, msgtype)
        shutil.move(bag_dir / f"{path.stem}{suffix}", path)
    return path


def _write2(traj: SwarmTrajectory, bag_dir: Path, fmt: str, topic_pattern: str, msgtype: str) -> None:
    typestore = get_typestore(Stores.ROS2_JAZZY)
    plugin = StoragePlugin.MCAP if fmt == "mcap" else StoragePlugin.SQLITE3
    with Writer2(bag_dir, version=Writer2.VERSION_LATEST, storage_plugin=plugin) as writer:
        _write_all(traj, writer, typestore, topic_pattern, MSGTYPES[msgtype], typestore.serialize_cdr)


def _write_all(traj, writer, typestore, topic_pattern: str, msgtype: str, serialize) -> None:
    """Messages in global time order (what a recorder would produce), one connection per vehicle."""
    conns = {u: writer.add_connection(topic_pattern.format(uav=u), msgtype, typestore=typestore)
             for u in traj.uav_ids}
    ros1 = "seq" in typestore.types["std_msgs/msg/Header"].__dataclass_fields__
    stamps, owners, rows = [], [], []
    for j, u in enumerate(traj.uav_ids):
        tr = traj.tracks[u]
        stamps.append(np.round(tr.t * 1e9).astype(np.int64))
        owners.append(np.full(len(tr), j))
        rows.append(np.arange(len(tr)))
    ns_all, own_all, row_all = (np.concatenate(a) for a in (stamps, owners, rows))
    if len(ns_all) and ns_all.min() < 0:
        raise InputError("bag stamps must be >= 0 s; shift the trajectory's clock first")
    quats = {u: _orientation(traj.tracks[u]) for u in traj.uav_ids}
    make = _Messages(typestore, msgtype, ros1)
    ids = traj.uav_ids
    for k in np.lexsort((own_all, ns_all)):
        u, r, ns = ids[own_all[k]], int(row_all[k]), int(ns_all[k])
        tr = traj.tracks[u]
        msg = make(ns, r, tr.pos[r], quats[u][r], tr.vel[r])
        writer.write(conns[u], ns, serialize(msg, msgtype))


class _Messages:
    """Builds PoseStamped / Odometry instances from one sample."""

    def __init__(self, typestore, msgtype: str, ros1: bool):
        types = typestore.types
        self.t = types
        self.msgtype = msgtype
        self.ros1 = ros1
        self.cov = np.zeros(36)

    def __call__(self, ns: int, seq: int, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray):
        t = self.t
        stamp = t["builtin_interfaces/msg/Time"](sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
        header = (t["std_msgs/msg/Header"](seq=seq, stamp=stamp, frame_id=FRAME_ID) if self.ros1
                  else t["std_msgs/msg/Header"](stamp=stamp, frame_id=FRAME_ID))
        pose = t["geometry_msgs/msg/Pose"](
            position=t["geometry_msgs/msg/Point"](x=float(pos[0]), y=float(pos[1]), z=float(pos[2])),
            orientation=t["geometry_msgs/msg/Quaternion"](x=float(quat[0]), y=float(quat[1]), z=float(quat[2]),
                                                          w=float(quat[3])))
        if self.msgtype == MSGTYPES["PoseStamped"]:
            return t[self.msgtype](header=header, pose=pose)
        vec = t["geometry_msgs/msg/Vector3"]
        twist = t["geometry_msgs/msg/Twist"](linear=vec(x=float(vel[0]), y=float(vel[1]), z=float(vel[2])),
                                             angular=vec(x=0.0, y=0.0, z=0.0))
        return t[self.msgtype](
            header=header, child_frame_id="base_link",
            pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=self.cov),
            twist=t["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=self.cov))


def _orientation(tr: Track) -> np.ndarray:
    """(n, 4) quaternions x, y, z, w: recorded ones, else yaw along the course (held while hovering)."""
    if tr.quat is not None and np.isfinite(tr.quat).all():
        return tr.quat
    moving = tr.horizontal_speed > 0.2
    yaw = np.arctan2(tr.vel[:, 1], tr.vel[:, 0])
    if moving.any():
        idx = np.where(moving, np.arange(len(tr)), 0)
        np.maximum.accumulate(idx, out=idx)
        first = int(np.argmax(moving))
        idx[:first] = first
        yaw = yaw[idx]
    else:
        yaw = np.zeros(len(tr))
    return np.column_stack([np.zeros(len(tr)), np.zeros(len(tr)), np.sin(yaw / 2), np.cos(yaw / 2)])
