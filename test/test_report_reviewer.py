"""The reviewer test: score a report's words the way a reviewer would, independently of the tool's own gate.

A sentence of a claim or a summary (every response's, every judge's, the verdict's) is grounded when it names
a vehicle, a constraint, a metric, an event (id or type), a DSL id, a finding id or a segment id of *that*
flight. Every recommendation must be grounded; at least 90 % of the sentences must be; nothing may carry
template debris; no text repeats a sentence; struck text is counted. Labels stay the verifier's and no
citation is invalid.
"""

from __future__ import annotations

import re

import pytest
from llm_support import require_embedded_model

from uav_debate_eval.core.records import CONSTRAINT_NAMES
from uav_debate_eval.debate.comparison import DEFAULT_SUITE, parse_suite_entry
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.report.schema import validate_report
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate

_ID = re.compile(r"\b[A-Z][A-Z0-9_]*\[[A-Za-z0-9_.:\-]{1,32}\]")
_DEBRIS = re.compile(r"[{}]|\b[A-Z]{2,}_[A-Z_]{2,}\b|Recommendez|\bSUMMARY\s*:|\bCLAIM\s*:")


def flight_names(report: dict) -> set[str]:
    """Everything a grounded sentence may name, lower-cased, from the report alone."""
    names = {*report["mission"]["uavs"], *CONSTRAINT_NAMES, *(c.replace("_", " ") for c in CONSTRAINT_NAMES)}
    for e in report["events"]:
        names |= {e["id"], e["type"], e["type"].replace("_", " ")}
    for cat, group in report["metrics"]["details"].items():
        for m in group:
            names |= {f"{cat}.{m}", m, m.replace("_", " ")}
    names |= set(report["dsl"]["index"])
    for seg in report["segments"]:
        names.add(seg["id"])
        for f in seg.get("findings", []):
            names |= {f["id"], *f["refs"]}
    for f in report.get("findings", []):
        names |= {f["id"], *f["refs"]}
    for rd in report["debate"]["rounds"]:  # ids the panel cited in evidence that the verifier accepted
        for r in rd["responses"]:
            names |= {i for item in r["evidence"] for i in _ID.findall(item)}
    return {n.lower() for n in names if n}


def grounded(sentence: str, names: set[str]) -> bool:
    low = sentence.lower()
    return any(re.search(r"(?<![a-z0-9_])" + re.escape(n) + r"(?![a-z0-9_])", low) for n in names)


def split(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text or "") if s.strip()]


def review(report: dict) -> dict:
    """The reviewer's score card of one report."""
    names = flight_names(report)
    debate = report["debate"]
    texts = [report["verdict"]["summary"]]
    recs = list(report["verdict"]["recommendations"])
    for rd in debate["rounds"]:
        for r in rd["responses"]:
            texts += [r["claim"], r["summary"]]
            recs += [r["recommendation"]] if r["recommendation"] else []
    for seg in debate["segments"]:
        judge = seg.get("judge") or {}
        if judge.get("by") == "llm":
            texts.append(judge["summary"])
            recs += judge["recommendations"]
    sentences = [s for t in texts for s in split(t)]
    repeated = [t for t in texts if len(split(t)) != len(set(split(t)))]
    repeated += [r for r in set(recs) if report["verdict"]["recommendations"].count(r) > 1]
    return {
        "sentences": len(sentences),
        "grounded": sum(grounded(s, names) for s in sentences),
        "ungrounded": [s for s in sentences if not grounded(s, names)],
        "recommendations": len(recs),
        "ungrounded_recommendations": [r for r in recs if not grounded(r, names)],
        "debris": [t for t in texts + recs if _DEBRIS.search(t)],
        "repeated": repeated,
        "struck_counted": debate["struck"]["count"] == sum(s["struck"]["count"] for s in debate["segments"])
        and sum(debate["struck"]["reasons"].values()) == debate["struck"]["count"],
    }


def assert_reads_well(report: dict, safety_label: str) -> dict:
    card = review(report)
    assert card["recommendations"] >= 1 and card["ungrounded_recommendations"] == []
    assert card["grounded"] >= 0.9 * card["sentences"], card["ungrounded"]
    assert card["debris"] == [] and card["repeated"] == [] and card["struck_counted"]
    assert report["verdict"]["label"] == safety_label  # the words never change the label
    assert report["debate"]["invalid_citations"]["struck"] == 0
    assert report["findings"] and report["verdict"]["summary"].split(":")[0].lower() == safety_label
    return card


def test_reviewer_rejects_the_demo_text_the_issue_quotes():
    report = {"mission": {"uavs": ["uav1", "uav2"]}, "events": [], "metrics": {"details": {}},
              "dsl": {"index": {"RISK[1]": {}}}, "segments": [{"id": "MSEG[1]"}], "findings": [],
              "verdict": {"summary": "Judge on MSEG[1] (safe): SCORES_SUPPED, SAFE; SUMMARY DURING THE DAY: x.",
                          "recommendations": ["Recommendez-SUPPED, SAFE.", "Recommendations:"]},
              "debate": {"rounds": [{"responses": [
                  {"claim": "The swarm is a group of autonomous vehicles that protect the environment.",
                   "summary": "{{ {{{1}}}}, {{{} }", "recommendation": "", "evidence": []}]}],
                  "segments": [], "struck": {"count": 0, "reasons": {}}}}
    card = review(report)
    assert card["ungrounded_recommendations"] == ["Recommendez-SUPPED, SAFE.", "Recommendations:"]
    assert len(card["debris"]) == 3 and card["grounded"] < 0.9 * card["sentences"]


@pytest.mark.slow
def test_rules_panel_reads_like_an_engineer_on_the_built_in_suite():
    for entry in DEFAULT_SUITE:
        name, faults = parse_suite_entry(entry)
        sim = simulate(name, seed=0, faults=faults)
        ev = evaluate(sim.traj, sim.mission)
        validate_report(ev.report)
        card = assert_reads_well(ev.report, ev.safety.label)
        assert card["grounded"] == card["sentences"], (entry, card["ungrounded"])


@pytest.mark.llm
@pytest.mark.slow
def test_local_panel_reads_like_an_engineer_on_the_demo_scenario(tmp_path):
    require_embedded_model()
    from uav_debate_eval.debate.llm.factory import LLMConfig

    sim = simulate("formation", seed=0, duration_s=30, faults=["near_miss"])
    one_round = {1: 1, 2: 1, 3: 1}
    cfg = DebateConfig(backend="local", max_rounds=one_round, min_rounds=one_round,
                       llm=LLMConfig(backend="local", cache_dir=str(tmp_path / "cache")))
    ev = evaluate(sim.traj, sim.mission, cfg, segment_mode="window", window_s=40.0)
    report = ev.report
    validate_report(report)
    assert report["debate"]["backend"] == "local" and report["debate"]["fallback"] is None
    assert_reads_well(report, "risky")
    assert set(report["debate"]["coherence"].values()) == {0}  # issue 23: the demo's panel agrees with the facts
    # The model chose: every response selected findings that exist; struck model text stays in the transcript.
    ids = {f["id"] for s in report["debate"]["segments"] for f in s["findings"]}
    responses = [x for rd in report["debate"]["rounds"] for x in rd["responses"]]
    assert responses and all(x["findings"] and {c["id"] for c in x["findings"]} <= ids for x in responses)
    raw = " ".join(row.get("response_text") or "" for row in ev.transcript)
    assert raw and report["debate"]["struck"]["count"] >= 0
