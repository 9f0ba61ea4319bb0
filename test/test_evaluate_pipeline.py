"""pipeline.evaluate: stage order, the veto over the panel, LLM failure fallback, mission lookup."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.report.build import final_verdict
from uav_debate_eval.report.schema import validate_report
from uav_debate_eval.runner.job import load_mission_for
from uav_debate_eval.runner.pipeline import evaluate

MISSION = parse_mission("mission: {name: cross, type: formation}\nconstraints: {min_separation_m: 1.0}\n")


def crossing(offset: float = 0.3) -> SwarmTrajectory:
    t = np.arange(0, 40, 0.1)
    n = len(t)
    p1 = np.column_stack([t - 20, np.zeros(n), np.full(n, 2.0)])
    p2 = np.column_stack([np.full(n, offset), 20 - t, np.full(n, 2.0)])
    return SwarmTrajectory.from_columns(np.concatenate([t, t]), ["uav1"] * n + ["uav2"] * n, np.vstack([p1, p2]))


class FailingBackend:
    """An LLM endpoint that is down: every call raises."""

    name = "openai"
    model = "gpt-test"

    def __init__(self):
        self.calls = 0

    async def chat(self, request):
        self.calls += 1
        raise ConnectionError("connection refused")

    async def aclose(self):
        return None


def test_stages_in_order_and_report_valid():
    seen = []
    ev = evaluate(crossing(), MISSION, progress=lambda stage, done, total: seen.append(stage))
    order = list(dict.fromkeys(seen))
    assert order == ["safety", "metrics", "segments", "debate", "report"]
    assert seen.count("segments") == len(ev.segments) >= 1
    validate_report(ev.report)
    assert ev.label == "risky" and ev.n_violations == 1
    assert set(ev.report["timing"]) == {"safety", "metrics", "dsl", "debate", "report"}
    assert ev.report["debate"]["backend"] == "rules"


def test_llm_failure_falls_back_to_rules_and_says_so():
    backend = FailingBackend()
    ev = evaluate(crossing(), MISSION, DebateConfig(backend="openai"), backend=backend)
    assert backend.calls > 0
    assert ev.report["debate"]["backend"] == "rules"
    fallback = ev.report["debate"]["fallback"]
    assert "every agent of the LLM backend 'openai' failed" in fallback and "rules agents" in fallback
    # why, in one line a user can act on: each distinct error once, with how many calls it ended
    assert f"({backend.calls} failed answers: ConnectionError: connection refused x{backend.calls})" in fallback
    assert fallback in ev.report["notes"]
    # the failed calls stay in the transcript, marked, before the rules agents' answers
    failed = [row for row in ev.transcript if row.get("fell_back")]
    assert len(failed) == backend.calls and all(r["error"] == "ConnectionError: connection refused" for r in failed)
    assert ev.transcript[:len(failed)] == failed and ev.transcript[-1]["kind"] == "verdict"
    assert ev.report["verdict"]["label"] == "risky"
    validate_report(ev.report)


def test_veto_overrides_a_safe_panel():
    safety = SimpleNamespace(label="risky", vetoed=True, violations=[object()], veto_intervals=[(1.0, 2.0)])
    debate = SimpleNamespace(verdict=SimpleNamespace(label="safe", summary="all fine", recommendations=["fly"],
                                                     overridden=False, panel_label="safe"))
    v = final_verdict(safety, debate)
    assert v["label"] == "risky" and v["vetoed"] is True and v["overridden"] is True
    assert v["summary"].startswith("Safety veto: 1 hard-constraint violation(s); the panel's 'safe' was overridden.")
    calm = SimpleNamespace(label="safe", vetoed=False, violations=[], veto_intervals=[])
    assert final_verdict(calm, debate)["label"] == "safe"
    assert final_verdict(calm, None)["label"] == "safe"


def test_no_constraints_is_said(tmp_path):
    (tmp_path / "f.csv").write_text("t,uav_id,x,y,z\n0,a,0,0,1\n1,a,1,0,1\n")
    mission, notes = load_mission_for([tmp_path / "f.csv"], None)
    assert mission.name == "f" and notes and "no constraints were given" in notes[0]
    ev = evaluate(crossing(5.0), mission, notes=notes)
    assert ev.report["mission"]["constraints_checked"] == []
    # contract §3: nothing checked is inconclusive, never safe (issue 33)
    assert ev.report["violations"] == [] and ev.report["verdict"]["label"] == "inconclusive"
    assert any("no hard constraint was checked" in n for n in ev.report["notes"])


def test_mission_beside_input_and_explicit(tmp_path):
    (tmp_path / "mission.yaml").write_text("mission: {name: beside}\n")
    other = tmp_path / "other.yaml"
    other.write_text("mission: {name: explicit}\n")
    m, notes = load_mission_for([tmp_path / "x.csv"], None)
    assert m.name == "beside" and notes == [f"mission file found beside the input: {tmp_path / 'mission.yaml'}"]
    m, notes = load_mission_for([tmp_path / "x.csv"], other)
    assert m.name == "explicit" and notes == []


def test_nearest_mission_is_searched_upwards(tmp_path, monkeypatch):
    (tmp_path / "mission.yaml").write_text("mission: {name: campaign}\n")
    flight = tmp_path / "day1" / "f1"
    flight.mkdir(parents=True)
    m, notes = load_mission_for([flight / "x.csv"], None)
    assert m.name == "campaign" and notes == [f"mission file found in a folder above the input: "
                                              f"{tmp_path / 'mission.yaml'}"]
    monkeypatch.chdir(tmp_path / "day1")  # a relative input: relative missions below the working directory
    m, notes = load_mission_for([Path("f1/x.csv")], None)
    assert m.name == "campaign" and notes[0].endswith(f"above the input: {tmp_path / 'mission.yaml'}")
    (flight / "mission.yaml").write_text("mission: {name: own}\n")
    m, notes = load_mission_for([Path("f1/x.csv")], None)
    assert m.name == "own" and notes == ["mission file found beside the input: f1/mission.yaml"]


def test_bad_segment_arguments():
    from uav_debate_eval.core.errors import InputError

    with pytest.raises(InputError, match="--window: must be > 0 s"):
        evaluate(crossing(), MISSION, segment_mode="window", window_s=0)
    with pytest.raises(InputError, match="--segment-mode"):
        evaluate(crossing(), MISSION, segment_mode="bogus")


def test_empty_trajectory_is_input_error():
    from uav_debate_eval.core.errors import InputError

    with pytest.raises(InputError, match="no vehicle samples"):
        evaluate(SwarmTrajectory({}, name="empty"), MISSION)


def test_paths_are_strings_in_report(tmp_path):
    ev = evaluate(crossing(), MISSION, inputs=[str(Path("a") / "b.csv")])
    assert ev.report["inputs"] == ["a/b.csv"]


def test_the_fallback_names_each_error_once_shortened():
    from uav_debate_eval.runner.pipeline import ERROR_CHARS, _why_failed

    long = "ValueError: " + "x" * 500 + "\nTraceback line two"
    why = _why_failed([{"error": "timeout after 120 s"}, {"error": long}, {"error": "timeout after 120 s"},
                       {"error": None}, {"error": "a"}, {"error": "b"}])
    assert why.startswith("6 failed answers: timeout after 120 s x2; ")
    shortened = why.split("; ")[1]
    assert len(shortened) == ERROR_CHARS and shortened.endswith("…") and "Traceback" not in why
    assert why.endswith("; 2 other errors")  # 5 distinct errors: the 3 most frequent are quoted
    assert _why_failed([]) == "no answer"


def test_an_evaluation_runs_fewer_full_collections_and_restores_the_collector(monkeypatch):
    """Issue 35: full collections walk every object an evaluation keeps (a show's segments, lines, events); during
    one they run 10x less often, and the thresholds are the process's again after it, however it ends."""
    import gc

    from uav_debate_eval.metrics import compute
    from uav_debate_eval.runner import pipeline

    before = gc.get_threshold()
    seen = []
    real = compute.compute_metrics
    monkeypatch.setattr(compute, "compute_metrics", lambda *a, **k: seen.append(gc.get_threshold()) or real(*a, **k))
    evaluate(crossing(), MISSION)
    assert seen and set(seen) == {pipeline.EVALUATION_GC_THRESHOLDS} != {before}
    assert gc.get_threshold() == before

    def fail(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(compute, "compute_metrics", fail)
    with pytest.raises(pipeline.EvaluationError):
        evaluate(crossing(), MISSION)
    assert gc.get_threshold() == before
