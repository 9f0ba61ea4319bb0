"""The engine end to end with the rules agents and a scripted backend: stopping, veto, citations, failures, schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from debate_fakes import ScriptedBackend, answer, make_context

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.debate.engine import DebateConfig, run_debate
from uav_debate_eval.debate.monitor import Intervention
from uav_debate_eval.debate.personas import load_personas
from uav_debate_eval.debate.prompts import Turn
from uav_debate_eval.debate.rules import rules_response

SCHEMA = json.loads((Path(__file__).parents[1] / "uav_debate_eval/report/report.schema.json").read_text())
QUIET, BUSY = dict(n_events=0), dict(n_events=6)  # router with T: L1 / L2
T = (0.25, 0.55)  # router thresholds for the hand-made segments (the defaults are calibrated on simulated flights)


def _fake(script, **cfg):
    return DebateConfig(router="complexity", router_thresholds=T, **cfg), ScriptedBackend(script)


def _const(**kw):
    return lambda req: answer(**kw)


def test_rules_mission_is_deterministic_and_schema_valid():
    ctxs = [make_context("MSEG[1]", 0, 30), make_context("MSEG[2]", 30, 60, n_events=6, borderline=True, fc=0.9),
            make_context("MSEG[3]", 60, 90, n_events=8, violation=True)]
    # the protocol without the mission's budget (test_stop_on_token_budget and test_debate_budget spend one)
    cfg = DebateConfig(router="complexity", router_thresholds=T, token_budget=10**6)
    a, b = (run_debate(ctxs, Mission(), cfg) for _ in range(2))
    ra, rb = a.to_report(), b.to_report()
    jsonschema.validate(ra, SCHEMA["properties"]["debate"])
    assert json.dumps(ra["rounds"]) == json.dumps(rb["rounds"])
    assert ra["backend"] == "rules" and ra["layer"] == 3 and ra["tokens"]["estimated"] is True
    assert [s["layer"] for s in ra["segments"]] == [1, 2, 3]
    assert [s["rounds"] for s in ra["segments"]] == [1, 2, 3]
    assert [s["stop_reason"] for s in ra["segments"]] == ["max_rounds", "convergence", "convergence"]
    assert ra["invalid_citations"] == {"first_pass": 0, "repaired": 0, "struck": 0}
    assert [s["panel_label"] for s in ra["segments"]] == ["safe", "borderline", "risky"]
    assert a.verdict.label == "risky" and a.verdict.vetoed and not a.verdict.overridden
    assert ra["segments"][2]["decided_by"] == "jury"
    assert all(r["segment"] for r in ra["rounds"]) and [r["index"] for r in ra["rounds"]] == list(range(6))
    # every agent call is in the transcript with its prompt, answer, tokens and timing
    rows = [t for t in a.transcript if t["kind"] == "agent"]
    assert len(rows) == 6 * 3 and all(t["messages"] and t["prompt_tokens"] > 0 and t["latency_s"] >= 0 for t in rows)
    assert sum(t["prompt_tokens"] for t in rows) == ra["tokens"]["prompt"]
    assert a.transcript[-1]["kind"] == "verdict" and all(json.loads(json.dumps(t)) == t for t in a.transcript)


def test_rules_red_blue_and_interventions():
    ctx = make_context(n_events=3, fc=0.9)  # tracking_rmse 10 % off ideal: a precision defect
    p = {x.id: x for x in load_personas()}
    base = dict(ctx=ctx, agent="agent1", lead=False, round=0, layer=2, mode="adversarial", vetoed=False,
                valid_ids=list(ctx.dsl.index), metric_refs=[])
    blue = rules_response(Turn(persona=p["flight_control"], team="blue", **base))
    red = rules_response(Turn(persona=p["flight_control"], team="red", **base))
    assert blue.assessment == "borderline" and "tracking_rmse" in blue.claim
    assert red.claim.startswith("Challenge") and red.score == pytest.approx(blue.score - 0.1)
    assert red.confidence == pytest.approx(blue.confidence - 0.1)
    safe_ctx = make_context()
    calm = rules_response(Turn(persona=p["safety"], team="red", **{**base, "ctx": safe_ctx}))
    assert calm.assessment == "safe" and "no anomaly" in calm.claim
    asked = rules_response(Turn(persona=p["safety"], team="blue", interventions=[
        Intervention("request_evidence", "cite"), Intervention("missing_aspects", "x", ["trajectory"])], **base))
    ids = [e.split(":")[0] for e in asked.evidence if "[" in e.split(":")[0]]
    assert len(ids) >= 3 and any(e.startswith("flight_control.") for e in asked.evidence)
    flip = rules_response(Turn(persona=p["safety"], team="blue", own_previous=blue,
                               interventions=[Intervention("break_circularity", "x")], **base))
    assert flip.claim.startswith("Against my previous position (borderline)")


def test_veto_override_panel_says_safe():
    cfg, be = _fake(_const(label="safe"))
    res = run_debate([make_context(violation=True)], Mission(), cfg, backend=be)
    v = res.verdict
    assert (v.label, v.panel_label, v.overridden, v.vetoed) == ("risky", "safe", True, True)
    assert "SAFETY VETO" in be.requests[0].messages[1]["content"]  # lean: the role follows the shared prefix
    assert res.to_report()["overridden"] is True and "overridden" in v.summary


def test_no_violation_verifier_borderline_rule_decides():
    cfg, be = _fake(_const(label="safe"))
    v = run_debate([make_context(borderline=True)], Mission(), cfg, backend=be).verdict
    assert (v.label, v.panel_label, v.overridden) == ("borderline", "safe", False)
    cfg, be = _fake(_const(label="risky"))
    assert run_debate([make_context()], Mission(), cfg, backend=be).verdict.label == "safe"
    cfg, be = _fake(_const(label="risky"), panel_may_raise=True)
    v = run_debate([make_context()], Mission(), cfg, backend=be).verdict
    assert (v.label, v.panel_label) == ("borderline", "risky")


def test_stop_max_rounds_on_l1():
    cfg, be = _fake(_const())
    seg = run_debate([make_context(**QUIET)], Mission(), cfg, backend=be).segments[0]
    assert (seg.route.layer, len(seg.rounds), seg.stop_reason) == (1, 1, "max_rounds")


def test_stop_early_on_repeated_rounds():
    cfg, be = _fake(_const())
    seg = run_debate([make_context(**BUSY)], Mission(), cfg, backend=be).segments[0]
    assert (len(seg.rounds), seg.stop_reason) == (2, "early_stop") and seg.rounds[1].similarity == 1.0
    assert [i.kind for i in seg.rounds[0].interventions] == []


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


def _varied(req):
    w = " ".join(WORDS[(req.round * 3 + k) % 10] + str(req.round) for k in range(5))
    return answer(claim=f"claim {w}", summary=f"summary {w}")


def test_stop_on_score_convergence():
    cfg, be = _fake(_varied)
    seg = run_debate([make_context(**BUSY)], Mission(), cfg, backend=be).segments[0]
    assert (len(seg.rounds), seg.stop_reason) == (2, "convergence")
    assert seg.rounds[1].score_gap == 0.0 and seg.rounds[1].similarity < 0.92


def test_stop_on_token_budget():
    """The mission's budget holds by construction: a call is made only when its prompt and completion cap fit, and a
    round only when another round of the last one's cost fits."""
    full = run_debate([make_context(**BUSY)], Mission(), _fake(_varied, token_budget=10**6)[0],
                      backend=_fake(_varied)[1]).segments[0]
    assert len(full.rounds) > 1 and [len(r.responses) for r in full.rounds] == [3] * len(full.rounds)
    answered = {}
    for budget in (800, 1500, 2500):
        cfg, be = _fake(_varied, token_budget=budget)
        res = run_debate([make_context(**BUSY)], Mission(), cfg, backend=be)
        seg, spent = res.segments[0], res.tokens()["prompt"] + res.tokens()["completion"]
        assert spent <= budget and res.to_report()["tokens"]["spent"] == spent
        answered[budget] = [len(r.responses) for r in seg.rounds]
        if budget == 800:  # one call fits (prompt + completion cap), a second round would not
            assert seg.stop_reason == "budget"
    assert answered == {800: [1], 1500: [1, 1], 2500: [3, 3]}  # the whole panel once its round fits


