"""`t` of a trajectory CSV is seconds (CONTRACT.md §1). ROS stamps exported as integers are unix nanoseconds (or
milliseconds, microseconds): before, a nanosecond file made the segmenter ask for 2.5e8 pieces (killed at 24 GB)
and a millisecond file flew a 12-m/s vehicle at 0.012 m/s ("safe", the overspeed gone). Unix stamps are converted
and said so; a clock that steps minutes between a vehicle's samples is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from uav_debate_eval.cli import main as cli
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io.csv_io import read_csv

T0 = 1_764_300_000.0  # unix seconds


def _write(path: Path, scale: float, origin: float = T0) -> Path:
    """a flies east at 12 m/s, b at 2 m/s 5 m beside it, 10 Hz for 30 s; t = (origin + s) * scale."""
    rows = ["t,uav_id,x,y,z"]
    for k in range(301):
        for u, speed, y in (("a", 12.0, 0.0), ("b", 2.0, 5.0)):
            rows.append(f"{round((origin + k / 10) * scale)},{u},{speed * k / 10:.3f},{y},10")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(("scale", "unit"), [(1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds")])
def test_unix_stamps_in_a_finer_unit_are_read_as_seconds(tmp_path: Path, scale: float, unit: str):
    traj = read_csv(_write(tmp_path / "flight.csv", scale))
    assert traj.t0 == pytest.approx(T0, abs=1e-3) and traj.duration == pytest.approx(30.0, abs=1e-6)
    assert traj.tracks["a"].sample_period == pytest.approx(0.1, abs=1e-6)
    assert f"t read as unix {unit} (no clock in seconds is that large) and converted" in traj.ingest.notes


def test_unix_seconds_and_flight_seconds_are_left_as_they_are(tmp_path: Path):
    for origin in (T0, 0.0):
        traj = read_csv(_write(tmp_path / "s.csv", 1.0, origin))
        assert traj.t0 == pytest.approx(origin) and traj.duration == pytest.approx(30.0)
        assert not any("converted" in n for n in traj.ingest.notes)


@pytest.mark.parametrize(("scale", "step"), [(1e3, "100"), (1e9, r"1e\+08")])
def test_a_relative_clock_in_another_unit_is_a_one_line_error(tmp_path: Path, scale: float, step: str):
    with pytest.raises(InputError, match=rf"t steps {step} s between a vehicle's samples .*t must be seconds"):
        read_csv(_write(tmp_path / "boot.csv", scale, origin=0.0))


def test_a_nanosecond_file_is_evaluated_and_its_overspeed_found(tmp_path: Path):
    mission = tmp_path / "mission.yaml"
    mission.write_text("name: u\ntype: formation\nconstraints: {min_separation_m: 1.0, max_speed_mps: 5.0}\n")
    out = tmp_path / "out"
    assert cli(["evaluate", str(_write(tmp_path / "ns.csv", 1e9)), "--mission", str(mission), "--out", str(out),
                "--quiet"]) == 3
    report = json.loads((out / "report.json").read_text())
    (v,) = report["violations"]
    assert v["constraint"] == "max_speed" and v["uavs"] == ["a"] and v["worst_value"] == pytest.approx(12.0, abs=0.05)
    assert report["mission"]["t0"] == pytest.approx(T0, abs=1e-3)


def test_positions_in_millimetres_are_a_one_line_error_not_a_safe_flight(tmp_path: Path):
    """Motion capture exports millimetres: b 0.4 m beside a read as 400 m apart (the near miss gone) and every
    vehicle past the speed of sound; the flight in metres is read as it is."""
    rows = ["t,uav_id,x,y,z"]
    for k in range(101):
        for u, y in (("a", 0.0), ("b", 0.4)):
            rows.append(f"{k / 100},{u},{1000 * 1.5 * k / 100:.1f},{1000 * y:.1f},{1000 * 1.2:.1f}")
    mm = tmp_path / "vicon_export.csv"
    mm.write_text("\n".join(rows) + "\n")
    with pytest.raises(InputError, match=r"move 1500 m/s between samples \(90th percentile\): x, y, z must be metres"):
        read_csv(mm)
    metres = tmp_path / "metres.csv"
    metres.write_text("\n".join([rows[0], *(",".join([r.split(",")[0], r.split(",")[1],
                                                        *(f"{float(v) / 1000:.4f}" for v in r.split(",")[2:])])
                                             for r in rows[1:])]) + "\n")
    assert read_csv(metres).tracks["a"].speed.max() == pytest.approx(1.5, abs=1e-6)


@pytest.mark.parametrize(("suffix", "zone", "t0"), [("Z", "with their time zone", T0),
                                                     ("+01:00", "with their time zone", T0 - 3600.0),
                                                     ("", "no time zone given: taken as UTC", T0)])
def test_iso_8601_date_times_are_read_as_unix_seconds(tmp_path: Path, suffix: str, zone: str, t0: float):
    """An exporter's date-time column: before, every row was "not a number" and the file had no valid samples."""
    import datetime as dt

    start = dt.datetime.fromtimestamp(T0, dt.UTC).replace(tzinfo=None)
    rows = ["t,uav_id,x,y,z"]
    for k in range(51):
        stamp = (start + dt.timedelta(seconds=k / 10)).isoformat(timespec="milliseconds") + suffix
        rows += [f"{stamp},a,{k / 10:.2f},0,10", f"{stamp},b,{k / 10:.2f},3,10"]
    path = tmp_path / "export.csv"
    path.write_text("\n".join(rows) + "\n")
    traj = read_csv(path)
    assert traj.t0 == pytest.approx(t0, abs=1e-6) and traj.duration == pytest.approx(5.0, abs=1e-6)
    assert traj.n_samples == 102 and traj.tracks["b"].sample_period == pytest.approx(0.1, abs=1e-6)
    assert f"t read as ISO 8601 date-times ({zone}) and converted to unix seconds" in traj.ingest.notes
    path.write_text("\n".join([*rows, "yesterday,a,0,0,10"]) + "\n")  # a cell that is neither: no date-times
    with pytest.raises(InputError, match="no valid samples"):
        read_csv(path)
