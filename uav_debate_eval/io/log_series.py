"""Small helpers over an autopilot log's time series, shared by the ArduPilot and PX4 readers (no reader imports)."""

from __future__ import annotations

import numpy as np

#: Tilt (deg) past which a vehicle that has come to rest lies on its side: a crash, not a landing.
REST_TILT_DEG = 60.0


def hold_last(t_state: np.ndarray, state: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The state in force at each of `t` (the last one logged at or before it; the first one before that)."""
    i = np.searchsorted(t_state, t, side="right") - 1
    return state[np.clip(i, 0, len(state) - 1)]


def rest_on_side(t: np.ndarray, actual: np.ndarray) -> tuple[float, str] | None:
    """(when, words) when the log ends with the vehicle tilted past REST_TILT_DEG for at least 1 s."""
    if not len(t):
        return None
    tilt = np.abs(actual).max(axis=1)
    upright = np.flatnonzero(tilt <= REST_TILT_DEG)
    rest = upright[-1] + 1 if len(upright) else 0
    if rest < len(t) and t[-1] - t[rest] >= 1.0:
        return float(t[rest]), f"it came to rest on its side ({float(np.median(tilt[rest:])):.0f}° tilt)"
    return None
