"""comparison.md and comparison.html (one self-contained page: inline CSS, figures as base64 PNG, no script).

Every text from a model, a file or a mission goes through `h()` / `md()`. All times are flight times.
"""

from __future__ import annotations

import base64

from uav_debate_eval.compare_flights.figures import CAPTIONS
from uav_debate_eval.report.escape import h, md
from uav_debate_eval.report.html import _COLORS, _CSS

CATS = ("flight_control", "coordination", "safety", "overall")


def _f(v, fmt: str = ".3g") -> str:
    return "n/a" if v is None else format(v, fmt) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _effect(row: dict) -> str:
    e = row.get("effect")
    if not e or e.get("hedges_g") is None:
        return ""
    ci = e.get("ci")
    return f"g={e['hedges_g']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _delta_rows(doc: dict) -> list[list[str]]:
    return [[name, _f(r["a"]), _f(r["b"]), _f(r["delta"]), r["better"], str(r["winner"]), _effect(r)]
            for name, r in doc["metric_deltas"].items()]


DELTA_HEAD = ["metric", "A", "B", "delta (B-A)", "better value", "better flight", "effect size (95% CI)"]


def render_markdown(doc: dict, figures: list[str]) -> str:
    keys = [f["key"] for f in doc["flights"]]
    a, b = keys[0], keys[1]
    lines = [f"# Flight comparison: {' vs '.join(md(k) for k in keys)}", "",
             f"**Winner: {md(doc['winner'])}** (protocol {md(doc['protocol'])}, backend "
             f"{md(doc['backend']['name'])}); bias audit: swapped-order winner "
             f"{md(doc['bias_audit']['swapped_winner'])}, "
             f"{'consistent' if doc['bias_audit']['consistent'] else 'INCONSISTENT'}.", "",
             md(doc["verdict"]["summary"]), "",
             f"Alignment: {md(doc['alignment']['mode'])} ({md(doc['alignment']['axis'])}). "
             f"{md(doc['alignment']['note'])}",
             "", "## Flights", "", "| flight | label | violations | runs | " + " | ".join(CATS) + " | inputs |",
             "|" + "---|" * (5 + len(CATS))]
    for f in doc["flights"]:
        lines.append(f"| {md(f['key'])} | {md(f['label'])} | {f['violations']} | {f['runs']} | "
                     + " | ".join(_f(f["scores"].get(c)) for c in CATS) + f" | {md(', '.join(f['inputs']))} |")
    lines += ["", f"## Metric deltas ({md(a)} vs {md(b)})", "", "| " + " | ".join(DELTA_HEAD) + " |",
              "|" + "---|" * len(DELTA_HEAD)]
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in _delta_rows(doc)]
    j = doc["judge"]
    lines += ["", "## Judge", "", "| category | " + " | ".join(md(k) for k in j["scores"]) + " | rationale |",
              "|---|---|---|---|"]
    for c in CATS[:3]:
        lines.append(f"| {c} | " + " | ".join(_f(s[c]) for s in j["scores"].values()) + f" | {md(j['rationale'][c])} |")
    lines += ["", f"Anonymisation: {md(', '.join(f'{k} = {v}' for k, v in doc['anonymisation'].items()))}", ""]
    lines += [f"- {md(c['text'])} (cites {md(', '.join(c['cites']))})" for c in j["claims"]]
    if doc["verdict"]["recommendations"]:
        lines += ["", "## Recommendations", ""] + [f"- {md(r)}" for r in doc["verdict"]["recommendations"]]
    if doc["jury"]["enabled"]:
        lines += ["", f"## Jury ({md(doc['jury']['decided_by'])})", ""]
        lines += [f"- {md(v['juror'])}: {md(v['vote'])}: {md(v['rationale'])} ({md(', '.join(v['cites']))})"
                  for v in doc["jury"]["votes"]]
    d = doc["debate"]
    lines += ["", "## Debate", "", f"Protocol {md(d['protocol'])}: {d['rounds']} round(s), stop reason "
              f"{md(d['stop_reason'])}; score gap per round: "
              + ", ".join(f"{h_['round']}: {h_['gap']:g}" for h_ in d["score_history"]), ""]
    if len(doc["flights"]) > 2:
        lines += ["## Ranking (Copeland)", "", "| rank | flight | copeland | wins | losses | ties | judge total |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['rank']} | {md(r['key'])} | {r['copeland']} | {r['wins']} | {r['losses']} | {r['ties']} | "
                  f"{r['judge_total']:g} |" for r in doc["ranking"]]
        lines += ["", "| pair | winner | swapped-order winner | consistent |", "|---|---|---|---|"]
        lines += [f"| {md(' vs '.join(p['flights']))} | {md(p['winner'])} | {md(p['bias_audit']['swapped_winner'])} | "
                  f"{p['bias_audit']['consistent']} |" for p in doc["pairs"]]
        lines.append("")
    t = doc["tokens"]
    lines += ["## Tokens", "", f"{t['prompt']} prompt + {t['completion']} completion"
              f"{' (estimated: rules backend)' if t['estimated'] else ''}, {t['calls']} calls, "
              f"{t['cache_hits']} cache hits.", "", "| role | prompt | completion |", "|---|---|---|"]
    lines += [f"| {md(r)} | {v['prompt']} | {v['completion']} |" for r, v in t["per_role"].items()]
    lines += ["", "## Figures", ""] + [f"![{md(CAPTIONS.get(n, n))}](figures/{n}.png)" for n in figures]
    lines += ["", "Each flight's own report: " + ", ".join(md(r) for f in doc["flights"] for r in f["reports"]), ""]
    return "\n".join(lines)


