"""Findings from what the autopilot itself logged (ArduPilot MODE / ERR / EV): a failsafe, an estimator or sensor
error, a switch into a recovery mode. The panel must see these: they often explain the trajectory (an RTL is no
navigation fault). Plain mode changes, events and mission commands stay in the DSL only.
"""

from __future__ import annotations

from typing import Any

from uav_debate_eval.findings.model import VerifiedFinding
from uav_debate_eval.findings.text import span, vehicles
from uav_debate_eval.io.ardupilot_codes import RECOVERY_MODES

#: Errors the data-quality pass already reports (as gps_glitch findings): not repeated as warnings.
_QUALITY_ERRORS = ("GPS_glitch",)
_WARNING_LOG_EVENTS = ("LOST_GPS", "EKF_ALT_RESET", "EKF_YAW_RESET")
#: Event times are kept to the millisecond: one at the flight's last sample may lie this far past its end.
EVENT_ROUNDING_S = 5e-4


def autopilot_findings(events: list, rng: tuple[float, float] | None) -> list[VerifiedFinding]:
    """One warning per failsafe, autopilot error, recovery-mode switch and alarming log event within `rng`."""
    out: list[VerifiedFinding] = []
    for e in events:
        t1 = e.t_end if e.t_end is not None else e.t
        if not e.id or (rng is not None and (e.t > rng[1] + EVENT_ROUNDING_S or t1 < rng[0] - EVENT_ROUNDING_S)):
            continue
        said = _sentence(e)
        if said is None:
            continue
        sentence, recommendation, weight = said
        severity = "hazard" if e.type == "crash" else "info" if e.type == "log_end_in_flight" and e.extra.get("sitl") \
            else "warning"
        out.append(VerifiedFinding(e.type, severity, sentence, e.t, t1, list(e.uavs), [e.id], [recommendation],
                                   f"event:{e.type}:{','.join(e.uavs)}:{e.t:.2f}", weight))
    return out


def _sentence(e: Any) -> tuple[str, str, float] | None:
    who, label = vehicles(e.uavs), str(e.extra.get("label", ""))
    when = span(e.t, e.t_end)
    if e.type == "crash":
        return (f"{who} crashed at {when}: {label} (crash {e.id}).",
                f"Recommend inspecting {who} and reading its log before it flies again: {label}.", 0.95)
    if e.type == "failsafe":
        what = e.extra.get("subsystem", label)
        return (f"{who}'s autopilot raised {what} at {when} (failsafe {e.id}).",
                f"Recommend finding why {who} triggered {what} at {when} and checking that its failsafe action "
                "was the intended one.", 0.7)
    if e.type == "autopilot_error" and e.extra.get("refused_mode"):
        mode = e.extra["refused_mode"]
        return (f"{who}'s autopilot refused a change to {mode} at {when} (autopilot_error {e.id}).",
                f"Recommend checking what {mode} needs before it is asked for (a mission loaded, a position "
                f"estimate, the vehicle armed): {who} stayed in its mode at {when}.", 0.5)
    if e.type == "autopilot_error" and label not in _QUALITY_ERRORS:
        what = label.replace("_", " ")
        part = f"the {e.extra['subsystem']} of " if e.extra.get("subsystem") else ""
        return (f"{who}'s autopilot logged {what} at {when} (autopilot_error {e.id}).",
                f"Recommend checking {part}{who} (sensors, vibration, configuration) before the next flight: it "
                f"logged {what} at {when}.", 0.6)
    if e.type == "flight_mode":
        mode, reason = str(e.extra.get("mode", "")), str(e.extra.get("reason", ""))
        if e.extra.get("initial") or (mode not in RECOVERY_MODES and "failsafe" not in reason):
            return None  # the mode the log starts in (written at boot) is no switch
        why = reason.replace("_", " ")
        return (f"{who} switched to {mode} at {when} ({why + '; ' if why else ''}flight_mode {e.id}).",
                f"Recommend reviewing why {who} switched to {mode} at {when}" + (f" ({why})." if why else "."), 0.55)
    if e.type == "log_end_in_flight":
        where = (f"{e.extra.get('height_m', 0):.1f} m above where its log started, moving at "
                 f"{e.extra.get('speed_mps', 0):.1f} m/s")
        if "descent_mps" in e.extra:
            where += f", falling at {e.extra['descent_mps']:.1f} m/s"
        if e.extra.get("sitl"):
            return (f"{who}'s simulation stopped at {when} while it was in the air, {where} "
                    f"(log_end_in_flight {e.id}).", f"Recommend letting {who} land before the simulation is "
                    "stopped, so the log shows the whole flight.", 0.3)
        armed = "armed and " if e.extra.get("armed") else ""
        return (f"{who}'s log ends at {when} while it was {armed}in the air, {where}: the recording stopped in "
                f"flight, as a power loss or a crash cuts it (log_end_in_flight {e.id}).",
                f"Recommend finding out how {who}'s flight ended (the vehicle, its battery, the log's storage): its "
                f"log stops in the air at {when}.", 0.75)
    if e.type == "autopilot_event" and label in _WARNING_LOG_EVENTS:
        return (f"{who}'s autopilot logged {label} at {when} (autopilot_event {e.id}).",
                f"Recommend checking the estimator inputs of {who} around {when} ({label}).", 0.5)
    return None
