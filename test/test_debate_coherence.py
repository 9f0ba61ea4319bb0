"""A coherent panel on the built-in flights: its choices agree with the verified facts, with any backend."""

from __future__ import annotations

import copy

import pytest
from contract import REPORT_SCHEMA
from llm_support import require_embedded_model

from uav_debate_eval.debate.coherence import KEYS, coherence
from uav_debate_eval.debate.comparison import hazards, hazards_chosen, parse_suite_entry
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.suite import DEFAULT_SUITE
from uav_debate_eval.report.html import render_html
from uav_debate_eval.report.markdown import render_markdown
from uav_debate_eval.report.schema import validate_report
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate

ZERO = dict.fromkeys(KEYS, 0)


def _suite(config: DebateConfig) -> list[tuple[str, object, object]]:
    out = []
    for entry in DEFAULT_SUITE:
        name, faults = parse_suite_entry(entry)
        sim = simulate(name, seed=0, faults=faults)
        out.append((entry, sim, evaluate(sim.traj, sim.mission, config)))
    return out


def _check_coherent(runs: list) -> None:
    chosen = total = 0
    for entry, sim, ev in runs:
        report = ev.report
        validate_report(report, REPORT_SCHEMA)
        assert report["debate"]["coherence"] == ZERO, entry
        assert report["verdict"]["label"] == report["verdict"]["safety_label"], entry  # the verifier's label
        for seg in ev.debate.segments:
            assert seg.panel_label in seg.admissible.labels, (entry, seg.segment_id)
            for rd in seg.rounds:
                for r in rd.responses:
                    assert all(seg.admissible.allows(c) for c in r.response.choices), (entry, seg.segment_id)
        got, n = hazards_chosen(ev.debate, sim.truth)
        chosen, total = chosen + got, total + n
    assert total == len([h for _, sim, _ in runs for h in hazards(sim.truth)]) == 7
    assert chosen >= 6  # Table II chosen hazard identification


@pytest.fixture(scope="module")
def rules_runs():
    return _suite(DebateConfig())


def test_rules_panel_is_coherent_on_the_built_in_suite(rules_runs):
    _check_coherent(rules_runs)
    vetoed = [seg for _, _, ev in rules_runs for seg in ev.debate.segments if seg.admissible.labels == ("risky",)]
    assert vetoed and all(seg.panel_label == "risky" for seg in vetoed)


def test_report_names_segment_rounds_and_shows_coherence(rules_runs):
    _, _, ev = next(run for run in rules_runs if run[0] == "formation:near_miss")
    md = render_markdown(ev.report)
    assert "### MSEG\\[1\\] round 1 of 1" in md and "### Round 0" not in md
    assert "Coherence: 0 stance contradictions, 0 unsupported disputes, 0 counter/finding mismatches, 0 debris." in md
    html = render_html(ev.report, {})
    assert "<summary>MSEG[1] round 1 of 1: " in html and '<p class="coherence">Coherence: 0 stance' in html


def test_flight_summary_cites_the_flights_own_finding_ids(rules_runs):
    for _, _, ev in rules_runs:
        flight_ids = {f["id"] for f in ev.report["findings"]}
        for seg in ev.debate.segments:
            local = {f.id for f in seg.findings}
            summary = ev.report["verdict"]["summary"]
            part = summary.split(f"On {seg.segment_id} ", 1)
            if len(part) == 2:  # the label-differs sentence names a flight-level finding
                cited = {w.strip(".,:") for w in part[1].split(".")[0].split() if w.startswith("F")}
                assert cited <= flight_ids, (seg.segment_id, cited, local)


def test_coherence_counts_what_contradicts_the_facts(rules_runs):
    _, _, ev = next(run for run in rules_runs if run[0] == "formation:near_miss")
    report = copy.deepcopy(ev.report)
    seg = next(s for s in report["debate"]["segments"] if s["admissible"]["labels"] == ["risky"])
    r = next(x for rd in report["debate"]["rounds"] if rd["segment"] == seg["id"] for x in rd["responses"])
    hazard = next(f for f in seg["findings"] if f["severity"] == "hazard")
    r["assessment"] = "safe"  # rates a vetoed segment safe ...
    r["claim"] = f"agent rates {seg['id']} safe: {hazard['sentence']}"
    r["findings"] = [{"id": hazard["id"], "stance": "dispute", "reason": "sensor_artefact"}]  # ... with no artefact
    r["counter"] = "F9 is disputed as within tolerance. It reads: nothing."
    r["summary"] = "The agent disputed it as needs more data[:] for now."
    counts = coherence(report)
    assert counts["stance_contradictions"] == 1 and counts["unsupported_disputes"] == 1
    assert counts["counter_mismatches"] >= 2  # F9's named dispute, and the findings' panel counters now differ
    assert counts["debris"] == 1


@pytest.mark.llm
@pytest.mark.suite  # ~4 min on two cores: `make test-suite`; `make test` checks the demo's local panel
@pytest.mark.timeout(3600)  # 11 flights through the embedded model: ~10 min on two cores
def test_local_panel_is_coherent_on_the_built_in_suite():
    require_embedded_model()
    from uav_debate_eval.debate.llm.factory import LLMConfig

    _check_coherent(_suite(DebateConfig(backend="local", llm=LLMConfig(backend="local", use_cache=False))))
