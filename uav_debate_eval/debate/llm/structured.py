"""The panel's structured response: JSON schema for constrained decoding, a tolerant parser, repair prompts.

One response = claim, evidence (3-5 items citing DSL ids or metric values), counter, summary, confidence, label.
Constrained decoders (llama.cpp grammars, OpenAI `json_schema`) get a schema where an evidence id is an enum of
the ids that exist and free text may not contain brackets, so they cannot emit an id that does not resolve.
Servers without structured output get the tagged text protocol and `parse_response`, which accepts both forms.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

LABELS = ("safe", "borderline", "risky")
TEXT_FIELDS = ("claim", "counter", "summary")
MIN_EVIDENCE = 3
MAX_EVIDENCE = 5
# Confidence on a 0.05 grid: an enum every constrained decoder turns into literals, so it cannot leave [0, 1].
CONFIDENCE_STEPS = [round(0.05 * i, 2) for i in range(21)]

# DSL ids look like SEG[3], EVENT[2], RISK[1]; the tagged protocol's own [CLAIM] has no name before the bracket.
ID_RE = re.compile(r"\b[A-Z][A-Z0-9_]*\[[A-Za-z0-9_.:\-]{1,32}\]")
# Free text in the constrained form: no brackets (so no ids), no quote, backslash or control character (so no
# JSON escapes to get wrong).
_PLAIN = r'[^\[\]"\\\x00-\x1f]'
_WORDS = r'[^\[\]"\\\x00-\x1f0-9]'  # plain text without digits: a quoted fact's note adds no number
_TAGS = ("claim", "evidence", "counter", "summary", "confidence", "label")
_TAG_ALT = "|".join(_TAGS)
# "[CLAIM]" anywhere, or "CLAIM:" / "**Claim:**" at the start of a line.
_TAG_RE = re.compile(rf"(?im)\[({_TAG_ALT})\][ \t]*:?|^[ \t>#-]*\**({_TAG_ALT})\**[ \t]*:\**[ \t]*")
_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_NUM_RE = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?\s*%?")
_BULLET_RE = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")


def plain_string(min_len: int, max_len: int) -> dict:
    """A bounded free-text field without brackets (so without ids), quotes, backslashes or control characters."""
    return {"type": "string", "pattern": f"^{_PLAIN}{{{min_len},{max_len}}}$"}


def _evidence_item(ids: list[str], note: dict, quotes: list[str] | None = None) -> dict:
    props: dict[str, Any] = {"id": {"type": "string", "enum": ids}}
    if quotes:
        props["quote"] = {"type": "string", "enum": quotes}
    props["note"] = note
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def response_schema(
    valid_ids: list[str],
    *,
    text_max: int = 120,
    note_max: int = 60,
    min_evidence: int = MIN_EVIDENCE,
    max_evidence: int = MAX_EVIDENCE,
    quotes: dict[str, list[str]] | None = None,
) -> dict:
    """JSON Schema of one panel response; evidence ids are an enum of `valid_ids` (strings without ids if none).

    With `quotes` (id -> exact facts of that id, for small models) an evidence item cites an id *and* one of its
    facts word for word, and its note may hold no digit, so every number it states is one the data holds.
    Length caps keep a weak model's worst case inside a modest `max_tokens`, so constrained output never truncates.
    All properties are required and no others allowed, which is what OpenAI's strict mode demands.
    """
    ids = list(dict.fromkeys(valid_ids))
    item: dict[str, Any]
    if ids and quotes:
        words = {"type": "string", "pattern": f"^{_WORDS}{{2,{note_max}}}$"}
        quoted = [_evidence_item([i], words, quotes[i]) for i in ids if quotes.get(i)]
        rest = [i for i in ids if not quotes.get(i)]
        item = {"anyOf": quoted + ([_evidence_item(rest, words)] if rest else [])}
    elif ids:
        item = _evidence_item(ids, plain_string(2, note_max))
    else:
        item = plain_string(3, note_max)
    return {
        "type": "object",
        "properties": {
            "claim": plain_string(10, text_max),
            "evidence": {"type": "array", "items": item, "minItems": min_evidence, "maxItems": max_evidence},
            "counter": plain_string(5, text_max),
            "summary": plain_string(10, text_max),
            "confidence": {"type": "number", "enum": CONFIDENCE_STEPS},
            "label": {"type": "string", "enum": list(LABELS)},
        },
        "required": ["claim", "evidence", "counter", "summary", "confidence", "label"],
        "additionalProperties": False,
    }


def is_panel_schema(schema: dict | None) -> bool:
    """True when `schema` is (shaped like) `response_schema`, so the panel parser and id checks apply."""
    props = (schema or {}).get("properties") or {}
    return "claim" in props and "evidence" in props


def _pattern_max(prop: dict) -> int:
    match = re.search(r"\{\d+,(\d+)\}\$$", prop.get("pattern", ""))
    return int(match.group(1)) if match else 0


def _item_chars(item: dict) -> int:
    props = item.get("properties")
    if props is None:
        return _pattern_max(item) + 6
    quote = max(map(len, props["quote"]["enum"])) + 12 if "quote" in props else 0
    return max(map(len, props["id"]["enum"])) + quote + _pattern_max(props["note"]) + 40


def max_answer_chars(schema: dict) -> int:
    """Upper bound on the length of a constrained panel answer: a `max_tokens` at least this never truncates it."""
    props = schema["properties"]
    ev = props["evidence"]
    item = ev["items"]
    per_item = max(map(_item_chars, item.get("anyOf", [item])))
    text = sum(_pattern_max(props[k]) + len(k) + 10 for k in TEXT_FIELDS)
    return text + ev.get("maxItems", MAX_EVIDENCE) * per_item + 80


#: The opening of a note's value: the key, then the string's opening quote (a plain string holds no quote).
_NOTE_OPENED = re.compile(r'"note"\s*:\s*"')


def close_cut_note(text: str, schema: dict) -> str | None:
    """`text` cut (at the token cap) inside the value of `note`, the schema's last property, closed with an empty
    note: every choice before it is whole, and half a sentence is no note. None when the cut fell elsewhere."""
    props = list((schema or {}).get("properties") or {})
    if not props or props[-1] != "note":
        return None
    opened = list(_NOTE_OPENED.finditer(text))[-1:]
    if not opened or '"' in text[opened[0].end():]:
        return None
    return text[:opened[0].start()] + '"note": ""}'


def parse_for_schema(text: str, schema: dict, valid_ids: list[str]) -> tuple[dict | None, str]:
    """(data, "") when `text` answers `schema` (panel responses get `check_ids`), else (None, why it does not)."""
    if is_panel_schema(schema):
        data = parse_response(text)
        if data is None:
            return None, "missing claim, evidence or confidence"
        return check_ids(data, valid_ids), ""
    closed = close_cut_note(text, schema)  # cut at the token cap inside its trailing note: the choices are whole
    obj = parse_json_object(text if closed is None else closed)
    if obj is None:
        return None, "no JSON object found"
    try:
        jsonschema.validate(obj, schema)
    except jsonschema.ValidationError as exc:
        return None, f"schema violation: {exc.message[:120]}"
    return obj, ""


def extract_ids(text: str) -> list[str]:
    """DSL ids cited in `text`, first occurrence order, without duplicates."""
    return list(dict.fromkeys(ID_RE.findall(text or "")))


def normalise_evidence(items: Any) -> list[str]:
    """Evidence in the report's list-of-strings form: {"id", "quote"?, "note"} -> "ID quote: note"; strings are
    kept, blanks dropped."""
    if isinstance(items, (str, dict)):
        items = [items]
    out: list[str] = []
    for item in items or []:
        if isinstance(item, dict):
            low = {str(k).lower(): v for k, v in item.items()}
            ident = " ".join(str(low.get(k) or "").strip() for k in ("id", "quote")).strip()
            note = str(low.get("note") or low.get("text") or low.get("value") or "").strip()
            text = f"{ident}: {note}" if ident and note else ident or note
        else:
            text = _BULLET_RE.sub("", str(item)).strip()
        if text:
            out.append(text)
    return out


def _confidence(value: Any) -> float | None:
    """A number in [0, 1]; "70%" and 70 are read as percentages, anything unreadable is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        num, pct = float(value), False
    else:
        match = _NUM_RE.search(str(value or ""))
        if not match:
            return None
        raw = match.group(0).strip()
        pct = raw.endswith("%")
        num = float(raw.rstrip("%").strip())
    if pct or 1.0 < num <= 100.0:
        num /= 100.0
    return num if 0.0 <= num <= 1.0 else None


