"""report.md: the report for people reading in a terminal or a code review; every free text is escaped."""

from __future__ import annotations

from uav_debate_eval.report.captions import CAPTIONS
from uav_debate_eval.report.debate_words import coherence_line, round_name
from uav_debate_eval.report.escape import md, md_code_block
from uav_debate_eval.report.live_section import headline_markdown, live_markdown
from uav_debate_eval.report.rules_table import rules_markdown

MAX_EVENTS = 50


def _num(v, fmt: str = ".3g") -> str:
    return "n/a" if v is None else format(v, fmt) if isinstance(v, (int, float)) else md(v)


def event_value(e: dict):
    """The event's value, or what an autopilot logged (its label: mode=RTL, GPS_glitch, ...)."""
    return e.get("value") if e.get("value") is not None else (e.get("extra") or {}).get("label")


def render_markdown(report: dict, figures: list[str] | None = None) -> str:
    """The Markdown report; `figures` are names of PNGs written under figures/."""
    m, v = report["mission"], report["verdict"]
    out: list[str] = [f"# Swarm evaluation: {md(m.get('name', ''))}", ""]
    flag = " (safety veto)" if v["vetoed"] else ""
    out += [f"**Verdict: {md(v['label']).upper()}{flag}**", "", md(v["summary"]), "", *headline_markdown(report)]
    out += [f"- Vehicles: {', '.join(md(u) for u in m['uavs'])}",
            f"- Duration: {m['duration_s']:.2f} s ({m.get('samples', 'n/a')} samples)",
            f"- Mission type: {md(m.get('type', ''))}; constraints checked: "
            f"{', '.join(m.get('constraints_checked') or []) or 'none'}",
            f"- Inputs: {', '.join(md(i) for i in report.get('inputs', [])) or 'n/a'}"]
    if v.get("overridden"):
        out.append(f"- The panel's label ({md(v.get('panel_label'))}) was overridden by the safety verifier")
    out.append("")
    out += ["## Scores", "", "| category | score |", "|---|---|"]
    out += [f"| {k} | {_num(report['scores'].get(k), '.3f')} |" for k in ("flight_control", "coordination",
                                                                          "safety", "overall")]
    out += ["", f"## Violations ({len(report['violations'])})", ""]
    if report["violations"]:
        out += ["| constraint | t start [s] | t end [s] | vehicles | worst | limit |", "|---|---|---|---|---|---|"]
        out += [f"| {md(x['constraint'])} | {x['t_start']:.3f} | {x['t_end']:.3f} | {md(', '.join(x['uavs']))} | "
                f"{_num(x['worst_value'])} | {_num(x['limit'])} |" for x in report["violations"]]
    else:
        out.append("None.")
    out += ["", *rules_markdown(report), *_data_quality(report)]
    events = report["events"]
    out += ["", f"## Events ({len(events)})", ""]
    if events:
        out += ["| id | type | t [s] | vehicles | value |", "|---|---|---|---|---|"]
        out += [f"| {md(e['id'])} | {md(e['type'])} | {e['t']:.3f} | {md(', '.join(e['uavs']))} | "
                f"{_num(event_value(e))} {md(e.get('unit') or '')} |" for e in events[:MAX_EVENTS]]
        if len(events) > MAX_EVENTS:
            out.append(f"\n{len(events) - MAX_EVENTS} more in report.json.")
    else:
        out.append("None.")
    out += _findings(report.get("findings") or [])
    recs = v.get("recommendations") or []
    if recs:
        out += ["", "## Recommendations", ""] + [f"- {md(r)}" for r in recs]
    out += live_markdown(report)
    out += ["", *_debate(report["debate"])]
    dsl = report["dsl"]
    out += ["", "## Trajectory DSL", "",
            f"{dsl['tokens']} tokens (raw trajectory: {dsl['raw_tokens']} tokens).", "",
            md_code_block(dsl["text"]), ""]
    if figures:
        out += ["## Figures", ""]
        out += [f"![{md(CAPTIONS.get(n, n))}](figures/{n}.png)\n" for n in figures]
    notes = list(report.get("notes", [])) + list(report.get("ingest", {}).get("notes", []))
    if notes:
        out += ["## Notes", ""] + [f"- {md(n)}" for n in notes] + [""]
    tool = report.get("tool") or {}
    out += [f"_{md(tool.get('name', 'uav_debate_eval'))} {md(tool.get('version', ''))}, report schema "
            f"{report['schema_version']}_", ""]
    return "\n".join(out) + "\n"


