"""The report figures drawn on the second core while the segments are evaluated and the panel debates.

Drawing a large swarm's figures takes about a second of matplotlib (half of it loading the library); the five
figures that do not need the debate only need the trajectory, the safety result, the metrics' scores and the
flight's events, all known once the flight's DSL is built. A forked child (uav_debate_eval.forked), started as
soon as the trajectory is clean, loads matplotlib while the flight is checked, receives those results (the same
objects the report is built from, pickled), draws, then waits for the debate's report section to draw the last
figure. Should the child fail, the parent draws the figures itself, so a report never lacks them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from uav_debate_eval.forked import Forked, can_fork


class FigureJob:
    """Figures drawn in a forked child: started once the trajectory is clean (the child loads matplotlib while the
    flight is checked), `flight_ready` hands it the flight's results, `pngs(debate)` the debate section and returns
    {name: PNG}."""

    def __init__(self, traj: Any, mission: Any):
        self.view = SimpleNamespace(traj=traj, mission=mission, safety=None, report={})
        self.child: Forked | None = Forked(_draw, traj, mission)

    def flight_ready(self, safety: Any, metrics: Any, events: list) -> None:
        scores = {k: metrics.scores.get(k) for k in ("flight_control", "coordination", "safety", "overall")}
        # the same values build_report puts in the report for these keys
        self.view.safety = safety
        self.view.report = {"violations": [v.to_dict() for v in safety.violations],
                            "events": [e.to_dict() for e in events], "scores": scores}
        if self.child is not None:
            try:
                self.child.send((safety, self.view.report))
            except OSError:  # the child is gone: pngs() draws here
                self.cancel()

    def pngs(self, debate: dict) -> dict[str, bytes]:
        child, self.child = self.child, None
        if child is not None:
            try:
                child.send(debate)
                return child.result()
            except Exception:  # noqa: BLE001 - the parent draws them instead; nothing is lost
                child.cancel()
        from uav_debate_eval.report.figures import render_figures

        self.view.report = {**self.view.report, "debate": debate}
        return render_figures(self.view)

    def cancel(self) -> None:
        if self.child is not None:
            self.child.cancel()
            self.child = None


def start_figure_job(traj: Any, mission: Any) -> FigureJob | None:
    """A FigureJob when this process can fork, else None (the writer draws the figures)."""
    return FigureJob(traj, mission) if can_fork() else None


def _draw(inbox: Any, traj: Any, mission: Any) -> dict[str, bytes]:
    from uav_debate_eval.report.figures import DEBATE_FIGURES, FIGURES, render_figures

    safety, report = inbox.recv()
    view = SimpleNamespace(traj=traj, mission=mission, safety=safety, report=report)
    early = render_figures(view, tuple(n for n in FIGURES if n not in DEBATE_FIGURES))
    view.report = {**report, "debate": inbox.recv()}
    late = render_figures(view, DEBATE_FIGURES)
    return {name: early[name] if name in early else late[name] for name in FIGURES}
