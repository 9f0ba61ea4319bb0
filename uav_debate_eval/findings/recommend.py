"""Candidate recommendations (and event sentences) for each kind of finding: specific and actionable.

Every recommendation names the vehicles, the constraint or metric, the flight time and the numbers it rests
on, so a reader can act on it without the rest of the report.
"""

from __future__ import annotations

from typing import Any

from uav_debate_eval.findings.text import num, span, vehicles
from uav_debate_eval.quality.frames import FIX_KEY


def for_violation(v: Any, on_turn: bool) -> list[str]:
    who, when = vehicles(v.uavs), span(v.t_start, v.t_end)
    worst, limit = num(v.worst_value), num(v.limit)
    if v.constraint == "min_separation":
        where = f"on the turn at {when}" if on_turn else f"at {when}"
        return [f"Recommend increasing the planned separation of {who} {where} "
                f"(closest {worst} m, min_separation limit {limit} m).",
                f"Recommend a separation guard that holds {who} at least {limit} m apart before the next flight."]
    if v.constraint == "max_speed":
        return [f"Recommend capping the commanded speed of {who} below {limit} m/s (peak {worst} m/s at {when}).",
                f"Recommend checking the speed controller gains of {who} for the overshoot at {when}."]
    if v.constraint == "max_vertical_speed":
        return [f"Recommend limiting the climb and descent rate of {who} below {limit} m/s "
                f"(peak {worst} m/s at {when}).",
                f"Recommend checking the altitude controller of {who} for the vertical_speed spike at {when}."]
    if v.constraint == "geofence":
        return [f"Recommend moving the waypoints of {who} inside the geofence (left it by {worst} m at {when}).",
                f"Recommend a geofence guard that stops {who} before the boundary."]
    if v.constraint == "stale_data":
        return [f"Recommend checking the telemetry link of {who} (pose silent {worst} s at {when}, "
                f"stale_data limit {limit} s).",
                f"Recommend a failsafe that holds {who} when its pose is older than {limit} s."]
    return [f"Recommend enforcing {v.constraint} for {who} (worst {worst}, limit {limit} at {when})."]


def for_warning(w: dict) -> list[str]:
    who = vehicles(w.get("uavs") or [])
    if w["kind"] == "cpa":
        return [f"Recommend reacting to the predicted closest approach of {who} at {num(w['t'])} s "
                f"(predicted {num(w['value'])} m, min_separation limit {num(w['limit'])} m) with a wider spacing."]
    return [f"Recommend keeping {who} further from the geofence boundary near {num(w['t'])} s "
            f"(predicted exit within {num(w['value'])} s)."]


def for_margin(name: str, m: dict) -> list[str]:
    worst, limit = num(m.get("worst_value")), num(m.get("limit"))
    if name == "min_separation":
        return [f"Recommend widening the planned spacing: the closest pair came to {worst} m "
                f"against the {limit} m min_separation limit."]
    if name == "stale_data":
        return [f"Recommend checking the telemetry rate: the longest pose silence was {worst} s "
                f"against the {limit} s stale_data limit."]
    if name == "geofence":
        return ["Recommend moving the route further inside the geofence: a vehicle came close to its boundary."]
    return [f"Recommend more margin on {name}: worst {worst} against the limit {limit}."]


def event_sentence(e: Any) -> str:
    who, t1 = vehicles(e.uavs), e.t_end if e.t_end is not None else e.t
    when = span(e.t, t1)
    if e.type == "proximity":
        return f"{who} came within {num(e.value)} m of each other at {when} (proximity event {e.id})."
    if e.type == "altitude_rate":
        return f"{who} changed altitude at {num(e.value)} m/s at {when} (altitude_rate event {e.id})."
    if e.type == "link_loss":
        return f"{who} lost its communication link for {num(e.value)} s at {when} (link_loss event {e.id})."
    if e.type == "formation_breach":
        return f"{who} left its formation slot by up to {num(e.value)} m at {when} (formation_breach {e.id})."
    if e.type == "sharp_turn":
        return f"{who} turned {num(e.value, 0)} deg at {num(e.t)} s (sharp_turn {e.id})."
    if e.type == "data_gap":
        return f"The pose stream of {who} has a {num(e.value)} s gap at {when} (data_gap {e.id})."
    return f"{e.type} of {who} at {when} ({e.id})."


