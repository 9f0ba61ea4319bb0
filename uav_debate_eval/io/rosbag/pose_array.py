"""PoseArray topics (a swarm's poses in one message): the k-th pose is the mission's k-th vehicle, else uav<k+1>."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from uav_debate_eval.io.rosbag.columns import Columns, stamp_ns, stamps
from uav_debate_eval.io.rosbag.topics import POSE_ARRAY

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader

    from uav_debate_eval.io.rosbag.raw_messages import Raw


def decode_pose_array(reader: AnyReader, topic: str, raw: Raw, names: list[str] | None, cols: Columns,
                      notes: list[str]) -> None:
    t_list: list[int] = []
    id_list: list[str] = []
    pos_list: list[tuple[float, float, float]] = []
    quat_list: list[tuple[float, float, float, float]] = []
    header: list[int] = []
    width = 0
    for i in range(len(raw)):
        m: Any = reader.deserialize(raw.message(i), POSE_ARRAY)
        header.append(stamp_ns(m.header.stamp))
        width = max(width, len(m.poses))
        for k, p in enumerate(m.poses):
            t_list.append(i)
            id_list.append(names[k] if names and k < len(names) else f"uav{k + 1}")
            pos_list.append((p.position.x, p.position.y, p.position.z))
            quat_list.append((p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w))
    if not t_list:
        notes.append(f"{topic}: PoseArray messages hold no poses")
        return
    t, keep = stamps(notes, topic, np.asarray(header, dtype=np.int64), raw.recv)
    idx = np.asarray(t_list)
    mask = keep[idx]
    how = "named by the mission's uavs" if names and len(names) >= width else "named uav1..uavN by index"
    notes.append(f"{topic}: PoseArray of up to {width} vehicle(s), {how}")
    cols.add(t[idx][mask], np.asarray(id_list, dtype=object)[mask], np.asarray(pos_list)[mask],
             np.asarray(quat_list)[mask])
