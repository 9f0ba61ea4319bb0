"""A recorded trajectory as the simulator node plays it: samples grouped by stamp, in time order."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from uav_debate_eval.core.trajectory import SwarmTrajectory

#: One tick: scenario time and (uav, position, velocity or None, link_ok) per vehicle.
Tick = tuple[float, list[tuple[str, np.ndarray, np.ndarray | None, bool]]]


def csv_ticks(traj: SwarmTrajectory) -> Iterator[Tick]:
    """Samples of a recorded trajectory grouped by stamp, in time order (vehicles may have their own stamps)."""
    rows = [(float(tr.t[i]), uav, i) for uav, tr in traj.tracks.items() for i in range(len(tr.t))]
    rows.sort(key=lambda r: (r[0], r[1]))
    k = 0
    while k < len(rows):
        t = rows[k][0]
        batch = []
        while k < len(rows) and rows[k][0] == t:
            _, uav, i = rows[k]
            tr = traj.tracks[uav]
            link = tr.link_ok is None or bool(tr.link_ok[i])
            batch.append((uav, tr.pos[i], tr.vel[i], link))
            k += 1
        yield t, batch
