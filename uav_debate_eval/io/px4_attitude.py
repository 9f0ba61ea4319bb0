"""PX4 ULog attitude against its own target (`vehicle_attitude` q against `vehicle_attitude_setpoint` q_d) for the
`attitude_control` constraint, PX4's crash evidence, and its vehicle class (`vehicle_status`).

A target counts only while the vehicle is armed (`vehicle_status.arming_state`) and its controller holds an
attitude (`vehicle_control_mode.flag_control_attitude_enabled`; without that topic, any mode but ACRO), and only
while fresh (`SETPOINT_MAX_AGE_S`: the logger writes the setpoint more slowly than the attitude, and a mode that
stops publishing it leaves an old one behind). Crash evidence: PX4's failure detector flagging roll or pitch
(`vehicle_status.failure_detector_status`, or its own topic), or the vehicle coming to rest on its side.
"""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.arming import first_and_changes
from uav_debate_eval.core.records import Event
from uav_debate_eval.io.log_series import hold_last, rest_on_side
from uav_debate_eval.io.vehicle import MAV_TYPE_CLASS

#: Topics this module reads (besides the position ones io.ulog reads).
ATTITUDE_TOPICS = ["vehicle_attitude", "vehicle_attitude_setpoint", "vehicle_control_mode", "vehicle_status",
                   "failure_detector_status", "vehicle_land_detected"]
SETPOINT_MAX_AGE_S = 1.0
ARMING_STATE_ARMED = 2
NAV_STATE_ACRO = 10
#: vehicle_status.nav_state names (PX4 NAVIGATION_STATE_*), as PX4's own tools print them.
NAV_STATES = {0: "MANUAL", 1: "ALTCTL", 2: "POSCTL", 3: "AUTO_MISSION", 4: "AUTO_LOITER", 5: "AUTO_RTL",
              6: "POSITION_SLOW", 10: "ACRO", 12: "DESCEND", 13: "TERMINATION", 14: "OFFBOARD", 15: "STAB",
              17: "AUTO_TAKEOFF", 18: "AUTO_LAND", 19: "AUTO_FOLLOW_TARGET", 20: "AUTO_PRECLAND", 21: "ORBIT",
              22: "AUTO_VTOL_TAKEOFF"}
#: vehicle_status.failure_detector_status bits that mean the attitude left its limits (FD_FAIL_R / FD_FAIL_P).
FAILURE_ROLL, FAILURE_PITCH = 1, 2
#: vehicle_status.vehicle_type (PX4 1.14+ VEHICLE_TYPE_*; 0 unspecified) -> the project's class (is_vtol wins).
PX4_VEHICLE_CLASS = {1: "multirotor", 2: "fixed_wing", 3: "rover"}


def roll_pitch_deg(d: dict, prefix: str) -> np.ndarray | None:
    """Roll and pitch (deg, (n, 2)) from a quaternion logged as prefix[0..3] (w, x, y, z), or None."""
    keys = [f"{prefix}[{i}]" for i in range(4)]
    if not all(k in d for k in keys):
        return None
    w, x, y, z = (np.asarray(d[k], dtype=float) for k in keys)
    roll = np.arctan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2.0 * (w * y - z * x), -1.0, 1.0))
    return np.degrees(np.column_stack([roll, pitch]))


def px4_attitude(data: dict) -> tuple | None:
    """(boot µs, roll/pitch deg, targets deg, controlled) from the ULog's topics (name -> columns), or None."""
    att, sp = data.get("vehicle_attitude"), data.get("vehicle_attitude_setpoint")
    if att is None or sp is None or not len(att.get("timestamp", ())) or not len(sp.get("timestamp", ())):
        return None
    actual, target = roll_pitch_deg(att, "q"), roll_pitch_deg(sp, "q_d")
    if actual is None or target is None:
        return None
    t = att["timestamp"].astype(float)
    t_sp = sp["timestamp"].astype(float)
    order = np.argsort(t_sp, kind="stable")
    t_sp, target = t_sp[order], target[order]
    i = np.searchsorted(t_sp, t, side="right") - 1
    fresh = (i >= 0) & (t - t_sp[np.clip(i, 0, None)] <= SETPOINT_MAX_AGE_S * 1e6)
    controlled = fresh & _controlling(data, t)
    return t, actual, target[np.clip(i, 0, None)], controlled


