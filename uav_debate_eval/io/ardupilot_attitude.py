"""Attitude against the autopilot's own target (ArduPilot `ATT` Roll/DesRoll, Pitch/DesPitch), and crash evidence,
for the `attitude_control` constraint (safety.attitude).

The target means something only while the vehicle is armed in a mode that controls attitude: disarmed, the target
follows the attitude; ACRO and MANUAL have none. A crash is the autopilot's own crash check (ERR CRASH_CHECK) or
the vehicle coming to rest on its side after it was armed (more than 60° of tilt at the end of the
log: io.log_series.rest_on_side).
"""

from __future__ import annotations

import numpy as np

from uav_debate_eval.io.ardupilot_log import LogEvent, VehicleLog
from uav_debate_eval.io.log_series import hold_last, rest_on_side

#: Modes without an attitude target to follow (rates or the pilot's sticks straight to the surfaces).
NO_ATTITUDE_MODES = ("ACRO", "MANUAL", "QACRO")


def attach_attitude(log: VehicleLog, att: dict[str, np.ndarray] | None) -> None:
    """Fill log.attitude (boot µs, roll/pitch, targets, controlled) from ATT columns; add crash events."""
    if log.vehicle_class == "rover" or att is None or not all(
            k in att for k in ("TimeUS", "Roll", "DesRoll", "Pitch", "DesPitch")):
        _crash(log, None, None)
        return
    order = np.argsort(att["TimeUS"], kind="stable")
    t = att["TimeUS"][order]
    actual = np.column_stack([att["Roll"][order], att["Pitch"][order]])
    target = np.column_stack([att["DesRoll"][order], att["DesPitch"][order]])
    log.attitude = (t, actual, target, _armed(log, t) & _attitude_mode(log, t))
    _crash(log, t, actual)


def _armed(log: VehicleLog, t: np.ndarray) -> np.ndarray:
    arming = [(e.t_us, e.label == "ARMED", bool(e.extra.get("initial"))) for e in log.events
              if e.type == "autopilot_event" and e.label in ("ARMED", "DISARMED")]
    if not arming:
        return np.ones(len(t), bool)  # the log does not say: every sample counts
    arming.sort(key=lambda a: a[0])
    at, state = np.array([a for a, _, _ in arming]), np.array([s for _, s, _ in arming])
    out = hold_last(at, state, t)
    # before the first: the opposite of an EV (a change); the state a first STAT read (it held before too)
    out[t < at[0]] = state[0] if arming[0][2] else not state[0]
    return out


def _attitude_mode(log: VehicleLog, t: np.ndarray) -> np.ndarray:
    modes = [(e.t_us, str(e.extra.get("mode", "")).upper() not in NO_ATTITUDE_MODES) for e in log.events
             if e.type == "flight_mode"]
    if not modes:
        return np.ones(len(t), bool)
    return hold_last(np.array([a for a, _ in modes]), np.array([s for _, s in modes]), t)


def _crash(log: VehicleLog, t: np.ndarray | None, actual: np.ndarray | None) -> None:
    """One crash event: the autopilot's crash check (its ERR event becomes the crash), the rest on its side."""
    checks = [e for e in log.events if e.extra.get("subsystem") == "CRASH_CHECK" and e.extra.get("code") == 1]
    log.events = [e for e in log.events if e not in checks]
    words, at = [], None
    if checks:
        words.append("the autopilot's crash check fired (ERR CRASH_CHECK)")
        at = checks[0].t_us
    side = rest_on_side(t, actual, _armed(log, t)) if t is not None and actual is not None else None
    if side is not None:
        words.append(side[1])
        at = side[0] if at is None else min(at, side[0])
    if at is not None:
        log.events.append(LogEvent("crash", at, "; ".join(words), extra={"evidence": words}))
