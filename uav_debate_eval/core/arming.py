"""When each vehicle was armed, as its autopilot said (ArduPilot's EV ARMED/DISARMED, PX4's vehicle_status, a
telemetry log's heartbeats): a disarmed vehicle stands on the ground with its motors stopped. No ROS here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


def first_and_changes(t: Sequence[float], armed: Sequence[bool]) -> list[tuple[float, bool]]:
    """(t, armed) of the first state read and of each change: state messages repeat the state they hold."""
    return [(float(t[i]), bool(armed[i])) for i in range(len(armed)) if i == 0 or armed[i] != armed[i - 1]]


def state_events(log_events: list, uav: str, states: list[tuple[float, bool]], t0: float, source: str,
                 words: tuple[str, str] = ("ARMED", "DISARMED")) -> None:
    """A vehicle's arming from its autopilot's state messages (`first_and_changes`, times in the input clock)
    appended to the flight's `log_events`, `t0` the flight's origin, labelled `words` (armed, disarmed): the bag
    reader and the live flight report take a recorded and a received MAVROS state alike, the ULog reader PX4's."""
    for k, (t, armed) in enumerate(states):
        log_events.append(Event("", "autopilot_event", max(round(t - t0, 6), 0.0), [uav],
                                extra={"label": words[0] if armed else words[1], "source": source,
                                       **({"initial": True} if k == 0 else {})}))
