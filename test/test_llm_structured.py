"""Structured response: schema (only existing ids), tolerant parser (JSON, fenced, tagged, garbage), ids."""

import json

import jsonschema
import pytest

from uav_debate_eval.debate.llm.structured import (
    check_ids,
    extract_ids,
    max_answer_chars,
    normalise_evidence,
    parse_for_schema,
    parse_response,
    repair_prompt,
    response_schema,
)

IDS = ["SEG[0]", "SEG[1]", "EVENT[2]", "RISK[1]"]
GOOD = {
    "claim": "Separation fell below the limit in SEG[1].",
    "evidence": [
        {"id": "SEG[1]", "note": "min separation 2.4 m against 3.0 m"},
        {"id": "EVENT[2]", "note": "proximity at t=41 s"},
        {"id": "RISK[1]", "note": "below limit for 2.0 s"},
    ],
    "counter": "The breach was short.",
    "summary": "Risky pass. Recommend a 4 m separation margin.",
    "confidence": 0.8,
    "label": "risky",
}


def _valid(obj: dict) -> dict:
    """Schema-valid variant of GOOD (no brackets in free text)."""
    return {**obj, "claim": "Separation fell below the limit in segment one."}


def test_schema_accepts_known_ids_and_rejects_unknown_ones():
    schema = response_schema(IDS)
    jsonschema.validate(_valid(GOOD), schema)
    bad = _valid(GOOD)
    bad["evidence"] = [*bad["evidence"][:2], {"id": "SEG[9]", "note": "x y"}]
    with pytest.raises(jsonschema.ValidationError, match="SEG\\[9\\]"):
        jsonschema.validate(bad, schema)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(evidence=d["evidence"][:2]),  # fewer than 3
        lambda d: d.update(evidence=d["evidence"] * 2),  # more than 5
        lambda d: d.update(confidence=1.5),
        lambda d: d.update(label="fine"),
        lambda d: d.update(summary="cites RISK[7] in free text"),  # ids only in evidence.id
        lambda d: d.update(extra="x"),
        lambda d: d.pop("counter"),
    ],
)
def test_schema_rejects_shape_violations(mutate):
    obj = json.loads(json.dumps(_valid(GOOD)))
    mutate(obj)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, response_schema(IDS))


def test_schema_without_ids_uses_plain_strings():
    schema = response_schema([])
    ok = {**_valid(GOOD), "evidence": ["min separation 2.4 m", "max speed 12.1 m/s", "jerk 3 m/s3"]}
    jsonschema.validate(ok, schema)
    assert schema["properties"]["evidence"]["items"]["type"] == "string"


def test_max_answer_chars_bounds_the_longest_valid_answer():
    schema = response_schema(IDS)
    longest = {
        "claim": "c" * 120,
        "evidence": [{"id": "EVENT[2]", "note": "n" * 60}] * 5,
        "counter": "k" * 120,
        "summary": "s" * 120,
        "confidence": 0.25,
        "label": "borderline",
    }
    jsonschema.validate(longest, schema)
    # the grammar allows one optional space around every separator and bracket; take them all
    widest = json.dumps(longest, separators=(" , ", " : ")).replace("{", "{ ").replace("[", "[ ") + " "
    assert len(widest) <= max_answer_chars(schema) <= 1.2 * len(widest)


def test_parse_plain_json():
    data = parse_response(json.dumps(GOOD))
    assert data == {
        "claim": "Separation fell below the limit in SEG[1].",
        "evidence": [
            "SEG[1]: min separation 2.4 m against 3.0 m",
            "EVENT[2]: proximity at t=41 s",
            "RISK[1]: below limit for 2.0 s",
        ],
        "counter": "The breach was short.",
        "summary": "Risky pass. Recommend a 4 m separation margin.",
        "confidence": 0.8,
        "label": "risky",
    }


def test_parse_fenced_json_with_prose_around_it():
    text = f"Sure! Here is my answer:\n```json\n{json.dumps(GOOD, indent=2)}\n```\nHope this helps {{not json}}."
    assert parse_response(text)["evidence"][1] == "EVENT[2]: proximity at t=41 s"


def test_parse_json_with_trailing_text_and_string_evidence():
    obj = {**GOOD, "evidence": ["SEG[0] ok", "EVENT[2] 2.4 m", "RISK[1] 2 s"], "confidence": "75%"}
    data = parse_response(json.dumps(obj) + " -- end of answer")
    assert data["evidence"] == ["SEG[0] ok", "EVENT[2] 2.4 m", "RISK[1] 2 s"]
    assert data["confidence"] == 0.75


