"""geometry_msgs/PointStamped as a vehicle's position: what a position-only tracker records (a laser tracker's prism,
as the EuRoC MAV datasets' `/leica/position`; an ultra-wideband tag). Such a topic carries no attitude and no
velocity: the velocity is derived from the positions and the attitude stays level (as for fixes); a point the
tracker lost (NaN) is a dropped row, counted."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from uav_debate_eval.io.rosbag.columns import Columns, stamped_messages
from uav_debate_eval.io.rosbag.topics import POINT, vehicle_from_topic

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader

    from uav_debate_eval.io.rosbag.raw_messages import Raw


def decode_point(reader: AnyReader, topic: str, explicit: str | None, raw: Raw, cols: Columns,
                 notes: list[str]) -> None:
    msgs, header, t, keep = stamped_messages(reader, raw, POINT, topic, notes)
    pos = np.array([(m.point.x, m.point.y, m.point.z) for m in msgs], dtype=float).reshape(-1, 3)
    uav = explicit or vehicle_from_topic(topic)
    quat = np.tile([0.0, 0.0, 0.0, 1.0], (len(msgs), 1))
    cols.add(t[keep], uav, pos[keep], quat[keep], source=topic, receive_time=bool((header == 0).all()))
    if uav in cols.meta and msgs:
        cols.meta[uav].frame_id = msgs[0].header.frame_id.strip("/")
    notes.append(f"{uav}: positions from {topic} (PointStamped, a position-only tracker): no attitude, velocity from "
                 "the positions")