def test_stop_max_rounds_when_labels_keep_moving():
    labels = ["safe", "borderline", "risky"]
    cfg, be = _fake(lambda req: {**_varied(req), "label": labels[req.round % 3]})
    seg = run_debate([make_context(**BUSY)], Mission(), cfg, backend=be).segments[0]
    assert (len(seg.rounds), seg.stop_reason) == (3, "max_rounds")
    assert seg.uncertainty["flip_rate"] == 1.0


def test_invalid_citation_reprompted_once_then_struck():
    bad = [{"id": "SEG[9]", "note": "1.52 m/s"}, {"id": "SEG[1]", "note": "speed 1.52 m/s"},
           {"id": "SEG[2]", "note": "spacing 1.61 m"}]
    cfg, be = _fake(lambda req: answer(evidence=bad) if req.agent == "agent1" else answer())
    res = run_debate([make_context(**QUIET)], Mission(), cfg, backend=be)
    assert res.invalid_citations() == {"first_pass": 1, "repaired": 0, "struck": 1}
    first, second = [r for r in be.requests if r.agent == "agent1"]
    assert len(first.messages) == 2 and len(second.messages) == 4 and "SEG[9]" in second.messages[3]["content"]
    resp = res.rounds[0].responses[0]
    assert resp.agent == "agent1" and resp.struck == ["SEG[9]: 1.52 m/s"] and len(resp.response.evidence) == 2
    assert res.to_report()["invalid_citations"]["struck"] == 1


