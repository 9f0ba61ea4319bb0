"""The panel on simulated flights through the real safety checker, metrics and DSL (rules backend)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from debate_fakes import ScriptedBackend

from uav_debate_eval.debate.baselines import evaluate_baseline
from uav_debate_eval.debate.comparison import build_contexts, compare, format_table, hazards_named
from uav_debate_eval.debate.engine import DebateConfig, run_debate
from uav_debate_eval.debate.evidence import EvidenceVerifier
from uav_debate_eval.sim.scenarios import simulate

SCHEMA = json.loads((Path(__file__).parents[1] / "uav_debate_eval/report/report.schema.json").read_text())


@pytest.fixture(scope="module")
def near_miss():
    sim = simulate("formation", seed=0, faults=["near_miss"])
    contexts, safety = build_contexts(sim.traj, sim.mission)
    return sim, contexts, safety


def test_near_miss_is_risky_and_every_citation_resolves(near_miss):
    sim, contexts, safety = near_miss
    res = run_debate(contexts, sim.mission, DebateConfig())
    rep = res.to_report()
    jsonschema.validate(rep, SCHEMA["properties"]["debate"])
    assert safety.label == "risky" and res.verdict.label == "risky" and res.verdict.vetoed
    assert res.invalid_citations() == {"first_pass": 0, "repaired": 0, "struck": 0}
    for seg, ctx in zip(res.segments, contexts, strict=True):
        v = EvidenceVerifier(ctx.dsl, ctx.metrics)
        for rd in seg.rounds:
            for r in rd.responses:
                assert r.response.evidence and all(v.check(e).valid for e in r.response.evidence)
    assert hazards_named(res, sim.truth) == (1, 1)
    assert any("min_separation" in r for r in res.verdict.recommendations)
    # issue 13: the veto fixes the label, so the sparse router does not deepen a vetoed segment to L3; the
    # complexity router alone still does
    assert [(s["layer"], s["route_reason"]) for s in rep["segments"]] == [(2, "veto"), (2, "veto"), (2, "complexity")]
    assert run_debate(contexts, sim.mission, DebateConfig(router="complexity")).layer == 3


def test_llm_agent_text_only_answers_are_parsed(near_miss):
    """A server without structured output: the agent parses the tagged text protocol (debate.llm.structured)."""
    sim, contexts, _ = near_miss
    ids = [i for i in contexts[0].dsl.index if i.startswith(("EVENT", "RISK", "SEG"))][:3]

    def script(req):
        assert req.json_schema is not None and ids[0] in req.valid_ids
        return {"claim": "x"}  # replaced below: the fake returns text without parsed data

    class TextOnly(ScriptedBackend):
        async def chat(self, request):
            result = await super().chat(request)
            lines = "\n".join(f"- {contexts[0].dsl.index[i].text}" for i in ids)
            result.text = (f"[CLAIM] The swarm had a near miss.\n[EVIDENCE]\n{lines}\n[COUNTER] none\n"
                           "[SUMMARY] Separation was lost. Recommend larger spacing.\n[CONFIDENCE] 0.8\n[LABEL] risky")
            result.data = None
            return result

    res = run_debate(contexts[:1], sim.mission, DebateConfig(), backend=TextOnly(script))
    r = res.rounds[0].responses[0]
    assert r.response.assessment == "risky" and r.valid_evidence == 3
    assert r.response.recommendation == "Recommend larger spacing."
    assert res.backend == "fake" and res.to_report()["tokens"]["estimated"] is False


def test_baselines_same_structure(near_miss):
    sim, contexts, _ = near_miss
    for method in ("single_metric", "fixed_weight", "single_agent"):
        res = evaluate_baseline(method, contexts, sim.mission)
        jsonschema.validate(res.to_report(), SCHEMA["properties"]["debate"])
        assert res.verdict.label == "risky" and len(res.rounds) == len(contexts)


@pytest.mark.slow
def test_table_two_on_a_small_suite():
    rows, details = compare(("formation:near_miss", "surveillance:sharp_turn", "swap"))
    by = {r["method"]: r for r in rows}
    assert by["debate"]["hazards_named"] == 2 and by["debate"]["hazards_total"] == 2
    assert by["debate"]["coverage"] > by["single_agent"]["coverage"] > by["single_metric"]["coverage"]
    assert by["debate"]["evidence_quality"] >= 0.85 and by["single_metric"]["hazards_named"] == 0
    assert "paper debate" in format_table(rows) and len(details["runs"]) == 3
    # the same table from two worker processes (rules are deterministic; only timings differ)
    rows2, details2 = compare(("formation:near_miss", "surveillance:sharp_turn", "swap"), jobs=2)
    strip = (lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs])  # noqa: E731
    assert strip(rows2) == strip(rows)
    assert [r["scenario"] for r in details2["runs"]] == ["formation:near_miss", "surveillance:sharp_turn", "swap"]


def test_compare_command(capsys, tmp_path):
    from uav_debate_eval.cli import main

    out = tmp_path / "table.json"
    assert main(["compare", "--scenarios", "tracking", "--methods", "debate", "single_metric",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Table II on 1 flights, backend rules" in text and "single_metric" in text
    rows = json.loads(out.read_text())["rows"]
    assert [r["method"] for r in rows] == ["debate", "single_metric"] and rows[0]["hazards_total"] == 0
    assert main(["compare", "--scenarios", "tracking:bogus"]) == 2
    assert main(["compare", "--scenarios", "tracking", "--jobs", "0"]) == 2
