"""The verifier's status table, one row per checked constraint, per kind of predicted warning and for
the veto itself (the live node sends them as diagnostic_msgs/DiagnosticArray; no ROS here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from uav_debate_eval.core.records import CONSTRAINT_NAMES
from uav_debate_eval.safety.health import HealthReport
from uav_debate_eval.safety.monitor import SafetyState

OK, WARN, ERROR = 0, 1, 2  # diagnostic_msgs/DiagnosticStatus levels
_WARN_OF = {"cpa": "min_separation", "time_to_geofence": "geofence"}


@dataclass
class StatusRow:
    name: str
    level: int
    message: str
    values: dict[str, str] = field(default_factory=dict)


def unit(constraint: str | None) -> str:
    units = {"min_separation": "m", "geofence": "m", "stale_data": "s", "attitude_control": "deg"}
    return units.get(constraint or "", "m/s")


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def status_rows(state: SafetyState, limits: dict[str, object], veto_values: dict[str, str],
                unheard: list[str] | None = None, health: HealthReport | None = None,
                fail_safe: str = "veto") -> list[StatusRow]:
    """`limits`: each constraint's limit (None: not checked, no row); `veto_values`: extra keys of the veto row;
    `unheard`: vehicles expected but never heard from (see `unheard_vehicles`); `health`: the verifier's own
    state (a `safety/verifier` row: ERROR while degraded under fail_safe `veto`, WARN under `warn`)."""
    rows: list[StatusRow] = []
    active = {a["constraint"]: a for a in state.active}
    warned = {_WARN_OF.get(w["kind"]) for w in state.warnings}
    for name in CONSTRAINT_NAMES:
        if limits.get(name) is None:
            continue
        a = active.get(name)
        cur = state.values.get(name, {})
        lim = a["limit"] if a else cur.get("limit")
        value = a["value"] if a else cur.get("value")
        if a:
            level = ERROR
            message = f"violated by {', '.join(a['uavs'][:10])}: {value:.3f} {unit(name)} (limit {lim:g})"
            if a.get("data_quality"):
                message += f"; data-quality fault ({a['data_quality']}) on a vehicle involved"
            uavs = a["uavs"]
        else:
            level = WARN if name in warned else OK
            message = "predicted violation within the horizon" if name in warned else "ok"
            if name == "stale_data" and state.ended:
                message = f"flight over: {len(state.ended)} vehicles went quiet together"
            uavs = []
        rows.append(StatusRow(f"safety/{name}", level, message, {
            "uavs": ",".join(uavs), "value": _num(value), "limit": _num(lim),
            "t": f"{(a['t'] if a else state.t):.6f}", **({"data_quality": a["data_quality"]}
                                                         if a and a.get("data_quality") else {})}))
    for kind in sorted({w["kind"] for w in state.warnings}):
        ws = sorted((w for w in state.warnings if w["kind"] == kind), key=lambda w: w["t_predicted"])
        w = ws[0]
        rows.append(StatusRow(f"safety/warning/{kind}", WARN,
                              f"{len(ws)} predicted; first {','.join(w['uavs'])} at {w['t_predicted']:.2f}", {
                                  "uavs": ",".join(w["uavs"]), "value": f"{w['value']:.6g}",
                                  "limit": f"{w['limit']:.6g}", "t": f"{w['t']:.6f}",
                                  "t_predicted": f"{w['t_predicted']:.6f}"}))
    rows += rule_rows(state, active)
    for dq in state.data_quality:
        rows.append(StatusRow(f"safety/data_quality/{dq['kind']}", WARN,
                              f"{', '.join(dq['uavs'][:10])}: moved faster than {dq['limit']:g} m/s between two "
                              "samples, likely a tracking or recording glitch; the veto still acts on it",
                              {"uavs": ",".join(dq["uavs"]), "limit": _num(dq["limit"]), "t": f"{dq['t']:.6f}"}))
    if unheard:
        rows.append(StatusRow("safety/unheard", WARN, f"{', '.join(unheard[:10])}: configured but no pose received "
                              "yet; not checked (start the monitor before the vehicles publish)",
                              {"uavs": ",".join(unheard), "t": f"{state.t:.6f}"}))
    if health is not None:
        rows.append(verifier_row(health, state.t, fail_safe))
    rows.append(StatusRow("safety/veto", ERROR if state.veto else OK, "VETO" if state.veto else "clear",
                          {"snapshot_policy": state.snapshot_policy, **veto_values}))
    return rows


def verifier_row(health: HealthReport, t: float, fail_safe: str) -> StatusRow:
    """The verifier's own row: whether it can vouch for the swarm, its lag and the poses it never processed."""
    lost = health.lost
    values = {"constraint": "verifier_degraded" if health.degraded else "", "lag_s": f"{health.lag_s:.6f}",
              "poses_lost": str(sum(lost.values())),
              "poses_lost_by_vehicle": ",".join(f"{u}:{n}" for u, n in sorted(lost.items())),
              "uavs": ",".join(sorted({u for r in health.reasons for u in r["uavs"]})), "t": f"{t:.6f}",
              "fail_safe": fail_safe}
    if health.check_ms is not None:
        values.update(check_ms_p50=f"{health.check_ms[0]:.3f}", check_ms_p99=f"{health.check_ms[1]:.3f}",
                      check_cpu_ms_p99=f"{health.check_ms[2]:.3f}")
    if not health.degraded:
        lost_text = f"; {sum(lost.values())} poses lost before the verifier" if lost else ""
        return StatusRow("safety/verifier", OK, f"verifying (lag {health.lag_s:.3f} s){lost_text}", values)
    first = health.reasons[0]
    values.update(value=f"{first['value']:.6g}", limit=f"{first['limit']:.6g}",
                  reasons=",".join(r["kind"] for r in health.reasons))
    action = "veto raised (fail-safe)" if fail_safe == "veto" else "not vetoing (fail_safe: warn)"
    return StatusRow("safety/verifier", ERROR if fail_safe == "veto" else WARN,
                     f"verifier_degraded: {'; '.join(r['message'] for r in health.reasons)}; {action}", values)


