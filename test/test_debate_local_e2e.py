"""The embedded model end to end: a built-in scenario's report cites only ids that exist, all verified."""

from __future__ import annotations

import re

import pytest
from llm_support import require_embedded_model

from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.llm.factory import LLMConfig
from uav_debate_eval.debate.llm.structured import extract_ids
from uav_debate_eval.report.schema import validate_report
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate


@pytest.mark.llm
def _ids_in_prompt(text: str) -> set[str]:
    """Every id the prompt shows: its VALID IDS list when it has one, else the ids its lines carry (lean prompts
    show the segment's DSL and findings and no separate list)."""
    if "VALID IDS: " in text:
        return set(text.split("VALID IDS: ", 1)[1].split("\n", 1)[0].split(", "))
    return set(extract_ids(text)) | set(re.findall(r"\bF\d+\b", text))


@pytest.mark.slow
def test_local_panel_report_cites_only_resolvable_verified_evidence(tmp_path):
    require_embedded_model()
    sim = simulate("formation", seed=0, duration_s=30, faults=["near_miss"])
    one_round = {1: 1, 2: 1, 3: 1}
    # A fresh cache: answers cached by an earlier run would (rightly) cost 0 tokens. The complexity router calls the
    # judge on every segment (the sparse one skips it on this vetoed segment: the veto fixes the label).
    # A budget with room for the judge: this checks the judge's path. Under the mission's default 4,096 tokens the
    # complexity router's judge does not fit beside three agents and their vote stands (issue 36, test_debate_budget).
    cfg = DebateConfig(backend="local", router="complexity", max_rounds=one_round, min_rounds=one_round,
                       token_budget=16000, llm=LLMConfig(backend="local", cache_dir=str(tmp_path / "cache")))
    ev = evaluate(sim.traj, sim.mission, cfg, segment_mode="window", window_s=40.0)
    report = ev.report
    validate_report(report)
    debate = report["debate"]
    assert debate["backend"] == "local" and debate["model"].startswith("SmolLM2")
    assert report["verdict"]["label"] == "risky"  # the veto holds whatever the model says
    assert debate["tokens"]["prompt"] > 0 and debate["tokens"]["completion"] > 0

    prompts = {}
    for row in ev.transcript:
        if row.get("kind") == "agent" and row.get("messages"):
            text = "\n".join(m["content"] for m in row["messages"])
            prompts[(row["round"], row["agent"])] = _ids_in_prompt(text)
    # the tool cites a chosen finding's references (DSL lines, metrics) for it: those of the findings the prompt shows
    refs = {s["id"]: {ref for f in s["findings"] for ref in f["refs"]} for s in debate["segments"]}
    responses = [(r["index"], r["segment"], x) for r in debate["rounds"] for x in r["responses"]]
    assert responses, "the local panel produced no response"
    for index, seg_id, resp in responses:
        valid = prompts[(index, resp["agent"])] | refs[seg_id]
        for item in resp["evidence"]:
            for ref in extract_ids(item):
                assert ref in valid, (ref, item)
    assert debate["invalid_citations"]["first_pass"] >= debate["invalid_citations"]["struck"]
    # The judge's synthesis comes from the model too, constrained to the open labels and to existing ids.
    judges = {row["segment"]: row for row in ev.transcript if row.get("kind") == "judge"}
    for seg in debate["segments"]:
        judge, row = seg["judge"], judges[seg["id"]]
        assert judge["by"] == "llm", judge["error"]
        panel = {x["assessment"] for r in debate["rounds"] if r["segment"] == seg["id"] for x in r["responses"]}
        assert judge["label"] in panel and seg["panel_label"] == judge["label"]
        valid = _ids_in_prompt("\n".join(m["content"] for m in row["messages"])) | refs[seg["id"]]
        assert judge["evidence"] and set(judge["evidence"]) <= valid
        assert judge["tokens"]["completion"] > 0
        # the judge's free text reaches the report only where it passed the quality gate; the rest is counted
        assert judge["summary"] or seg["struck"]["count"] > 0
