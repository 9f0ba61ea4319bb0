"""Mission rules (CONTRACT.md §2a): the formula language parses, and bad rules fail the load with the rule's id and
the column of the error (exit 2, one line)."""

import numpy as np
import pytest

from uav_debate_eval.cli import main
from uav_debate_eval.core.errors import MissionError
from uav_debate_eval.core.mission_file import mission_to_yaml, parse_mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.csv_io import write_csv
from uav_debate_eval.stl.syntax import Binary, Compare, Logic, Temporal, parse_formula, to_text

MISSION = """
constraints:
  geofence: {{min: [-10, -10, 0], max: [10, 10, 5]}}
rules:
  - id: {rid}
    severity: hard
    over: {over}
    stl: "{stl}"
"""


def load(stl: str, over: str = "each_vehicle", rid: str = "r1"):
    return parse_mission(MISSION.format(rid=rid, over=over, stl=stl), "m.yaml")


def test_contract_examples_parse_with_their_structure():
    m = parse_mission("""
constraints: {min_separation_m: 0.5}
rules:
  - id: hold_altitude
    severity: hard
    over: each_vehicle
    stl: "always[5, 30] (z >= 1.0)"
  - id: climb_apart
    severity: soft
    over: each_pair
    stl: "always ((separation < 2.0) -> (abs(a.vz) <= 0.5 and abs(b.vz) <= 0.5))"
""", "m.yaml")
    hold, climb = m.rules
    assert (hold.id, hold.severity, hold.over) == ("hold_altitude", "hard", "each_vehicle")
    assert isinstance(hold.formula, Temporal) and (hold.formula.lo, hold.formula.hi) == (5.0, 30.0)
    assert hold.horizon_s == 30.0 and climb.horizon_s is None
    assert climb.signals == ["separation", "a.vz", "b.vz"]
    body = climb.formula.arg
    assert isinstance(body, Logic) and body.op == "->" and isinstance(body.right, Logic) and body.right.op == "and"
    # written back and read again: the same mission
    again = parse_mission(mission_to_yaml(m), "again.yaml")
    assert [(r.id, r.stl) for r in again.rules] == [(r.id, r.stl) for r in m.rules]


def test_precedence_and_round_trip():
    f = parse_formula("not x > 1 and y < 2 or z >= 3 -> always[0:2] x > 0 until[1, 2] y > 0")
    assert isinstance(f, Logic) and f.op == "->"
    assert isinstance(f.left, Logic) and f.left.op == "or"
    assert isinstance(f.right, Binary) and f.right.op == "until" and isinstance(f.right.left, Temporal)
    for text in ["always[5, 30] (z >= 1.0)", "(a.z + b.z) >= 2 * abs(-x - 1.5e-1)", "(x > 1) since (y < 2)",
                 "historically[0, 3] (once (x > 0))", "p > 0 -> q > 0 -> r > 0"]:
        f = parse_formula(text)
        assert parse_formula(to_text(f)) == f
    assert isinstance(parse_formula("(x + 1) >= 2"), Compare)


@pytest.mark.parametrize("stl,column,why", [
    ("always[5, 30] (zz >= 1.0)", 16, "unknown signal 'zz'"),
    ("always[5, 30] (a.z >= 1.0)", 16, "bound only by over: each_pair"),
    ("always[5 30] (z >= 1)", 10, "expected ',' between the bounds"),
    ("always[30, 5] (z >= 1)", 8, "upper bound is below the lower bound"),
    ("(z >= 1", 8, "expected ')'"),
    ("z >= ", 6, "expected a signal"),
    ("z ! 1", 3, "unexpected character '!'"),
    ("always (z)", 10, "expected a comparison"),
])
def test_parse_errors_name_rule_and_column(stl, column, why):
    with pytest.raises(MissionError) as exc:
        load(stl)
    msg = str(exc.value)
    assert msg.startswith("m.yaml:8: rule r1: stl: ") and f"column {column} " in msg and why in msg
    assert "\n" not in msg


def test_pair_rules_bind_a_and_b_only():
    assert load("always (a.z - b.z <= 1)", over="each_pair").rules[0].signals == ["a.z", "b.z"]
    with pytest.raises(MissionError, match="column 9 .*name the vehicle of the pair, a.z or b.z"):
        load("always (z <= 1)", over="each_pair")
    with pytest.raises(MissionError, match="unknown signal 'c.z'"):
        load("always (c.z <= 1)", over="each_pair")
    with pytest.raises(MissionError, match="unknown signal 'separation' for over: swarm"):
        load("always (separation >= 1)", over="swarm")


def test_rule_keys_are_checked():
    with pytest.raises(MissionError, match="severity.*expected one of hard, soft"):
        parse_mission("rules:\n  - {id: a, severity: fatal, over: swarm, stl: 'spread < 3'}\n", "m.yaml")
    with pytest.raises(MissionError, match="rules\\[0\\].stl: missing"):
        parse_mission("rules:\n  - {id: a, severity: hard, over: swarm}\n", "m.yaml")
    with pytest.raises(MissionError, match="duplicate rule id 'a'"):
        parse_mission("rules:\n  - {id: a, severity: hard, over: swarm, stl: 'spread < 3'}\n"
                      "  - {id: a, severity: soft, over: swarm, stl: 'spread < 4'}\n", "m.yaml")
    with pytest.raises(MissionError, match="fence_margin' needs constraints.geofence"):
        parse_mission("rules:\n  - {id: a, severity: hard, over: each_vehicle, stl: 'fence_margin > 0'}\n", "m.yaml")


def test_cli_exit_2_with_rule_and_column(tmp_path, capsys):
    t = np.repeat(np.arange(5) * 0.1, 2)
    traj = SwarmTrajectory.from_columns(t, np.tile(["u1", "u2"], 5), np.zeros((10, 3)))
    write_csv(traj, tmp_path / "f.csv")
    (tmp_path / "m.yaml").write_text(MISSION.format(rid="keep_up", over="each_vehicle", stl="always (hight >= 1)"))
    out = tmp_path / "out"
    assert main(["evaluate", str(tmp_path / "f.csv"), "--out", str(out), "--mission", str(tmp_path / "m.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rule keep_up: stl: column 9" in err and "unknown signal 'hight'" in err
    assert not out.exists()


def test_readme_worked_examples_load():
    """The README's five worked examples are rules the loader accepts (with a geofence for fence_margin)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = text.split("Five worked examples", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    m = parse_mission("constraints: {geofence: {min: [0, 0, 0], max: [50, 50, 20]}}\n" + block, "README.md")
    assert [r.id for r in m.rules] == ["hold_altitude", "climb_apart", "spread_out", "fence_recovery",
                                       "layered_crossing"]
    assert [r.horizon_s for r in m.rules] == [595.0, None, 10.0, None, None]