def test_parse_tagged_text_multiline():
    text = """[CLAIM] Separation fell below the limit.
[EVIDENCE]
- SEG[1]: min separation 2.4 m
- EVENT[2]: proximity 2.4 m at 41 s
3. RISK[1]: 2.0 s below 3.0 m
[COUNTER] The breach was brief.
[SUMMARY] Risky. Recommend 4 m spacing.
[CONFIDENCE] 0.7
[LABEL] risky"""
    data = parse_response(text)
    assert data == {
        "claim": "Separation fell below the limit.",
        "evidence": ["SEG[1]: min separation 2.4 m", "EVENT[2]: proximity 2.4 m at 41 s", "RISK[1]: 2.0 s below 3.0 m"],
        "counter": "The breach was brief.",
        "summary": "Risky. Recommend 4 m spacing.",
        "confidence": 0.7,
        "label": "risky",
    }


def test_parse_tagged_text_on_one_line_and_colon_headers():
    one = "[CLAIM] Fine. [EVIDENCE] SEG[0] ok; EVENT[2] 1 m; RISK[1] none [COUNTER] no [SUMMARY] keep [CONFIDENCE] 0.6"
    data = parse_response(one)
    assert data["evidence"] == ["SEG[0] ok", "EVENT[2] 1 m", "RISK[1] none"]
    assert data["confidence"] == 0.6 and data["label"] is None
    colon = "**Claim:** Fine\nEvidence:\n- SEG[0] ok\nConfidence: 60\nLabel: safe"
    data = parse_response(colon)
    assert (data["claim"], data["evidence"], data["confidence"], data["label"]) == ("Fine", ["SEG[0] ok"], 0.6, "safe")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think the flight was fine.",
        "{not json at all",
        '{"claim": "x", "evidence": [], "confidence": 0.5}',  # no evidence
        '{"claim": "x", "evidence": ["SEG[0]"], "confidence": 7000}',  # unreadable confidence
        "[CLAIM] only a claim",
        "```json\n[1, 2, 3]\n```",
    ],
)
def test_garbage_is_none(text):
    assert parse_response(text) is None


def test_extract_and_check_ids():
    assert extract_ids("SEG[1] then EVENT[2], again SEG[1]; [CLAIM] is no id; RISK[x-1]") == [
        "SEG[1]",
        "EVENT[2]",
        "RISK[x-1]",
    ]
    data = parse_response(json.dumps({**GOOD, "summary": "See SEG[7] too."}))
    check_ids(data, IDS)
    assert data["cited_ids"] == ["SEG[1]", "EVENT[2]", "RISK[1]", "SEG[7]"]
    assert data["invalid_ids"] == ["SEG[7]"]


def test_normalise_evidence_forms():
    assert normalise_evidence(
        [{"id": "SEG[0]", "note": "3 m"}, {"ID": "RISK[1]"}, " - 12 m/s max ", "", {"note": ""}]
    ) == [
        "SEG[0]: 3 m",
        "RISK[1]",
        "12 m/s max",
    ]
    assert normalise_evidence("SEG[0] only") == ["SEG[0] only"]


def test_parse_for_schema_generic_schema():
    schema = {"type": "object", "properties": {"label": {"enum": ["safe", "risky"]}}, "required": ["label"]}
    assert parse_for_schema('verdict: {"label": "risky"}', schema, []) == ({"label": "risky"}, "")
    data, why = parse_for_schema('{"label": "maybe"}', schema, [])
    assert data is None and why.startswith("schema violation")


def test_repair_prompt_names_the_error_and_the_format():
    msg = repair_prompt("missing claim", valid_ids=["SEG[0]"])
    assert msg["role"] == "user"
    assert "missing claim" in msg["content"] and "[CLAIM]" in msg["content"] and "SEG[0]" in msg["content"]
    assert '"claim"' in repair_prompt("x", json_mode=True)["content"]


def test_close_cut_note_only_when_the_cut_fell_in_the_trailing_note():
    from uav_debate_eval.debate.llm.structured import close_cut_note

    schema = {"properties": {"findings": {}, "note": {}}}
    closed = '{"findings": ["F1"], "note": ""}'
    assert close_cut_note('{"findings": ["F1"], "note" : "uav2 drifted at', schema) == closed
    assert close_cut_note('{"findings": ["F1"], "note": "', schema) == '{"findings": ["F1"], "note": ""}'
    assert close_cut_note('{"findings": ["F1"], "note": "done"', schema) is None  # closed: cut after it
    assert close_cut_note('{"findings": ["F1", "F', schema) is None  # cut in the choices
    assert close_cut_note('{"findings": ["F1"], "note": "x', {"properties": {"note": {}, "findings": {}}}) is None
