"""The flight's verdict and its most important findings in words, read from a report dict (terminal, live end).

Composed only from the report's verified findings and the panel's recorded choices, never from model text.
"""

from __future__ import annotations

from uav_debate_eval.findings.text import span

_OPENING = {
    "risky": "Risky",
    "borderline": "Borderline",
    "safe": "Safe",
    "inconclusive": "Inconclusive",
}


def _findings(report: dict) -> list[dict]:
    return list(report.get("findings") or [])


def _panel_words(findings: list[dict]) -> str:
    endorsed = [f["id"] for f in findings if (f.get("panel") or {}).get("endorsed")]
    disputed = [(f["id"], (f.get("panel") or {}).get("reasons") or []) for f in findings
                if (f.get("panel") or {}).get("disputed") and not (f.get("panel") or {}).get("endorsed")]
    parts = []
    if endorsed:
        parts.append(f"the panel endorsed {', '.join(endorsed[:4])}" + (" and more" if len(endorsed) > 4 else ""))
    if disputed:
        fid, reasons = disputed[0]
        why = f" ({reasons[0].replace('_', ' ')})" if reasons else ""
        parts.append(f"disputed {fid}{why}")
    text = "; ".join(parts)
    return (" " + text[0].upper() + text[1:] + ".") if parts else ""


def _more(rest: list[dict]) -> str:
    """How many more violations, and other hazards by kind (a crash is no violation: counted as one, a 3-crash flight
    read '14 more violations' beside its 12)."""
    violations = sum(str(f.get("kind", "")).startswith("violation:") for f in rest)
    others = sorted({str(f.get("kind", "")).replace("_", " ") for f in rest if not
                     str(f.get("kind", "")).startswith("violation:")})
    parts = [f"{violations} more violation{'s' if violations > 1 else ''}"] if violations else []
    if others:
        n = len(rest) - violations
        parts.append(f"{n} more hazard{'s' if n > 1 else ''} ({', '.join(others)})")
    return f" ({'; '.join(parts)})" if parts else ""


def verdict_sentence(report: dict) -> str:
    """One or two sentences an engineer would write: label, what decides it, what else matters."""
    verdict = report.get("verdict") or {}
    label = verdict.get("label", "safe")
    found = _findings(report)
    hazards = [f for f in found if f.get("severity") == "hazard"]
    warnings = [f for f in found if f.get("severity") == "warning"]
    dq = [f for f in found if f.get("severity") == "data_quality"]
    opening = _OPENING.get(label, label.capitalize())
    if label == "risky" and hazards:
        text = f"{opening}: {hazards[0]['sentence'].rstrip('.')}{_more(hazards[1:])}."
    elif label == "risky":
        text = f"{opening}: the safety verifier vetoed the flight ({len(report.get('violations') or [])} violation(s))."
    elif label == "inconclusive" and not (report.get("mission") or {}).get("constraints_checked") \
            and not report.get("rules"):
        text = f"{opening}: nothing was checked: give a mission or limits."
    elif label == "inconclusive":
        head = dq[0]["sentence"].rstrip(".") if dq else "a checked constraint could not be evaluated"
        text = f"{opening}: no violation, but {head[0].lower() + head[1:]}."
        if hazards:  # a hazard no constraint decides (the autopilot's own crash check) is said too
            text += " " + hazards[0]["sentence"].strip()
    elif hazards:  # a hazard no constraint decides (the autopilot's own crash check) is said first
        text = f"{opening}: no hard-constraint violation, but {_lower(hazards[0]['sentence'])}"
    elif label == "borderline" and warnings:
        text = f"{opening}: no hard-constraint violation, but {_lower(warnings[0]['sentence'])}"
    elif warnings:
        text = f"{opening}: no hard-constraint violation; {_lower(warnings[0]['sentence'])}"
    else:  # info findings and recording artefacts never lead a verdict
        checked = (report.get("mission") or {}).get("constraints_checked") or []
        near = "none within 10 % of its limit" if label == "safe" else "but one came within 10 % of its limit"
        text = (f"{opening}: {', '.join(checked)} held throughout, {near}." if checked
                else f"{opening}: the mission gave no hard constraint to check.")
    if dq and label != "inconclusive":
        ids = ", ".join(f["id"] for f in dq[:4]) + (" and more" if len(dq) > 4 else "")
        text += (f" Data quality: {len(dq)} recording artefact{'s' if len(dq) > 1 else ''} ({ids}) set apart from "
                 "the checks.")
    return text + _panel_words(found)


def _lower(sentence: str) -> str:
    s = sentence.strip()
    if not s.endswith("."):
        s += "."
    # keep ids and vehicle names as they are; only lower a capitalised English first word
    first, _, rest = s.partition(" ")
    return (first.lower() if first.istitle() and first.isalpha() else first) + (" " + rest if rest else "")


def top_findings(report: dict, n: int = 3) -> list[str]:
    """The `n` most important findings as terminal lines: id, severity, flight time, sentence."""
    return [f"{f['id']} [{f['severity']}] {span(f['t_start'], f['t_end'])}: {f['sentence']}"
            for f in _findings(report)[:n]]
