"""Quoted evidence for small models: each evidence item cites an id and one of that id's own facts word for word
(a schema enum), and its note holds no digit, so every number a constrained model states is in the data."""

from __future__ import annotations

import jsonschema
import pytest
from debate_fakes import ScriptedBackend, answer, make_context

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.debate.comparison import build_contexts
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.engine import run_debate
from uav_debate_eval.debate.evidence import EvidenceVerifier, has_data_ref
from uav_debate_eval.debate.llm.structured import max_answer_chars, normalise_evidence, response_schema
from uav_debate_eval.sim.scenarios import simulate


@pytest.fixture(scope="module")
def near_miss_verifier():
    sim = simulate("formation", faults=["near_miss"])
    contexts, _ = build_contexts(sim.traj, sim.mission)
    ctx = next(c for c in contexts if c.safety.violations)
    return EvidenceVerifier(ctx.dsl, ctx.metrics)


def test_quotes_are_verified_facts_of_their_own_id(near_miss_verifier):
    v = near_miss_verifier
    quotes = v.quotes()
    assert set(quotes) == set(v.valid_ids) | set(v.metric_refs())
    risk = next(k for k, it in v.index.items() if it.kind == "violation" or k.startswith("RISK"))
    assert any("min_separation" in q and "worst=" in q for q in quotes[risk])
    for ref, qs in quotes.items():
        assert len(qs) <= 4
        for q in qs:
            assert v.check(f"{ref} {q}").valid, (ref, q)
    margin = quotes["safety.separation_margin"][0]
    assert margin.startswith("value=") and margin.endswith(" m")
    # the same fact under another id does not verify: quotes are per id
    other = next(k for k in v.valid_ids if k.startswith("SEG"))
    assert not v.check(f"{other} {quotes[risk][1]}").valid


def test_schema_pins_each_quote_to_its_id_and_keeps_numbers_out_of_notes(near_miss_verifier):
    v = near_miss_verifier
    ids, quotes = v.valid_ids + v.metric_refs(), v.quotes()
    schema = response_schema(ids, quotes=quotes)
    risk = next(k for k in ids if k.startswith("RISK"))
    seg = next(k for k in ids if k.startswith("SEG"))
    base = answer()
    good = {**base, "evidence": [{"id": risk, "quote": quotes[risk][0], "note": "the pair came too close"}] * 3}
    jsonschema.validate(good, schema)
    for item in ({"id": seg, "quote": quotes[risk][0], "note": "wrong id for this fact"},
                 {"id": risk, "quote": quotes[risk][0], "note": "closer than 0 m"},
                 {"id": risk, "quote": "worst=0.001m", "note": "an invented number"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**base, "evidence": [item] * 3}, schema)
    assert max_answer_chars(schema) >= len(str(good))
    text = normalise_evidence(good["evidence"])[0]
    assert text == f"{risk} {quotes[risk][0]}: the pair came too close"
    assert v.check(text).valid and has_data_ref(text)


def test_compact_panels_quote_and_full_ones_do_not():
    assert DebateConfig(backend="local").quotes_evidence and not DebateConfig(backend="openai").quotes_evidence
    assert not DebateConfig(backend="local", quoted_evidence=False).quotes_evidence
    backend = ScriptedBackend(lambda req: answer())
    run_debate([make_context()], Mission(), DebateConfig(router_thresholds=(0.25, 0.55), prompt_style="compact",
                                                         choices=False), backend=backend)
    item = backend.requests[0].json_schema["properties"]["evidence"]["items"]
    assert {o["properties"]["id"]["enum"][0] for o in item["anyOf"]} >= {"SEG[1]", "SEG[2]"}
    assert '"quote"' in backend.requests[0].messages[0]["content"]
    backend = ScriptedBackend(lambda req: answer())
    run_debate([make_context()], Mission(), DebateConfig(router_thresholds=(0.25, 0.55), choices=False),
               backend=backend)
    assert "anyOf" not in backend.requests[0].json_schema["properties"]["evidence"]["items"]
