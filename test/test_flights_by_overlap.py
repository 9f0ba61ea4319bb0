"""Per-drone recordings of several flights given together: each set of overlapping recordings is one flight (a
simulator's shared logs/ folder of three 4-5-drone runs, 13 .BIN, was evaluated log by log: no separation checked)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from uav_debate_eval.cli import main
from uav_debate_eval.runner.discover import plan_flights

START = 1_750_000_000.0  # unix seconds: one absolute clock


def _drone(folder: Path, name: str, start: float, x0: float) -> Path:
    path = folder / f"{name}.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "uav_id", "x", "y", "z"])
        for t in np.arange(0.0, 60.0, 0.1):
            w.writerow([f"{start + t:.3f}", name, f"{x0 + 0.5 * t:.3f}", "0", "5"])
    return path


def test_recordings_of_two_flights_given_together_are_two_flights(tmp_path):
    # the morning run: three drones 1.5 m apart, two of them 0.5 m apart (a near miss); the afternoon's: two drones
    morning = [_drone(tmp_path, n, START, x) for n, x in (("d1", 0.0), ("d2", 1.5), ("d3", 2.0))]
    afternoon = [_drone(tmp_path, n, START + 3600.0, x) for n, x in (("d4", 0.0), ("d5", 3.0))]
    (tmp_path / "mission.yaml").write_text("constraints: {min_separation_m: 1.0}\n")
    paths = [*afternoon, *morning]
    plan = plan_flights(list(map(str, paths)))
    assert [sorted(p.name for p in f.paths) for f in plan.flights] == [["d1.csv", "d2.csv", "d3.csv"],
                                                                        ["d4.csv", "d5.csv"]]
    assert plan.batch and plan.messages == ["5 inputs: 2 flights by their time spans (3, 2 recordings); --each, "
                                            "--one-flight override"]
    out = tmp_path / "out"
    assert main(["evaluate", *map(str, paths), "--out", str(out), "--llm", "rules", "--quiet"]) == 3
    near = json.loads((out / "d1-d3" / "report.json").read_text())
    assert [(v["constraint"], v["uavs"]) for v in near["violations"]] == [("min_separation", ["d2", "d3"])]
    assert not json.loads((out / "d4-d5" / "report.json").read_text())["violations"]
    # a single recording apart stays a flight of its own; --each still reads every recording alone
    lone = _drone(tmp_path, "d6", START + 7200.0, 0.0)
    plan = plan_flights(list(map(str, [*paths, lone])))
    assert [len(f.paths) for f in plan.flights] == [3, 2, 1]
    assert len(plan_flights(list(map(str, paths)), each=True).flights) == 5
