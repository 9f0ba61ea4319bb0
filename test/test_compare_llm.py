"""compare-flights over the real llama.cpp OpenAI-compatible server (SmolLM2), and its HTML in headless Chromium."""

from __future__ import annotations

import json
import re

import pytest
from browser import needs_chromium, render
from contract import COMPARISON_SCHEMA
from test_llm_server import server_url  # noqa: F401  (the module-scoped real server fixture)

from uav_debate_eval.cli import main
from uav_debate_eval.compare_flights.build import validate_comparison
from uav_debate_eval.sim.scenarios import simulate


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("llm_flights")
    simulate("formation", seed=0).write(root / "clean", formats=("csv",))
    simulate("formation", seed=0, faults=["near_miss"]).write(root / "near", formats=("csv",))
    return str(root / "clean" / "trajectory.csv"), str(root / "near" / "trajectory.csv")


@pytest.mark.llm
@pytest.mark.slow
def test_openai_path_against_real_server(server_url, pair, tmp_path, monkeypatch):  # noqa: F811
    from uav_debate_eval.debate.llm import cache

    monkeypatch.setattr(cache, "DEFAULT_CACHE_DIR", tmp_path / "cache")
    args = ["compare-flights", *pair, "--llm", "openai", "--base-url", server_url, "--protocol", "more",
            "--advocates", "1", "--fail-if-worse", "--quiet"]
    rc = main([*args, "--out", str(tmp_path / "first")])
    doc = json.loads((tmp_path / "first" / "comparison.json").read_text())
    validate_comparison(doc, COMPARISON_SCHEMA)
    assert rc == 5 and doc["winner"] == "A"  # the near miss can never win, whatever the model says
    assert doc["backend"]["name"] == "openai" and doc["backend"]["model"]
    tokens = doc["tokens"]
    assert tokens["estimated"] is False and tokens["calls"] == 4  # 2 advocates, judge, audit judge
    assert tokens["prompt"] > 500 and tokens["completion"] > 20
    answered = [r for r in (tmp_path / "first" / "comparison_transcript.jsonl").read_text().splitlines()
                if json.loads(r).get("error") is None]
    assert answered, "the model answered no call at all"
    assert doc["judge"]["by"] == "llm" and doc["judge"]["error"] is None  # the schema-bound judge answered
    valid = set(doc["pairs"][0]["valid_ids"])
    for claim in doc["judge"]["claims"]:
        assert claim["cites"] and set(claim["cites"]) <= valid
    for arg in doc["debate"]["arguments"]:
        for claim in arg["claims"]:
            assert set(claim["cites"]) <= valid
    # the same comparison again is served from the response cache: no token spent
    rc2 = main([*args, "--out", str(tmp_path / "second")])
    again = json.loads((tmp_path / "second" / "comparison.json").read_text())
    assert rc2 == 5 and again["tokens"]["cache_hits"] == 4 and again["tokens"]["prompt"] == 0
    assert again["winner"] == doc["winner"] and again["judge"]["totals"] == doc["judge"]["totals"]


@needs_chromium
def test_comparison_html_in_headless_chromium(pair, tmp_path):
    out = tmp_path / "cmp"
    assert main(["compare-flights", *pair, "--out", str(out), "--jury", "--quiet"]) == 0
    dom, console = render(out / "comparison.html", tmp_path)
    assert "<h1>Flight comparison: A vs B</h1>" in dom
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom)) == 4
    assert "<script" not in dom.lower()
    assert console == []
