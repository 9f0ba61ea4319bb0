"""compare-flights end to end on built-in scenarios with the rules backend: winner in both orders, ties, the swap
audit, the CI gate's exit codes, schema validity, citations, anonymisation, budgets, ranking and effect sizes."""

from __future__ import annotations

import asyncio
import filecmp
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from contract import COMPARISON_SCHEMA

from uav_debate_eval.cli import main
from uav_debate_eval.compare_flights.build import validate_comparison
from uav_debate_eval.compare_flights.flights import Flight
from uav_debate_eval.compare_flights.protocol import ProtocolConfig, compare_pair
from uav_debate_eval.debate.llm.base import ChatResult
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate

SHARED_SCHEMA = COMPARISON_SCHEMA


@pytest.fixture(scope="module")
def flights(tmp_path_factory):
    """Formation flights written as CSV + mission.yaml: clean (seeds 0, 1) and with a near miss (seeds 0, 1)."""
    root = tmp_path_factory.mktemp("flights")
    out = {}
    for name, faults, seed in (("clean", [], 0), ("clean1", [], 1), ("near", ["near_miss"], 0),
                               ("near1", ["near_miss"], 1), ("drop", ["altitude_drop"], 0)):
        simulate("formation", seed=seed, faults=faults).write(root / name, formats=("csv",))
        out[name] = str(root / name / "trajectory.csv")
    return out


def _run(args) -> tuple[int, dict | None]:
    rc = main(["compare-flights", *args, "--quiet"])
    out = next((a for a in zip(args, args[1:], strict=False) if a[0] == "--out"), None)
    if out is None:
        return rc, None
    path = f"{out[1]}/comparison.json"
    try:
        with open(path, encoding="utf-8") as fh:
            return rc, json.load(fh)
    except FileNotFoundError:
        return rc, None


@pytest.mark.parametrize("protocol", ["more", "samre"])
def test_clean_beats_near_miss_in_both_orders(flights, tmp_path, protocol):
    rc1, ab = _run([flights["clean"], flights["near"], "--out", str(tmp_path / "ab"), "--protocol", protocol])
    rc2, ba = _run([flights["near"], flights["clean"], "--out", str(tmp_path / "ba"), "--protocol", protocol])
    assert rc1 == rc2 == 0
    assert ab["winner"] == "A" and ba["winner"] == "B"
    for doc in (ab, ba):
        assert doc["protocol"] == protocol
        assert doc["bias_audit"]["consistent"] is True and doc["bias_audit"]["swapped_winner"] == doc["winner"]
        clean = next(f for f in doc["flights"] if f["label"] == "safe")
        risky = next(f for f in doc["flights"] if f["label"] == "risky")
        assert risky["violations"] == 1 and clean["violations"] == 0
        judge = doc["judge"]
        anon = {v: k for k, v in doc["anonymisation"].items()}
        assert judge["totals"][anon[clean["key"]]] > judge["totals"][anon[risky["key"]]]
        assert judge["scores"][anon[risky["key"]]]["safety"] <= 3
        assert doc["verdict"]["overridden"] is False  # the panel itself found the clean flight better
    # both flights' own reports went to DIR/A and DIR/B
    assert (tmp_path / "ab" / "A" / "report.json").is_file() and (tmp_path / "ab" / "B" / "report.html").is_file()


def test_flight_against_itself_is_a_tie(flights, tmp_path):
    rc, doc = _run([flights["clean"], flights["clean"], "--out", str(tmp_path / "same"), "--jury",
                    "--fail-if-worse"])
    assert rc == 0
    assert doc["winner"] == "tie" and doc["bias_audit"] == {**doc["bias_audit"], "swapped_winner": "tie",
                                                             "consistent": True}
    assert all(r["winner"] in ("tie", None) and (r["delta"] in (0, None)) for r in doc["metric_deltas"].values())
    assert [v["vote"] for v in doc["jury"]["votes"]] == ["tie"] * 3
    totals = list(doc["judge"]["totals"].values())
    assert totals[0] == totals[1]


def test_fail_if_worse_exit_codes(flights, tmp_path, capsys):
    rc, doc = _run([flights["clean"], flights["near"], "--out", str(tmp_path / "worse"), "--fail-if-worse"])
    assert rc == 5 and doc["winner"] == "A"
    assert "B is worse than A" in capsys.readouterr().err
    rc, doc = _run([flights["near"], flights["clean"], "--out", str(tmp_path / "better"), "--fail-if-worse"])
    assert rc == 0 and doc["winner"] == "B"
    rc, _ = _run([flights["clean"], flights["near"], "--out", str(tmp_path / "nogate")])
    assert rc == 0


