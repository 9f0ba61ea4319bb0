"""Fleet batches on Dask (issue 15, CONTRACT.md §4): `--scheduler local` equals `--jobs`; failures stay rows."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from batch_summary import summary_rows

from uav_debate_eval.cli import main
from uav_debate_eval.sim.scenarios import simulate

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def batch_inputs(tmp_path_factory):
    """Two flights (one with a near miss) each with its mission.yaml, and a CSV that is bad input."""
    root = tmp_path_factory.mktemp("fleet")
    simulate("formation", seed=2, duration_s=30, faults=["near_miss"]).write(root / "near", formats=("csv",))
    simulate("surveillance", seed=3, duration_s=20).write(root / "clean", formats=("csv",))
    (root / "bad.csv").write_text("t,uav_id,x\n0,uav1,1\n", encoding="utf-8")
    return [str(root / "near" / "trajectory.csv"), str(root / "clean" / "trajectory.csv"), str(root / "bad.csv")]


def _report(path: Path) -> dict:
    report = json.loads(path.read_text())
    report.pop("timing")
    report["debate"].pop("elapsed_s", None)
    return report


def test_local_cluster_equals_jobs(batch_inputs, tmp_path):
    by_jobs, by_dask = tmp_path / "jobs", tmp_path / "dask"
    assert main(["evaluate", *batch_inputs, "--out", str(by_jobs), "--jobs", "2", "--quiet"]) == 2
    assert main(["evaluate", *batch_inputs, "--out", str(by_dask), "--scheduler", "local", "--quiet"]) == 2
    rows_jobs = summary_rows(by_jobs, timed=False)
    rows_dask = [{**r, "report": r["report"].replace(str(by_dask), str(by_jobs))}
                 for r in summary_rows(by_dask, timed=False)]
    assert rows_dask == rows_jobs
    assert [r["status"] for r in rows_jobs] == ["ok", "ok", "failed"]
    assert [r["label"] for r in rows_jobs[:2]] == ["risky", "safe"]
    assert "missing required column" in rows_jobs[2]["error"]
    for sub in ("trajectory_csv", "trajectory_csv_2"):
        assert _report(by_dask / sub / "report.json") == _report(by_jobs / sub / "report.json"), sub
        assert sorted(p.name for p in (by_dask / sub / "figures").iterdir()) == \
            sorted(p.name for p in (by_jobs / sub / "figures").iterdir())


def _die_or_echo(item: str, marker_dir: str) -> dict:
    """A task that kills its worker process: always for "always", on the first attempt only for "once"."""
    marker = Path(marker_dir) / item
    if item == "always" or (item == "once" and not marker.exists()):
        marker.touch()
        os._exit(1)
    return {"file": item, "status": "ok"}


def test_worker_death_is_retried_or_reported(tmp_path):
    import cloudpickle

    from uav_debate_eval.runner.fleet import run_on_dask

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    seen = []
    # the scheduler's default allowed-failures (3): "once" runs again after its worker died, "always" is reported
    rows = run_on_dask(_die_or_echo, [(n, str(tmp_path)) for n in ("fine", "once", "always")], "local",
                       lambda call, why: {"file": call[0], "status": "error", "error": why},
                       progress=lambda done, total: seen.append((done, total)))
    assert [r["file"] for r in rows] == ["fine", "once", "always"]
    assert [r["status"] for r in rows] == ["ok", "ok", "error"]
    assert "KilledWorker" in rows[2]["error"]
    assert seen[-1] == (3, 3) and len(seen) == 3


def test_unreachable_scheduler_is_bad_input(batch_inputs, tmp_path, capsys, monkeypatch):
    from uav_debate_eval.runner import fleet

    monkeypatch.setattr(fleet, "CONNECT_TIMEOUT_S", 2)  # nothing listens there: no need to wait the full 20 s
    assert main(["evaluate", *batch_inputs, "--out", str(tmp_path / "x"), "--scheduler", "tcp://127.0.0.1:9",
                 "--quiet"]) == 2
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err


def _die_on_bad(flight, out, options) -> dict:
    if str(flight.paths[0]).endswith("bad.csv"):
        os._exit(1)
    from uav_debate_eval.runner.summary import failed_row

    return {**failed_row(flight, "ok", ""), "label": "safe", "violations": 0}


def test_jobs_worker_death_is_an_error_row_not_a_lost_batch(batch_inputs, tmp_path, monkeypatch):
    from uav_debate_eval.runner import batch

    monkeypatch.setattr(batch, "evaluate_one", _die_on_bad)
    out = tmp_path / "jobs"
    assert main(["evaluate", *batch_inputs, "--out", str(out), "--jobs", "2", "--quiet"]) == 1
    rows = summary_rows(out, timed=False)
    assert [r["file"] for r in rows] == batch_inputs
    assert rows[2]["status"] == "error" and "worker process lost" in rows[2]["error"]
