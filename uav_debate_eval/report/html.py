"""report.html: one self-contained page (inline CSS, figures as base64 PNG, no script, no external URL).

Every free text goes through `h()`; citations of DSL ids in the panel's text link to the DSL item anchors.
"""

from __future__ import annotations

import base64

from uav_debate_eval.report.captions import CAPTIONS
from uav_debate_eval.report.debate_words import coherence_line, round_name
from uav_debate_eval.report.escape import anchor_id, h, link_citations
from uav_debate_eval.report.live_section import headline_html, live_html
from uav_debate_eval.report.markdown import event_value
from uav_debate_eval.report.rules_table import rules_html

MAX_EVENTS = 200
_COLORS = {"safe": "#2e7d32", "borderline": "#ef6c00", "risky": "#c62828", "inconclusive": "#546e7a"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:1rem 1.5rem 3rem}
h1{margin:.4rem 0}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
.badge{display:inline-block;padding:.25rem .7rem;border-radius:4px;color:#fff;font-weight:700;letter-spacing:.05em}
.meta{color:#555;font-size:.92rem}.meta li{margin:.1rem 0}
table{border-collapse:collapse;font-size:.88rem;margin:.5rem 0}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}th{background:#f0f0f0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:1rem}
figure{margin:0;background:#fff;border:1px solid #e3e3e3;padding:.4rem}figure img{width:100%;height:auto}
figcaption{font-size:.82rem;color:#555}
details{background:#fff;border:1px solid #e3e3e3;margin:.4rem 0;padding:.3rem .6rem}
summary{cursor:pointer;font-weight:600}
.resp{border-left:4px solid #999;padding:.2rem .6rem;margin:.5rem 0}
.resp.red{border-color:#c62828}.resp.blue{border-color:#1565c0}
.resp .who{font-size:.85rem;color:#555}
pre{background:#fff;border:1px solid #e3e3e3;padding:.6rem;overflow:auto;font-size:.8rem;max-height:30rem}
.dsl-item{font-family:ui-monospace,monospace;font-size:.8rem;padding:.1rem .3rem}
.dsl-item:target{background:#fff59d}a.cite{font-family:ui-monospace,monospace}
.note{background:#fff8e1;border:1px solid #ffe082;padding:.4rem .6rem}
ul.headline{font-weight:600;padding-left:1.2rem}
"""


def _num(v, fmt: str = ".3g") -> str:
    return "n/a" if v is None else format(v, fmt) if isinstance(v, (int, float)) else h(v)


def render_html(report: dict, figures: dict[str, bytes]) -> str:
    """The full page; `figures` are {name: PNG bytes} embedded as data URIs."""
    m, v = report["mission"], report["verdict"]
    ids = _dsl_ids(report["dsl"])
    color = _COLORS.get(v["label"], "#555")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Swarm evaluation: {h(m.get('name', ''))}</title><style>{_CSS}</style></head><body><main>",
        f"<h1>Swarm evaluation: {h(m.get('name', ''))}</h1>",
        f'<p><span class="badge" style="background:{color}">{h(v["label"]).upper()}</span>'
        + (' <span class="badge" style="background:#000">SAFETY VETO</span>' if v["vetoed"] else "") + "</p>",
        f"<p>{link_citations(h(v['summary']), ids)}</p>" + headline_html(report),
        '<ul class="meta">',
        f"<li>Vehicles ({len(m['uavs'])}): {h(', '.join(m['uavs']))}</li>",
        f"<li>Duration {m['duration_s']:.2f} s, {h(m.get('samples', 'n/a'))} samples</li>",
        f"<li>Mission type {h(m.get('type', ''))}; constraints checked: "
        f"{h(', '.join(m.get('constraints_checked') or []) or 'none')}</li>",
        f"<li>Inputs: {h(', '.join(report.get('inputs', [])) or 'n/a')}</li>",
    ]
    if v.get("overridden"):
        parts.append(f"<li>The panel's label ({h(v.get('panel_label'))}) was overridden by the safety verifier</li>")
    parts.append("</ul>")
    notes = list(report.get("notes", [])) + list(report.get("ingest", {}).get("notes", []))
    if report["debate"].get("fallback"):
        notes.insert(0, report["debate"]["fallback"])
    if notes:
        parts.append('<div class="note"><ul>' + "".join(f"<li>{h(n)}</li>" for n in notes) + "</ul></div>")
    parts += _scores(report), _violations(report), rules_html(report), _findings(report, ids)
    parts += _data_quality(report), _figures(figures)
    parts.append(_recommendations(v, ids) + live_html(report))
    parts += _debate(report["debate"], ids), _events(report), _dsl(report["dsl"])
    parts.append(f'<p class="meta">{h(report.get("tool", {}).get("name", ""))} '
                 f'{h(report.get("tool", {}).get("version", ""))}, report schema {report["schema_version"]}</p>')
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _dsl_ids(dsl: dict) -> list[str]:
    index = dsl.get("index") or {}
    if isinstance(index, dict):
        return [str(k) for k in index]
    return [str(i.get("id")) for i in index if isinstance(i, dict) and i.get("id")]


def _scores(report: dict) -> str:
    rows = "".join(f"<tr><td>{k}</td><td class=num>{_num(report['scores'].get(k), '.3f')}</td></tr>"
                   for k in ("flight_control", "coordination", "safety", "overall"))
    return f"<h2>Scores</h2><table><tr><th>category</th><th>score</th></tr>{rows}</table>"


def _violations(report: dict) -> str:
    vs = report["violations"]
    if not vs:
        return "<h2>Violations (0)</h2><p>None.</p>"
    rows = "".join(
        f"<tr><td>{h(x['constraint'])}</td><td class=num>{x['t_start']:.3f}</td><td class=num>{x['t_end']:.3f}</td>"
        f"<td>{h(', '.join(x['uavs']))}</td><td class=num>{_num(x['worst_value'])}</td>"
        f"<td class=num>{_num(x['limit'])}</td><td>{h(x.get('detail', ''))}</td></tr>" for x in vs)
    return (f"<h2>Violations ({len(vs)})</h2><table><tr><th>constraint</th><th>t start [s]</th><th>t end [s]</th>"
            f"<th>vehicles</th><th>worst</th><th>limit</th><th>detail</th></tr>{rows}</table>")


def _data_quality(report: dict) -> str:
    """Recording artefacts are findings, shown apart from the violations; then the checks the data did not allow."""
    dq = report["data_quality"]
    rows = "".join(
        f"<tr><td>{h(f['kind'])}</td><td class=num>{f['t_start']:.2f}–{f['t_end']:.2f}</td>"
        f"<td>{h(', '.join(f['uavs']))}</td><td>{h(', '.join(f.get('affects') or []))}</td><td>{h(f['detail'])}</td>"
        "</tr>" for f in dq["findings"])
    body = (f"<table><tr><th>kind</th><th>t [s]</th><th>vehicles</th><th>affects</th><th>what the recording did</th>"
            f"</tr>{rows}</table>" if rows else "<p>No recording artefact found.</p>")
    if dq["not_evaluable"]:
        body += "<p>Not evaluable:</p><ul>" + "".join(
            f"<li>{h(n['constraint'])} for {h(', '.join(n['uavs']))}"
            + ("" if n.get("t_start") is None else f" from {n['t_start']:.2f} to {n['t_end']:.2f} s")
            + f": {h(n['reason'])}</li>" for n in dq["not_evaluable"]) + "</ul>"
    return f'<h2 id="data-quality">Data quality: {h(dq["status"])}</h2>{body}'
def _findings(report: dict, ids: list[str]) -> str:
    found = report.get("findings") or []
    if not found:
        return ""
    rows = "".join(
        f"<tr><td>{h(f['id'])}</td><td>{h(f['severity'])}</td><td class=num>{f['t_start']:.2f}–{f['t_end']:.2f}</td>"
        f"<td>{link_citations(h(f['sentence']), ids)}</td><td class=num>"
        + (f"+{h((f.get('panel') or {}).get('endorsed', 0))} / -{h((f.get('panel') or {}).get('disputed', 0))}"
           if f.get("panel") else "") + "</td></tr>" for f in found)
    return (f"<h2>Findings ({len(found)})</h2><table><tr><th>id</th><th>severity</th><th>t [s]</th><th>finding</th>"
            f"<th>panel</th></tr>{rows}</table>")


def _figures(figures: dict[str, bytes]) -> str:
    items = []
    for name, png in figures.items():
        data = base64.b64encode(png).decode("ascii")
        items.append(f'<figure id="fig-{h(name)}"><img alt="{h(CAPTIONS.get(name, name))}" '
                     f'src="data:image/png;base64,{data}"><figcaption>{h(CAPTIONS.get(name, name))}</figcaption>'
                     "</figure>")
    return '<h2>Figures</h2><div class="figs">' + "".join(items) + "</div>" if items else ""


def _recommendations(v: dict, ids: list[str]) -> str:
    recs = v.get("recommendations") or []
    if not recs:
        return ""
    return "<h2>Recommendations</h2><ul>" + "".join(f"<li>{link_citations(h(r), ids)}</li>" for r in recs) + "</ul>"


def _debate(d: dict, ids: list[str]) -> str:
    cons = (d.get("consensus") or {}).get("overall")
    head = (f"<h2>Expert panel</h2><p>Backend {h(d.get('backend'))}"
            + (f" ({h(d.get('model'))})" if d.get("model") else "")
            + f", layer {h(d.get('layer'))}, {len(d.get('rounds', []))} round(s), consensus {_num(cons, '.2f')}, "
            f"tokens {h(d['tokens'].get('prompt', 0))} prompt / {h(d['tokens'].get('completion', 0))} completion.</p>")
    struck = d.get("struck") or {}
    if struck.get("count"):
        reasons = ", ".join(f"{h(k)} {n}" for k, n in sorted(struck.get("reasons", {}).items()))
        head += f"<p>Struck model sentences: {struck['count']} ({reasons}); kept in transcript.jsonl.</p>"
    if d.get("coherence"):
        head += f'<p class="coherence">{h(coherence_line(d))}</p>'
    rounds = []
    for rnd in d.get("rounds", []):
        resp = []
        for r in rnd.get("responses", []):
            team = r.get("team") if r.get("team") in ("red", "blue") else ""
            evidence = ", ".join(link_citations(h(e), ids) for e in r.get("evidence", []))
            resp.append(
                f'<div class="resp {team}"><div class="who">{h(r.get("agent"))} · {h(r.get("role"))} · '
                f'{h(r.get("team"))} · confidence {_num(r.get("confidence"), ".2f")}</div>'
                f"<p>{link_citations(h(r.get('claim', '')), ids)}</p>"
                + (f"<p>Evidence: {evidence}</p>" if evidence else "")
                + (f"<p>Counter: {link_citations(h(r['counter']), ids)}</p>" if r.get("counter") else "")
                + (f"<p>Summary: {link_citations(h(r['summary']), ids)}</p>" if r.get("summary") else "")
                + "</div>")
        rc = rnd.get("consensus")
        rc = rc.get("overall") if isinstance(rc, dict) else rc
        extra = f", consensus {_num(rc, '.2f')}" if isinstance(rc, (int, float)) else ""
        name = link_citations(h(round_name(d, rnd)), ids)
        rounds.append(f"<details><summary>{name}: {len(resp)} response(s){extra}</summary>"
                      + "".join(resp) + "</details>")
    judged = [(s["id"], s["judge"]) for s in d.get("segments", []) if (s.get("judge") or {}).get("by") == "llm"]
    judges = "".join(
        f"<li>{link_citations(h(seg), ids)}: {h(j.get('label'))}. {link_citations(h(j.get('summary', '')), ids)}"
        + (f" Evidence: {', '.join(link_citations(h(e), ids) for e in j.get('evidence', []))}." if j.get("evidence")
           else "") + "</li>" for seg, j in judged)
    return head + "".join(rounds) + (f"<h3>Judge</h3><ul>{judges}</ul>" if judges else "")


def _events(report: dict) -> str:
    events = report["events"]
    if not events:
        return "<h2>Events (0)</h2><p>None.</p>"
    rows = "".join(
        f"<tr><td>{h(e['id'])}</td><td>{h(e['type'])}</td><td class=num>{e['t']:.3f}</td>"
        f"<td>{h(', '.join(e['uavs']))}</td><td class=num>{_num(event_value(e))} {h(e.get('unit') or '')}</td></tr>"
        for e in events[:MAX_EVENTS])
    more = f"<p>{len(events) - MAX_EVENTS} more in report.json.</p>" if len(events) > MAX_EVENTS else ""
    return (f"<h2>Events ({len(events)})</h2><table><tr><th>id</th><th>type</th><th>t [s]</th><th>vehicles</th>"
            f"<th>value</th></tr>{rows}</table>{more}")


def _dsl(dsl: dict) -> str:
    index = dsl.get("index") or {}
    items = index.values() if isinstance(index, dict) else index
    rows = []
    for key, item in zip(_dsl_ids(dsl), items, strict=False):
        text = item.get("text", "") if isinstance(item, dict) else str(item)
        rest = text[len(key):] if text.startswith(key) else " " + text
        rows.append(f'<div class="dsl-item" id="{anchor_id(key)}"><b>{h(key)}</b>{h(rest)}</div>')
    listing = "<h3>Citable items</h3>" + "".join(rows) if rows else ""
    return (f"<h2>Trajectory DSL</h2><p>{h(dsl.get('tokens'))} tokens (raw trajectory: {h(dsl.get('raw_tokens'))} "
            f"tokens).</p><details open><summary>DSL text</summary><pre>{h(dsl.get('text', ''))}</pre></details>"
            + listing)
