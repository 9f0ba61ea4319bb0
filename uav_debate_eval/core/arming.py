"""When each vehicle was armed, as its autopilot said (ArduPilot's EV ARMED/DISARMED, PX4's vehicle_status, a
telemetry log's heartbeats): a disarmed vehicle stands on the ground with its motors stopped. No ROS here."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

#: The labels arming events carry (ArduPilot's EV names, the PX4 reader's words).
ARMING_LABELS = {"ARMED": True, "armed": True, "DISARMED": False, "disarmed": False}


def arming_changes(events: Iterable) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per vehicle with arming events: (times, armed after each), in time order."""
    rows: dict[str, list[tuple[float, bool]]] = {}
    for e in events:
        state = ARMING_LABELS.get(str(e.extra.get("label", "")))
        if e.type == "autopilot_event" and state is not None and e.uavs:
            rows.setdefault(e.uavs[0], []).append((float(e.t), state))
    out = {}
    for u, changes in rows.items():
        changes.sort(key=lambda c: c[0])
        out[u] = (np.array([c[0] for c in changes]), np.array([c[1] for c in changes], dtype=bool))
    return out


def disarmed_at(changes: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """Whether the vehicle was disarmed at each of `t`: the last change at or before it says; before the first,
    the opposite of the first (an ARMED event: it was disarmed until then)."""
    at, armed = changes
    k = np.searchsorted(at, t, side="right") - 1
    state = np.where(k >= 0, armed[np.clip(k, 0, None)], ~armed[0])
    return ~state
