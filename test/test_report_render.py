"""Reports: schema validity, escaping of untrusted text, citation links, self-contained HTML, atomic writes."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest
from browser import needs_chromium, render
from contract import REPORT_SCHEMA
from markdown_it import MarkdownIt

from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.report import writer as writer_mod
from uav_debate_eval.report.escape import anchor_id, md, md_code_block
from uav_debate_eval.report.html import render_html
from uav_debate_eval.report.markdown import render_markdown
from uav_debate_eval.report.schema import ReportSchemaError, validate_report
from uav_debate_eval.report.writer import write_reports
from uav_debate_eval.runner.pipeline import evaluate

CONTRACT_SCHEMA = REPORT_SCHEMA
EVIL = "<script>alert(1)</script> [x](http://evil.example/a) ![i](https://evil.example/i.png) <img src=x onerror=y>"


@pytest.fixture(scope="module")
def crossing():
    """Two vehicles crossing at right angles with 0.3 m offset: one min_separation violation near t = 30 s."""
    t = np.arange(0, 60, 0.1)
    n = len(t)
    p1 = np.column_stack([t * 0.5 - 15, np.zeros(n), np.full(n, 2.0)])
    p2 = np.column_stack([np.full(n, 0.3), 15 - t * 0.5, np.full(n, 2.0)])
    traj = SwarmTrajectory.from_columns(np.concatenate([t, t]), ["uav1"] * n + ["uav2"] * n, np.vstack([p1, p2]))
    mission = parse_mission('mission: {name: "cross <b>bold</b> [m](http://evil.example)", type: formation}\n'
                            "constraints: {min_separation_m: 1.0, max_speed_mps: 3.0}\n")
    return evaluate(traj, mission, inputs=["crossing.csv"])


def _poisoned(report: dict) -> dict:
    r = copy.deepcopy(report)
    resp = r["debate"]["rounds"][0]["responses"][0]
    resp["claim"] = EVIL + " see RISK[1]"
    resp["counter"] = EVIL
    resp["evidence"] = ["RISK[1]", EVIL]
    r["verdict"]["summary"] = EVIL
    r["verdict"]["recommendations"] = [EVIL]
    r["notes"] = [EVIL]
    r["debate"]["segments"][0]["judge"] = {"by": "llm", "label": "risky", "summary": EVIL + " RISK[1]",
                                           "recommendations": [EVIL], "evidence": ["RISK[1]"],
                                           "tokens": {"prompt": 1, "completion": 1}, "error": None}
    return r


def test_report_matches_both_schemas(crossing):
    r = crossing.report
    validate_report(r)
    validate_report(r, CONTRACT_SCHEMA)
    json.dumps(r, allow_nan=False)
    assert r["schema_version"] == 2
    assert r["verdict"]["label"] == "risky" and r["verdict"]["vetoed"] is True
    assert [v["constraint"] for v in r["violations"]] == ["min_separation"]
    assert r["violations"][0]["uavs"] == ["uav1", "uav2"]
    assert r["mission"]["uavs"] == ["uav1", "uav2"]
    assert r["mission"]["duration_s"] == pytest.approx(59.9)
    assert r["mission"]["constraints_checked"] == ["min_separation", "max_speed"]
    assert r["dsl"]["tokens"] < r["dsl"]["raw_tokens"]


def test_schema_rejects_bad_report(crossing):
    bad = copy.deepcopy(crossing.report)
    bad["verdict"]["label"] = "fine"
    del bad["dsl"]["tokens"]
    with pytest.raises(ReportSchemaError, match=r"2 error\(s\).*dsl: 'tokens' is a required property.*verdict/label"):
        validate_report(bad)


def test_markdown_renders_untrusted_text_inert(crossing):
    text = render_markdown(_poisoned(crossing.report), ["separation"])
    outside_code = re.sub(r"(?ms)^(`{3,})\n.*?\n\1$", "", text)  # the DSL block is literal text by construction
    for bad in ("<script", "<img", "<b>", "](http", "http://", "https://"):
        assert bad not in outside_code, bad
    rendered = MarkdownIt("commonmark").render(text)
    assert "<script" not in rendered and "<b>" not in rendered
    assert "evil" in rendered  # kept as text, not dropped
    assert "### Judge" in text and "(risky): &lt;script&gt;alert" in text
    assert re.findall(r'<a href="([^"]*)"', rendered) == []
    assert re.findall(r'<img src="([^"]*)"', rendered) == ["figures/separation.png"]


def test_md_helpers():
    assert md("[x](http://e) `c` *b*") == r"\[x\]\(http\[:\]//e\) \`c\` \*b\*"
    assert md("a\nb\t c") == "a b c"
    block = md_code_block("x ```` y")
    assert block.startswith("`````\n") and block.endswith("\n`````")


def test_html_escapes_and_links_citations(crossing):
    page = render_html(_poisoned(crossing.report), {})
    assert "<script" not in page.lower() and "<img src=x" not in page and "<b>bold" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not re.search(r'(href|src)="(https?:)?//', page)
    assert f'<a class="cite" href="#{anchor_id("RISK[1]")}">RISK[1]</a>' in page
    assert f'id="{anchor_id("RISK[1]")}"' in page
    assert page.count("<details>") == len(crossing.report["debate"]["rounds"])
    judge = page.split("<h3>Judge</h3>", 1)[1]
    assert judge.count("&lt;script&gt;") == 1 and judge.count('class="cite"') == 2  # summary and evidence


def test_write_reports_files_and_self_contained_html(crossing, tmp_path):
    out = write_reports(crossing, tmp_path / "out")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["figures", "report.html", "report.json", "report.md", "transcript.jsonl"]
    figs = sorted(p.name for p in (out / "figures").iterdir())
    assert figs == ["altitude_speed.png", "debate_rounds.png", "scores.png", "separation.png",
                    "trajectory_3d.png", "trajectory_xy.png"]
    assert all((out / "figures" / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in figs)
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 6
    assert not re.search(r'(href|src)="(?!data:|#)', page)
    report = json.loads((out / "report.json").read_text())
    validate_report(report, CONTRACT_SCHEMA)
    rows = [json.loads(x) for x in (out / "transcript.jsonl").read_text().splitlines()]
    assert rows and rows[-1]["kind"] == "verdict"


def test_write_is_atomic(crossing, tmp_path, monkeypatch):
    out = tmp_path / "out"

    def boom(*_a, **_k):
        raise RuntimeError("render failed")

    monkeypatch.setattr(writer_mod, "render_html", boom)
    with pytest.raises(RuntimeError):
        write_reports(crossing, out)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []
    monkeypatch.undo()
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    write_reports(crossing, out, figures=False)
    assert (out / "keep.txt").read_text() == "mine" and (out / "report.json").exists()


@pytest.mark.slow
@needs_chromium
def test_html_in_headless_chromium(crossing, tmp_path):
    report = _poisoned(crossing.report)
    crossing_copy = copy.copy(crossing)
    crossing_copy.report = report
    out = write_reports(crossing_copy, tmp_path / "out")
    dom, console = render(out / "report.html", tmp_path)
    assert "<h1>Swarm evaluation:" in dom
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom)) == 6
    assert "<script" not in dom.lower()
    assert console == []


def test_hostile_vehicle_names_render(tmp_path):
    """Names come from topic names and bag metadata: mathtext, markup and a leading underscore stay literal."""
    t = np.arange(0, 5, 0.1)
    n = len(t)
    names = ["$\\frac{1}{$", "_hidden", "<b>x</b>"]
    pos = np.vstack([np.column_stack([t, np.full(n, 3.0 * i), np.ones(n)]) for i in range(3)])
    traj = SwarmTrajectory.from_columns(np.tile(t, 3), np.repeat(names, n), pos)
    ev = evaluate(traj, parse_mission("constraints: {min_separation_m: 0.5}\n"))
    out = write_reports(ev, tmp_path / "o")
    page = (out / "report.html").read_text()
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert len(list((out / "figures").glob("*.png"))) == 6
