"""The live PX4 input keeps a vehicle's vehicle_status changes, not every message (io.px4.keep_status): the flight
report reads the same events and class from them, and a long session's side file stays small."""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io import px4

DISARMED, ARMED = 1, px4.ARMED
POSCTL, AUTO_MISSION, AUTO_RTL = 2, 3, 5


def _statuses() -> list[px4.StatusFields]:
    """An hour at 2 Hz: armed at 60 s, a mission at 90 s, RTL at 3,000 s, disarmed at 3,300 s; a VTOL from 1,000 s
    (the type a message reports can change too)."""
    out = []
    for k in range(7200):
        t = k / 2
        armed = ARMED if 60 <= t < 3300 else DISARMED
        mode = AUTO_RTL if t >= 3000 else AUTO_MISSION if t >= 90 else POSCTL
        out.append(px4.StatusFields(int(t * 1e6), armed, mode, 2, t >= 1000))
    return out


def _events(rows: list[px4.StatusFields]) -> tuple[list, list, dict]:
    t = np.arange(0.0, 3600.0, 1.0)
    traj = SwarmTrajectory.from_columns(t, ["px4_0"] * len(t), np.zeros((len(t), 3)))
    px4.apply_status(traj, "px4_0", rows, 0.0)
    return [(e.type, e.t, e.extra) for e in traj.ingest.log_events], traj.ingest.notes, traj.ingest.autopilot


def test_the_changes_give_the_flight_report_every_message_gives():
    every = _statuses()
    kept: list[px4.StatusFields] = []
    arming = [row.timestamp / 1e6 for row in every if px4.keep_status(kept, row)]
    assert arming == [0.0, 60.0, 3300.0]  # the first state, then each change: the verifier's parked pairs
    assert len(kept) == 6 and [r.timestamp / 1e6 for r in kept] == [0.0, 60.0, 90.0, 1000.0, 3000.0, 3300.0]
    assert _events(kept) == _events(every)
    events, notes, autopilot = _events(kept)
    assert [e[2]["label"] for e in events] == ["disarmed", "mode=POSCTL", "armed", "mode=AUTO_MISSION",
                                               "mode=AUTO_RTL", "disarmed"]
    assert autopilot["px4_0"]["vehicle_class"] == "vtol" and "VTOL" in notes[0]
