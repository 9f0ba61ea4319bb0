"""A log that stops while its vehicle is in the air: the usual signature of a power loss or a crash that cut the
recording short (the autopilot never logged a landing). Said as an autopilot event, so the panel and the report see
it beside the last thing the vehicle did."""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.arming import arming_changes
from uav_debate_eval.core.records import Event
from uav_debate_eval.core.trajectory import SwarmTrajectory

#: Height (m) above where the log started that counts as in the air at its end (beyond a barometer's drift).
AIRBORNE_M = 3.0
#: A fixed-wing vehicle in the air moves at least this fast (m/s): slower, it stands on higher ground.
PLANE_MIN_SPEED_MPS = 5.0
#: Descending this fast (m/s; the contract's vertical-speed event threshold) at the log's last sample, a vehicle is
#: in the air whatever its height: falling (a real ArduCopter 3.2 motor failure's log stops at 15.7 m/s, 1.75 m up).
FALLING_MPS = 3.0


def mark_ends_in_flight(traj: SwarmTrajectory) -> None:
    """An `log_end_in_flight` event for each vehicle whose log ends armed (as far as the log says) and at least
    AIRBORNE_M above its first valid altitude, or falling (FALLING_MPS)."""
    armed = {u: bool(states[-1]) for u, (_, states, _) in arming_changes(traj.ingest.log_events).items()}
    for u, tr in traj.tracks.items():
        if not armed.get(u, True) or len(tr) < 2 or tr.source.lower().endswith(".tlog"):
            continue  # a ground station's telemetry log ends when the ground station stops, not the vehicle
        ok = tr.est_z_valid if tr.est_z_valid is not None else tr.est_valid
        rows = np.flatnonzero(ok) if ok is not None else np.arange(len(tr))
        if len(rows) < 2 or rows[-1] != len(tr) - 1:
            continue  # its altitude at the end is not known
        height = float(tr.pos[rows[-1], 2] - tr.pos[rows[0], 2])
        descent = float(-tr.vel[-1, 2])
        if height < AIRBORNE_M and not descent >= FALLING_MPS:
            continue
        speed = float(np.linalg.norm(tr.vel[-1]))
        autopilot = traj.ingest.autopilot.get(u, {})
        if autopilot.get("vehicle_class") == "fixed_wing" and speed < PLANE_MIN_SPEED_MPS:
            continue
        traj.ingest.log_events.append(Event("", "log_end_in_flight", float(tr.t[-1]), [u], None, None, None, {
            "label": "log_end_in_flight", "height_m": round(height, 2), "speed_mps": round(speed, 2),
            "sitl": bool(autopilot.get("sitl")), "armed": u in armed,
            **({"descent_mps": round(descent, 2)} if descent >= FALLING_MPS else {})}))
