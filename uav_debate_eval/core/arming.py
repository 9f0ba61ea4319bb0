"""When each vehicle was armed, as its autopilot said (ArduPilot's EV ARMED/DISARMED, PX4's vehicle_status, a
telemetry log's heartbeats): a disarmed vehicle stands on the ground with its motors stopped. No ROS here."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from uav_debate_eval.core.records import Event

#: The labels arming events carry (ArduPilot's EV names, the PX4 reader's words).
ARMING_LABELS = {"ARMED": True, "armed": True, "DISARMED": False, "disarmed": False}


def arming_changes(events: Iterable) -> dict[str, tuple[np.ndarray, np.ndarray, bool]]:
    """Per vehicle with arming events: (times, armed after each, whether the first is a change), in time order.
    A first state read (a status message, a heartbeat: `initial`) is no change: it says nothing of before."""
    rows: dict[str, list[tuple[float, bool, bool]]] = {}
    for e in events:
        state = ARMING_LABELS.get(str(e.extra.get("label", "")))
        if e.type == "autopilot_event" and state is not None and e.uavs:
            rows.setdefault(e.uavs[0], []).append((float(e.t), state, not e.extra.get("initial")))
    out = {}
    for u, changes in rows.items():
        changes.sort(key=lambda c: c[0])
        out[u] = (np.array([c[0] for c in changes]), np.array([c[1] for c in changes], dtype=bool), changes[0][2])
    return out


def disarmed_at(changes: tuple[np.ndarray, np.ndarray, bool], t: np.ndarray) -> np.ndarray:
    """Whether the vehicle was disarmed at each of `t`: the last change at or before it says; before the first,
    the opposite of the first when it is a change (an ARMED event: disarmed until then), else not known: not
    disarmed (a vehicle is never taken for parked on what nothing said)."""
    at, armed, changed = changes
    k = np.searchsorted(at, t, side="right") - 1
    before = ~armed[0] if changed else True
    state = np.where(k >= 0, armed[np.clip(k, 0, None)], before)
    return ~state


def state_events(log_events: list, uav: str, states: list[tuple[float, bool]], t0: float, source: str) -> None:
    """A vehicle's arming from its autopilot's state messages (MAVROS `state`: the first state read and each change,
    times in the input clock) appended to the flight's `log_events`, `t0` the flight's origin: the bag reader and the
    live flight report take a recorded and a received state topic the same way."""
    for k, (t, armed) in enumerate(states):
        log_events.append(Event("", "autopilot_event", max(round(t - t0, 6), 0.0), [uav],
                                extra={"label": "ARMED" if armed else "DISARMED", "source": source,
                                       **({"initial": True} if k == 0 else {})}))
