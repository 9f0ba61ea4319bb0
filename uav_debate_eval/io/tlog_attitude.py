"""Attitude against the autopilot's own target in a MAVLink telemetry log, for the `attitude_control` constraint,
and crash evidence.

The attitude is `ATTITUDE` (roll, pitch in rad); the target `ATTITUDE_TARGET` (quaternion q, unless its type_mask
says the attitude is ignored), else `NAV_CONTROLLER_OUTPUT` (nav_roll, nav_pitch in deg: ArduPilot sends its
attitude controller's target there). A target counts only while fresh (`SETPOINT_MAX_AGE_S`), the HEARTBEAT says
armed (base_mode MAV_MODE_FLAG_SAFETY_ARMED) and its mode controls attitude (not ACRO, MANUAL, QACRO). Crash
evidence: the autopilot's "Crash: Disarming" (its crash check, in STATUSTEXT) or the vehicle coming to rest on
its side.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from uav_debate_eval.io.ardupilot_attitude import NO_ATTITUDE_MODES
from uav_debate_eval.io.ardupilot_log import LogEvent, VehicleLog
from uav_debate_eval.io.log_series import hold_last, rest_on_side
from uav_debate_eval.io.px4_attitude import SETPOINT_MAX_AGE_S, roll_pitch_deg

ATTITUDE_TYPES = ["ATTITUDE", "ATTITUDE_TARGET", "NAV_CONTROLLER_OUTPUT"]
ARMED_FLAG = 128  # MAV_MODE_FLAG_SAFETY_ARMED
IGNORE_ATTITUDE = 128  # ATTITUDE_TARGET_TYPEMASK_ATTITUDE_IGNORE


def attach_tlog_attitude(log: VehicleLog, msgs: dict[str, list], boot: Callable) -> None:
    """Fill log.attitude (boot µs, roll/pitch, targets, controlled) and add one crash event where the log shows one."""
    att = msgs.get("ATTITUDE", [])
    t, actual = np.zeros(0), np.zeros((0, 2))
    if att and log.vehicle_class != "rover":
        t = np.array([m.time_boot_ms * 1000.0 for m in att])
        actual = np.degrees(np.array([[m.roll, m.pitch] for m in att], dtype=float))
        order = np.argsort(t, kind="stable")
        t, actual = t[order], actual[order]
        target = _targets(msgs, boot)
        if target is not None:
            t_sp, sp = target
            i = np.searchsorted(t_sp, t, side="right") - 1
            fresh = (i >= 0) & (t - t_sp[np.clip(i, 0, None)] <= SETPOINT_MAX_AGE_S * 1e6)
            log.attitude = (t, actual, sp[np.clip(i, 0, None)], fresh & _controlling(msgs, boot, t))
    _crash(log, msgs, boot, t, actual)


def _targets(msgs: dict[str, list], boot: Callable) -> tuple[np.ndarray, np.ndarray] | None:
    wanted = [m for m in msgs.get("ATTITUDE_TARGET", []) if not int(m.type_mask) & IGNORE_ATTITUDE]
    if wanted:
        t = np.array([m.time_boot_ms * 1000.0 for m in wanted])
        d = {f"q[{i}]": np.array([m.q[i] for m in wanted], dtype=float) for i in range(4)}
        sp = roll_pitch_deg(d, "q")
    elif msgs.get("NAV_CONTROLLER_OUTPUT"):
        nav = msgs["NAV_CONTROLLER_OUTPUT"]
        t = np.array([boot(m) for m in nav])  # no time of its own: its receive time on the boot clock
        sp = np.array([[m.nav_roll, m.nav_pitch] for m in nav], dtype=float)
    else:
        return None
    order = np.argsort(t, kind="stable")
    return t[order], np.asarray(sp)[order]


def _heartbeats(msgs: dict[str, list], boot: Callable) -> tuple[np.ndarray, list]:
    """The autopilot's HEARTBEATs (not a ground station's) and their boot times, in time order."""
    from pymavlink import mavutil

    beats = [m for m in msgs.get("HEARTBEAT", []) if m.autopilot != mavutil.mavlink.MAV_AUTOPILOT_INVALID]
    tb = np.array([boot(m) for m in beats], dtype=float)
    order = np.argsort(tb, kind="stable")
    return tb[order], [beats[k] for k in order.tolist()]


def _controlling(msgs: dict[str, list], boot: Callable, t: np.ndarray) -> np.ndarray:
    """Armed in a mode that controls attitude, by the autopilot's HEARTBEAT (not armed before the first one)."""
    from pymavlink import mavutil

    tb, beats = _heartbeats(msgs, boot)
    if not beats:
        return np.zeros(len(t), bool)
    ok = np.array([bool(m.base_mode & ARMED_FLAG) and mavutil.mode_string_v10(m).upper() not in NO_ATTITUDE_MODES
                   for m in beats])
    return hold_last(tb, ok, t) & (t >= tb[0])


def _armed(msgs: dict[str, list], boot: Callable, t: np.ndarray) -> np.ndarray | None:
    """Armed at each of `t` by the autopilot's HEARTBEAT (None: the log holds none)."""
    tb, beats = _heartbeats(msgs, boot)
    return hold_last(tb, np.array([bool(m.base_mode & ARMED_FLAG) for m in beats]), t) if beats else None


def _crash(log: VehicleLog, msgs: dict[str, list], boot: Callable, t: np.ndarray, actual: np.ndarray) -> None:
    words, at = [], None
    checks = [m for m in msgs.get("STATUSTEXT", []) if str(m.text).strip().lower().startswith("crash")]
    if checks:
        words.append(f"the autopilot's crash check fired ('{str(checks[0].text).strip()}')")
        at = boot(checks[0])
    side = rest_on_side(t, actual, _armed(msgs, boot, t))
    if side is not None:
        words.append(side[1])
        at = side[0] if at is None else min(at, side[0])
    if at is not None:
        log.events.append(LogEvent("crash", at, "; ".join(words), extra={"evidence": words}))
