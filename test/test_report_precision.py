"""report.precision: numbers rounded once, where a report leaves the tool (scores 4 decimals, physical 3)."""

import json

from uav_debate_eval.report.precision import decimals, rounded


def test_keys_choose_their_decimals():
    assert [decimals(k) for k in ("overall", "confidence", "t_start", "t", "duration_s", "min_separation_m",
                                   "max_speed_mps", "worst_value", "heading_change_deg", None)] == [4, 4, 3, 3, 3,
                                                                                                     3, 3, 3, 3, 4]


def test_rounded_copies_the_report_and_keeps_ints_bools_and_text():
    report = {"scores": {"overall": 0.8337943694873491, "n": 3}, "ok": True, "note": "0.123456 m",
              "violations": [{"t_start": 14.4499999, "worst_value": -1e-9, "veto_intervals": [[1.00049, 2.5]]}]}
    out = rounded(report)
    assert out == {"scores": {"overall": 0.8338, "n": 3}, "ok": True, "note": "0.123456 m",
                   "violations": [{"t_start": 14.45, "worst_value": 0.0, "veto_intervals": [[1.0, 2.5]]}]}
    assert report["scores"]["overall"] == 0.8337943694873491  # the computation keeps full precision
    assert "-0.0" not in json.dumps(out)


def _floats(obj, key=None):
    if isinstance(obj, float):
        yield key, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _floats(v, k)
    elif isinstance(obj, list):
        for v in obj:
            yield from _floats(v, key)


def test_written_reports_carry_each_number_at_its_precision(tmp_path):
    from uav_debate_eval.report.writer import write_reports
    from uav_debate_eval.runner.pipeline import evaluate
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("formation", seed=0, duration_s=30.0, faults=["near_miss"])
    ev = evaluate(sim.traj, sim.mission)
    write_reports(ev, tmp_path, figures=False)
    written = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    floats = list(_floats(written))
    assert len(floats) > 50
    assert all(round(v, decimals(k)) == v for k, v in floats), [(k, v) for k, v in floats if round(v, decimals(k)) != v]
    assert written["scores"]["overall"] == round(ev.report["scores"]["overall"], 4)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert repr(ev.report["scores"]["overall"]) not in md  # no full-precision float reaches the Markdown