def _controlling(data: dict, t: np.ndarray) -> np.ndarray:
    """Armed and holding an attitude, at each of `t` (the state before the first message: not armed)."""
    armed = _armed(data, t)
    if armed is None:
        return np.zeros(len(t), bool)
    status, mode = data["vehicle_status"], data.get("vehicle_control_mode")
    ts = status["timestamp"].astype(float)
    out = armed & (t >= ts[0])
    if mode is not None and "flag_control_attitude_enabled" in mode and len(mode["timestamp"]):
        tm = mode["timestamp"].astype(float)
        return out & hold_last(tm, mode["flag_control_attitude_enabled"] != 0, t) & (t >= tm[0])
    if "nav_state" in status:
        out &= hold_last(ts, status["nav_state"] != NAV_STATE_ACRO, t)
    return out


def _armed(data: dict, t: np.ndarray) -> np.ndarray | None:
    """Armed at each of `t` by vehicle_status (None: the log holds none)."""
    status = data.get("vehicle_status")
    if status is None or "arming_state" not in status or not len(status["timestamp"]):
        return None
    return hold_last(status["timestamp"].astype(float), status["arming_state"] == ARMING_STATE_ARMED, t)


def px4_arming(data: dict) -> list[tuple[float, bool]]:
    """(boot µs, armed) at the log's first vehicle_status and at each change of its arming_state."""
    status = data.get("vehicle_status")
    if status is None or "arming_state" not in status or not len(status["timestamp"]):
        return []
    return first_and_changes(status["timestamp"].tolist(), (status["arming_state"] == ARMING_STATE_ARMED).tolist())


def px4_modes(data: dict) -> list[tuple[float, int]]:
    """(boot µs, nav_state) at the log's first vehicle_status and at each change of its nav_state."""
    status = data.get("vehicle_status")
    if status is None or "nav_state" not in status or not len(status["timestamp"]):
        return []
    t, states = status["timestamp"].tolist(), status["nav_state"].tolist()
    return [(float(t[i]), int(states[i])) for i in range(len(states)) if i == 0 or states[i] != states[i - 1]]


def mode_event(uav: str, t: float, nav_state: int, first: bool) -> Event:
    """The flight_mode event of a vehicle_status nav_state at flight time `t` (`first`: the state the log starts in),
    as the ULog and the bag readers give it."""
    name = NAV_STATES.get(nav_state, f"NAV_STATE_{nav_state}")
    return Event("", "flight_mode", t, [uav], None, None, None,
                 {"label": f"mode={name}", "mode": name, **({"initial": True} if first else {})})


def px4_landing(data: dict) -> list[tuple[float, bool]]:
    """(boot µs, landed) at the log's first vehicle_land_detected and at each change of its `landed`."""
    landed = data.get("vehicle_land_detected")
    if landed is None or "landed" not in landed or not len(landed["timestamp"]):
        return []
    return first_and_changes(landed["timestamp"].tolist(), (landed["landed"] != 0).tolist())


def px4_crash(data: dict, attitude: tuple | None) -> tuple[float, str] | None:
    """(boot µs, words) of PX4's crash evidence, or None."""
    words, at = [], None
    status, own = data.get("vehicle_status"), data.get("failure_detector_status")
    hits = []
    if status is not None and "failure_detector_status" in status:
        bits = status["failure_detector_status"].astype(int) & (FAILURE_ROLL | FAILURE_PITCH)
        hits += [float(status["timestamp"][k]) for k in np.flatnonzero(bits)[:1]]
    if own is not None and "fd_roll" in own and "fd_pitch" in own:
        hits += [float(own["timestamp"][k]) for k in np.flatnonzero((own["fd_roll"] != 0) | (own["fd_pitch"] != 0))[:1]]
    if hits:
        at = min(hits)
        words.append("PX4's failure detector found its roll or pitch beyond its limits")
    if attitude is not None:
        side = rest_on_side(attitude[0], attitude[1], _armed(data, attitude[0]))
        if side is not None:
            words.append(side[1])
            at = side[0] if at is None else min(at, side[0])
    return None if at is None else (at, "; ".join(words))


def px4_vehicle_class(data: dict) -> str:
    """The class vehicle_status names ('' when the log does not say): is_vtol, else vehicle_type, else
    is_rotary_wing (before PX4 1.14), else system_type (the MAVLink MAV_TYPE it reports)."""
    status = data.get("vehicle_status")
    if status is None or not len(status.get("timestamp", ())):
        return ""
    if "is_vtol" in status and status["is_vtol"].any():
        return "vtol"
    kind = PX4_VEHICLE_CLASS.get(int(status["vehicle_type"][-1])) if "vehicle_type" in status else None
    if kind is None and "is_rotary_wing" in status and status["is_rotary_wing"][-1]:
        kind = "multirotor"
    if kind is None and "system_type" in status:
        kind = MAV_TYPE_CLASS.get(int(status["system_type"][-1]))
    return kind or ""