def test_invalid_citation_repaired():
    bad = [{"id": "SEG[1]", "note": "speed 9.99 m/s"}, {"id": "SEG[2]", "note": "spacing 1.61 m"}]
    cfg, be = _fake(lambda req: answer(evidence=bad) if len(req.messages) == 2 and req.agent == "agent2"
                    else answer())
    res = run_debate([make_context(**QUIET)], Mission(), cfg, backend=be)
    assert res.invalid_citations() == {"first_pass": 1, "repaired": 1, "struck": 0}


def test_failing_agent_dropped_and_recorded():
    def script(req):
        return RuntimeError("HTTP 500") if req.agent == "agent2" else answer()

    cfg, be = _fake(script)
    res = run_debate([make_context(**QUIET)], Mission(), cfg, backend=be)
    assert [r.agent for r in res.rounds[0].responses] == ["agent1", "agent3"]
    assert res.failures == [{"segment": "MSEG[1]", "round": 0, "segment_round": 0, "agent": "agent2",
                             "role": "coordination", "error": "RuntimeError: HTTP 500"}]
    assert res.to_report()["failures"][0]["agent"] == "agent2"


def test_timeout_and_all_failed():
    cfg = DebateConfig(agent_timeout_s=0.05, router="complexity", router_thresholds=T)
    res = run_debate([make_context(**QUIET)], Mission(), cfg, backend=ScriptedBackend(_const(), delay_s=1.0))
    assert len(res.failures) == 3 and res.failures[0]["error"].startswith("timeout")
    assert res.segments[0].stop_reason == "all_agents_failed" and res.verdict.panel_label is None
    assert res.verdict.label == "safe"  # the verifier still decides
    jsonschema.validate(res.to_report(), SCHEMA["properties"]["debate"])


def test_collaborative_mode_has_no_red_team():
    cfg, be = _fake(_const(), mode="collaborative")
    res = run_debate([make_context(**BUSY)], Mission(), cfg, backend=be)
    assert all(r.team == "blue" for rd in res.rounds for r in rd.responses)
    assert "Collaborative mode" in be.requests[0].messages[1]["content"]
    cfg = DebateConfig(mode="collaborative", router="complexity", router_thresholds=T)
    rules = run_debate([make_context(**BUSY)], Mission(), cfg).to_report()
    assert {r["team"] for rd in rules["rounds"] for r in rd["responses"]} == {"blue"}