def for_event(e: Any) -> list[str]:
    who, when = vehicles(e.uavs), span(e.t, e.t_end if e.t_end is not None else e.t)
    if e.type == "proximity":
        return [f"Recommend increasing the spacing of {who} at {when} (closest {num(e.value)} m)."]
    if e.type == "altitude_rate":
        return [f"Recommend limiting the vertical rate of {who} at {when} ({num(e.value)} m/s)."]
    if e.type == "link_loss":
        return [f"Recommend checking the radio link of {who} and its link-loss failsafe (lost {num(e.value)} s "
                f"at {when})."]
    if e.type == "formation_breach":
        return [f"Recommend re-tuning the formation controller of {who} (slot error up to {num(e.value)} m at "
                f"{when})."]
    if e.type == "sharp_turn":
        return [f"Recommend smoothing the path of {who} around {num(e.t)} s (turn of {num(e.value, 0)} deg)."]
    if e.type == "data_gap":
        return [f"Recommend checking the logging of {who}: its pose stream has a {num(e.value)} s gap at {when}."]
    return [f"Recommend reviewing {e.type} of {who} at {when}."]


def for_route_turns(turns: list) -> list[str]:
    return [f"Recommend keeping the planned route turns ({', '.join(e.id for e in turns)}): the swarm turned "
            f"together and no vehicle left the sharp_turn pattern."]


def for_turns(turns: list) -> list[str]:
    e0, e1 = turns[0], turns[-1]
    peak = max(float(e.value or 0.0) for e in turns)
    return [f"Recommend smoothing the path of {vehicles(e0.uavs)} at {span(e0.t, e1.t_end or e1.t)} "
            f"(sharp_turn of up to {num(peak, 0)} deg apart from the swarm)."]


def for_waypoints(uavs: list[str], vals: dict) -> list[str]:
    miss = vals.get("worst_miss")
    return [f"Recommend re-tuning the position tracking of {vehicles(uavs)}"
            + (f" or widening the waypoint tolerance (worst miss {num(miss)} m)." if miss is not None
               else ": its waypoints were not flown.")]


def for_data_quality(f: Any) -> list[str]:
    if f.kind == "clock_restart":
        return [f"Recommend evaluating the earlier run of {vehicles(f.uavs)} from a recording of its own before "
                "trusting the whole session."]
    if f.kind == "clock_back":
        return [f"Recommend finding why the clock of {vehicles(f.uavs)} restarted in flight (a reboot of its "
                "autopilot or companion computer, its time sync) before trusting the rest of the flight."]
    touched = ", ".join(f.affects) if f.affects else "the checks"
    return [f"Recommend checking the {f.kind.replace('_', ' ')} of {vehicles(f.uavs)} in the recording at "
            f"{span(f.t_start, f.t_end)} before trusting {touched}."]


def for_not_evaluable(n: Any) -> list[str]:
    if FIX_KEY in n.reason:  # local frames the mission can place: the recording is fine as it is
        return [f"Recommend setting {FIX_KEY} and evaluating again, so that {n.constraint} can be checked for "
                f"{vehicles(n.uavs)} (their local frames are placed by nothing)."]
    return [f"Recommend re-recording {vehicles(n.uavs)} so that {n.constraint} can be checked ({n.reason})."]


_METRIC_ADVICE = {
    "speed_consistency": "holding a steadier cruise speed",
    "smoothness": "smoothing the commanded accelerations",
    "formation_stability": "re-tuning the formation controller",
    "separation_margin": "widening the planned spacing",
    "emergency_response": "reacting sooner when a pair closes in",
    "envelope_margin": "keeping more margin to the hard limits",
    "task_completion": "re-tuning the waypoint tracking",
    "communication_quality": "checking the radio links",
    "energy_efficiency": "flying smoother, less aggressive profiles",
}


def for_metric(cat: str, name: str, d: dict, t_range: tuple[float, float]) -> list[str]:
    advice = _METRIC_ADVICE.get(name, "investigating the cause")
    return [f"Recommend {advice} to raise {cat}.{name} (score {num(d.get('score'), 2)} at {span(*t_range)})."]


def all_clear(safety: Any, t_range: tuple[float, float]) -> tuple[str, str]:
    """(sentence, recommendation) of a segment without any finding: the constraint that came closest."""
    margins = getattr(safety, "margins", {}) or {}
    rated = [(m["ratio"], n) for n, m in margins.items() if isinstance(m.get("ratio"), (int, float))]
    closest = max(rated) if rated else None
    tail = (f"; the closest constraint was {closest[1]} at {num(closest[0] * 100, 0)} % of its limit"
            if closest else "")
    sentence = f"No violation, warning or anomaly at {span(*t_range)}{tail}."
    rec = ("Recommend keeping the current settings" + (f" and watching {closest[1]}" if closest else "")
           + f" in the next flight (checked {span(*t_range)}).")
    return sentence, rec
