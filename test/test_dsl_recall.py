"""Event recall on simulated flights: every injected fault that should produce an event does, and the DSL keeps it."""

import pytest

from uav_debate_eval.dsl.builder import build_dsl
from uav_debate_eval.dsl.events import detect_events
from uav_debate_eval.metrics.compute import compute_metrics, run_checker
from uav_debate_eval.sim.faults import FAULT_KINDS
from uav_debate_eval.sim.scenarios import SCENARIOS, simulate

#: Truth times come from the commanded manoeuvre; the tracking controller lags it by up to ~1 s.
SLACK_S = 1.0


def _faults(name: str) -> list[str]:
    single = SCENARIOS[name].max_uavs == 1
    return [k for k in FAULT_KINDS if not (single and k == "near_miss")]


def _matches(truth, events):
    return [e for e in events
            if e.type == truth.expect_event and set(e.uavs) & set(truth.uavs)
            and e.extra.get("t_from", e.t) - SLACK_S <= truth.t_end
            and (e.t_end if e.t_end is not None else e.t) + SLACK_S >= truth.t_start]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("with_faults", [True, False], ids=["faults", "clean"])
def test_every_expected_event_is_detected_and_kept_in_the_dsl(name, with_faults):
    sim = simulate(name, seed=0, faults=_faults(name) if with_faults else [])
    safety = run_checker(sim.traj, sim.mission)
    events = detect_events(sim.traj, sim.mission, safety)
    doc = build_dsl(sim.traj, sim.mission, safety=safety, events=events)
    expected = [f for f in sim.truth if f.expect_event]
    if with_faults:
        assert {f.expect_event for f in expected} >= {"altitude_rate", "sharp_turn", "link_loss"}
    for f in expected:
        hits = _matches(f, events)
        assert hits, f"{name}: {f.kind} {f.uavs} {f.t_start}-{f.t_end} has no {f.expect_event} event"
        assert any(e.id in doc.index for e in hits), f"{name}: {f.kind} event cut from the DSL"
        assert any(e.id in doc.text for e in hits)
    assert doc.reduction >= 0.95, f"{name}: {doc.tokens} DSL tokens vs {doc.raw_tokens} raw"
    assert doc.tokens <= doc.budget_tokens


@pytest.mark.slow
def test_clean_formation_scores_well_and_faults_score_lower():
    clean = simulate("formation", seed=0)
    faulty = simulate("formation", seed=0, faults=["near_miss", "overspeed"])
    a = compute_metrics(clean.traj, clean.mission)
    b = compute_metrics(faulty.traj, faulty.mission)
    assert a.scores["safety"] > b.scores["safety"]
    assert a.scores["overall"] > b.scores["overall"]
    assert a.details["safety"]["constraint_compliance"]["score"] == 1.0
    assert b.details["safety"]["constraint_compliance"]["score"] < 1.0