def test_adaptive_rotation_in_engine():
    # safety issues in round 0 (red critic names the margin) -> the safety persona leads round 1
    cfg = DebateConfig(rotation="adaptive", score_gap_eps=0.0, router="complexity", router_thresholds=T,
                       token_budget=10**6)
    res = run_debate([make_context(n_events=6, borderline=True)], Mission(), cfg)
    leads = [r.lead for r in res.rounds]
    assert leads[0] == "flight_control" and leads[1] == "safety"
    cfg = DebateConfig(score_gap_eps=0.0, router="complexity", router_thresholds=T, token_budget=10**6)
    rr = run_debate([make_context(n_events=6, borderline=True)], Mission(), cfg)
    assert [r.lead for r in rr.rounds] == ["flight_control", "coordination", "safety"]


def test_router_series_over_all_samples_equal_each_tracks_speed_and_course():
    """The router's speed and heading series are computed over every vehicle's samples at once: the same numbers,
    in the same order, as Track.speed and Track.heading (where moving) of each vehicle of the segment."""
    from types import SimpleNamespace

    import numpy as np

    from uav_debate_eval.core import SwarmTrajectory
    from uav_debate_eval.debate.router import _series
    from uav_debate_eval.sim.scenarios import simulate

    traj = simulate("grid", seed=0, n_uavs=70, duration_s=40.0, faults=["sharp_turn"]).traj
    short = traj.tracks["uav3"]
    tracks = dict(traj.tracks)
    tracks["uav3"] = short.select(slice(0, len(short) - 17))  # one vehicle with fewer samples
    traj = SwarmTrajectory(tracks, traj.ingest, traj.name, traj.t0)
    for t0, t1 in [(0.0, 0.0), (3.05, 27.33)]:
        speed, heading = _series(SimpleNamespace(traj=traj, t_start=t0, t_end=t1, dsl=None))
        w = traj.window(t0, t1) if t1 > t0 else traj
        np.testing.assert_array_equal(speed, np.concatenate([tr.speed for tr in w.tracks.values()]))
        np.testing.assert_array_equal(heading, np.concatenate([tr.heading[tr.horizontal_speed > 0.2]
                                                               for tr in w.tracks.values()]))
        assert speed.size > 1000 and heading.size > 1000


def test_router_heading_sectors_hold_a_course_along_an_axis_whatever_the_last_bits():
    """A swarm flying due east (vy exactly 0, or a last-bit residue of either sign, as two platforms' BLAS kernels
    leave it) is one heading: entropy 0 either way. With sectors starting at east, a residue of -1e-15 m/s put half
    the samples in the last sector: 0.33 (as much as two real courses). A real change of course still counts."""
    from types import SimpleNamespace

    import numpy as np

    from uav_debate_eval.core import SwarmTrajectory, Track
    from uav_debate_eval.debate.router import route

    t = np.arange(0.0, 30.0, 0.1)
    residue = np.where(np.arange(t.size) % 2, 1e-15, -1e-15)

    def flight(vy_noise: np.ndarray, turn: bool = False) -> SimpleNamespace:
        vel = np.column_stack([np.full(t.size, 5.0), vy_noise, np.zeros(t.size)])
        if turn:  # the second half due north
            vel[t.size // 2:] = [0.0, 5.0, 0.0]
        pos = np.cumsum(vel * 0.1, axis=0)
        tracks = {f"uav{i}": Track(f"uav{i}", t, pos + [0.0, 3.0 * i, 10.0], vel) for i in range(4)}
        return SimpleNamespace(traj=SwarmTrajectory(tracks), t_start=0.0, t_end=30.0, dsl=None, safety=None)

    weights, thresholds = {"heading_entropy": 1.0}, (0.25, 0.55)
    exact = route(flight(np.zeros(t.size)), weights, thresholds).terms["heading_entropy"]
    noisy = route(flight(residue), weights, thresholds).terms["heading_entropy"]
    turned = route(flight(residue, turn=True), weights, thresholds).terms["heading_entropy"]
    assert exact == noisy == 0.0
    assert turned == pytest.approx(np.log(2) / np.log(8))