def _table(head: list[str], rows: list[list[str]]) -> str:
    return ("<table><tr>" + "".join(f"<th>{h(x)}</th>" for x in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{h(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>")


def render_html(doc: dict, figures: dict[str, bytes]) -> str:
    keys = [f["key"] for f in doc["flights"]]
    audit = doc["bias_audit"]
    badge = _COLORS.get("safe") if doc["winner"] != "tie" else "#546e7a"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>Flight comparison: {h(' vs '.join(keys))}</title><style>{_CSS}</style></head><body><main>",
             f"<h1>Flight comparison: {h(' vs '.join(keys))}</h1>",
             f'<p><span class="badge" style="background:{badge}">WINNER: {h(doc["winner"])}</span></p>',
             f"<p>{h(doc['verdict']['summary'])}</p>",
             f'<ul class="meta"><li>Protocol {h(doc["protocol"])}, backend {h(doc["backend"]["name"])} '
             f'({h(doc["backend"]["model"])})</li><li>Bias audit: swapped-order winner {h(audit["swapped_winner"])}, '
             f'{"consistent" if audit["consistent"] else "inconsistent"}</li>'
             f'<li>Alignment: {h(doc["alignment"]["mode"])} ({h(doc["alignment"]["axis"])}) '
             f'{h(doc["alignment"]["note"])}</li>'
             f'<li>Overridden by the safety verifier: {h(doc["verdict"]["overridden"])}</li></ul>']
    if doc["notes"]:
        parts.append('<div class="note"><ul>' + "".join(f"<li>{h(n)}</li>" for n in doc["notes"]) + "</ul></div>")
    parts.append("<h2>Flights side by side</h2>")
    parts.append('<div class="figs">' + "".join(
        f'<div><h3>{h(f["key"])} <span class="badge" style="background:{_COLORS.get(f["label"], "#555")}">'
        f'{h(f["label"]).upper()}</span></h3>'
        + _table(["score", "value"], [[c, _f(f["scores"].get(c))] for c in CATS]
                 + [["violations", str(f["violations"])], ["runs", str(f["runs"])]])
        + f"<p class=\"meta\">{h(', '.join(f['inputs']))}</p></div>" for f in doc["flights"]) + "</div>")
    parts += [f"<h2>Metric deltas ({h(keys[0])} vs {h(keys[1])})</h2>", _table(DELTA_HEAD, _delta_rows(doc))]
    j = doc["judge"]
    parts += ["<h2>Judge</h2>", _table(["category", *j["scores"], "rationale"],
                                       [[c, *[_f(s[c]) for s in j["scores"].values()], j["rationale"][c]]
                                        for c in CATS[:3]]),
              f"<p class=\"meta\">Anonymisation: {h(', '.join(f'{k} = {v}' for k, v in doc['anonymisation'].items()))}"
              "</p><ul>" + "".join(f"<li>{h(c['text'])} <code>{h(', '.join(c['cites']))}</code></li>"
                                   for c in j["claims"]) + "</ul>"]
    if doc["verdict"]["recommendations"]:
        parts.append("<h2>Recommendations</h2><ul>"
                     + "".join(f"<li>{h(r)}</li>" for r in doc["verdict"]["recommendations"]) + "</ul>")
    if doc["jury"]["enabled"]:
        parts += [f"<h2>Jury ({h(doc['jury']['decided_by'])})</h2>",
                  _table(["juror", "vote", "rationale", "cites"],
                         [[v["juror"], v["vote"], v["rationale"], ", ".join(v["cites"])]
                          for v in doc["jury"]["votes"]])]
    d = doc["debate"]
    parts += ["<h2>Debate</h2>",
              f"<p>{h(d['protocol'])}: {d['rounds']} round(s), stop reason {h(d['stop_reason'])}</p>",
              _table(["round", "score gap (Flight 1 - Flight 2)"], [[str(x["round"]), _f(x["gap"])]
                                                                    for x in d["score_history"]]),
              "<details><summary>Arguments</summary>" + _table(
                  ["round", "flight", "persona", "claim", "cites"],
                  [[str(a["round"]), a["flight"], a["persona"], c["text"], ", ".join(c["cites"])]
                   for a in d["arguments"] for c in a["claims"]]) + "</details>"]
    if len(doc["flights"]) > 2:
        parts += ["<h2>Ranking (Copeland)</h2>", _table(
            ["rank", "flight", "copeland", "wins", "losses", "ties", "judge total"],
            [[str(r["rank"]), r["key"], str(r["copeland"]), str(r["wins"]), str(r["losses"]), str(r["ties"]),
              _f(r["judge_total"])] for r in doc["ranking"]]),
            _table(["pair", "winner", "swapped-order winner", "consistent"],
                   [[" vs ".join(p["flights"]), p["winner"], p["bias_audit"]["swapped_winner"],
                     str(p["bias_audit"]["consistent"])] for p in doc["pairs"]])]
    t = doc["tokens"]
    parts += ["<h2>Tokens</h2>", f"<p>{t['prompt']} prompt + {t['completion']} completion"
              f"{' (estimated: rules backend)' if t['estimated'] else ''}; {t['calls']} calls, "
              f"{t['cache_hits']} cache hits</p>",
              _table(["role", "prompt", "completion"], [[r, str(v["prompt"]), str(v["completion"])]
                                                        for r, v in t["per_role"].items()])]
    parts.append('<h2>Figures</h2><div class="figs">' + "".join(
        f'<figure><img alt="{h(n)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'
        f"<figcaption>{h(CAPTIONS.get(n, n))}</figcaption></figure>" for n, png in figures.items()) + "</div>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"
