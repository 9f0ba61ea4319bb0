"""The openai path against a scripted server that returns choices the facts rule out: one repair, then the
inadmissible choices are dropped and counted, never shown as chosen."""

from __future__ import annotations

import json

import pytest
from llm_fault_server import FaultServer

from uav_debate_eval.debate.coherence import KEYS, coherence
from uav_debate_eval.debate.comparison import build_contexts
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.engine import run_debate
from uav_debate_eval.debate.llm.openai_backend import OpenAIBackend
from uav_debate_eval.debate.llm.resilience import RetryPolicy
from uav_debate_eval.sim.scenarios import simulate

# The vetoed segment of the near miss: F1 is the min_separation hazard and nothing overlaps a data-quality finding,
# so F1 may be endorsed but not disputed, and the label is fixed (risky): the schema asks for none.
BAD = {"findings": [{"id": "F1", "stance": "dispute", "reason": "sensor_artefact"},
                    {"id": "F2", "stance": "endorse", "reason": "confirmed_by_data"}],
       "label": "safe", "confidence": 0.7, "recommendations": ["R1"], "note": ""}
GOOD = {"findings": [{"id": "F1", "stance": "endorse", "reason": "safety_critical"}],
        "confidence": 0.8, "recommendations": ["R1"], "note": ""}


@pytest.fixture(scope="module")
def vetoed_segment():
    sim = simulate("formation", seed=0, duration_s=30, faults=["near_miss"])
    contexts, _ = build_contexts(sim.traj, sim.mission)
    return sim, contexts[:1]


def _debate(script: list[dict], sim, contexts):
    with FaultServer([{"content": json.dumps(step)} for step in script]) as srv:
        backend = OpenAIBackend(base_url=srv.url, api_key="sk-test", model="scripted", structured="json_schema",
                                policy=RetryPolicy(timeout_s=5.0, max_retries=0))
        res = run_debate(contexts, sim.mission, DebateConfig(backend="openai", judge="vote", parallel_agents=1),
                         backend=backend)
        return res, srv.chat_requests


def test_inadmissible_choices_are_repaired_once_then_dropped_and_counted(vetoed_segment):
    sim, contexts = vetoed_segment
    # agent1: inadmissible, repaired; agent2: inadmissible twice, dropped; agent3: admissible at once
    res, requests = _debate([BAD, GOOD, BAD, BAD, GOOD], sim, contexts)
    seg = res.segments[0]
    assert seg.admissible.labels == ("risky",) and seg.admissible.dispute("F1") == ()
    schema = requests[0]["body"]["response_format"]["json_schema"]["schema"]
    assert "label" not in schema["properties"]  # the one admissible label is not asked
    assert len(requests) == 5 and "schema allows" in requests[1]["body"]["messages"][-1]["content"]
    report = res.to_report()
    assert report["inadmissible"] == {"answers": 2, "repaired": 1, "dropped": 2}  # agent2's dispute and its label
    responses = [r for rd in report["rounds"] for r in rd["responses"]]
    assert len(responses) == 3 and not res.failures
    for r in responses:  # nothing inadmissible is shown as chosen
        assert r["assessment"] == "risky"
        assert all(seg.admissible.allows(c) for c in r["findings"])
        text = " ".join([r["claim"], r["counter"], r["summary"]])
        assert "F1 is disputed" not in text and "disputes F1" not in text and "safe" not in r["claim"]
    assert responses[1]["findings"] == [{"id": "F2", "stance": "endorse", "reason": "confirmed_by_data"}]
    assert coherence({"debate": report}) == dict.fromkeys(KEYS, 0)
    assert res.verdict.label == "risky" and res.segments[0].panel_label == "risky"