@pytest.mark.parametrize("args, message", [
    (["{clean}", "/nonexistent/x.csv"], "/nonexistent/x.csv: no such file"),
    (["{clean}"], "at least two flights"),
    (["1bad={clean}", "{near}"], "flight key must be"),
    (["X={clean}", "X={near}"], "flight keys must differ"),
    (["{clean}", "{near}", "--max-rounds", "0"], "--max-rounds"),
])
def test_bad_input_exit_2_with_one_line(flights, tmp_path, capsys, args, message):
    args = [a.format(**flights) for a in args]
    rc = main(["compare-flights", *args, "--out", str(tmp_path / "bad")])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and err.count("\n") == 1 and err.startswith("uav-debate-eval compare-flights: error:")


def test_json_validates_against_both_schemas_and_copy_is_identical(flights, tmp_path):
    from importlib import resources

    pkg = resources.files("uav_debate_eval.report").joinpath("comparison.schema.json")
    assert filecmp.cmp(str(pkg), SHARED_SCHEMA, shallow=False)
    _, doc = _run([flights["clean"], flights["near"], "--out", str(tmp_path / "s"), "--jury"])
    validate_comparison(doc)
    validate_comparison(doc, SHARED_SCHEMA)
    bad = {**doc, "bias_audit": {"consistent": "yes"}}
    with pytest.raises(ValueError, match="swapped_winner"):
        validate_comparison(bad, SHARED_SCHEMA)
    for name in ("scores.safety", "safety.separation_margin", "counts.violations"):
        row = doc["metric_deltas"][name]
        assert {"a", "b", "delta", "better", "winner"} <= set(row)
    sep = doc["metric_deltas"]["safety.separation_margin"]
    assert sep["better"] == "higher" and sep["delta"] == pytest.approx(sep["b"] - sep["a"], abs=1e-5)
    assert sep["winner"] == "A" and sep["b"] < 0.5  # the near miss came closer than the 0.5 m limit
    assert doc["metric_deltas"]["counts.violations"] == {**doc["metric_deltas"]["counts.violations"],
                                                         "a": 0, "b": 1, "winner": "A"}


def test_every_claim_cites_an_existing_delta_or_finding(flights, tmp_path):
    _, doc = _run([flights["clean"], flights["near"], "--out", str(tmp_path / "c"), "--protocol", "more"])
    pair = doc["pairs"][0]
    valid = set(pair["valid_ids"])
    assert any(i.startswith("FIND[") for i in valid) and any(i.startswith("DELTA[") for i in valid)
    assert doc["judge"]["claims"]
    for claim in doc["judge"]["claims"]:
        assert claim["cites"] and set(claim["cites"]) <= valid
    for ref in doc["judge"]["citations"]:
        if ref["kind"] == "metric_delta":
            assert ref["metric"] in doc["metric_deltas"]
        else:
            assert ref["flight"] in ("A", "B") and re.fullmatch(r"F\d+", ref["finding"])
    for arg in doc["debate"]["arguments"]:
        for claim in arg["claims"]:
            assert set(claim["cites"]) <= valid
    # a near-miss finding of the risky flight is argued by the clean flight's safety advocate
    risky_pos = next(k for k, v in doc["anonymisation"].items() if v == "B")[-1]
    assert any(c.startswith(f"FIND[{risky_pos}.") for a in doc["debate"]["arguments"] for cl in a["claims"]
               for c in cl["cites"])


def test_prompts_are_anonymised(flights, tmp_path):
    out = tmp_path / "anon"
    _run([f"BASE={flights['clean']}", f"CAND={flights['near']}", "--out", str(out), "--jury"])
    rows = [json.loads(line) for line in (out / "comparison_transcript.jsonl").read_text().splitlines()]
    assert rows and {r["role"] for r in rows} >= {"judge", "audit_judge", "jury_safety_officer"}
    text = " ".join(m["content"] for r in rows for m in r["messages"])
    for leak in ("trajectory", "csv", "BASE", "CAND", "uav1", "uav2", str(tmp_path)):
        assert leak not in text
    # the mission's name ("formation-seed0"); words of the findings such as "formation slot" stay
    assert not re.search(r"formation-seed", text)
    assert "Flight 1" in text and "Flight 2" in text and "V1" in text


def _flight(key, scenario="formation", faults=(), seed=0):
    sim = simulate(scenario, seed=seed, faults=list(faults))
    return Flight(key, [f"{key}.csv"], [evaluate(sim.traj, sim.mission)])


