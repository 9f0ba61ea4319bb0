"""The LLM judge synthesis: it chooses only among the labels the panel left open, cites only existing ids, costs
counted tokens, and any failure leaves the deterministic vote standing; the veto still overrides it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from debate_fakes import ScriptedBackend, answer, make_context

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.debate import synthesis
from uav_debate_eval.debate.engine import DebateConfig, run_debate

SCHEMA = json.loads((Path(__file__).parents[1] / "uav_debate_eval/report/report.schema.json").read_text())
T = (0.25, 0.55)


def CX(**kw) -> DebateConfig:
    """The complexity router (every agent in every round) on the hand-made segments."""
    return DebateConfig(router="complexity", router_thresholds=T, **kw)


def _split(req):
    """agent1 and agent3 say safe, agent2 borderline: the vote is safe, borderline stays open for the judge."""
    return answer(label="borderline", confidence=0.6) if req.agent == "agent2" else answer()


def _judge_says(label, **extra):
    def judge(req):
        return {"label": label, "summary": "Spacing of uav1 held but one expert saw a margin worth watching.",
                "recommendations": ["Recommend a wider spacing margin for uav1 and uav2."], "evidence": ["SEG[2]"],
                **extra}
    return judge


def test_llm_judge_decides_among_open_labels_and_is_recorded():
    backend = ScriptedBackend(_split, judge=_judge_says("borderline"))  # free-text judge: agents do not choose
    res = run_debate([make_context()], Mission(), CX(choices=False), backend=backend)
    seg = res.segments[0]
    (req,) = backend.judge_requests
    assert req.json_schema["properties"]["label"]["enum"] == ["safe", "borderline"]
    assert set(req.json_schema["properties"]["evidence"]["items"]["enum"]) == set(req.valid_ids)
    assert "- coordination: label borderline, confidence 0.60" in req.messages[1]["content"]
    assert seg.panel_label == "borderline" and seg.decided_by == "judge_llm"
    assert seg.recommendations[0] == "Recommend a wider spacing margin for uav1 and uav2."
    # 3 agents + the judge, 100 prompt / 20 completion tokens each
    assert res.tokens() == {"prompt": 400, "completion": 80}
    report = res.to_report()
    jsonschema.validate(report, SCHEMA["properties"]["debate"])
    assert report["segments"][0]["judge"]["by"] == "llm" and report["segments"][0]["judge"]["evidence"] == ["SEG[2]"]
    row = [t for t in res.transcript if t["kind"] == "judge"]
    assert len(row) == 1 and row[0]["prompt_tokens"] == 100 and row[0]["error"] is None
    assert "Judge on MSEG[1] (borderline): Spacing of uav1 held" in res.verdict.summary
    assert res.failures == []


def test_judge_label_outside_the_open_ones_is_refused_and_the_vote_stands():
    backend = ScriptedBackend(_split, judge=_judge_says("risky"))  # a server without constrained output strays
    res = run_debate([make_context()], Mission(), CX(), backend=backend)
    seg = res.segments[0]
    assert seg.panel_label == "safe" and seg.decided_by == "judge" and seg.judge.by == "vote"
    assert res.failures == [{"segment": "MSEG[1]", "round": 0, "agent": "judge", "role": "judge",
                             "error": "judge label 'risky' not among ['safe', 'borderline']"}]


def test_judge_citing_an_unknown_id_or_raising_leaves_the_vote():
    for judge, error in ((_judge_says("safe", evidence=["EVENT[99]"]), "judge cites unknown ids ['EVENT[99]']"),
                         (lambda req: TimeoutError(), "timeout after 120 s")):
        res = run_debate([make_context()], Mission(), CX(),
                         backend=ScriptedBackend(_split, judge=judge))
        assert res.segments[0].panel_label == "safe" and res.segments[0].judge.error == error
        assert [f["agent"] for f in res.failures] == ["judge"]


def test_l3_jury_majority_fixes_the_label_and_a_tie_is_left_to_the_judge():
    ctx = make_context(n_events=8, violation=True)  # L3 with T
    cfg = CX(max_rounds={1: 1, 2: 1, 3: 3}, min_rounds={1: 1, 2: 1, 3: 3})
    backend = ScriptedBackend(lambda req: answer(label="risky"), judge=_judge_says("risky"))
    res = run_debate([ctx], Mission(), cfg, backend=backend)
    assert res.segments[0].route.layer == 3
    assert backend.judge_requests[0].json_schema["properties"]["label"]["enum"] == ["risky"]
    assert res.segments[0].decided_by == "jury"  # a clear majority: the judge only writes the synthesis

    def tie(req):  # with 3 agents a tie needs 3 different labels
        return answer(label={"agent1": "safe", "agent2": "borderline", "agent3": "risky"}[req.agent])
    backend = ScriptedBackend(tie, judge=_judge_says("borderline"))
    res = run_debate([ctx], Mission(), cfg, backend=backend)
    assert backend.judge_requests[0].json_schema["properties"]["label"]["enum"] == ["safe", "borderline", "risky"]
    assert res.segments[0].panel_label == "borderline" and res.segments[0].decided_by == "jury+judge_llm"


def test_the_veto_overrides_a_judge_that_says_safe():
    backend = ScriptedBackend(lambda req: answer(), judge=_judge_says("safe"))
    res = run_debate([make_context(violation=True)], Mission(), CX(), backend=backend)
    assert "SAFETY VETO" in backend.judge_requests[0].messages[0]["content"]
    assert res.segments[0].panel_label == "safe"
    assert res.verdict.label == "risky" and res.verdict.overridden


def test_no_judge_call_for_rules_for_vote_or_after_the_budget_is_spent():
    assert run_debate([make_context()], Mission(), CX()).segments[0].judge is None
    backend = ScriptedBackend(_split, judge=_judge_says("borderline"))
    res = run_debate([make_context()], Mission(), CX(judge="vote"), backend=backend)
    assert backend.judge_requests == [] and res.segments[0].decided_by == "judge"
    backend = ScriptedBackend(_split, judge=_judge_says("borderline"))
    res = run_debate([make_context()], Mission(), CX(token_budget=100), backend=backend)  # not even one call fits
    seg = res.segments[0]
    assert backend.judge_requests == [] and seg.stop_reason == "budget" and not seg.rounds
    assert seg.decided_by == "rules_verdict" and seg.not_debated and res.to_report()["tokens"]["spent"] == 0
    backend = ScriptedBackend(_split, judge=_judge_says("borderline"))
    res = run_debate([make_context()], Mission(), CX(token_budget=1000), backend=backend)  # a round, not the judge
    seg = res.segments[0]
    assert backend.judge_requests == [] and seg.rounds and res.to_report()["tokens"]["spent"] <= 1000
    assert seg.judge.by == "vote" and "token budget" in seg.judge.error and seg.panel_label == "safe"


def test_judge_schema_bounds_and_answer_checks():
    schema = synthesis.judge_schema(["safe", "safe", "risky"], ["SEG[1]", "EVENT[2]"])
    assert schema["properties"]["label"]["enum"] == ["safe", "risky"]
    good = {"label": "risky", "summary": "Ten chars plus.", "recommendations": ["Recommend a check."],
            "evidence": ["EVENT[2]"]}
    jsonschema.validate(good, schema)
    for bad in ({**good, "evidence": ["SEG[9]"]}, {**good, "summary": "has [SEG[1]] inside"},
                {**good, "recommendations": []}, {**good, "label": "borderline"},
                {**good, "recommendations": [".0.9526;1-3 junk"]}):
        try:
            jsonschema.validate(bad, schema)
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"schema accepted {bad}")
    assert synthesis.judge_schema(["safe"], [])["properties"]["evidence"]["maxItems"] == 0
    verdict, why = synthesis.from_answer(good, ["safe", "risky"], ["SEG[1]", "EVENT[2]"])
    assert why == "" and verdict.label == "risky" and verdict.by == "llm"
    assert synthesis.from_answer({**good, "summary": " "}, ["risky"], ["EVENT[2]"]) == (None, "judge gave no summary")


def test_single_agent_baseline_has_no_judge():
    from uav_debate_eval.debate.baselines import evaluate_baseline

    backend = ScriptedBackend(lambda req: answer(), judge=_judge_says("safe"))
    res = evaluate_baseline("single_agent", [make_context()], Mission(), CX(), backend)
    assert len(backend.requests) == 1 and backend.judge_requests == [] and res.segments[0].judge is None


def test_judge_token_budget_covers_the_longest_answer_its_schema_allows():
    backend = ScriptedBackend(_split, judge=_judge_says("safe"))
    run_debate([make_context()], Mission(), CX(max_tokens=64, choices=False), backend=backend)
    (req,) = backend.judge_requests
    ids = req.valid_ids
    longest = {"label": "borderline", "summary": "x" * synthesis.SUMMARY_MAX,
               "recommendations": ["Recommend " + "y" * (synthesis.RECOMMENDATION_MAX - 10)] * 3,
               "evidence": sorted(ids, key=len)[-3:]}
    jsonschema.validate(longest, req.json_schema)
    assert req.max_tokens >= len(json.dumps(longest))  # a token is at least one character
