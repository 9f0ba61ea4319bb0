"""The live record of a flight report (`report["live"]` with `flight`, written by `live`): the header's sentence
per broken constraint, then the session, the veto episodes as published, the segments with their panel verdicts
and findings (ids `S1/F2`), data quality found live and the token cost. HTML and Markdown; empty otherwise."""

from __future__ import annotations

from uav_debate_eval.report.escape import h, md


def _t(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def _num(v) -> str:
    return "n/a" if v is None else f"{v:.3g}"


def _flight(report: dict) -> dict | None:
    live = report.get("live") or {}
    return live if live.get("flight") and "segments" in live else None


def _episodes(live: dict) -> list[list[str]]:
    return [[_t(e["t_rise"]), _t(e["t_fall"]), ", ".join(e["constraints"]) or "—", ", ".join(e["uavs"]) or "—",
             f"{_num(e['worst_value'])} (limit {_num(e['limit'])})", _t(e["offending_t"]),
             "—" if e["latency_s"] is None else f"{e['latency_s']:.3f}", ", ".join(e["segments"]) or "—"]
            for e in live["veto_episodes"]]


def _degraded(live: dict) -> list[list[str]]:
    """The fail-safe episodes: the verifier could not vouch for the swarm (not a hazard of the flight)."""
    return [[_t(e["t_rise"]), _t(e["t_fall"]), ", ".join(e.get("causes") or []) or "—", ", ".join(e["uavs"]) or "—",
             ", ".join(e["segments"]) or "—"] for e in live.get("degraded_episodes") or []]


def _no_hazard(live: dict) -> str:
    return "No hazard raised the veto." if live.get("degraded_episodes") else "The veto was never raised."


_DEGRADED_HEAD = ["rise [s]", "fall [s]", "why the verifier could not vouch", "vehicles", "segments"]
_DEGRADED_TITLE = "Fail-safe veto episodes (verifier_degraded)"
_EPISODE_HEAD = ["rise [s]", "fall [s]", "constraint", "vehicles", "worst", "offending sample [s]", "latency [s]",
                 "segments"]
_SEGMENT_HEAD = ["segment", "t [s]", "closed by", "label", "panel", "tokens", "verdict"]


def _segment_row(s: dict) -> list[str]:
    panel = s["panel"]
    who = f"{panel.get('backend') or '?'}" + (f" ({panel['label']})" if panel.get("label") else "")
    return [s["id"], f"{s['t_start']:.1f}–{s['t_end']:.1f}", str(s.get("reason") or ""),
            s["label"] + (" (vetoed)" if s["vetoed"] else ""), who, str(panel.get("tokens", 0)), s["summary"]]


def _poses(n: int) -> str:
    return f"{n} pose{'s' if n != 1 else ''}"


def _session_line(live: dict) -> str:
    tape, dropped = live.get("tape") or {}, live.get("dropped_poses") or {}
    lost = tape.get("lost_s") or {}
    text = (f"{tape.get('samples', 0)} poses kept for the flight's evaluation; dropped on arrival: "
            + (", ".join(f"{n} {why.replace('_', ' ')}" for why, n in sorted(dropped.items())) or "none"))
    for uav, back in (live.get("clock_back") or {}).items():
        text += (f"; {uav}'s clock went back {back['back_s']:.4g} s while the others flew on: its "
                 f"{_poses(back['poses'])} stamped on it could not be placed in the flight and were not checked")
    if lost:
        text += "; lost to the buffer before they were kept: " + ", ".join(f"{u} {s:g} s" for u, s in lost.items())
    if lost_before := {u: n for u, n in (live.get("poses_lost_before_verifier") or {}).items() if n}:
        text += "; poses lost before the verifier: " + ", ".join(f"{u} {n}" for u, n in sorted(lost_before.items()))
    if tape.get("restarts"):
        text += f"; the clock jumped back {tape['restarts']} time(s): the report covers the stream since the last jump"
    if live.get("skipped_segments"):
        text += f"; segments skipped by the panel: {', '.join(live['skipped_segments'])}"
    tokens = live.get("tokens") or {}
    return (text + f". Tokens: {tokens.get('segments', 0)} in the segment debates, {tokens.get('flight_debate', 0)} "
            "in the flight's (rules agents, estimated).")


def headline_html(report: dict) -> str:
    live = _flight(report)
    if not live or not live.get("headline"):
        return ""
    return '<ul class="headline">' + "".join(f"<li>{h(s)}</li>" for s in live["headline"]) + "</ul>"


def live_html(report: dict) -> str:
    live = _flight(report)
    if not live:
        return ""

    def table(head: list[str], rows: list[list[str]]) -> str:
        return ("<table><tr>" + "".join(f"<th>{h(c)}</th>" for c in head) + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{h(c)}</td>" for c in row) + "</tr>" for row in rows) + "</table>")

    parts = ['<h2 id="live">Live session</h2>', f"<p>{h(_session_line(live))}</p>",
             f"<h3>Veto episodes as published ({len(live['veto_episodes'])})</h3>",
             table(_EPISODE_HEAD, _episodes(live)) if live["veto_episodes"] else f"<p>{h(_no_hazard(live))}</p>",
             *([f"<h3>{_DEGRADED_TITLE} ({len(_degraded(live))})</h3>", table(_DEGRADED_HEAD, _degraded(live))]
               if _degraded(live) else []),
             f"<h3>Segments ({len(live['segments'])})</h3>", table(_SEGMENT_HEAD, [_segment_row(s)
                                                                                 for s in live["segments"]])]
    for s in live["segments"]:
        if s["findings"]:
            rows = [[f["id"], f["severity"], f["sentence"]] for f in s["findings"]]
            parts.append(f"<details><summary>{h(s['id'])}: the findings its panel saw ({len(rows)})</summary>"
                         + table(["id", "severity", "finding"], rows) + "</details>")
    if live.get("data_quality"):
        rows = [[f["segment"], f["kind"], f"{f['t_start']:.2f}–{f['t_end']:.2f}", ", ".join(f["uavs"]), f["detail"]]
                for f in live["data_quality"]]
        parts += ["<h3>Data quality found live</h3>", table(["segment", "kind", "t [s]", "vehicles", "detail"], rows)]
    return "\n".join(parts)


def headline_markdown(report: dict) -> list[str]:
    live = _flight(report)
    if not live or not live.get("headline"):
        return []
    return [f"- {md(s)}" for s in live["headline"]] + [""]


def live_markdown(report: dict) -> list[str]:
    live = _flight(report)
    if not live:
        return []

    def table(head: list[str], rows: list[list[str]]) -> list[str]:
        return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                + ["| " + " | ".join(md(c) for c in row) + " |" for row in rows])

    out = ["", "## Live session", "", md(_session_line(live)), "",
           f"### Veto episodes as published ({len(live['veto_episodes'])})", ""]
    out += table(_EPISODE_HEAD, _episodes(live)) if live["veto_episodes"] else [_no_hazard(live)]
    if degraded := _degraded(live):
        out += ["", f"### {_DEGRADED_TITLE} ({len(degraded)})", ""] + table(_DEGRADED_HEAD, degraded)
    out += ["", f"### Segments ({len(live['segments'])})", ""]
    out += table(_SEGMENT_HEAD, [_segment_row(s) for s in live["segments"]])
    for s in live["segments"]:
        out += ["", f"Findings its panel saw in {md(s['id'])}:", ""]
        out += [f"- {md(f['id'])} [{md(f['severity'])}] {md(f['sentence'])}" for f in s["findings"]] or ["- none"]
    if live.get("data_quality"):
        out += ["", "### Data quality found live", ""]
        out += table(["segment", "kind", "t [s]", "vehicles", "detail"],
                     [[f["segment"], f["kind"], f"{f['t_start']:.2f}–{f['t_end']:.2f}", ", ".join(f["uavs"]),
                       f["detail"]] for f in live["data_quality"]])
    return out
