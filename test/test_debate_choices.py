"""Agents choose, the tool writes; the quality gate strikes model text that does not read like an engineer's."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
import pytest
from debate_fakes import ScriptedBackend

from uav_debate_eval.debate import gate
from uav_debate_eval.debate.choices import REASONS, candidates, choice_schema, findings_text, normalise
from uav_debate_eval.debate.comparison import build_contexts, hazards_chosen, hazards_named
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.consensus import consensus
from uav_debate_eval.debate.engine import run_debate
from uav_debate_eval.debate.response import AgentResponse
from uav_debate_eval.findings import build_findings
from uav_debate_eval.findings.admissible import admissible
from uav_debate_eval.sim.scenarios import simulate

NAMES = {"uav1", "uav2", "min_separation", "mseg[1]", "event[2]", "speed_consistency", "f1"}


@pytest.mark.parametrize("text, why", [
    ("Judge on MSEG[1] (safe): SCORES_SUPPED, SAFE; SUMMARY DURING THE DAY: verdict RISKY.", "template_debris"),
    ("Recommendez-SUPPED, SAFE.", "template_debris"),
    ("{{ {{{1}}}}, {{{} }", "template_debris"),
    ("Recommendations:", "truncated"),
    ("MWE: Scores of a flight control system in operation; the F-", "truncated"),
    ("The swarm is a group of autonomous vehicles that are designed to protect the environment.", "ungrounded"),
    ("uav1 uav2 0.23 14.45 19.95 0.5 MSEG[1] 7 8 9.", "not_english"),
])
def test_gate_strikes_what_the_issue_measured(text, why):
    assert gate.reason(text, NAMES, set()) == why


def test_gate_keeps_grounded_prose_once():
    g = gate.gate("uav1 and uav2 came within 0.23 m at 14.45 s. Nice day. uav1 and uav2 came within 0.23 m at "
                  "14.45 s. The speed_consistency of the swarm was low.", NAMES)
    assert g.kept == "uav1 and uav2 came within 0.23 m at 14.45 s. The speed_consistency of the swarm was low."
    assert g.struck == [("Nice day.", "ungrounded"), ("uav1 and uav2 came within 0.23 m at 14.45 s.", "repeated")]
    assert gate.count(g.struck) == {"count": 2, "reasons": {"ungrounded": 1, "repeated": 1}}


@pytest.fixture(scope="module")
def near_miss():
    sim = simulate("formation", seed=0, duration_s=30, faults=["near_miss"])
    contexts, safety = build_contexts(sim.traj, sim.mission)
    return sim, contexts


def test_choice_schema_offers_only_what_the_facts_admit(near_miss):
    sim, contexts = near_miss
    ctx = contexts[0]
    found = build_findings(ctx.safety, ctx.dsl, ctx.metrics, sim.mission, (ctx.t_start, ctx.t_end))
    adm = admissible(found, ctx.safety, sim.mission, (ctx.t_start, ctx.t_end), vetoed=True)
    assert found[0].severity == "hazard" and adm.labels == ("risky",)
    schema = choice_schema(found, adm)
    recs = candidates(found)
    assert "label" not in schema["properties"]  # one admissible label: the question is not asked
    good = {"findings": [{"id": "F1", "stance": "endorse", "reason": "safety_critical"}],
            "confidence": 0.8, "recommendations": ["R1"], "note": ""}
    jsonschema.validate(good, schema)
    for bad in ({**good, "findings": [{"id": f"F{len(found) + 1}", "stance": "endorse", "reason": "safety_critical"}]},
                {**good, "findings": [{"id": "F1", "stance": "endorse", "reason": "sensor_artefact"}]},
                {**good, "findings": [{"id": "F1", "stance": "dispute", "reason": "within_tolerance"}]},
                {**good, "findings": [{"id": "F1", "stance": "dispute", "reason": "sensor_artefact"}]},
                {**good, "label": "safe"},
                {**good, "recommendations": [f"R{len(recs) + 1}"]}, {**good, "note": "cites {RISK[1]}"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    choices, picked, dropped = normalise({**good, "findings": [
        *good["findings"], {"id": "F99", "reason": "x"}, {"id": "F1", "reason": "within_tolerance"}]}, found, adm)
    assert choices == good["findings"] and picked == [recs["R1"][1]] and dropped == 1
    assert set(REASONS) >= {"sensor_artefact", "within_tolerance", "outside_mission_scope", "needs_more_data"}


def test_the_note_is_the_last_property_asked(near_miss):
    """A grammar emits the properties in schema order: the choices and concerns come before the free text, so an
    answer cut at the token cap inside its note has made them all (llm.structured.close_cut_note)."""
    sim, contexts = near_miss
    ctx = contexts[0]
    found = build_findings(ctx.safety, ctx.dsl, ctx.metrics, sim.mission, (ctx.t_start, ctx.t_end))
    for aspects in (None, [SimpleNamespace(id="A1"), SimpleNamespace(id="A2")]):
        schema = choice_schema(found, aspect_items=aspects)
        assert list(schema["properties"])[-1] == "note" and not {"note", "concerns"} & set(schema["required"])
        assert ("concerns" in schema["properties"]) == bool(aspects)
    gbnf = pytest.importorskip("llama_cpp.llama_grammar").json_schema_to_gbnf
    root = next(line for line in gbnf(json.dumps(schema)).splitlines() if line.startswith("root ::="))
    assert root.index("recommendations-kv") < root.index("concerns-kv") < root.index("note-kv"), root


def _chooser(note: str):
    def script(req):
        ids = req.json_schema["properties"]["findings"]["items"]["anyOf"][0]["properties"]["id"]["enum"]
        recs = req.json_schema["properties"]["recommendations"]["items"]["enum"]
        stance = [{"id": ids[0], "stance": "endorse", "reason": "safety_critical"}]
        if req.agent == "agent3" and len(ids) > 1:
            stance.append({"id": ids[1], "stance": "dispute", "reason": "sensor_artefact"})
        return {"findings": stance, "label": "safe", "confidence": 0.7, "recommendations": recs[:1], "note": note}
    return script


def test_llm_panel_chooses_and_the_tool_writes(near_miss):
    sim, contexts = near_miss
    backend = ScriptedBackend(_chooser("Nice weather for flying today."))
    res = run_debate(contexts[:1], sim.mission, DebateConfig(judge="vote"), backend=backend)
    report = res.to_report()
    seg = report["segments"][0]
    first = seg["findings"][0]
    refs = {f["id"]: f["refs"] for f in seg["findings"]}
    by_id = {f["id"]: f for f in seg["findings"]}
    leads = []
    for r in (x for rd in report["rounds"] for x in rd["responses"]):
        # each agent is asked about its persona's findings: it chose the first it was offered
        lead = by_id[r["findings"][0]["id"]]
        leads.append(lead["id"])
        assert r["findings"][0] == {"id": lead["id"], "stance": "endorse", "reason": "safety_critical"}
        assert lead["sentence"] in r["claim"] and r["claim"].split(" rates ")[1].startswith(seg["id"])
        assert r["recommendation"] == lead["recommendations"][0] and r["note"] == ""
        chosen = {ref for c in r["findings"] for ref in refs[c["id"]]}
        facts = {e.split()[0] for e in r["evidence"]} - chosen  # the rest: the aspects it reported on
        assert r["evidence"] and all(ref.split(".")[0] in ("flight_control", "coordination", "safety")
                                     or ref.startswith("WAYPTS[") for ref in facts)
        assert {a["id"] for a in r.get("aspects", [])} or not facts
    # the ungrounded note of every agent is struck and counted, and stays in the transcript
    n = sum(len(rd["responses"]) for rd in report["rounds"])
    assert n >= 3 and report["struck"] == {"count": n, "reasons": {"ungrounded": n}} == seg["struck"]
    assert any("Nice weather" in (row.get("response_text") or "") for row in res.transcript)
    assert report["invalid_citations"] == {"first_pass": 0, "repaired": 0, "struck": 0}
    assert res.verdict.recommendations[0] == first["recommendations"][0]
    # the hazard goes to the safety expert and to the persona of its kind (separation: coordination)
    assert leads.count("F1") >= 2 and first["id"] == "F1"
    final = report["rounds"][-1]["consensus"]
    assert 0.0 <= final["findings"] <= 1.0
    assert hazards_chosen(res, sim.truth) == (1, 1) and hazards_named(res, sim.truth) == (1, 1)


def test_grounded_note_is_kept_and_disputes_do_not_count_as_identification(near_miss):
    sim, contexts = near_miss

    def disputer(req):  # disputes every finding the schema lets it dispute, and the hazard F1 as well
        alts = [a["properties"] for a in req.json_schema["properties"]["findings"]["items"]["anyOf"]
                if a["properties"]["stance"]["enum"] == ["dispute"]]
        chosen = [{"id": i, "stance": "dispute", "reason": a["reason"]["enum"][0]} for a in alts
                  for i in a["id"]["enum"]][:2]
        return {"findings": [{"id": "F1", "stance": "dispute", "reason": "sensor_artefact"}, *chosen],
                "confidence": 0.6, "recommendations": ["R1"],
                "note": "The closest approach of uav1 and uav2 needs a second look."}

    res = run_debate(contexts[:1], sim.mission, DebateConfig(judge="vote"), backend=ScriptedBackend(disputer))
    report = res.to_report()
    r = report["rounds"][0]["responses"][0]
    assert r["note"] == "The closest approach of uav1 and uav2 needs a second look." and r["note"] in r["summary"]
    assert {c["stance"] for c in r["findings"]} == {"dispute"}
    assert "F1" not in {c["id"] for c in r["findings"]}
    assert f"disputes {r['findings'][0]['id']} as " in r["summary"]
    n = sum(len(rd["responses"]) for rd in report["rounds"])  # the hazard's unsupported dispute: dropped, counted
    assert report["inadmissible"] == {"answers": n, "repaired": 0, "dropped": n}
    assert hazards_chosen(res, sim.truth) == (0, 1)  # the tool's text names it; the panel's choices do not
    assert res.verdict.label == "risky"  # the veto holds whatever the panel chose


def test_consensus_on_findings_enters_the_overall_score():
    a = AgentResponse("c", choices=[{"id": "F1", "stance": "endorse", "reason": "safety_critical"}])
    b = AgentResponse("c", choices=[{"id": "F2", "stance": "endorse", "reason": "safety_critical"}])
    plain = [AgentResponse("c"), AgentResponse("c")]
    assert consensus(plain)["findings"] == 1.0
    same, apart = consensus([a, a]), consensus([a, b])
    assert same["findings"] == 1.0 and apart["findings"] == 0.0
    assert same["overall"] - apart["overall"] == pytest.approx(0.2)


def test_rules_personas_choose_deterministically(near_miss):
    sim, contexts = near_miss
    one = run_debate(contexts, sim.mission).to_report()
    two = run_debate(contexts, sim.mission).to_report()
    pick = [[x["findings"] for x in rd["responses"]] for rd in one["rounds"]]
    assert pick == [[x["findings"] for x in rd["responses"]] for rd in two["rounds"]]
    seg_of = {s["id"]: s for s in one["segments"]}
    for x, segment in ((x, rd["segment"]) for rd in one["rounds"] for x in rd["responses"] if x["role"] == "safety"):
        first = seg_of[segment]["findings"][0]
        if first["severity"] == "hazard":
            assert x["findings"][0] == {"id": first["id"], "stance": "endorse", "reason": "safety_critical"}


def test_llm_judge_chooses_findings_and_recommendations(near_miss):
    sim, contexts = near_miss

    def judge(req):
        props = req.json_schema["properties"]
        return {"label": props["label"]["enum"][0], "findings": props["findings"]["items"]["enum"][:2],
                "recommendations": props["recommendations"]["items"]["enum"][:1],
                "summary": "SCORES_SUPPED, SAFE; SUMMARY DURING THE DAY"}

    backend = ScriptedBackend(_chooser(""), judge=judge)
    # the complexity router: the sparse one makes no judge call on a vetoed segment (the veto fixes its label)
    res = run_debate(contexts[:1], sim.mission, DebateConfig(router="complexity"), backend=backend)
    (req,) = backend.judge_requests
    assert "FINDINGS" in req.messages[1]["content"] and set(req.json_schema["required"]) == {
        "label", "findings", "recommendations", "summary"}
    seg = res.to_report()["segments"][0]
    j, first = seg["judge"], seg["findings"][0]
    assert j["by"] == "llm" and j["findings"] == ["F1", "F2"] and j["note"] == ""
    assert j["summary"].startswith(f"The judge rates it {j['label']}, resting on F1 and F2: {first['sentence']}")
    assert j["recommendations"] == [first["recommendations"][0]] and set(j["evidence"]) <= set(first["refs"] +
                                                                                                seg["findings"][1]["refs"])
    assert seg["struck"] == {"count": 1, "reasons": {"template_debris": 1}}  # the judge's own text was debris
    assert f"Judge on {seg['id']} ({j['label']}): The judge rates it" in res.verdict.summary


def test_free_text_answers_are_gated_and_evidence_is_kept_once(near_miss):
    sim, contexts = near_miss
    item = {"id": "RISK[1]", "note": "the pair came within 0.222 m"}

    def free(req):
        return {"claim": "The swarm is a group of autonomous vehicles that protect the environment.",
                "evidence": [item] * 5, "counter": "{{ {{{1}}}}, {{{} }",
                "summary": "uav1 and uav2 broke min_separation. Recommendez-SUPPED, SAFE.",
                "confidence": 0.6, "label": "risky"}

    res = run_debate(contexts[:1], sim.mission, DebateConfig(choices=False, judge="vote"),
                     backend=ScriptedBackend(free))
    report = res.to_report()
    r = report["rounds"][0]["responses"][0]
    assert len(r["evidence"]) == 1 and r["evidence"][0].startswith("RISK[1]")
    assert r["summary"] == "uav1 and uav2 broke min_separation."
    assert r["claim"].endswith("without choosing a finding.") and report["segments"][0]["id"] in r["claim"]
    n = sum(len(rd["responses"]) for rd in report["rounds"])
    # counter, the summary's second sentence and the recommendation read from it are debris
    assert report["struck"]["reasons"] == {"ungrounded": n, "template_debris": 3 * n}
    assert "Recommendez" not in " ".join(res.verdict.recommendations)


def test_each_finding_lists_its_own_recommendations_in_the_prompt():
    """The FINDINGS blocks: under each finding its own recommendation ids (all of them; grouped: the lead's first),
    numbered R1.. in finding order, at show size (a segment of 3,000 findings) as for three."""
    from uav_debate_eval.debate.prompts import grouped_text

    def finding(k: int, recs: int):
        return SimpleNamespace(id=f"F{k}", severity="warning", sentence=f"d{k:04d} climbed at 4 m/s.",
                               recommendations=[f"Check d{k:04d}'s climb {j}." for j in range(recs)],
                               t_start=float(k), t_end=float(k) + 1.0)

    for n in (3, 3000):
        found = [finding(k, k % 3) for k in range(1, n + 1)]  # 1, 2 and no recommendations in turn
        recs = candidates(found)
        text = findings_text(found).splitlines()
        at = {line.split(" ", 1)[0]: i for i, line in enumerate(text) if line.startswith("F")}
        for f in found:
            below = text[at[f.id] + 1:at[f.id] + 1 + len(f.recommendations)]
            assert below == [f"  {rid}: {t}" for rid, (fid, t) in recs.items() if fid == f.id]
        assert len(text) == n + len(recs)
        groups = {f"F{k}": [f"F{k}", f"F{k + 1}"] for k in range(1, n, 2)}
        lines = grouped_text(found, groups, None).splitlines()
        first = {fid: f"  {rid}: {t}" for rid, (fid, t) in reversed(recs.items())}
        expected = []
        for lead, ids in groups.items():
            expected.append(next(line for line in lines if line.startswith(", ".join(ids) + " [")))
            expected += [first[lead]] if lead in first else []
        assert lines == expected
        assert any(line.startswith("  R") for line in lines)