def _label(value: Any) -> str | None:
    low = str(value or "").lower()
    hits = [lab for lab in LABELS if lab in low]
    return hits[0] if len(hits) == 1 else None


def _from_mapping(obj: dict) -> dict | None:
    low = {str(k).lower(): v for k, v in obj.items()}
    claim = str(low.get("claim") or "").strip()
    evidence = normalise_evidence(low.get("evidence"))
    confidence = _confidence(low.get("confidence"))
    if not claim or not evidence or confidence is None:
        return None
    return {
        "claim": claim,
        "evidence": evidence,
        "counter": str(low.get("counter") or "").strip(),
        "summary": str(low.get("summary") or "").strip(),
        "confidence": confidence,
        "label": _label(low.get("label")),
    }


def parse_json_object(text: str) -> dict | None:
    """The first JSON object in `text`: inside ``` fences, bare, or followed by trailing prose."""
    if not text:
        return None
    candidates = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    decoder = json.JSONDecoder(strict=False)  # a raw newline inside a string is not worth a re-prompt
    for cand in candidates:
        start = cand.find("{")
        while start != -1:
            try:
                obj, _ = decoder.raw_decode(cand, start)
            except json.JSONDecodeError:
                start = cand.find("{", start + 1)
                continue
            if isinstance(obj, dict):
                return obj
            start = cand.find("{", start + 1)
    return None