def rule_rows(state: SafetyState, active: dict[str, dict]) -> list[StatusRow]:
    """One row per mission rule: failing (a hard rule's failure is the veto's reason `rule:<id>`), its decision
    delay (a bounded-future rule is decided that long after the step it judges), or why it is offline only."""
    rows = []
    warned = {w["kind"]: w for w in state.warnings}
    for r in state.rules:
        name = f"rule:{r['rule']}"
        a = active.get(name) or warned.get(name)
        delay = r.get("delay_s")
        when = "decided at each sample" if not delay else f"decided {delay:g} s after the step it judges"
        if not r["live"]:
            level, message = OK, f"not monitored live: {r['why']}"
        elif a:
            level = ERROR if r["severity"] == "hard" else WARN
            message = (f"{r['severity']} rule failed by {', '.join(a['uavs'][:10]) or 'the swarm'} at "
                       f"{a['t']:.2f}: robustness {a['value']:.3f} ({when})")
        else:
            level, message = OK, f"holds ({when})"
        value = _num(a["value"] if a else r.get("robustness"))
        rows.append(StatusRow(f"safety/{name}", level, message, {
            "constraint": name, "uavs": ",".join(a["uavs"]) if a else "", "value": value, "limit": "0",
            "robustness": value, "delay_s": _num(delay), "severity": r["severity"],
            "t": f"{(a['t'] if a else state.t):.6f}"}))
    return rows


def unheard_vehicles(expected: list[str], tracked: set[str], heard_for_s: float, timeout_s: float | None) -> list[str]:
    """Configured vehicles with no pose yet, once the others have reported for longer than the stale timeout.

    Not a veto: the verifier cannot tell a vehicle that is not flying from one whose poses never arrive (a
    topic that never matched, a wrong name), so the status says which vehicles it is not checking.
    """
    if timeout_s is None or heard_for_s <= timeout_s:
        return []
    return [u for u in expected if u not in tracked]