@pytest.fixture(scope="module")
def pair_flights():
    return {"clean": _flight("A"), "clean1": _flight("C", seed=1), "near": _flight("B", faults=["near_miss"])}


def test_order_is_drawn_from_the_seed_and_result_does_not_depend_on_it(pair_flights):
    a, b = pair_flights["clean"], pair_flights["near"]
    orders, winners = set(), set()
    for seed in range(6):
        r = asyncio.run(compare_pair(a, b, ProtocolConfig(protocol="more", seed=seed)))
        orders.add(r["anonymisation"]["Flight 1"])
        winners.add(r["winner"])
    assert orders == {"A", "B"} and winners == {"A"}


def test_samre_stop_reasons(pair_flights):
    a, b = pair_flights["clean"], pair_flights["near"]
    conv = asyncio.run(compare_pair(a, b, ProtocolConfig(protocol="samre", max_rounds=8, token_budget=10**7)))
    assert conv["stop_reason"] == "converged" and 3 <= conv["rounds"] < 8
    gaps = [h["gap"] for h in conv["score_history"]]
    assert abs(gaps[-1] - gaps[-2]) <= 0.5 and abs(gaps[-2] - gaps[-3]) <= 0.5
    one = asyncio.run(compare_pair(a, b, ProtocolConfig(protocol="samre", max_rounds=1)))
    assert one["stop_reason"] == "round_budget" and one["rounds"] == 1
    tight = asyncio.run(compare_pair(a, b, ProtocolConfig(protocol="samre", max_rounds=8, token_budget=1000)))
    assert tight["stop_reason"] == "token_budget" and tight["rounds"] == 1
    per_role = conv["tokens"]["per_role"]
    assert set(per_role) == {"advocate_1_overall", "advocate_2_overall", "judge", "audit_judge"}
    assert len(per_role["judge"]["per_round"]) == conv["rounds"] and conv["tokens"]["estimated"] is True
    assert conv["tokens"]["total"] == sum(v["prompt"] + v["completion"] for v in per_role.values())


class _BiasedJudge:
    """An LLM double whose judge always prefers whichever flight is shown first (pure position bias)."""

    name, model = "fake", "fake-model"

    async def chat(self, request):
        if request.agent.endswith("judge"):
            ids = request.valid_ids
            data = {"flight_1": {"flight_control": 9, "coordination": 9, "safety": 9},
                    "flight_2": {"flight_control": 4, "coordination": 4, "safety": 4},
                    "rationale": {"flight_control": "first", "coordination": "first", "safety": "first"},
                    "claims": [{"text": "Flight 1 is better", "cites": [ids[0]]},
                               {"text": "An invented claim", "cites": ["DELTA[made.up]"]}],
                    "recommendations": []}
            return ChatResult(text=json.dumps(data), data=data, prompt_tokens=100, completion_tokens=20)
        return ChatResult(text="", error="advocate down")

    async def aclose(self):
        return None


def test_position_bias_becomes_a_tie_and_veto_overrides(pair_flights):
    a, c = pair_flights["clean"], pair_flights["clean1"]
    r = asyncio.run(compare_pair(a, c, ProtocolConfig(protocol="more"), backend=_BiasedJudge()))
    assert r["panel_winner"] != r["bias_audit"]["swapped_winner"]
    assert r["bias_audit"]["consistent"] is False and r["winner"] == "tie" and "position bias" in r["reason"]
    assert r["judge"]["by"] == "llm" and r["judge"]["dropped_claims"] == 1
    assert [c["cites"] for c in r["judge"]["claims"]] == [[r["valid_ids"][0]]]
    assert r["tokens"]["per_role"]["judge"] == {"prompt": 100, "completion": 20, "per_round": {
        "1": {"prompt": 100, "completion": 20}}}
    assert len([f for f in r["failures"] if f["role"].startswith("advocate")]) == 6  # rules stood in
    # with a vetoed flight the verifier has the last word whatever the biased judge says
    b = pair_flights["near"]
    for seed in (0, 1, 2, 3):
        v = asyncio.run(compare_pair(a, b, ProtocolConfig(protocol="more", seed=seed), backend=_BiasedJudge()))
        # the biased judge picks B whenever B is shown first: the audit makes that a tie, the verifier makes it A
        assert v["winner"] == "A" and v["bias_audit"]["consistent"] is False
        assert v["overridden"] is True and "overridden by the safety verifier" in v["reason"]


