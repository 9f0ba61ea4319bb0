"""Names and counts of the panel's work as the Markdown and HTML reports show them."""

from __future__ import annotations


def round_name(debate: dict, rnd: dict) -> str:
    """"MSEG[1] round 1 of 2": a segment's debate and its round (not the mission-wide round index)."""
    seg = rnd.get("segment")
    if not seg:
        return f"Round {int(rnd.get('index', 0)) + 1}"
    total = next((s.get("rounds") for s in debate.get("segments") or [] if s.get("id") == seg), None)
    k = int(rnd.get("segment_round", 0)) + 1
    return f"{seg} round {k} of {total}" if total else f"{seg} round {k}"


def coherence_line(debate: dict) -> str:
    """The panel's coherence counts (debate.coherence) and the inadmissible choices it was held to."""
    c = debate.get("coherence") or {}
    text = (f"Coherence: {c.get('stance_contradictions', 0)} stance contradictions, "
            f"{c.get('unsupported_disputes', 0)} unsupported disputes, {c.get('counter_mismatches', 0)} "
            f"counter/finding mismatches, {c.get('debris', 0)} debris.")
    bad = debate.get("inadmissible") or {}
    if bad.get("answers"):
        text += (f" Inadmissible choices: {bad['answers']} answer(s), {bad.get('repaired', 0)} repaired, "
                 f"{bad.get('dropped', 0)} choice(s) dropped.")
    return text
