"""Debate formulas on hand-computed cases: teams, rotation, consensus, Q_ev, monitor, uncertainty, router."""

from __future__ import annotations

import math

import pytest
from debate_fakes import make_context

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.consensus import consensus, lcs_len, similarity
from uav_debate_eval.debate.evidence import EvidenceVerifier, q_evidence
from uav_debate_eval.debate.monitor import assess
from uav_debate_eval.debate.personas import load_personas
from uav_debate_eval.debate.response import AgentResponse, from_data
from uav_debate_eval.debate.router import route
from uav_debate_eval.debate.teams import n_red, red_indices, roles, rotation_shift
from uav_debate_eval.debate.uncertainty import uncertainty

CFG = DebateConfig()


def _route(ctx, thresholds=(0.25, 0.55)):
    return route(ctx, CFG.router_weights, thresholds, CFG.router_event_rate_ref, CFG.router_bins)


def test_red_team_sets_n3_and_n5():
    assert n_red(3) == 1 and n_red(5) == 2 and n_red(2) == 1 and n_red(10) == 4
    assert [red_indices(3, r) for r in range(4)] == [{0}, {1}, {2}, {0}]
    assert [red_indices(5, r) for r in range(5)] == [{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 0}]


def test_round_robin_rotation():
    p = load_personas()
    ids = [[x.id for x in roles(p, r % 3)] for r in range(3)]
    assert ids == [["flight_control", "coordination", "safety"],
                   ["coordination", "safety", "flight_control"],
                   ["safety", "flight_control", "coordination"]]


def test_adaptive_rotation_leads_with_relevant_persona():
    p = load_personas()
    assert rotation_shift(1, p, "min separation violation near the geofence margin") == 2  # safety
    assert roles(p, 2)[0].id == "safety"
    assert rotation_shift(1, p, "formation spacing lost cohesion") == 1  # coordination
    assert rotation_shift(2, p, "tracking deviation and jerk on the trajectory") == 0  # flight control
    assert rotation_shift(1, p, "") == 1 and rotation_shift(2, p, "nothing relevant here") == 2  # round-robin


def test_personas_extend_and_replace():
    p = load_personas(extra=[{"id": "energy", "name": "Energy Analyst", "category": "flight_control",
                              "keywords": ["battery", "energy"]},
                             {"id": "safety", "name": "Strict Safety", "category": "safety", "bias": "zero_trust",
                              "envelope_fraction": 0.2}])
    assert [x.id for x in p] == ["flight_control", "coordination", "safety", "energy"]
    assert p[2].name == "Strict Safety" and p[2].envelope_fraction == 0.2
    with pytest.raises(InputError):
        load_personas(extra=[{"id": "x", "bias": "reckless"}])


def test_lcs_and_similarity():
    assert lcs_len(["a", "b", "c", "b", "d", "a", "b"], ["b", "d", "c", "a", "b", "a"]) == 4
    assert similarity("a b c d", "a b x d") == pytest.approx(0.75)
    assert similarity("", "") == 1.0 and similarity("a", "") == 0.0


def test_consensus_hand_case():
    r1 = AgentResponse(claim="safe flight", evidence=["alpha beta gamma"], summary="a b c d", confidence=0.6)
    r2 = AgentResponse(claim="safe flight", evidence=["beta gamma delta"], summary="a b x d", confidence=0.8)
    c = consensus([r1, r2])
    assert c["score"] == pytest.approx(0.9)
    assert c["semantic"] == pytest.approx(0.75)
    assert c["priority"] == pytest.approx(1.0)
    assert c["concern"] == pytest.approx(0.5)
    assert c["overall"] == pytest.approx(0.25 * 0.9 + 0.30 * 0.75 + 0.25 * 1.0 + 0.20 * 0.5)
    assert consensus([r1])["overall"] == pytest.approx(1.0)


def test_quote_verification_and_q_ev():
    ctx = make_context(n_events=2)
    v = EvidenceVerifier(ctx.dsl, ctx.metrics)
    ok = ["SEG[1]: speed_mean_mps=1.52 m/s", "EVENT[1]: sharp turn 36 deg", "coordination.formation_error = 0.2 m",
          "flight_control.tracking_rmse = 12 %"]
    assert [v.check(e).valid for e in ok] == [True, True, True, True]
    bad = v.check("SEG[9]: speed 1.52 m/s")
    assert not bad.valid and bad.unresolved == ["SEG[9]"]
    wrong = v.check("SEG[1]: speed 1.9 m/s")
    assert not wrong.valid and wrong.mismatched == [1.9]
    assert not v.check("flight_control.made_up = 1 m").valid
    assert v.check("flight_control.jerk_rms = 0.8 m/s^3").valid  # the exponent is no quote
    plain = v.check("the swarm flew well")
    assert not plain.cites and not plain.valid
    checks = v.check_all(ok[:3])
    assert q_evidence(checks, " ".join(ok[:3])) == pytest.approx(0.85)  # 3/4 + 0.1
    assert q_evidence(v.check_all(ok), "") == pytest.approx(1.0)
    assert q_evidence(v.check_all(ok[:1]), "no units here") == pytest.approx(0.25)