def _data_quality(report: dict) -> list[str]:
    """Recording artefacts (findings, not hazards), checks the data did not allow, and what counted as a vehicle."""
    dq = report["data_quality"]
    out = [f"## Data quality: {md(dq['status'])}", ""]
    if dq["findings"]:
        out += ["| kind | t [s] | vehicles | affects | what the recording did |", "|---|---|---|---|---|"]
        out += [f"| {md(f['kind'])} | {f['t_start']:.2f}–{f['t_end']:.2f} | {md(', '.join(f['uavs']))} | "
                f"{md(', '.join(f.get('affects') or []))} | {md(f['detail'])} |" for f in dq["findings"]]
    else:
        out.append("No recording artefact found.")
    if dq["not_evaluable"]:
        out += ["", "Not evaluable:", ""]
        out += [f"- {md(n['constraint'])} for {md(', '.join(n['uavs']))}{_span(n)}: {md(n['reason'])}"
                for n in dq["not_evaluable"]]
    skipped = [v for v in report.get("ingest", {}).get("vehicles", []) if not v.get("vehicle")]
    if skipped:
        out += ["", "Pose sources not taken as vehicles:", ""]
        out += [f"- {md(v['uav'])} ({md(v.get('source') or '')}): {md(v['why'])}" for v in skipped]
    return out


def _span(n: dict) -> str:
    return "" if n.get("t_start") is None else f" from {n['t_start']:.2f} to {n['t_end']:.2f} s"


def _findings(findings: list[dict]) -> list[str]:
    """The verified findings, most important first, with the panel's votes on each."""
    if not findings:
        return []
    out = ["", f"## Findings ({len(findings)})", "", "| id | severity | t [s] | finding | panel |",
           "|---|---|---|---|---|"]
    for f in findings:
        p = f.get("panel") or {}
        votes = f"+{p.get('endorsed', 0)} / -{p.get('disputed', 0)}" if p else ""
        out.append(f"| {md(f['id'])} | {md(f['severity'])} | {f['t_start']:.2f}–{f['t_end']:.2f} | "
                   f"{md(f['sentence'])} | {votes} |")
    return out


def _debate(d: dict) -> list[str]:
    out = ["## Expert panel", "",
           f"Backend {md(d.get('backend'))}" + (f" ({md(d.get('model'))})" if d.get("model") else "")
           + f", layer {d.get('layer')}, {len(d.get('rounds', []))} round(s), consensus "
           f"{_num((d.get('consensus') or {}).get('overall'), '.2f')}, tokens {d['tokens'].get('prompt', 0)} prompt / "
           f"{d['tokens'].get('completion', 0)} completion.", ""]
    if d.get("fallback"):
        out += [f"> {md(d['fallback'])}", ""]
    struck = d.get("struck") or {}
    if struck.get("count"):
        reasons = ", ".join(f"{md(k)} {n}" for k, n in sorted(struck.get("reasons", {}).items()))
        out += [f"Struck model sentences: {struck['count']} ({reasons}); kept in transcript.jsonl.", ""]
    if d.get("coherence"):
        out += [md(coherence_line(d)), ""]
    for rnd in d.get("rounds", []):
        out += [f"### {md(round_name(d, rnd))}", ""]
        for r in rnd.get("responses", []):
            ev = ", ".join(md(e) for e in r.get("evidence", []))
            out.append(f"- **{md(r.get('agent'))}** ({md(r.get('role'))}, {md(r.get('team'))}, confidence "
                       f"{_num(r.get('confidence'), '.2f')}): {md(r.get('claim'))}"
                       + (f" Evidence: {ev}." if ev else ""))
            if r.get("counter"):
                out.append(f"  - counter: {md(r['counter'])}")
        out.append("")
    judged = [(s["id"], s["judge"]) for s in d.get("segments", []) if (s.get("judge") or {}).get("by") == "llm"]
    if judged:
        out += ["### Judge", ""]
        out += [f"- **{md(seg)}** ({md(j.get('label'))}): {md(j.get('summary'))}"
                + (f" Evidence: {', '.join(md(e) for e in j.get('evidence', []))}." if j.get("evidence") else "")
                for seg, j in judged]
        out.append("")
    return out
