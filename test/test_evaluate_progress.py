"""Progress: every long step (read, segments, debate rounds, write) reaches the progress callback; nothing is
printed when stderr is not a terminal."""

from __future__ import annotations

from uav_debate_eval.cli import main
from uav_debate_eval.commands import evaluate as cmd
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate


def test_debate_rounds_are_progress_steps():
    sim = simulate("formation", seed=1, duration_s=40, faults=["near_miss"])
    seen: list[tuple[str, int, int]] = []
    ev = evaluate(sim.traj, sim.mission, progress=lambda stage, done, total: seen.append((stage, done, total)))
    debate = [(done, total) for stage, done, total in seen if stage == "debate"]
    n = len(ev.report["debate"]["rounds"])
    assert n >= 2
    assert [done for done, _ in debate] == [*range(1, n + 1), n]  # one step per round, then the end
    assert all(total >= done for done, total in debate)
    assert debate[-1] == (n, n)
    segments = [(done, total) for stage, done, total in seen if stage == "segments"]
    assert segments == [(i, len(ev.segments)) for i in range(1, len(ev.segments) + 1)]


def test_command_reports_read_segments_debate_and_write(tmp_path, monkeypatch):
    sim = simulate("formation", seed=1, duration_s=30, faults=["near_miss"])
    csv = sim.write(tmp_path / "in", formats=("csv",))[0]
    calls: list[str] = []

    class Recorder:
        """Stands in for the rich bar: records the stages the command reports."""

        def __init__(self, enabled: bool):
            assert enabled

        def __enter__(self):
            return self

        def __call__(self, stage: str, done: int, total: int) -> None:
            calls.append(stage)

        def __exit__(self, *exc) -> None:
            return None

    monkeypatch.setattr(cmd, "_Progress", Recorder)
    monkeypatch.setattr(cmd.sys.stderr, "isatty", lambda: True)
    assert main(["evaluate", str(csv), "--out", str(tmp_path / "out")]) == 3
    assert list(dict.fromkeys(calls)) == ["read", "safety", "metrics", "segments", "debate", "report", "write"]
    assert calls.count("debate") >= 2


def test_nothing_is_printed_off_terminal(tmp_path, capsys):
    sim = simulate("formation", seed=1, duration_s=30, faults=["near_miss"])
    csv = sim.write(tmp_path / "in", formats=("csv",))[0]
    assert main(["evaluate", str(csv), "--out", str(tmp_path / "out")]) == 3
    cap = capsys.readouterr()
    assert cap.err == ""
    lines = cap.out.splitlines()  # the status line, the verdict in words, the top findings: no progress bar
    assert lines[0].startswith("risky: ") and 2 <= len(lines) <= 5 and "\x1b[" not in cap.out
    bar = cmd._Progress(False)
    with bar:
        bar("debate", 1, 3)
    assert bar.progress is None and capsys.readouterr() == ("", "")
