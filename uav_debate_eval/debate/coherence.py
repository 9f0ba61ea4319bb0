"""Does the panel's reasoning hold together? Counted on a report dict (`debate.coherence`), so any report.json can be
checked after the fact:

- stance_contradictions: a response or a segment's panel label outside the labels the segment's facts admit, or a
  claim that rates a segment `safe` while quoting a hazard or warning it endorsed;
- unsupported_disputes: a dispute whose reason the facts do not admit for that finding (an artefact without a
  data-quality finding behind it, a hazard "within tolerance", ...);
- counter_mismatches: text that names a dispute ("disputes F2 as ...", "F2 is disputed as ...") the response did not
  choose, or a flight finding whose panel counters (endorsed / disputed / reasons) differ from the final rounds;
- debris: shown sentences with template debris (gate.has_debris).
All four are 0 for a coherent panel, with any backend.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from uav_debate_eval.debate import gate
from uav_debate_eval.findings.admissible import DISPUTE_REASONS, Admissible

KEYS = ("stance_contradictions", "unsupported_disputes", "counter_mismatches", "debris")
_REASON_WORDS = "|".join(r.replace("_", " ") for r in DISPUTE_REASONS)
_NAMED_DISPUTE = re.compile(rf"\b(F\d+) is disputed as ({_REASON_WORDS})\b|\bdisputes? (F\d+) as ({_REASON_WORDS})\b")


def _responses(debate: dict) -> Iterator[tuple[str, dict]]:
    for rnd in debate.get("rounds") or []:
        for r in rnd.get("responses") or []:
            if not r.get("reused"):
                yield rnd.get("segment", ""), r


def _contradicts(r: dict, adm: Admissible, by_id: dict) -> bool:
    label = r.get("assessment") or r.get("label")
    if r.get("findings") is not None and not adm.allows_label(label):
        return True
    if label != "safe":
        return False
    claim = str(r.get("claim") or "")
    return any(c["stance"] == "endorse" and c["id"] in by_id and by_id[c["id"]]["severity"] in ("hazard", "warning")
               and by_id[c["id"]]["sentence"] in claim for c in r.get("findings") or [])


def _named_disputes(r: dict) -> set[tuple[str, str]]:
    text = " ".join(str(r.get(k) or "") for k in ("claim", "summary", "counter"))
    return {(m.group(1) or m.group(3), (m.group(2) or m.group(4)).strip().replace(" ", "_"))
            for m in _NAMED_DISPUTE.finditer(text)}


def _panel_recount(report: dict) -> dict[str, dict]:
    """What the flight findings' panel counters should say: per finding key, the final rounds' stances."""
    debate = report.get("debate") or {}
    last: dict[str, int] = {}
    for rnd in debate.get("rounds") or []:
        last[rnd.get("segment", "")] = max(last.get(rnd.get("segment", ""), -1), int(rnd.get("segment_round", 0)))
    keys = {s["id"]: {f["id"]: f.get("key") for f in s.get("findings") or []} for s in debate.get("segments") or []}
    out: dict[str, dict] = {}
    for rnd in debate.get("rounds") or []:
        seg = rnd.get("segment", "")
        if int(rnd.get("segment_round", 0)) != last.get(seg):
            continue
        for r in rnd.get("responses") or []:
            for c in r.get("findings") or []:
                key = keys.get(seg, {}).get(c["id"])
                p = out.setdefault(str(key), {"endorsed": 0, "disputed": 0, "reasons": set()})
                p["endorsed" if c["stance"] == "endorse" else "disputed"] += 1
                p["reasons"].add(c["reason"])
    return out


def _counter_findings(report: dict) -> int:
    """Flight findings whose panel counters differ from the final rounds' choices (matched by key)."""
    recount = _panel_recount(report)
    bad = 0
    for f in report.get("findings") or []:
        if "key" not in f:
            continue
        p, want = f.get("panel") or {}, recount.get(str(f["key"]))
        if want is None:
            bad += bool(p.get("endorsed") or p.get("disputed"))
        else:
            bad += (p.get("endorsed", 0), p.get("disputed", 0), set(p.get("reasons") or [])) != (
                want["endorsed"], want["disputed"], want["reasons"])
    return bad


def _shown_texts(report: dict) -> Iterator[str]:
    debate = report.get("debate") or {}
    for _, r in _responses(debate):
        yield from (str(r.get(k) or "") for k in ("claim", "summary", "counter", "recommendation", "note"))
    for s in debate.get("segments") or []:
        j = s.get("judge") or {}
        yield str(j.get("summary") or "")
        yield from (str(x) for x in j.get("recommendations") or [])
    verdict = report.get("verdict") or {}
    yield str(verdict.get("summary") or "")
    yield from (str(x) for x in verdict.get("recommendations") or [])


def coherence(report: dict) -> dict[str, int]:
    """The four counts (see the module docstring) of one report."""
    debate = report.get("debate") or {}
    counts = dict.fromkeys(KEYS, 0)
    segments = {s["id"]: s for s in debate.get("segments") or []}
    for seg_id, r in _responses(debate):
        seg = segments.get(seg_id) or {}
        if "admissible" not in seg:
            continue
        adm = Admissible.from_dict(seg["admissible"])
        by_id = {f["id"]: f for f in seg.get("findings") or []}
        counts["stance_contradictions"] += _contradicts(r, adm, by_id)
        counts["unsupported_disputes"] += sum(c["stance"] == "dispute" and not adm.allows(c)
                                              for c in r.get("findings") or [])
        chosen = {(c["id"], c["reason"]) for c in r.get("findings") or [] if c["stance"] == "dispute"}
        counts["counter_mismatches"] += len(_named_disputes(r) - chosen)
    for seg in segments.values():
        if "admissible" in seg and seg.get("panel_label") is not None:
            counts["stance_contradictions"] += seg["panel_label"] not in seg["admissible"]["labels"]
    counts["counter_mismatches"] += _counter_findings(report)
    counts["debris"] = sum(gate.has_debris(s) for text in _shown_texts(report) for s in gate.sentences(text))
    return counts
