"""What only live knows, in the flight report's clock: veto episodes as published, the segments with their
panel verdicts, data quality found live, dropped poses; and the header's sentence per broken constraint."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from uav_debate_eval.live.veto_history import VetoEpisode
from uav_debate_eval.safety.health import DEGRADED

if TYPE_CHECKING:
    from uav_debate_eval.live.flight import FlightJob

UNITS = {"min_separation": "m", "max_speed": "m/s", "max_vertical_speed": "m/s", "geofence": "m", "stale_data": "s",
         "attitude_control": "deg"}
#: The verifier's degraded causes (safety.health) in words.
CAUSES = {"lag": "behind the pose stream", "poses_lost": "poses lost", "stalled": "check loop stalled"}
#: A stale-data veto's cause when the report finds the vehicle's estimate flagged invalid then (PX4 xy/z_valid):
#: live, its poses never reach the verifier.
ESTIMATE_INVALID = "estimate flagged invalid"
#: How long before a veto's rise an estimate lost may have started it (the stale timeout passes first).
CAUSE_LOOKBACK_S = 5.0
#: A violation's worst value is its smallest for these constraints, its largest for the others.
SMALLER_IS_WORSE = {"min_separation"}


def _worst(constraint: str, values: list[float]) -> float | None:
    values = [v for v in values if isinstance(v, float | int) and math.isfinite(v)]
    if not values:
        return None
    return min(values) if constraint in SMALLER_IS_WORSE else max(values)


def _overlapping(segments: list[dict], a: float, b: float) -> list[str]:
    """Ids of the segments (flight time) that overlap [a, b]."""
    return [s["id"] for s in segments if s["t_start"] <= b and s["t_end"] >= a]


def episode_record(ep: VetoEpisode, violations: list[dict], segments: list[dict], t0: float,
                   quality: Sequence[dict] = ()) -> dict:
    """One veto episode in flight time: rise and fall as published, the offending sample (the flight's first
    violating sample of the constraint it named; else the verifier's own evidence) and the latency from it; its
    causes (a degraded verifier's; a stale vehicle whose estimate the report's data quality finds invalid)."""
    rise = (ep.t_raised if ep.t_raised is not None else ep.t_on) - t0
    fall = None if ep.t_off is None else ep.t_off - t0
    constraints = sorted({c for ev in ep.evidence if (c := ev.constraint)})
    uavs = sorted({u for ev in ep.evidence for u in ev.uavs})
    end = fall if fall is not None else math.inf
    matching = [v for v in violations if (not constraints or v["constraint"] in constraints)
                and v["t_start"] <= end and v["t_end"] >= rise - 5.0]
    evidence_t = [ev.t - t0 for ev in ep.evidence if ev.t is not None]
    offending = min(v["t_start"] for v in matching) if matching else min(evidence_t, default=None)
    constraint = constraints[0] if constraints else None
    causes = {CAUSES.get(r, r) for ev in ep.evidence if ev.constraint == DEGRADED
              for r in str(ev.values.get("reasons", "")).split(",") if r}
    if "stale_data" in constraints and any(
            f["kind"] == "estimator_invalid" and set(f["uavs"]) & set(uavs) and f["t_start"] <= end
            and f["t_end"] >= rise - CAUSE_LOOKBACK_S for f in quality):
        causes.add(ESTIMATE_INVALID)
    return {
        "kind": ep.kind, "t_rise": rise, "t_fall": fall,
        "t_violating_until": None if ep.t_violating is None else ep.t_violating - t0,
        "constraints": constraints, "uavs": uavs,
        "worst_value": _worst(constraint or "", [v for ev in ep.evidence if (v := ev.number("value")) is not None]),
        "limit": next((lim for ev in ep.evidence if (lim := ev.number("limit")) is not None), None),
        "offending_t": offending, "latency_s": None if offending is None else rise - offending,
        "segments": _overlapping(segments, rise, end), "causes": sorted(causes),
    }


def live_record(report: dict, job: FlightJob, t0: float) -> dict:
    """report["live"] of the flight report (t0: the stream clock at the flight's time 0)."""
    segments = []
    for s in job.segments:
        shift = s["t0_stream"] - t0  # a segment report's flight time -> the flight's
        seg = {k: v for k, v in s.items() if k not in ("t_start_stream", "t_end_stream", "t0_stream",
                                                       "data_quality")}
        seg.update(t_start=s["t_start_stream"] - t0, t_end=s["t_end_stream"] - t0)
        segments.append((seg, [{**f, "t_start": f["t_start"] + shift, "t_end": f["t_end"] + shift}
                               for f in s["data_quality"]]))
    segs = [seg for seg, _ in segments]
    debate_tokens = report["debate"].get("tokens") or {}
    return {
        "flight": True,
        "session": job.session,
        "stream_t0": t0,
        "veto_episodes": [episode_record(ep, report["violations"], segs, t0, report["data_quality"]["findings"])
                          for ep in job.episodes if ep.kind == "hazard"],
        "degraded_episodes": [episode_record(ep, [], segs, t0) for ep in job.episodes if ep.kind == "degraded"],
        "poses_lost_before_verifier": dict(job.lost_before_verifier),
        "segments": segs,
        "data_quality": [f for _, dq in segments for f in dq],
        "dropped_poses": dict(job.dropped),
        "clock_back": {u: {"poses": n, "back_s": back_s} for u, (n, back_s) in sorted(job.clock_back.items())},
        "tape": job.tape,
        "skipped_segments": list(job.skipped),
        "clock_jumps": job.clock_jumps,
        "tokens": {"segments": sum(s["panel"]["tokens"] for s in segs),
                   "flight_debate": int(debate_tokens.get("prompt", 0)) + int(debate_tokens.get("completion", 0))},
    }


def _span(a: float, b: float) -> str:
    return f"t={a:.1f} s" if abs(b - a) < 0.05 else f"t={a:.1f}–{b:.1f} s"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def headline(report: dict) -> list[str]:
    """One sentence per broken constraint (episodes, the live segments they fell in, worst value), then the live
    veto's: the header of the flight report and the end of the terminal."""
    live = report.get("live", {})
    segments = live.get("segments", [])
    by_constraint: dict[str, list[dict]] = {}
    for v in report["violations"]:
        by_constraint.setdefault(v["constraint"], []).append(v)
    out = []
    for constraint, vs in by_constraint.items():
        unit = UNITS.get(constraint, "")
        worst = _worst(constraint, [v["worst_value"] for v in vs])
        limit = next((v["limit"] for v in vs if v.get("limit") is not None), None)
        seg_ids = sorted({s for v in vs for s in _overlapping(segments, v["t_start"], v["t_end"])},
                         key=lambda s: int(s[1:]) if s[1:].isdigit() else 0)
        where = f" in segment{'s' if len(seg_ids) != 1 else ''} {', '.join(seg_ids)}" if seg_ids else ""
        value = (f": worst {worst:.3g} {unit}" + (f" against the {limit:g} {unit} limit" if limit is not None else "")
                 if worst is not None else "")
        who = sorted({u for v in vs for u in v["uavs"]})
        out.append(f"{constraint.replace('_', ' ').capitalize()} broken in {_count(len(vs), 'episode')}{where}"
                   f"{value} ({', '.join(who) or 'the swarm'}, {_span(vs[0]['t_start'], vs[-1]['t_end'])}).")
    episodes = live.get("veto_episodes", [])
    if episodes:
        latencies = [e["latency_s"] for e in episodes if e.get("latency_s") is not None]
        seg_ids = sorted({s for e in episodes for s in e["segments"]}, key=lambda s: int(s[1:]) if s[1:].isdigit()
                         else 0)
        n = len(episodes)
        times = {1: "once", 2: "twice"}.get(n, f"{n} times")
        text = (f"The live veto was raised {times}"
                + (f" (segment{'s' if len(seg_ids) != 1 else ''} {', '.join(seg_ids)})" if seg_ids else ""))
        if latencies and max(latencies) < 0.005:
            text += f", {'each time ' if n > 1 else ''}with the offending sample itself (stream time)"
        elif latencies:
            text += f", at most {max(latencies):.2f} s of stream time after the offending sample"
        out.append(text + ".")
    elif report["violations"]:
        out.append("The live veto was not raised during the session.")
    for e in episodes:
        if ESTIMATE_INVALID in e.get("causes", []):
            fall = e["t_fall"] if e["t_fall"] is not None else e["t_rise"]
            out.append(f"The veto for stale data of {', '.join(e['uavs'])} ({_span(e['t_rise'], fall)}) came while "
                       "its estimator flagged its position invalid: no position reached the verifier (the report's "
                       "estimator_invalid finding).")
    degraded = live.get("degraded_episodes", [])
    if degraded:
        n = len(degraded)
        causes = sorted({c for e in degraded for c in e.get("causes", [])})
        out.append(f"The verifier could not vouch for the swarm {({1: 'once', 2: 'twice'}).get(n, f'{n} times')}"
                   + (f" ({', '.join(causes)})" if causes else "")
                   + " and held the fail-safe veto (verifier_degraded) until it had caught up.")
    lost = sum(live.get("poses_lost_before_verifier", {}).values())
    if lost:
        out.append(f"{_count(lost, 'pose')} never reached the verifier (counted per vehicle in the live section).")
    return out
