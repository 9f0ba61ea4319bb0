"""The findings catalogue: verified sentences with the flight's own numbers, ranked, with actionable candidates."""

from __future__ import annotations

import re

import pytest

from uav_debate_eval.findings import build_findings, top_findings, verdict_sentence
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate


@pytest.fixture(scope="module")
def near_miss():
    sim = simulate("formation", seed=0, faults=["near_miss"])
    return sim, evaluate(sim.traj, sim.mission)


def test_violation_is_the_first_finding_with_its_numbers_ids_and_recommendations(near_miss):
    sim, ev = near_miss
    v = ev.safety.violations[0]
    f1 = ev.findings[0]
    assert (f1.id, f1.severity, f1.kind, f1.uavs) == ("F1", "hazard", "violation:min_separation", ["uav1", "uav2"])
    assert (f1.t_start, f1.t_end) == (v.t_start, v.t_end)
    assert f"{v.worst_value:.2f}" in f1.sentence and "0.5 m min_separation limit" in f1.sentence
    assert "uav1 and uav2" in f1.sentence and "14.45–19.95 s" in f1.sentence
    risk = [i for i, it in ev.dsl.index.items() if it.kind == "RISK" and "violated" in it.text]
    violation_event = [e.id for e in ev.dsl.events if e.type == "violation:min_separation"]
    assert set(risk + violation_event) <= set(f1.refs)
    assert f1.recommendations[0] == ("Recommend increasing the planned separation of uav1 and uav2 on the turn at "
                                     "14.45–19.95 s (closest 0.23 m, min_separation limit 0.5 m).")


def test_ranking_severity_first_and_ids_in_order(near_miss):
    _, ev = near_miss
    order = ("hazard", "warning", "data_quality", "info")
    sev = [order.index(f.severity) for f in ev.findings]
    assert sev == sorted(sev) and [f.id for f in ev.findings] == [f"F{i}" for i in range(1, len(ev.findings) + 1)]
    kinds = [f.kind for f in ev.findings]
    assert {"warning:cpa", "formation_breach", "waypoint_miss", "route_turns"} <= set(kinds)
    cpa = ev.findings[kinds.index("warning:cpa")]
    w = ev.safety.warnings[0]
    assert cpa.t_start == w["t"] and f"{w['value']:.2f}" in cpa.sentence
    turns = ev.findings[kinds.index("route_turns")]
    assert turns.severity == "info" and len(turns.refs) == 3  # the planned route's corners are not hazards
    for f in ev.findings:  # every candidate is specific: it names a vehicle, a constraint or a metric
        for rec in f.recommendations:
            assert rec.startswith("Recommend ") and re.search(r"uav\d|min_separation|\w+\.\w+|EVENT\[", rec), rec


def test_report_carries_flight_and_segment_findings_with_the_panels_choices(near_miss):
    _, ev = near_miss
    r = ev.report
    assert [f["id"] for f in r["findings"]] == [f.id for f in ev.findings]
    assert set(r["findings"][0]) >= {"id", "kind", "severity", "sentence", "t_start", "t_end", "uavs", "refs",
                                     "recommendations"}
    assert r["findings"][0]["panel"]["endorsed"] >= 1  # the rules panel endorsed the violation
    seg = next(s for s in r["segments"] if s["t_start"] <= 15.0 < s["t_end"])
    assert seg["findings"][0]["kind"] == "violation:min_separation"
    assert r["verdict"]["recommendations"][0] == ev.findings[0].recommendations[0]


def test_words_for_the_terminal(near_miss):
    _, ev = near_miss
    sentence = verdict_sentence(ev.report)
    assert sentence.startswith("Risky: uav1 and uav2 came within 0.23 m") and "The panel endorsed F1" in sentence
    lines = top_findings(ev.report, 3)
    assert len(lines) == 3 and lines[0].startswith("F1 [hazard] 14.45–19.95 s: uav1 and uav2")


def test_an_inconclusive_verdict_still_names_a_crash():
    """A log without GPS (no horizontal position: inconclusive) whose vehicle crashed: the verdict sentence says
    both."""
    report = {"verdict": {"label": "inconclusive"}, "mission": {"constraints_checked": ["max_speed"]}, "findings": [
        {"id": "F1", "kind": "crash", "severity": "hazard",
         "sentence": "sysid1 crashed at 35.78 s: it came to rest on its side (126° tilt) (crash EVENT[2])."},
        {"id": "F2", "kind": "not_evaluable:max_speed", "severity": "data_quality",
         "sentence": "Max_speed could not be checked for sysid1 at 0–36.3 s: no position."}]}
    assert verdict_sentence(report) == ("Inconclusive: no violation, but max_speed could not be checked for sysid1 at "
                                        "0–36.3 s: no position. sysid1 crashed at 35.78 s: it came to rest on its "
                                        "side (126° tilt) (crash EVENT[2]).")


