"""Several per-drone logs or CSVs given together are parsed once: planning reads each for its time span (are they
one flight?) and the flight's read takes that parse (io.kept_reads). Before, every file was parsed twice (three
.bin files: six DataFlash parses), a drone show's per-drone logs twice the read time."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
from ardupilot_logs import write_mission, write_swarm_bins

from uav_debate_eval.cli import main
from uav_debate_eval.io import csv_io, dataflash, kept_reads, loader

VOLATILE = ("timing", "generated_at", "run")


def _counting(monkeypatch, module, name: str) -> list[str]:
    calls: list[str] = []
    real = getattr(module, name)

    def counted(path, *args, **kwargs):
        calls.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _report(args: list[str], out: Path) -> dict:
    assert main(["evaluate", *args, "--out", str(out), "--llm", "rules", "--quiet"]) in (0, 3, 4)
    report = json.loads((out / "report.json").read_text())
    report["debate"].pop("elapsed_s")
    return {k: v for k, v in report.items() if k not in VOLATILE}


@pytest.fixture(scope="module")
def bins(tmp_path_factory):
    root = tmp_path_factory.mktemp("kept_bins")
    return write_swarm_bins(root / "swarm"), write_mission(root)


def test_three_bins_of_one_flight_are_each_parsed_once_into_the_same_report(bins, tmp_path, monkeypatch):
    paths, mission = bins
    args = [*map(str, paths), "--mission", str(mission)]
    calls = _counting(monkeypatch, dataflash, "read_dataflash")
    kept = _report(args, tmp_path / "kept")
    assert sorted(calls) == sorted(p.name for p in paths)  # before: each twice
    calls.clear()
    monkeypatch.setattr(kept_reads, "_kept", None)
    monkeypatch.setattr(kept_reads, "keeping", contextlib.nullcontext)
    parsed_twice = _report(args, tmp_path / "twice")
    assert len(calls) == 2 * len(paths)
    assert kept == parsed_twice and kept["verdict"]["label"] == "risky"


def test_per_drone_csvs_are_parsed_once_and_a_batch_keeps_nothing(tmp_path, monkeypatch):
    t = np.arange(0.0, 20.0, 0.1)
    paths = []
    for k, u in enumerate(("a", "b")):
        rows = "".join(f"{ti:.2f},{u},{ti:.2f},{5.0 * k},10\n" for ti in t)
        paths.append(tmp_path / f"drone_{u}.csv")
        paths[-1].write_text("t,uav_id,x,y,z\n" + rows)
    calls = _counting(monkeypatch, csv_io, "read_csv")
    report = _report(list(map(str, paths)), tmp_path / "one")
    assert sorted(calls) == ["drone_a.csv", "drone_b.csv"] and report["mission"]["uavs"] == ["a", "b"]
    later = tmp_path / "later.csv"  # 100 s after: two flights, a batch whose workers read their own
    later.write_text("t,uav_id,x,y,z\n" + "".join(f"{ti + 100:.2f},a,{ti:.2f},0,10\n" for ti in t))
    calls.clear()
    assert main(["evaluate", str(paths[0]), str(later), "--out", str(tmp_path / "batch"), "--llm", "rules",
                 "--quiet", "--jobs", "1"]) in (0, 3, 4)
    assert sorted(calls) == ["drone_a.csv", "drone_a.csv", "later.csv", "later.csv"]  # spans, then each flight
    folder = tmp_path / "show" / "drones"  # a folder of flights holding one flight: a batch of one, read here
    folder.mkdir(parents=True)
    for p in paths:
        (folder / p.name).write_bytes(p.read_bytes())
    calls.clear()
    assert main(["evaluate", str(tmp_path / "show"), "--out", str(tmp_path / "folder"), "--llm", "rules",
                 "--quiet"]) in (0, 3, 4)
    assert sorted(calls) == ["drone_a.csv", "drone_b.csv"]
    from uav_debate_eval.runner import spans

    monkeypatch.setattr(spans, "MIN_BYTES", 0)  # per-drone CSVs read on two cores: one here, one in a worker
    monkeypatch.setattr(spans, "cores", lambda: 2)
    calls.clear()
    assert _report(list(map(str, paths)), tmp_path / "two_cores") == report and calls == ["drone_a.csv"]


def test_a_kept_parse_is_the_file_as_read_before_any_change(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("one")
    reads: list[str] = []

    def parse(p: Path) -> dict:
        reads.append(p.read_text())
        return {"text": reads[-1], "names": []}

    with kept_reads.keeping():
        first = kept_reads.parsed(path, parse, keep=True)
        first["names"].append("renamed by its reader")
        assert kept_reads.parsed(path, parse) == {"text": "one", "names": []}  # the copy, untouched
        assert kept_reads.parsed(path, parse) == {"text": "one", "names": []} and reads == ["one", "one"]  # once
        kept_reads.parsed(path, parse, keep=True)
        path.write_text("changed")  # another size: another file
        assert kept_reads.parsed(path, parse)["text"] == "changed"
    kept_reads.parsed(path, parse, keep=True)  # outside keeping(): nothing kept
    assert kept_reads.parsed(path, parse)["text"] == "changed" and len(reads) == 6


def test_many_logs_spans_are_read_on_every_core_and_each_log_still_parsed_once(bins, tmp_path, monkeypatch):
    """A show's per-drone logs: planning reads their spans (one flight?) in this process and forked workers (500
    two-minute logs: 4.4 -> 3.4 s on two cores); a worker's parses come back kept, so the flight's read parses
    nothing again, and the report is the serial one's. A log a worker cannot read is read again here and reported
    as before."""
    from uav_debate_eval.runner import spans

    paths, mission = bins
    monkeypatch.setattr(spans, "MIN_BYTES", 0)
    monkeypatch.setattr(spans, "cores", lambda: 2)
    args = [*map(str, paths), "--mission", str(mission)]
    calls = _counting(monkeypatch, dataflash, "read_dataflash")  # in this process only: not the worker's
    shared = _report(args, tmp_path / "shared")
    assert sorted(calls) == sorted(p.name for p in paths[0::2])  # this process's share; the flight parsed none
    with kept_reads.keeping():
        ahead = spans.spans_ahead(list(paths))
    assert ahead == {p: loader.span(p) for p in paths}
    monkeypatch.setattr(spans, "can_fork", lambda: False)
    calls.clear()
    assert _report(args, tmp_path / "serial") == shared and sorted(calls) == sorted(p.name for p in paths)
    monkeypatch.setattr(spans, "can_fork", lambda: True)
    _broken_log_among_them(paths, mission, tmp_path, shared)


def _broken_log_among_them(paths: list[Path], mission: Path, tmp_path: Path, whole: dict) -> None:
    """One log that cannot be read among a flight's: the others are the flight (before: every log its own flight,
    a show's 499 reports), the bad one named in the report's notes, on stderr and in the terminal's plan; exit 2,
    as a batch with a failed flight. --one-flight still refuses the unreadable input."""
    import io
    from contextlib import redirect_stderr

    from uav_debate_eval.runner.discover import plan_flights

    broken = tmp_path / "broken.BIN"
    broken.write_bytes(b"\xa3\x95" + b"\x00" * 64)
    out = tmp_path / "with_broken"
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["evaluate", *map(str, paths), str(broken), "--mission", str(mission), "--out", str(out), "--llm",
                     "rules", "--quiet"]) == 2
    [line] = err.getvalue().splitlines()
    assert line.startswith("uav-debate-eval evaluate: failed: broken.BIN cannot be read (") and line.endswith(
        ": left out of the flight")
    report = json.loads((out / "report.json").read_text())
    assert report["mission"]["uavs"] == whole["mission"]["uavs"] and report["violations"] == whole["violations"]
    assert line.removeprefix("uav-debate-eval evaluate: failed: ") in report["notes"]
    [said] = plan_flights([*map(str, paths), str(broken)]).messages
    assert said.startswith("4 inputs: one flight of 3 (their time spans overlap") and "; left out: broken.BIN" in said
    # a show's many damaged logs: the plan's line names three and counts the rest (the notes name each)
    more = [tmp_path / f"broken_{k}.BIN" for k in range(5)]
    for extra in more:
        extra.write_bytes(broken.read_bytes())
    [said] = plan_flights([*map(str, paths), *map(str, more)]).messages
    assert said.startswith("8 inputs: one flight of 3 (") and said.count("cannot be read") == 3
    assert said.endswith(" and 2 more")
    assert main(["evaluate", *map(str, paths), str(broken), "--one-flight", "--out", str(tmp_path / "forced"),
                 "--quiet"]) == 2


def test_a_shows_names_that_do_not_match_say_so_in_one_short_line(tmp_path):
    """A mission naming 500 vehicles the logs do not hold: the error listed every name and every file (5 kB on one
    line); now the first few of each and how many more."""
    from uav_debate_eval.core.errors import InputError
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.io.names import apply_names

    n = 500
    t = np.repeat(np.arange(3) * 0.1, n)
    ids = np.tile([f"sysid{k}" for k in range(n)], 3)
    traj = SwarmTrajectory.from_columns(t, ids, np.zeros((3 * n, 3)))
    with pytest.raises(InputError) as err:
        apply_names(traj, [f"uav{k}" for k in range(n + 1)], "500 logs")
    text = str(err.value)
    assert len(text) < 300 and "and 493 more not found in the input" in text and text.endswith("and 492 more)")


def test_many_px4_logs_are_parsed_on_every_core_into_the_serial_report(tmp_path, monkeypatch):
    """PX4 logs' spans (their GPS times: one flight or not) and the flight's read parsed them one after another. They
    are parsed on every core (20 real 3-MB logs: read 1.14 -> 0.57 s on two cores), once, into the same report."""
    from uav_debate_eval.io import ulog
    from uav_debate_eval.runner import spans

    real = Path(__file__).parent / "fixtures" / "real" / "px4_mission_rtl" / "flight.ulg"
    paths = []
    for k in range(3):
        paths.append(tmp_path / f"px4_{k}.ulg")
        paths[-1].write_bytes(real.read_bytes())
    monkeypatch.setattr(spans, "MIN_BYTES", 0)
    monkeypatch.setattr(spans, "cores", lambda: 2)
    calls = _counting(monkeypatch, ulog, "read_ulog")  # in this process only: not the worker's
    shared = _report(list(map(str, paths)), tmp_path / "shared")
    assert sorted(calls) == ["px4_0.ulg", "px4_2.ulg"]  # this process's share; the flight parsed none again
    monkeypatch.setattr(spans, "can_fork", lambda: False)
    calls.clear()
    assert _report(list(map(str, paths)), tmp_path / "serial") == shared and len(calls) == 3
    assert shared["mission"]["uavs"] == ["px4_0"]  # copies of one log: one vehicle recorded three times
    assert sum(f["kind"] == "duplicate_vehicle" for f in shared["data_quality"]["findings"]) == 2


def test_a_folder_of_flights_with_a_bad_log_among_a_flights_logs(bins, tmp_path, capsys):
    """A folder of flights whose sub-folder holds a flight's logs and one that cannot be read (a damaged SD card):
    the others are that flight, as given inputs are (before: every log evaluated one by one, the bad one failed);
    its summary row is `partial`, naming the input left out, the batch exits 2; the other flight is `ok`."""
    import csv
    import shutil

    paths, mission = bins
    root = tmp_path / "flights"
    for name in ("show", "rehearsal"):
        (root / name).mkdir(parents=True)
        for p in paths:
            shutil.copyfile(p, root / name / p.name)
    shutil.copyfile(mission, root / "mission.yaml")
    (root / "show" / "broken.BIN").write_bytes(b"\xa3\x95" + b"\x00" * 64)
    out = tmp_path / "out"
    assert main(["evaluate", str(root), "--out", str(out), "--llm", "rules"]) == 2
    err = capsys.readouterr().err
    assert "show: one flight of 3 of its 4 recordings (their time spans overlap" in err
    assert "left out: broken.BIN" in err
    assert "uav-debate-eval evaluate: failed: broken.BIN cannot be read (" in err
    rows = {r["flight"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert {k: r["status"] for k, r in rows.items()} == {"rehearsal": "ok", "show": "partial"}
    assert rows["show"]["error"].startswith("broken.BIN cannot be read (") and not rows["rehearsal"]["error"]
    show, rehearsal = (json.loads((out / k / "report.json").read_text()) for k in ("show", "rehearsal"))
    assert show["mission"]["uavs"] == rehearsal["mission"]["uavs"] and len(show["mission"]["uavs"]) == len(paths)
    assert show["violations"] == rehearsal["violations"] and rows["show"]["violations"] == str(len(show["violations"]))
    assert rows["show"]["error"] in show["notes"]
    from uav_debate_eval.runner.discover import plan_flights

    for k in range(4):  # more damaged logs: the plan's line names three and counts the rest (the notes name each)
        (root / "show" / f"broken_{k}.BIN").write_bytes(b"\xa3\x95" + b"\x00" * 64)
    [said] = [m for m in plan_flights([str(root)]).messages if m.startswith("show:")]
    assert said.startswith("show: one flight of 3 of its 8 recordings (") and said.endswith(" and 2 more")
