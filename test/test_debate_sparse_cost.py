"""The sparse router spends calls only where they can change the verdict: no judge call when the panel is unanimous or
a veto fixes the label, one round for a vetoed segment, a lean judge prompt when the judge is called."""

from __future__ import annotations

import pytest
from debate_fakes import ScriptedBackend, answer, make_context

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.debate.engine import DebateConfig, run_debate

T = (0.25, 0.55)


@pytest.fixture(scope="module")
def near_miss_contexts():
    from uav_debate_eval.debate.comparison import build_contexts
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("formation", seed=0, duration_s=30, faults=["near_miss"])
    return sim, build_contexts(sim.traj, sim.mission)[0]


def _choose(labels: dict[str, str], confidence: float = 0.8):
    """Each agent endorses the first finding and gives the label `labels` holds for it (default borderline)."""
    def script(req):
        props = req.json_schema["properties"]
        fid = props["findings"]["items"]["anyOf"][0]["properties"]["id"]["enum"][0]
        return {"findings": [{"id": fid, "stance": "endorse", "reason": "confirmed_by_data"}],
                "label": labels.get(req.agent, "borderline"), "confidence": confidence,
                "recommendations": props["recommendations"]["items"]["enum"][:1], "note": ""}
    return script


def test_unanimous_panel_or_jury_majority_makes_no_judge_call():
    ctx = make_context(n_events=6, borderline=True, fc=0.9)  # notable, no veto: L2 with T
    backend = ScriptedBackend(_choose({}))
    res = run_debate([ctx], Mission(), DebateConfig(router_thresholds=T), backend=backend)
    seg = res.segments[0]
    assert backend.judge_requests == [] and seg.judge is None and seg.judge_skipped == "decided"
    assert (seg.panel_label, seg.decided_by, seg.stop_reason) == ("borderline", "judge", "agreement")
    assert [t["kind"] for t in res.transcript].count("judge") == 0
    assert res.tokens() == {"prompt": 300, "completion": 60}  # 3 agents, 100 + 20 tokens each, nothing else
    assert res.to_report()["segments"][0]["judge_skipped"] == "decided"
    # the complexity router (every call, as before issue 13) still asks the judge
    backend = ScriptedBackend(_choose({}))
    run_debate([ctx], Mission(), DebateConfig(router="complexity", router_thresholds=T), backend=backend)
    assert len(backend.judge_requests) == 1
    # a jury majority in L3 (two of three, the labels split: contested) decides too
    backend = ScriptedBackend(_choose({"agent2": "safe"}))
    res = run_debate([ctx], Mission(), DebateConfig(router_thresholds=T, max_rounds={1: 1, 2: 1, 3: 1}),
                     backend=backend)
    seg = res.segments[0]
    assert (seg.route.reason, seg.decided_by, seg.panel_label) == ("contested", "jury", "borderline")
    assert backend.judge_requests == [] and seg.judge_skipped == "decided"


def test_split_panel_gets_one_lean_judge_call():
    ctx = make_context(n_events=6, borderline=True, fc=0.9)
    backend = ScriptedBackend(_choose({"agent2": "safe", "agent3": "risky"}))  # L3 (contested), a jury tie
    cfg = DebateConfig(router_thresholds=T, max_rounds={1: 1, 2: 1, 3: 1})
    res = run_debate([ctx], Mission(), cfg, backend=backend)
    (req,) = backend.judge_requests
    assert res.segments[0].judge_skipped is None and res.segments[0].judge.by == "llm"
    data = req.messages[1]["content"]
    assert "FINDINGS" in data and "VALID IDS" not in data  # the findings carry the ids
    assert "- coordination: label safe, confidence 0.80; endorse F1 confirmed_by_data" in data
    assert "Claim:" not in data
    full = ScriptedBackend(_choose({"agent2": "safe", "agent3": "risky"}))
    run_debate([ctx], Mission(), DebateConfig(router_thresholds=T, max_rounds={1: 1, 2: 1, 3: 1},
                                              lean_prompts=False), backend=full)
    (full_req,) = full.judge_requests
    assert "VALID IDS" in full_req.messages[1]["content"] and "Claim:" in full_req.messages[1]["content"]
    assert len(data) < len(full_req.messages[1]["content"])


