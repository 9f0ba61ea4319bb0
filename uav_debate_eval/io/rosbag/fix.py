"""sensor_msgs/NavSatFix as a vehicle's position, in a bag that records no pose at all (a GPS-only rover, a boat,
an AUV on the surface): each fix on the tangent plane at the bag's first fix, so several vehicles share one frame;
a fix without a fix (status -1), or one spread over MAX_POSITION_STD_M, is no valid sample."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from uav_debate_eval.io.rosbag.columns import Columns, stamped_messages
from uav_debate_eval.io.rosbag.stamped import MAX_POSITION_STD_M
from uav_debate_eval.io.rosbag.topics import FIX, vehicle_from_topic

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader

    from uav_debate_eval.io.rosbag.raw_messages import Raw

#: sensor_msgs/NavSatStatus.STATUS_NO_FIX, and NavSatFix.COVARIANCE_TYPE_UNKNOWN.
_NO_FIX, _COVARIANCE_UNKNOWN = -1, 0


def decode_fix(reader: AnyReader, topic: str, explicit: str | None, raw: Raw, cols: Columns,
               notes: list[str]) -> None:
    from uav_debate_eval.io.ulog import geodetic_to_enu

    msgs, header, t, keep = stamped_messages(reader, raw, FIX, topic, notes)
    lla = np.array([(m.latitude, m.longitude, m.altitude) for m in msgs], dtype=float).reshape(-1, 3)
    placed = np.isfinite(lla).all(axis=1) & (np.abs(lla[:, 0]) > 1e-6)
    if not placed.any():
        notes.append(f"{topic}: no fix with a position ({len(msgs)} message(s))")
        return
    if cols.geo_anchor is None:
        cols.geo_anchor = tuple(float(x) for x in lla[placed][0])
    held = np.where(placed[:, None], lla, lla[placed][0])  # no position: held at the first, and not valid
    enu = geodetic_to_enu(held[:, 0], held[:, 1], held[:, 2], *cols.geo_anchor)
    status = np.array([int(m.status.status) for m in msgs])
    spread = np.array([np.sqrt(max(m.position_covariance[0], m.position_covariance[4]))
                       if m.position_covariance_type != _COVARIANCE_UNKNOWN else 0.0 for m in msgs])
    valid = placed & (status != _NO_FIX) & ~(spread > MAX_POSITION_STD_M)
    uav = explicit or vehicle_from_topic(topic)
    quat = np.tile([0.0, 0.0, 0.0, 1.0], (len(msgs), 1))
    cols.add(t[keep], uav, enu[keep], quat[keep], None, valid[keep], source=topic,
             receive_time=bool((header == 0).all()))
    notes.append(f"{uav}: the bag's only position is {topic} (NavSatFix): GPS fixes on the tangent plane at "
                 f"{cols.geo_anchor[0]:.6f}, {cols.geo_anchor[1]:.6f}, velocity from the fixes")