def _parse_tagged(text: str) -> dict | None:
    marks = list(_TAG_RE.finditer(text))
    if not marks:
        return None
    parts: dict[str, str] = {}
    for i, mark in enumerate(marks):
        tag = (mark.group(1) or mark.group(2)).lower()
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        parts.setdefault(tag, text[mark.end() : end].strip())
    lines = [ln for ln in (parts.get("evidence") or "").splitlines() if ln.strip()]
    if len(lines) == 1 and ";" in lines[0]:
        lines = lines[0].split(";")
    return _from_mapping({**parts, "evidence": lines})


def parse_response(text: str) -> dict | None:
    """Panel response from JSON (fenced or not, trailing text allowed) or the tagged text protocol; None if neither.

    Returns claim, evidence (list of strings), counter, summary, confidence (in [0, 1]) and label (None if absent).
    """
    obj = parse_json_object(text)
    if obj is not None:
        parsed = _from_mapping(obj)
        if parsed is not None:
            return parsed
    return _parse_tagged(text or "")


def check_ids(data: dict, valid_ids: list[str]) -> dict:
    """Add `cited_ids` and `invalid_ids` (cited anywhere in the response but not in `valid_ids`) to `data`.

    With no `valid_ids` nothing can be checked and `invalid_ids` stays empty.
    """
    parts = [data.get("claim"), *data.get("evidence", []), data.get("counter"), data.get("summary")]
    text = " ".join(str(p or "") for p in parts)
    cited = extract_ids(text)
    known = set(valid_ids)
    data["cited_ids"] = cited
    data["invalid_ids"] = [i for i in cited if known and i not in known]
    return data


def format_instructions(valid_ids: list[str], *, json_mode: bool = False) -> str:
    """Short format instructions for servers that cannot constrain output (kept short for small models)."""
    ids = ", ".join(valid_ids[:40]) if valid_ids else "metric values with units"
    if json_mode:
        return (
            'Reply with one JSON object only: {"claim": "...", "evidence": [{"id": "...", "note": "..."}], '
            f'"counter": "...", "summary": "...", "confidence": 0.0-1.0, "label": "safe|borderline|risky"}}. '
            f"Evidence: 3-5 items; ids only from: {ids}."
        )
    return (
        "Reply in exactly this format:\n[CLAIM] one sentence\n[EVIDENCE]\n- ID: fact with value and unit\n"
        "(3-5 lines)\n[COUNTER] strongest counter-argument\n[SUMMARY] takeaways and one recommendation\n"
        f"[CONFIDENCE] number between 0 and 1\n[LABEL] safe, borderline or risky\nCite only these ids: {ids}."
    )


def repair_prompt(error: str, *, json_mode: bool = False, valid_ids: list[str] | None = None,
                  schema: dict | None = None) -> dict[str, str]:
    """The one user message that asks for a corrected answer after `error` (why the last one did not parse or
    what the schema did not allow)."""
    if schema is not None and not is_panel_schema(schema):
        return {"role": "user", "content": f"Your last answer could not be used ({error}). Reply with one JSON "
                                           "object only, with only the ids, stances, reasons and labels the JSON "
                                           "schema allows."}
    fix = format_instructions(valid_ids or [], json_mode=json_mode)
    return {"role": "user", "content": f"Your last answer could not be used ({error}). {fix}"}
