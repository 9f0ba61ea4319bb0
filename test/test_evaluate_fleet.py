"""A fleet folder as operators keep it (issue 25, CONTRACT.md §4): flights as files or as folders of recordings, to
any depth, each with its nearest mission.yaml; the same rows with --jobs and Dask, the same labels as one by one.
And one read path: `metrics`, `dsl` and `evaluate` see the same vehicles."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from batch_summary import summary_rows

from uav_debate_eval.cli import main
from uav_debate_eval.core.mission_file import mission_to_yaml
from uav_debate_eval.sim.recording import write_mocap_bags
from uav_debate_eval.sim.scenarios import simulate


def _mission(sim, folder: Path, name: str) -> None:
    """The simulator's mission for the flight, under a name that says which file a report used."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mission.yaml").write_text(mission_to_yaml(replace(sim.mission, name=name)), encoding="utf-8")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """flights/
         mission.yaml             campaign   (the flights below without a mission of their own)
         solo.csv                 a flight as a file
         site_a/mission.yaml      site_a
         site_a/near/             one flight: a bag per vehicle recorded together (mocap), its own mission.yaml
         site_a/calm/flight.mcap  one recording, no mission of its own: site_a's
         site_b/days/a.csv, b.csv two flights on relative clocks holding the same vehicles: one by one
    """
    root = tmp_path_factory.mktemp("fleet") / "flights"
    work = root.parent / "work"
    root.mkdir()
    calm = simulate("formation", seed=3, duration_s=20, n_uavs=3)
    near = simulate("formation", seed=1, duration_s=30, n_uavs=3, faults=["near_miss"])
    _mission(calm, root, "campaign")
    calm.write(work / "calm", formats=("csv", "mcap"))
    (root / "solo.csv").write_bytes((work / "calm" / "trajectory.csv").read_bytes())
    (root / "site_a" / "calm").mkdir(parents=True)
    _mission(calm, root / "site_a", "site_a")
    (root / "site_a" / "calm" / "flight.mcap").write_bytes((work / "calm" / "trajectory.mcap").read_bytes())
    write_mocap_bags(near.traj, root / "site_a" / "near")
    _mission(near, root / "site_a" / "near", "near")
    (root / "site_b" / "days").mkdir(parents=True)
    (root / "site_b" / "days" / "a.csv").write_bytes((work / "calm" / "trajectory.csv").read_bytes())
    near.write(work / "near", formats=("csv",))
    (root / "site_b" / "days" / "b.csv").write_bytes((work / "near" / "trajectory.csv").read_bytes())
    return root


def _report(path: Path) -> dict:
    report = json.loads((path / "report.json").read_text(encoding="utf-8"))
    report.pop("timing")
    report["debate"].pop("elapsed_s", None)
    return report


def test_fleet_folder_with_jobs_and_dask_equals_one_by_one(fleet, tmp_path, capsys):
    pytest.importorskip("distributed")
    by_jobs, by_dask = tmp_path / "jobs", tmp_path / "dask"
    assert main(["evaluate", str(fleet), "--out", str(by_jobs), "--jobs", "2"]) == 3
    err = capsys.readouterr().err
    assert "site_b/days: 2 recordings evaluated one by one" in err
    rows = summary_rows(by_jobs, timed=False)
    missions = {r["flight"]: Path(r["mission"]) for r in rows}
    assert missions == {"solo.csv": fleet / "mission.yaml", "site_a/calm": fleet / "site_a" / "mission.yaml",
                        "site_a/near": fleet / "site_a" / "near" / "mission.yaml",
                        "site_b/days/a.csv": fleet / "mission.yaml", "site_b/days/b.csv": fleet / "mission.yaml"}
    assert [r["flight"] for r in rows] == list(missions)  # the folder's order: its top, then each folder in turn
    assert all(r["status"] == "ok" for r in rows), rows
    near = next(r for r in rows if r["flight"] == "site_a/near")
    assert near["file"].split(" ") == [str(fleet / "site_a" / "near" / f"uav{i}.bag") for i in (1, 2, 3)]
    assert {r["flight"]: r["label"] for r in rows if r["label"] == "risky"} == {"site_a/near": "risky",
                                                                                 "site_b/days/b.csv": "risky"}
    assert sorted(p.relative_to(by_jobs).as_posix() for p in by_jobs.rglob("report.json")) == [
        "site_a/calm/report.json", "site_a/near/report.json", "site_b/days/a_csv/report.json",
        "site_b/days/b_csv/report.json", "solo_csv/report.json"]
    assert main(["evaluate", str(fleet), "--out", str(by_dask), "--scheduler", "local", "--quiet"]) == 3
    assert [{**r, "report": r["report"].replace(str(by_dask), str(by_jobs))}
            for r in summary_rows(by_dask, timed=False)] == rows
    for row in rows:  # each flight alone, as its operator would evaluate it
        alone = tmp_path / "alone" / row["flight"]
        code = main(["evaluate", *row["file"].split(" "), "--out", str(alone), "--quiet"])
        assert code == (3 if row["violations"] != "0" else 4 if row["label"] == "inconclusive" else 0)
        report, batch_report = _report(alone), _report(by_jobs / Path(row["report"]).relative_to(by_jobs))
        assert report["verdict"]["label"] == row["label"]
        assert report["mission"]["name"] == yaml.safe_load(missions[row["flight"]].read_text())["mission"]["name"]
        assert report == batch_report, row["flight"]
        assert report == _report(by_dask / Path(row["report"]).relative_to(by_jobs))


def test_mission_flag_overrides_every_flight_and_out_inside_is_skipped(fleet, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "calm").mkdir()
    (site / "calm" / "x.mcap").write_bytes((fleet / "site_a" / "calm" / "flight.mcap").read_bytes())
    (site / "y.csv").write_bytes((fleet / "solo.csv").read_bytes())
    mission = fleet / "site_a" / "near" / "mission.yaml"
    out = site / "out"  # a report folder inside the fleet folder is not a flight on the second run
    for _ in range(2):
        assert main(["evaluate", str(site), "--out", str(out), "--mission", str(mission), "--jobs", "1",
                     "--quiet"]) in (0, 3, 4)
    rows = summary_rows(out, timed=False)
    assert [(r["flight"], r["mission"]) for r in rows] == [("y.csv", str(mission)), ("calm", str(mission))]
    assert {_report(out / sub)["mission"]["name"] for sub in ("y_csv", "calm")} == {"near"}


def test_metrics_dsl_and_evaluate_see_the_same_vehicles(tmp_path, capsys):
    """A mission's `vehicles:` selects the same sources in every command (metrics and dsl used to ignore it)."""
    sim = simulate("formation", seed=2, duration_s=20, n_uavs=4)
    bag = sim.write(tmp_path / "f", formats=("mcap",))[0]
    (tmp_path / "f" / "mission.yaml").write_text(
        "mission: {name: pair}\nvehicles: [uav1, '/uav2/*']\nconstraints: {min_separation_m: 0.5}\n", encoding="utf-8")
    assert main(["evaluate", str(bag), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert _report(tmp_path / "out")["mission"]["uavs"] == ["uav1", "uav2"]
    assert main(["metrics", str(bag), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vehicles"] == ["uav1", "uav2"]
    assert main(["metrics", str(bag)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "vehicles: uav1, uav2"
    assert main(["dsl", str(bag)]) == 0
    assert set(re.findall(r"\buav\d\b", capsys.readouterr().out)) == {"uav1", "uav2"}
    assert main(["dsl", str(bag), "--vehicles", "uav[34]"]) == 0  # the flags are the same too
    assert set(re.findall(r"\buav\d\b", capsys.readouterr().out)) == {"uav3", "uav4"}


def test_flights_of_several_folders_globs_each_and_one_flight(fleet):
    from uav_debate_eval.runner.discover import plan_flights

    by_name = plan_flights([str(fleet / "site_a"), str(fleet / "site_b")])
    assert by_name.batch and [f.name for f in by_name.flights] == ["site_a/calm", "site_a/near", "site_b/days/a.csv",
                                                                  "site_b/days/b.csv"]
    assert [f.folder for f in by_name.flights] == ["site_a/calm", "site_a/near", "site_b/days/a_csv",
                                                   "site_b/days/b_csv"]
    assert [f.mission for f in by_name.flights] == [fleet / "site_a" / "mission.yaml",
                                                    fleet / "site_a" / "near" / "mission.yaml",
                                                    fleet / "mission.yaml", fleet / "mission.yaml"]
    assert plan_flights([str(fleet / "site_*")]).flights == by_name.flights
    each = plan_flights([str(fleet / "site_a")], each=True)
    assert [f.name for f in each.flights] == ["calm/flight.mcap", "near/uav1.bag", "near/uav2.bag", "near/uav3.bag"]
    one = plan_flights([str(fleet)], one_flight=True)
    assert not one.batch and len(one.flights) == 1 and len(one.flights[0].paths) == 7
    assert one.flights[0].mission == fleet / "mission.yaml"
    alone = plan_flights([str(fleet / "site_a" / "near")])  # one flight's folder given alone
    assert [f.name for f in alone.flights] == ["uav1.bag", "uav2.bag", "uav3.bag"]
    assert any("--one-flight reads them as one flight" in m for m in alone.messages)
    assert len(plan_flights([str(fleet / "site_a" / "near")], one_flight=True).flights[0].paths) == 3