def test_vetoed_segment_gets_one_round_and_no_judge_and_the_veto_still_decides():
    ctx = make_context(n_events=8, violation=True)  # L3 by complexity with T; the sparse router caps it at L2
    split = {"agent1": "safe", "agent2": "risky", "agent3": "borderline"}
    backend = ScriptedBackend(_choose(split, confidence=0.3))  # split and unsure: would debate on
    res = run_debate([ctx], Mission(), DebateConfig(router_thresholds=T), backend=backend)
    seg = res.segments[0]
    assert (seg.route.layer, seg.route.reason, seg.route.rounds) == (2, "veto", 1)
    assert (len(seg.rounds), seg.stop_reason) == (1, "max_rounds")
    assert len(backend.requests) == 3 and backend.judge_requests == [] and seg.judge_skipped == "veto"
    assert (res.verdict.label, res.verdict.vetoed) == ("risky", True)
    more = ScriptedBackend(_choose(split, confidence=0.3))
    res = run_debate([ctx], Mission(), DebateConfig(router_thresholds=T, veto_rounds=3, score_gap_eps=0.0,
                                                    early_stop_similarity=1.1), backend=more)
    assert len(res.segments[0].rounds) == 3 and len(more.requests) == 9 and more.judge_requests == []


def test_unanimous_safe_panel_on_a_vetoed_segment_is_overridden():
    backend = ScriptedBackend(lambda req: answer(label="safe", confidence=0.95))
    res = run_debate([make_context(violation=True)], Mission(), DebateConfig(), backend=backend)
    assert backend.judge_requests == [] and len(res.rounds) == 1
    assert (res.verdict.label, res.verdict.panel_label, res.verdict.overridden) == ("risky", "safe", True)


def test_veto_rounds_must_be_positive():
    with pytest.raises(InputError, match="debate.veto_rounds"):
        DebateConfig(veto_rounds=0)


def test_a_unanimous_panel_at_the_local_models_usual_confidence_stops():
    ctx = make_context(n_events=6, borderline=True, fc=0.9)
    for confidence, rounds, stop in ((0.5, 1, "agreement"), (0.45, 2, "early_stop")):
        res = run_debate([ctx], Mission(), DebateConfig(router_thresholds=T),
                         backend=ScriptedBackend(_choose({}, confidence)))
        assert (len(res.rounds), res.segments[0].stop_reason) == (rounds, stop)


def test_lean_prompt_with_findings_states_each_fact_once(near_miss_contexts):
    sim, contexts = near_miss_contexts
    backend = ScriptedBackend(_choose({}))
    res = run_debate(contexts[:1], sim.mission, DebateConfig(prompt_style="compact"), backend=backend)
    prefix = backend.requests[0].messages[0]["content"]
    # the shared prefix: where, the verifier, the scores and at most two risk lines around the hazards
    dsl = prefix.split("DSL:\n", 1)[1].split("\n\n", 1)[0].splitlines() if "DSL:\n" in prefix else []
    assert len(dsl) <= 2 and all(x.startswith("RISK[") for x in dsl)
    assert "FINDINGS" not in prefix and "VIOLATION" not in prefix and "ATTN[" not in prefix
    assert all(r.messages[0]["content"] == prefix for r in backend.requests)  # one cached prefix for all
    # each finding is stated to the agents asked about it, in their own message
    own = " ".join(r.messages[1]["content"] for r in backend.requests)
    for f in res.segments[0].findings:
        assert (f.sentence in own or f.id in res.segments[0].not_debated) and f.sentence not in prefix
    full = ScriptedBackend(_choose({}))
    run_debate(contexts[:1], sim.mission, DebateConfig(lean_prompts=False), backend=full)  # not lean: the DSL
    sent = "\n".join(m["content"] for m in full.requests[0].messages)
    assert "\nATTN[1] " in sent and len(prefix) < len(sent)


def test_frontier_counts_without_the_disk_cache(monkeypatch):
    """A cache hit costs 0 tokens: the frontier measures what a mission costs, so it runs every LLM call."""
    from uav_debate_eval.debate import frontier
    from uav_debate_eval.debate.llm.factory import LLMConfig

    seen = []
    real = frontier.run_debate

    def spy(contexts, mission, cfg, backend=None):
        seen.append(cfg)
        return real(contexts, mission, DebateConfig(router=cfg.router), backend=ScriptedBackend(_choose({})))

    monkeypatch.setattr(frontier, "run_debate", spy)
    cfg = DebateConfig(backend="local", llm=LLMConfig(backend="local", use_cache=True))
    (row,) = frontier.frontier(["formation"], cfg, settings=(("sparse", "full", True),))
    assert [c.llm.use_cache for c in seen] == [False] and cfg.llm.use_cache is True
    assert row["tokens_per_mission"] > 0
