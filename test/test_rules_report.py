"""Mission rules in the report (CONTRACT.md §2a): `rules` entries, hard failures as violations `rule:<id>` (label
risky, exit 3), soft failures as warning findings with robustness and intervals, RULE[k] lines in the DSL, the
robustness figure and the Markdown/HTML table; the report stays valid against the schema."""

import json

import pytest
from contract import REPORT_SCHEMA

from uav_debate_eval.cli import main
from uav_debate_eval.core.mission_file import mission_to_yaml
from uav_debate_eval.report.schema import validate_report
from uav_debate_eval.sim.scenarios import simulate
from uav_debate_eval.stl.spec import make_rule


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    sim = simulate("formation", seed=1, n_uavs=4, duration_s=40.0)
    sim.mission.rules = [
        make_rule("ceiling", "hard", "each_vehicle", "always[5, 30] (z <= 1.5)"),  # the formation flies higher
        make_rule("climb_apart", "soft", "each_pair",
                  "always ((separation < 3.0) -> (abs(a.vz) <= 0.05 and abs(b.vz) <= 0.05))"),
        make_rule("spread_out", "soft", "swarm", "eventually[0, 10] (spread >= 1.0)"),
    ]
    root = tmp_path_factory.mktemp("rules")
    sim.write(root / "in", formats=("csv",))
    (root / "in" / "mission.yaml").write_text(mission_to_yaml(sim.mission))
    code = main(["evaluate", str(root / "in" / "trajectory.csv"), "--out", str(root / "out"), "--quiet"])
    return code, root / "out", json.loads((root / "out" / "report.json").read_text())


def test_report_rules_section_and_schema(written):
    code, _, report = written
    validate_report(report, REPORT_SCHEMA)
    rules = {r["id"]: r for r in report["rules"]}
    assert list(rules) == ["ceiling", "climb_apart", "spread_out"]
    ceiling = rules["ceiling"]
    assert ceiling["satisfied"] is False and ceiling["robustness"] < 0 and ceiling["worst"]
    assert ceiling["intervals"] and all(5.0 - 1e-6 <= a <= b <= 30.0 + 1e-6 for a, b in ceiling["intervals"])
    assert rules["spread_out"]["satisfied"] is True and rules["spread_out"]["robustness"] > 0
    assert code == 3 and report["verdict"]["label"] == "risky"


def test_hard_failure_is_a_violation_and_soft_a_warning_finding(written):
    _, _, report = written
    hard = [v for v in report["violations"] if v["constraint"] == "rule:ceiling"]
    assert hard and all(v["limit"] == 0.0 and v["worst_value"] < 0 for v in hard)
    assert min(v["worst_value"] for v in hard) == pytest.approx(
        next(r["robustness"] for r in report["rules"] if r["id"] == "ceiling"), abs=1e-6)
    assert not [v for v in report["violations"] if v["constraint"] == "rule:climb_apart"]
    by_kind = {}
    for f in report["findings"]:
        by_kind.setdefault(f["kind"], []).append(f)
    assert all(f["severity"] == "hazard" and "RULE[1]" in f["refs"] for f in by_kind["violation:rule:ceiling"])
    soft = by_kind.get("rule:climb_apart", [])
    climb = next(r for r in report["rules"] if r["id"] == "climb_apart")
    if climb["satisfied"] is False:
        assert soft and all(f["severity"] == "warning" and f["refs"] == ["RULE[2]"] and "robustness" in f["sentence"]
                            for f in soft)
    else:
        assert not soft


def test_dsl_table_and_figure(written):
    _, out, report = written
    text = report["dsl"]["text"]
    line = next(ln for ln in text.splitlines() if ln.startswith("RULE[1]"))
    assert "failed ceiling hard each_vehicle rob=" in line
    assert any(ln.startswith("RULE[3] holds spread_out") for ln in text.splitlines())
    md = (out / "report.md").read_text()
    assert "## Mission rules (3)" in md
    assert "| ceiling | hard | each\\_vehicle | `always[5, 30] (z <= 1.5)` | FAILED |" in md
    html = (out / "report.html").read_text()
    assert '<h2 id="rules">Mission rules (3)</h2>' in html
    assert (out / "figures" / "rules.png").is_file()