def test_clean_flight_gets_info_findings_and_a_safe_sentence():
    sim = simulate("formation", seed=0)
    ev = evaluate(sim.traj, sim.mission)
    assert ev.label == "safe" and all(f.severity == "info" for f in ev.findings)
    assert verdict_sentence(ev.report).startswith("Safe: ")


def test_single_vehicle_sharp_turns_are_one_warning_and_data_quality_is_read():
    sim = simulate("surveillance", seed=0, faults=["sharp_turn"])
    ev = evaluate(sim.traj, sim.mission)
    turn = ev.findings[0]
    assert (turn.kind, turn.severity, turn.uavs) == ("sharp_turn", "warning", ["uav1"]) and len(turn.refs) == 3
    from types import SimpleNamespace

    from uav_debate_eval.core.records import DataQuality, Finding, NotEvaluable

    dq = DataQuality("degraded", [Finding("position_jump", ["uav3"], 4.0, 4.1, "one-frame swap", ["max_speed"])],
                     [NotEvaluable("min_separation", ["uav3"], "frames unverified", 5.0, 9.0)])
    safety = SimpleNamespace(**{k: getattr(ev.safety, k) for k in ("violations", "warnings", "margins",
                                                                   "separation")}, data_quality=dq)
    found = build_findings(safety, ev.dsl, ev.metrics, sim.mission, (0.0, 60.0))
    kinds = {f.kind: f for f in found}
    jump = kinds["data_quality:position_jump"]
    assert jump.severity == "data_quality" and "uav3" in jump.sentence and "affects max_speed" in jump.sentence
    assert "min_separation could not be checked for uav3 at 5–9 s" in kinds["not_evaluable:min_separation"].sentence


def test_a_margin_past_the_limit_without_a_violation_says_so():
    """attitude_control must stay past its limit for its hold time to be violated: a one-sample 180-deg error is a
    margin at 400 % of the limit, which read 'came within 300 % of its limit' before."""
    from types import SimpleNamespace

    from uav_debate_eval.findings.catalogue import _margins

    safety = SimpleNamespace(violations=[], margins={
        "attitude_control": {"worst_value": 180.0, "limit": 45.0, "ratio": 4.0},
        "max_speed": {"worst_value": 13.7, "limit": 14.4, "ratio": 0.95},
        "max_vertical_speed": {"worst_value": 1.0, "limit": 3.6, "ratio": 0.28}})
    found = {f.kind: f.sentence for f in _margins(safety, {}, 0.10, (0.0, 14.0))}
    assert found == {
        "margin:attitude_control": "attitude_control went past its limit only briefly, too briefly to be a violation "
                                   "(worst 180 deg, limit 45 deg).",
        "margin:max_speed": "max_speed came within 5 % of its limit without a violation (worst 13.7 m/s, "
                            "limit 14.4 m/s)."}


def test_the_headline_counts_violations_and_other_hazards_apart():
    """Four real ArduCopter SITL logs, three vehicles crashing: 12 violations and 3 crash hazards read '14 more
    violations' beside the report's 12. A crash is no violation: counted apart, by kind."""
    def hazard(kind: str, k: int) -> dict:
        return {"id": f"F{k}", "kind": kind, "severity": "hazard", "sentence": f"Hazard {k}."}

    found = [hazard("violation:attitude_control", k) for k in range(12)] + [hazard("crash", 12 + k) for k in range(3)]
    report = {"verdict": {"label": "risky"}, "mission": {"constraints_checked": ["attitude_control"]},
              "findings": found}
    assert verdict_sentence(report) == "Risky: Hazard 0 (11 more violations; 3 more hazards (crash))."
    report["findings"] = found[:1] + found[12:13]
    assert verdict_sentence(report) == "Risky: Hazard 0 (1 more hazard (crash))."
    report["findings"] = found[:2]
    assert verdict_sentence(report) == "Risky: Hazard 0 (1 more violation)."