def test_more_than_two_flights_are_ranked(flights, tmp_path):
    rc, doc = _run([flights["near"], flights["clean"], flights["drop"], "--out", str(tmp_path / "r"),
                    "--fail-if-worse"])
    assert rc == 0  # B (clean) is not worse than A (near miss)
    assert [r["key"] for r in doc["ranking"]][0] == "B" and doc["winner"] == "B"
    assert doc["ranking"][0]["copeland"] == 2 and doc["ranking"][0]["wins"] == 2
    assert sorted(tuple(p["flights"]) for p in doc["pairs"]) == [("A", "B"), ("A", "C"), ("B", "C")]
    assert (tmp_path / "r" / "C" / "report.json").is_file()
    assert "Ranking (Copeland)" in (tmp_path / "r" / "comparison.md").read_text()
    validate_comparison(doc, SHARED_SCHEMA)


def test_repeated_runs_give_effect_sizes(flights, tmp_path):
    rc, doc = _run([f"{flights['clean']},{flights['clean1']}", f"{flights['near']},{flights['near1']}",
                    "--out", str(tmp_path / "runs")])
    assert rc == 0 and doc["winner"] == "A"
    assert [f["runs"] for f in doc["flights"]] == [2, 2]
    eff = doc["metric_deltas"]["scores.safety"]["effect"]
    assert eff["n_a"] == 2 and eff["n_b"] == 2 and eff["hedges_g"] < 0
    assert eff["ci"] is None or eff["ci"][0] <= eff["hedges_g"] <= eff["ci"][1]
    assert (tmp_path / "runs" / "A" / "trajectory_csv" / "report.json").is_file()
    assert (tmp_path / "runs" / "A" / "trajectory_csv_2" / "report.json").is_file()


def test_outputs_render_and_escape(flights, tmp_path):
    evil = tmp_path / "<b>evil&x"
    evil.mkdir()
    src = Path(flights["clean"])
    shutil.copy(src, evil / "t.csv")
    shutil.copy(src.parent / "mission.yaml", evil / "mission.yaml")
    out = tmp_path / "html"
    rc, doc = _run([str(evil / "t.csv"), flights["near"], "--out", str(out), "--jury", "--align", "takeoff"])
    assert rc == 0 and doc["alignment"]["mode"] == "takeoff"
    page = (out / "comparison.html").read_text()
    assert "<b>evil" not in page and "&lt;b&gt;evil&amp;x" in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")
    assert page.count("data:image/png;base64,") == 4
    for section in ("Metric deltas", "Judge", "Jury", "Tokens", "Figures", "Flights side by side"):
        assert section in page
    md_text = (out / "comparison.md").read_text()
    assert "<b>" not in md_text and "| scores.safety |" in md_text.replace("scores.safety", "scores.safety")
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["altitude.png", "separation.png", "speed.png",
                                                                    "tracks_xy.png"]


def test_findings_catalogue_is_used_when_present():
    from uav_debate_eval.compare_flights.flights import findings_of

    catalogue = [{"id": "F1", "kind": "near_miss", "severity": "hazard", "sentence": "uav1 and uav2 came close",
                  "t_start": 1.0, "t_end": 2.0, "uavs": ["uav1", "uav2"], "refs": [], "recommendations": []}]
    assert findings_of({"findings": catalogue, "violations": [{"constraint": "x"}]}) == catalogue
    built = findings_of({"violations": [{"constraint": "min_separation", "t_start": 3.0, "t_end": 4.0,
                                         "uavs": ["u1", "u2"], "worst_value": 0.2, "limit": 0.5}],
                         "events": [{"id": "EVENT[1]", "type": "sharp_turn", "t": 1.0, "uavs": ["u1"],
                                     "value": 45.0, "unit": "deg"}],
                         "data_quality": {"findings": [{"kind": "repeated_samples", "uavs": ["u2"], "t_start": 0.0,
                                                        "t_end": 9.0, "detail": "republished estimate"}]}})
    assert [(f["id"], f["severity"], f["kind"]) for f in built] == [
        ("F1", "hazard", "violation:min_separation"), ("F2", "warning", "sharp_turn"),
        ("F3", "data_quality", "repeated_samples")]


def test_alignment_modes(pair_flights):
    from uav_debate_eval.compare_flights.align import align, takeoff_time

    evs = [pair_flights["clean"].runs[0], pair_flights["near"].runs[0]]
    phase, fns = align(evs, "phase")
    assert phase.mode == "phase" and phase.note == ""  # the veto segment is not a phase: both fly one cruise
    end = evs[1].traj.t_end
    assert fns[1](end) == pytest.approx(evs[0].report["segments"][-1]["t_end"])
    take, fns = align(evs, "takeoff")
    assert take.mode == "takeoff" and fns[0](takeoff_time(evs[0])) == 0.0
    prog, fns = align(evs, "progress")
    x = fns[0](np.linspace(0, evs[0].traj.t_end, 50))
    assert prog.mode == "progress" and x[0] == 0.0 and x[-1] == pytest.approx(1.0) and np.all(np.diff(x) >= 0)