def test_completeness_and_parse():
    r = from_data({"claim": "c", "evidence": [{"id": "SEG[1]", "note": "1.52 m/s"}], "summary": "s. Recommend x.",
                   "confidence": 0.7, "label": "borderline"})
    assert r.evidence == ["SEG[1]: 1.52 m/s"] and r.assessment == "borderline" and r.recommendation == "Recommend x."
    assert r.completeness() == 1.0
    assert AgentResponse(claim="", evidence=[], confidence=0.5).completeness() == 0.25


ALL = "trajectory tracking coordination formation safety margin efficiency energy"


def _kinds(q):
    return [i.kind for i in q.interventions]


def test_monitor_interventions_per_deficit():
    q = assess([0.5, 0.6], ["the swarm is fine", "all good"], ["SEG[1] 1.5 m/s", "EVENT[1] 36 deg"], [ALL],
               "round one", None)
    assert q.evidence == pytest.approx(0.55) and q.coverage == 1.0 and q.novelty == 1.0
    assert _kinds(q) == ["request_evidence"] and q.overall == pytest.approx(0.55)
    q = assess([1.0], ["x"], ["y"], ["trajectory tracking safety margin"], "r", None)
    assert q.coverage == 0.5 and q.missing == ["coordination", "efficiency"]
    assert _kinds(q) == ["missing_aspects"] and q.interventions[0].aspects == ["coordination", "efficiency"]
    q = assess([1.0], ["the swarm is safe"], ["the swarm is safe"], [ALL], "r", None)
    assert q.coherence == pytest.approx(0.5) and _kinds(q) == ["break_circularity"]
    q = assess([1.0], ["x"], ["y"], [ALL], "same words again", "same words again")
    assert q.novelty == 0.0 and q.suggest_stop and _kinds(q) == ["break_circularity"]
    q = assess([1.0], ["x"], ["y"], [ALL], "one two three", "four five six")
    assert q.interventions == [] and not q.suggest_stop and q.overall == pytest.approx(1.0)


def test_uncertainty_hand_computed_flips():
    rounds = [{"a": ("safe", 0.8), "b": ("safe", 0.6), "c": ("risky", 0.9)},
              {"a": ("borderline", 0.7), "b": ("safe", 0.6), "c": ("risky", 0.9)},
              {"a": ("borderline", 0.7), "b": ("borderline", 0.5), "c": ("risky", 0.8)}]
    u = uncertainty(rounds, lam=0.5)
    assert u["flip_rate"] == pytest.approx(2 / 6)
    assert u["belief_revision"] == pytest.approx(0.3 / 6)
    assert u["u_intra"] == pytest.approx(0.5 * 2 / 6 + 0.5 * 0.05)
    assert u["disagreement"] == pytest.approx([2 / 3, 1.0, 2 / 3])
    assert u["u_inter"] == pytest.approx(7 / 9)
    h = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3)) / math.log(3)
    assert u["entropy"] == pytest.approx(h)
    assert u["final_disagreement"] == pytest.approx(2 / 3)
    assert u["loo_instability"] == pytest.approx(2 / 3)
    assert u["u_sys"] == pytest.approx((h + 2 / 3 + 2 / 3) / 3)
    calm = uncertainty([{"a": ("safe", 0.9), "b": ("safe", 0.9)}] * 2)
    assert calm["u_sys"] == 0.0 and calm["flip_rate"] == 0.0


def test_router_layers_and_simple_share():
    quiet = _route(make_context())
    assert quiet.layer == 1 and quiet.score == pytest.approx(0.15 / 3)  # speed entropy of 2 values in 8 bins
    busy = _route(make_context(n_events=6))
    assert busy.layer == 2 and busy.score == pytest.approx(0.35 + 0.05)
    hard = _route(make_context(n_events=8, violation=True))
    assert hard.layer == 3 and hard.score == pytest.approx(0.75)
    simple = [make_context(n_events=k) for k in (0, 1, 2, 0, 1, 2)]  # no violation: "simple" segments
    layers = [_route(c).layer for c in simple]
    assert layers == [1, 1, 2, 1, 1, 2]
    assert sum(x == 1 for x in layers) / len(layers) == pytest.approx(4 / 6)
    assert CFG.router_thresholds == (0.45, 0.7) and _route(make_context(n_events=6), CFG.router_thresholds).layer == 1


def test_config_yaml(tmp_path):
    f = tmp_path / "debate.yaml"
    f.write_text("debate:\n  mode: collaborative\n  tau_q: 0.6\n  max_rounds: {1: 1, 2: 2, 3: 4}\n"
                 "  personas: [{id: energy, name: Energy, keywords: [battery]}]\n")
    cfg = DebateConfig.from_yaml(f)
    assert cfg.mode == "collaborative" and cfg.tau_q == 0.6 and cfg.max_rounds == {1: 1, 2: 2, 3: 4}
    assert [p.id for p in load_personas(cfg.personas_file, cfg.personas)][-1] == "energy"
    f.write_text("debate:\n  tau_qq: 0.6\n")
    with pytest.raises(InputError, match="tau_qq"):
        DebateConfig.from_yaml(f)
    with pytest.raises(InputError):
        DebateConfig(mode="shouting")
