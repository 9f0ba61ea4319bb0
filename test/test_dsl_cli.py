"""`uav-debate-eval dsl` and `uav-debate-eval metrics`: output, JSON, mission lookup, one-line errors (exit 2)."""

import json
import re

import numpy as np
import pytest

from uav_debate_eval.cli import main
from uav_debate_eval.core import SwarmTrajectory
from uav_debate_eval.io.csv_io import write_csv


@pytest.fixture()
def flight_csv(tmp_path):
    t = np.arange(0.0, 30.0 + 1e-9, 0.1)
    before = t <= 15.0
    p1 = np.column_stack([np.where(before, 2 * t, 30.0), np.where(before, 0.0, 2 * (t - 15)), 0 * t + 5])
    p2 = np.column_stack([2 * t, 0 * t - 6, 0 * t + 5])
    traj = SwarmTrajectory.from_columns(np.tile(t, 2), np.repeat(["uav1", "uav2"], len(t)), np.vstack([p1, p2]))
    return write_csv(traj, tmp_path / "flight.csv")


def test_dsl_prints_text_and_size_figures(flight_csv, capsys):
    assert main(["dsl", str(flight_csv)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DSL v1 mission=flight ")
    assert re.search(r"^EVENT\[1\] sharp_turn uav1 t=15\.00s value=90\.\ddeg left$", out, re.M)
    m = re.search(r"^# tokens=(\d+) raw_tokens=(\d+) reduction=(\d+\.\d)% budget=1500 events=1$", out, re.M)
    assert m and int(m.group(1)) < int(m.group(2))
    assert float(m.group(3)) == pytest.approx(100 * (1 - int(m.group(1)) / int(m.group(2))), abs=0.05)


def test_dsl_json_and_budget(flight_csv, capsys):
    assert main(["dsl", str(flight_csv), "--json", "--budget", "120"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tokens"] <= 120 and doc["budget_tokens"] == 120
    assert set(doc["index"]) <= {ln.split(" ")[0] for ln in doc["text"].splitlines()}
    assert doc["events"][0]["id"] == "EVENT[1]"


def test_mission_beside_the_input_is_used(flight_csv, capsys):
    (flight_csv.parent / "mission.yaml").write_text(
        "mission: {name: beside, type: formation}\nconstraints: {max_speed_mps: 1.5}\n", encoding="utf-8")
    assert main(["dsl", str(flight_csv)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DSL v1 mission=beside type=formation ")
    assert re.search(r"^RISK\[\d\] violated max_speed uav1 ", out, re.M)


def test_metrics_text_and_json(flight_csv, capsys):
    assert main(["metrics", str(flight_csv)]) == 0
    out = capsys.readouterr().out
    assert re.match(r"overall=\d\.\d{3} flight_control=\d\.\d{3} coordination=\d\.\d{3} safety=\d\.\d{3}", out)
    assert "  smoothness " in out and "formation_stability" in out
    assert main(["metrics", str(flight_csv), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["scores"]) == {"flight_control", "coordination", "safety", "overall"}
    assert doc["details"]["flight_control"]["smoothness"]["unit"] == "m/s^3"


@pytest.mark.parametrize("command", ["dsl", "metrics"])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, command, flight_csv):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n", encoding="utf-8")
    assert main([command, str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing required column" in err
    assert main([command, str(tmp_path / "nope.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    broken = tmp_path / "m.yaml"
    broken.write_text("constraints:\n  max_sped_mps: 3\n", encoding="utf-8")
    assert main([command, str(flight_csv), "--mission", str(broken)]) == 2
    assert "max_sped_mps" in capsys.readouterr().err


def test_dsl_rejects_a_non_positive_budget(flight_csv, capsys):
    assert main(["dsl", str(flight_csv), "--budget", "0"]) == 2
    assert "--budget" in capsys.readouterr().err
