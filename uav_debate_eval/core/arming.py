"""When each vehicle was armed, as its autopilot said (ArduPilot's EV ARMED/DISARMED, PX4's vehicle_status, a
telemetry log's heartbeats): a disarmed vehicle stands on the ground with its motors stopped. And when it stood
landed, as its land detector said (ArduCopter's EV LAND_COMPLETE/NOT_LANDED, PX4's vehicle_land_detected): an
armed vehicle spinning up on its pad, or down again after landing. No ROS here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from uav_debate_eval.core.records import Event

#: The labels arming events carry (ArduPilot's EV names, the PX4 reader's words).
ARMING_LABELS = {"ARMED": True, "armed": True, "DISARMED": False, "disarmed": False}
#: The labels of the land detector's events: landed or not (ArduCopter's EV names, the PX4 reader's words).
#: ArduCopter's LAND_COMPLETE_MAYBE is no landing yet.
LANDING_LABELS = {"LAND_COMPLETE": True, "landed": True, "NOT_LANDED": False, "airborne": False}
#: The words the PX4 and MAVROS readers label their land detector's changes with (landed, not).
LANDING_WORDS = ("landed", "airborne")
#: MAVLink's MAV_LANDED_STATE (EXTENDED_SYS_STATE, MAVROS ExtendedState.landed_state): undefined, on the ground;
#: in the air, taking off and landing are not landed.
MAV_LANDED_STATE_UNDEFINED, MAV_LANDED_STATE_ON_GROUND = 0, 1


def landed_state(value: int) -> bool | None:
    """A MAVLink landed state as landed or not; None for undefined (the autopilot does not know: no state)."""
    return None if int(value) == MAV_LANDED_STATE_UNDEFINED else int(value) == MAV_LANDED_STATE_ON_GROUND


Changes = tuple[np.ndarray, np.ndarray, bool]  #: (times, state after each, whether the first is a change)


def arming_changes(events: Iterable) -> dict[str, Changes]:
    """Per vehicle with arming events: (times, armed after each, whether the first is a change), in time order.
    A first state read (a status message, a heartbeat: `initial`) is no change: it says nothing of before."""
    return _changes(events, ARMING_LABELS)


def landing_changes(events: Iterable) -> dict[str, Changes]:
    """Per vehicle with land detector events: (times, landed after each, whether the first is a change)."""
    return _changes(events, LANDING_LABELS)


def _changes(events: Iterable, labels: dict[str, bool]) -> dict[str, Changes]:
    rows: dict[str, list[tuple[float, bool, bool]]] = {}
    for e in events:
        state = labels.get(str(e.extra.get("label", "")))
        if e.type == "autopilot_event" and state is not None and e.uavs:
            rows.setdefault(e.uavs[0], []).append((float(e.t), state, not e.extra.get("initial")))
    out = {}
    for u, changes in rows.items():
        changes.sort(key=lambda c: c[0])
        out[u] = (np.array([c[0] for c in changes]), np.array([c[1] for c in changes], dtype=bool), changes[0][2])
    return out


def disarmed_at(changes: Changes, t: np.ndarray) -> np.ndarray:
    """Whether the vehicle was disarmed at each of `t`: the last change at or before it says; before the first,
    the opposite of the first when it is a change (an ARMED event: disarmed until then), else not known: not
    disarmed (a vehicle is never taken for parked on what nothing said)."""
    return ~_state_at(changes, t, unknown=True)


def landed_at(changes: Changes, t: np.ndarray) -> np.ndarray:
    """Whether the vehicle stood landed at each of `t`, by the same rule (not known: not landed)."""
    return _state_at(changes, t, unknown=False)


def _state_at(changes: Changes, t: np.ndarray, unknown: bool) -> np.ndarray:
    at, state, changed = changes
    k = np.searchsorted(at, t, side="right") - 1
    before = ~state[0] if changed else unknown
    return np.where(k >= 0, state[np.clip(k, 0, None)], before)


def first_and_changes(t: Sequence[float], state: Sequence[bool]) -> list[tuple[float, bool]]:
    """(t, state) of the first state read and of each change (armed, landed): state messages repeat the state they
    hold."""
    return [(float(t[i]), bool(state[i])) for i in range(len(state)) if i == 0 or state[i] != state[i - 1]]


def state_events(log_events: list, uav: str, states: list[tuple[float, bool]], t0: float, source: str,
                 words: tuple[str, str] = ("ARMED", "DISARMED")) -> None:
    """A vehicle's arming (or land detector state) from its autopilot's state messages (`first_and_changes`, times
    in the input clock) appended to the flight's `log_events`, `t0` the flight's origin, labelled `words` (armed,
    disarmed; landed, airborne): the bag reader and the live flight report take a recorded and a received MAVROS
    state alike, the ULog reader PX4's vehicle_status and vehicle_land_detected."""
    for k, (t, armed) in enumerate(states):
        log_events.append(Event("", "autopilot_event", max(round(t - t0, 6), 0.0), [uav],
                                extra={"label": words[0] if armed else words[1], "source": source,
                                       **({"initial": True} if k == 0 else {})}))