def test_a_failed_render_leaves_the_previous_comparison_whole(flights, tmp_path, monkeypatch):
    from uav_debate_eval.compare_flights import render

    out = tmp_path / "ab"
    rc, first = _run([flights["clean"], flights["near"], "--out", str(out)])
    assert rc == 0 and first is not None
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def boom(*_a, **_k):
        raise RuntimeError("render failed")

    monkeypatch.setattr(render, "render_html", boom)
    with pytest.raises(RuntimeError, match="render failed"):
        main(["compare-flights", flights["clean1"], flights["near1"], "--out", str(out), "--quiet"])
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # no half-new comparison
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_folder_or_per_drone_files_are_one_flights_recordings(tmp_path):
    """A show's rehearsals compared by their folders of per-drone logs (before: "directory is not a rosbag2"), and
    per-drone CSVs given together: one run of every vehicle each (evaluate's one-flight rule), not one run per
    file; the same files given one by one make the same report. A folder holding nothing is one line."""
    from ardupilot_logs import write_mission, write_swarm_bins

    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.io.csv_io import write_csv

    logs = write_swarm_bins(tmp_path / "rehearsal" / "logs")
    mission = write_mission(tmp_path)
    rc, doc = _run([str(tmp_path / "rehearsal"), ",".join(map(str, logs)), "--mission", str(mission),
                    "--out", str(tmp_path / "show")])
    assert rc == 0 and doc["winner"] == "tie" and [f["runs"] for f in doc["flights"]] == [1, 1]
    a, b = (json.loads((tmp_path / "show" / k / "report.json").read_text()) for k in ("A", "B"))
    assert len(a["mission"]["uavs"]) == len(logs) and a["violations"] == b["violations"] and a["scores"] == b["scores"]

    sim = simulate("formation", seed=0, faults=["near_miss"])
    per_drone = []
    for u, tr in sim.traj.tracks.items():  # one CSV per drone, as a show's drones log them
        path = tmp_path / "drones" / f"{u}.csv"
        path.parent.mkdir(exist_ok=True)
        write_csv(SwarmTrajectory.from_columns(tr.t + 1_760_000_000.0, np.full(len(tr), u), tr.pos), path)
        per_drone.append(str(path))
    sim.write(tmp_path / "whole", formats=("csv",))
    rc, doc = _run([",".join(per_drone), str(tmp_path / "whole" / "trajectory.csv"), "--out", str(tmp_path / "csv")])
    assert [f["runs"] for f in doc["flights"]] == [1, 1]
    per, whole = (json.loads((tmp_path / "csv" / k / "report.json").read_text()) for k in ("A", "B"))
    assert per["mission"]["uavs"] == whole["mission"]["uavs"] == sorted(sim.traj.tracks)
    assert [v["constraint"] for v in per["violations"]] == [v["constraint"] for v in whole["violations"]]

    (tmp_path / "empty").mkdir()
    assert main(["compare-flights", str(tmp_path / "empty"), str(logs[0]), "--out", str(tmp_path / "bad")]) == 2


def test_a_shows_damaged_log_is_left_out_of_its_flight_as_evaluate_leaves_it_out(tmp_path, capsys):
    """One log that cannot be read among a rehearsal's: the others are the flight (named in its report's notes and on
    stderr), the comparison is written, and the exit status is 2 (bad input), as `evaluate` does."""
    from ardupilot_logs import write_mission, write_swarm_bins

    logs = write_swarm_bins(tmp_path / "monday")
    (tmp_path / "monday" / "broken.BIN").write_bytes(b"\xa3\x95" + b"\x00" * 64)
    mission = write_mission(tmp_path)
    rc = main(["compare-flights", str(tmp_path / "monday"), ",".join(map(str, logs)), "--mission", str(mission),
               "--out", str(tmp_path / "cmp"), "--quiet"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("uav-debate-eval compare-flights: failed: broken.BIN cannot "
                                                          "be read (") and err[0].endswith(": left out of flight A")
    doc = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert doc["winner"] == "tie" and [f["runs"] for f in doc["flights"]] == [1, 1]
    a = json.loads((tmp_path / "cmp" / "A" / "report.json").read_text())
    assert len(a["mission"]["uavs"]) == len(logs) and err[0].removeprefix("uav-debate-eval compare-flights: failed: ") \
        in a["notes"]
