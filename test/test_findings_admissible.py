"""The admissible choices, rule by rule, on hand-made findings (the facts decide what a panel may choose)."""

from __future__ import annotations

from types import SimpleNamespace

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.findings.admissible import admissible
from uav_debate_eval.findings.model import VerifiedFinding

M = parse_mission("mission: {name: t, type: formation}\n"
                  "constraints: {min_separation_m: 1.0, max_vertical_speed_mps: 2.5}\n")


def F(fid: str, kind: str, severity: str, t0: float, t1: float, uavs=("uav1",)) -> VerifiedFinding:
    return VerifiedFinding(kind, severity, f"{kind} of {fid}.", t0, t1, list(uavs), [], [], f"{kind}:{fid}", id=fid)


def _dq(*spans):
    findings = [SimpleNamespace(kind="position_jump", t_start=a, t_end=b, uavs=list(u)) for a, b, u in spans]
    return SimpleNamespace(data_quality=SimpleNamespace(findings=findings, not_evaluable=[]))


def test_a_hazard_admits_only_risky_and_only_a_supported_artefact_dispute():
    hazard = F("F1", "violation:max_vertical_speed", "hazard", 14.3, 15.2, ["uav3"])
    rate = F("F2", "altitude_rate", "warning", 14.0, 15.5, ["uav3"])  # the violation seen as an event
    cpa = F("F3", "warning:cpa", "warning", 5.0, 7.0, ["uav1", "uav2"])
    adm = admissible([hazard, rate, cpa], _dq(), M, (0.0, 30.0))
    assert adm.labels == ("risky",) and not adm.label_open and adm.verifier_label == "risky" and adm.deciding == "F1"
    assert adm.dispute("F1") == () and "safety_critical" in adm.endorse("F1")
    assert adm.dispute("F2") == () and adm.dispute("F3") == ("within_tolerance",)
    unconstrained = admissible([cpa], _dq(), Mission(), (0.0, 30.0))  # no min_separation in the mission
    assert unconstrained.dispute("F3") == ("within_tolerance", "outside_mission_scope")
    assert not adm.allows({"id": "F3", "stance": "dispute", "reason": "sensor_artefact"})
    supported = admissible([hazard, cpa], _dq((14.9, 15.0, ["uav3"])), Mission(), (0.0, 30.0))
    assert supported.dispute("F1") == ("sensor_artefact",) and supported.labels == ("risky",)
    other_vehicle = admissible([hazard], _dq((14.9, 15.0, ["uav1"])), Mission(), (0.0, 30.0))
    assert other_vehicle.dispute("F1") == ()


def test_labels_scope_and_short_evidence():
    turn = F("F1", "sharp_turn", "warning", 3.0, 3.2)  # 0.2 s of evidence: needs_more_data admissible
    metric = F("F2", "low_score", "info", 0.0, 30.0, [])
    margin = F("F3", "margin:min_separation", "warning", 0.0, 30.0, [])
    adm = admissible([turn, metric, margin], _dq(), Mission(), (0.0, 30.0), sample_period=0.05)
    assert adm.labels == ("safe", "borderline", "risky") and adm.verifier_label == "borderline"
    assert adm.deciding == "F3"
    assert adm.dispute("F1") == ("within_tolerance", "needs_more_data")  # the mission's sharp_turn_deg covers it
    assert adm.dispute("F2") == ("within_tolerance", "outside_mission_scope")  # no constraint covers a metric
    assert adm.dispute("F3") == ("within_tolerance",)
    assert admissible([metric], _dq(), Mission(), (0.0, 30.0)).labels == ("safe", "borderline")
    gap = F("F4", "not_evaluable:min_separation", "data_quality", 0.0, 20.0, [])
    inconclusive = admissible([metric, gap], _dq(), Mission(), (0.0, 30.0), n_vehicles=3)
    assert "inconclusive" in inconclusive.labels and inconclusive.verifier_label == "inconclusive"
    short_gap = F("F4", "not_evaluable:min_separation", "data_quality", 0.0, 2.0, ["uav1"])
    assert "inconclusive" not in admissible([metric, short_gap], _dq(), Mission(), (0.0, 30.0), n_vehicles=3).labels
