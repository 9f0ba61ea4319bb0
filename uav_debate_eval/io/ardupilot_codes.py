"""ArduPilot's numeric codes in logs, named as the autopilot names them (AP_Logger, ModeReason, EKF status bits).

Only what the reader turns into events and data-quality spans; anything else is printed by its number.
"""

from __future__ import annotations

#: ERR message subsystems (AP_Logger LogErrorSubsystem).
ERR_SUBSYSTEMS = {
    1: "MAIN", 2: "RADIO", 3: "COMPASS", 4: "OPTFLOW", 5: "FAILSAFE_RADIO", 6: "FAILSAFE_BATT", 7: "FAILSAFE_GPS",
    8: "FAILSAFE_GCS", 9: "FAILSAFE_FENCE", 10: "FLIGHT_MODE", 11: "GPS", 12: "CRASH_CHECK", 13: "FLIP",
    14: "AUTOTUNE", 15: "PARACHUTES", 16: "EKFCHECK", 17: "FAILSAFE_EKFINAV", 18: "BARO", 19: "CPU",
    20: "FAILSAFE_ADSB", 21: "TERRAIN", 22: "NAVIGATION", 23: "FAILSAFE_TERRAIN", 24: "EKF_PRIMARY",
    25: "THRUST_LOSS_CHECK", 26: "FAILSAFE_SENSORS", 27: "FAILSAFE_LEAK", 28: "PILOT_INPUT", 29: "FAILSAFE_VIBE",
    30: "INTERNAL_ERROR", 31: "FAILSAFE_DEADRECKON",
}
ERR_FLIGHT_MODE, ERR_GPS, ERR_EKFCHECK, ERR_EKF_PRIMARY = 10, 11, 16, 24
#: ECode 0 means "resolved" for every subsystem but EKF_PRIMARY (whose code is the new primary lane).
ERR_RESOLVED = 0
ERR_GPS_GLITCH = 2

#: EV message ids (AP_Logger LogEvent), the ones a flight review cares about.
EV_IDS = {
    10: "ARMED", 11: "DISARMED", 15: "AUTO_ARMED", 17: "LAND_COMPLETE_MAYBE", 18: "LAND_COMPLETE", 19: "LOST_GPS",
    21: "FLIP_START", 22: "FLIP_END", 25: "SET_HOME", 28: "NOT_LANDED", 54: "EKF_ALT_RESET",
    55: "LAND_CANCELLED_BY_PILOT", 56: "EKF_YAW_RESET", 61: "GPS_PRIMARY_CHANGED", 85: "EK3_SRC_PRIMARY",
    86: "EK3_SRC_SECONDARY", 87: "EK3_SRC_TERTIARY",
}

#: MODE message reasons (ModeReason).
MODE_REASONS = {
    0: "UNKNOWN", 1: "RC_COMMAND", 2: "GCS_COMMAND", 3: "RADIO_FAILSAFE", 4: "BATTERY_FAILSAFE", 5: "GCS_FAILSAFE",
    6: "EKF_FAILSAFE", 7: "GPS_GLITCH", 8: "MISSION_END", 9: "THROTTLE_LAND_ESCAPE", 10: "FENCE_BREACHED",
    11: "TERRAIN_FAILSAFE", 12: "BRAKE_TIMEOUT", 13: "FLIP_COMPLETE", 14: "AVOIDANCE", 15: "AVOIDANCE_RECOVERY",
    16: "THROW_COMPLETE", 17: "TERMINATE", 18: "TOY_MODE", 19: "CRASH_FAILSAFE", 25: "FAILSAFE", 26: "INITIALISED",
    31: "STARTUP", 32: "SCRIPTING",
}
#: Modes that take the vehicle home or down: a switch into one is something a reviewer must see.
RECOVERY_MODES = ("RTL", "SMART_RTL", "LAND", "BRAKE", "QRTL", "QLAND", "AUTO_RTL")

#: EKF nav filter status bits (XKF4/NKF4 `SS`; nav_filter_status) and EKF_STATUS_REPORT flags (EKF_STATUS_FLAGS):
#: the same meaning in both up to bit 9.
VERT_VEL, HORIZ_POS_REL, HORIZ_POS_ABS, VERT_POS, CONST_POS_MODE = 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 7
NAV_GPS_GLITCHING = 1 << 14
MAV_EKF_UNINITIALIZED, MAV_EKF_GPS_GLITCH = 1 << 10, 1 << 15
#: ArduPilot's EKF failsafe: two of the velocity, position and compass innovation test ratios above FS_EKF_THRESH.
FS_EKF_THRESH_DEFAULT = 0.8


def position_ok(flags: int) -> bool:
    """The estimator claims a usable position: horizontal (absolute or relative) and vertical, not a constant hold."""
    return bool(flags & (HORIZ_POS_REL | HORIZ_POS_ABS)) and bool(flags & VERT_POS) and not flags & CONST_POS_MODE


def vertical_ok(flags: int) -> bool:
    """The estimator claims a usable altitude and vertical velocity (barometer and accelerometers suffice: a
    position without GPS, or held constant, keeps them)."""
    return bool(flags & VERT_POS) and bool(flags & VERT_VEL)


def err_name(subsystem: int, code: int) -> str:
    """"GPS glitch", "FAILSAFE_RADIO resolved", "EKF_PRIMARY lane 1"."""
    name = ERR_SUBSYSTEMS.get(subsystem, f"SUBSYSTEM_{subsystem}")
    if subsystem == ERR_EKF_PRIMARY:
        return f"{name} lane {code}"
    if code == ERR_RESOLVED:
        return f"{name} resolved"
    if subsystem == ERR_GPS and code == ERR_GPS_GLITCH:
        return "GPS glitch"
    if subsystem == ERR_EKFCHECK and code == 2:
        return "EKFCHECK bad variance"
    return f"{name} code {code}"
