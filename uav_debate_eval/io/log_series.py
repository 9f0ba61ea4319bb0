"""Small helpers over an autopilot log's time series, shared by the ArduPilot and PX4 readers (no reader imports)."""

from __future__ import annotations

import numpy as np

#: Tilt (deg) past which a vehicle that has come to rest lies on its side: a crash, not a landing.
REST_TILT_DEG = 60.0
#: Roll and pitch of a vehicle at rest vary less than this (deg) over its last second (one still turning is held).
REST_STILL_DEG = 20.0


def hold_last(t_state: np.ndarray, state: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The state in force at each of `t` (the last one logged at or before it; the first one before that)."""
    i = np.searchsorted(t_state, t, side="right") - 1
    return state[np.clip(i, 0, len(state) - 1)]


def rest_on_side(t_us: np.ndarray, actual: np.ndarray, armed: np.ndarray | None = None) -> tuple[float, str] | None:
    """(when, words) when the log ends with the vehicle come to rest tilted past REST_TILT_DEG for at least 1 s;
    `t_us` boot microseconds (the readers' clock; `when` in it too), `actual` (roll, pitch) in degrees.

    A crash ends a flight: the vehicle stood upright at some point of the log, was armed before it came to rest
    (`armed` at each of `t_us`; None: the log does not say), and lies still over the last second (roll and pitch
    within REST_STILL_DEG, an inverted vehicle's roll across +-180 deg included), or the log stops under a second
    after it tipped over, still armed (the recording cut at the impact). A vehicle turned by hand while disarmed (a
    compass calibration) or lying inverted from its first sample (a simulator's submarine) did not crash in the
    log."""
    if not len(t_us):
        return None
    tilt = np.abs(actual).max(axis=1)
    upright = np.flatnonzero(tilt <= REST_TILT_DEG)
    if not len(upright):
        return None
    rest = upright[-1] + 1
    if rest >= len(t_us) or (armed is not None and not armed[:rest + 1].any()):
        return None
    if t_us[-1] - t_us[rest] < 1e6:  # tipped over under a second before the log stops: cut as it fell (armed still)
        if armed is None or armed[-1]:
            return float(t_us[rest]), f"its log stops as it tips over ({float(tilt[-1]):.0f}° tilt)"
        return None
    last_second = actual[t_us >= t_us[-1] - 1e6]
    turned = (last_second - last_second[-1] + 180.0) % 360.0 - 180.0  # each angle's way from the last, wrapped
    if (turned.max(axis=0) - turned.min(axis=0)).max() > REST_STILL_DEG:
        return None
    return float(t_us[rest]), f"it came to rest on its side ({float(np.median(tilt[rest:])):.0f}° tilt)"
