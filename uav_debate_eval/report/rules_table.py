"""The mission rules' table (report `rules`, CONTRACT.md §2a) in Markdown and HTML: one row per rule with its
outcome, robustness, worst vehicles and the intervals where its body fails."""

from __future__ import annotations

from uav_debate_eval.report.escape import h, md

#: Intervals printed per rule (the rest are counted; report.json has them all).
MAX_INTERVALS = 4
HEAD = ("rule", "severity", "over", "formula", "outcome", "robustness", "worst", "fails at [s]")


def _outcome(r: dict) -> str:
    return {True: "holds", False: "FAILED"}.get(r["satisfied"], "not evaluable")


def _intervals(r: dict) -> str:
    spans = r.get("intervals") or []
    text = ", ".join(f"{a:.2f}–{b:.2f}" for a, b in spans[:MAX_INTERVALS])
    return text + (f" (+{len(spans) - MAX_INTERVALS} more)" if len(spans) > MAX_INTERVALS else "") or "–"


def _robustness(r: dict) -> str:
    return "n/a" if r.get("robustness") is None else f"{r['robustness']:.3f}"


def _cells(r: dict) -> list[str]:
    return [r["id"], r["severity"], r.get("over", ""), r.get("stl", ""), _outcome(r), _robustness(r),
            ", ".join(r.get("worst") or []) or "–", _intervals(r)]


def rules_markdown(report: dict) -> list[str]:
    rules = report.get("rules") or []
    if not rules:
        return []
    out = [f"## Mission rules ({len(rules)})", "", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for r in rules:
        cells = _cells(r)
        cells[3] = f"`{cells[3]}`".replace("|", "\\|")
        out.append("| " + " | ".join(c if i == 3 else md(c) for i, c in enumerate(cells)) + " |")
    return out + [""]


def rules_html(report: dict) -> str:
    rules = report.get("rules") or []
    if not rules:
        return ""
    head = "".join(f"<th>{h(c)}</th>" for c in HEAD)
    rows = "".join("<tr>" + "".join(f"<td><code>{h(c)}</code></td>" if i == 3 else
                                     f"<td class=num>{h(c)}</td>" if i == 5 else f"<td>{h(c)}</td>"
                                     for i, c in enumerate(_cells(r))) + "</tr>" for r in rules)
    return f'<h2 id="rules">Mission rules ({len(rules)})</h2><table><tr>{head}</tr>{rows}</table>'
