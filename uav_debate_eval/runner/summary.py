"""A batch's summary: one row per flight (summary.csv, summary.md) and the terminal's status line of a flight."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from uav_debate_eval.runner.discover import FlightInputs

SCORES = ("flight_control", "coordination", "safety", "overall")
SUMMARY_COLUMNS = ("flight", "mission", "file", "status", "label", "violations", *SCORES, "dsl_tokens",
                   "debate_tokens", "time_s", "report", "error")
#: A summary row: SUMMARY_COLUMNS, and for an evaluated flight the verdict in words ("words").
Row = dict[str, Any]


def flight_row(flight: FlightInputs, report: dict[str, Any], out: Path, seconds: float) -> Row:
    """The row of an evaluated flight: status `ok`, or `partial` when inputs of it could not be read (the flight is
    the others'; `error` says which and why)."""
    from uav_debate_eval.findings import top_findings, verdict_sentence
    from uav_debate_eval.report.precision import rounded

    scores = rounded(report["scores"])  # as report.json gives them
    return {**_names(flight), "status": "partial" if flight.left_out else "ok", "label": report["verdict"]["label"],
            "violations": len(report["violations"]), **{k: scores.get(k) for k in SCORES},
            "dsl_tokens": report["dsl"]["tokens"],
            "debate_tokens": report["debate"]["tokens"]["prompt"] + report["debate"]["tokens"]["completion"],
            "time_s": round(seconds, 3), "report": str(out), "error": "; ".join(flight.left_out_notes()),
            "budget": budget_words(report),
            "words": [verdict_sentence(report), *("  " + line for line in top_findings(report, 3))]}


def budget_words(report: dict[str, Any]) -> str:
    """The debate's spend for the summary line: "debate 3,871 of 4,096 tokens, 21 findings not debated"."""
    t = (report.get("debate") or {}).get("tokens") or {}
    if "budget" not in t:
        return ""
    left_out = t["left_out"]["count"]
    return (f"debate {t['spent']:,} of {t['budget']:,} tokens"
            + (f", {left_out} finding(s) not debated" if left_out else ""))


def failed_row(flight: FlightInputs, status: str, error: str, seconds: float = 0.0) -> Row:
    """The row of a flight that was not evaluated: status `failed` (bad input) or `error` (internal)."""
    return {**_names(flight), "status": status, "label": "", "violations": "", **dict.fromkeys(SCORES),
            "dsl_tokens": "", "debate_tokens": "", "time_s": round(seconds, 3), "report": "",
            "error": " ".join(error.split())}


def _names(flight: FlightInputs) -> Row:
    return {"flight": flight.name, "mission": "" if flight.mission is None else str(flight.mission),
            "file": " ".join(str(p) for p in flight.paths)}


def fmt(value: Any) -> str:
    """A summary cell for the terminal and summary.md."""
    return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def write_summary(rows: list[Row], out: Path) -> None:
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=SUMMARY_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in SUMMARY_COLUMNS})
    from uav_debate_eval.report.escape import md

    lines = ["# Batch summary", "", "| " + " | ".join(SUMMARY_COLUMNS) + " |",
             "|" + "---|" * len(SUMMARY_COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(md(fmt(r.get(k))) if k in SCORES else md(r.get(k, ""))
                                       for k in SUMMARY_COLUMNS) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
