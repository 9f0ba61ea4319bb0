"""The report figures drawn on the second core while the segments are evaluated and the panel debates.

Drawing a large swarm's figures takes about a second of matplotlib; the five figures that do not need the
debate only need the trajectory, the safety result, the metrics' scores and the flight's events, all known once
the flight's DSL is built. A forked child (uav_debate_eval.forked) draws them from the same objects the report
is built from, then waits for the debate's report section to draw the last one. Should the child fail, the
parent draws the figures itself, so a report never lacks them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from uav_debate_eval.forked import Forked, can_fork


class FigureJob:
    """Figures drawn in a forked child; `pngs(debate)` hands it the debate section and returns {name: PNG}."""

    def __init__(self, traj: Any, mission: Any, safety: Any, metrics: Any, events: list):
        scores = {k: metrics.scores.get(k) for k in ("flight_control", "coordination", "safety", "overall")}
        # the same values build_report puts in the report for these keys
        self.partial = {"violations": [v.to_dict() for v in safety.violations],
                        "events": [e.to_dict() for e in events], "scores": scores}
        self.view = SimpleNamespace(traj=traj, mission=mission, safety=safety, report=self.partial)
        self.child: Forked | None = Forked(_draw, self.view)

    def pngs(self, debate: dict) -> dict[str, bytes]:
        child, self.child = self.child, None
        if child is not None:
            try:
                child.send(debate)
                return child.result()
            except Exception:  # noqa: BLE001 - the parent draws them instead; nothing is lost
                child.cancel()
        from uav_debate_eval.report.figures import render_figures

        self.view.report = {**self.partial, "debate": debate}
        return render_figures(self.view)

    def cancel(self) -> None:
        if self.child is not None:
            self.child.cancel()
            self.child = None


def start_figure_job(traj: Any, mission: Any, safety: Any, metrics: Any, events: list) -> FigureJob | None:
    """A FigureJob when this platform can fork, else None (the writer draws the figures)."""
    return FigureJob(traj, mission, safety, metrics, events) if can_fork() else None


def _draw(inbox: Any, view: SimpleNamespace) -> dict[str, bytes]:
    from uav_debate_eval.report.figures import DEBATE_FIGURES, FIGURES, render_figures

    early = render_figures(view, tuple(n for n in FIGURES if n not in DEBATE_FIGURES))
    view.report = {**view.report, "debate": inbox.recv()}
    late = render_figures(view, DEBATE_FIGURES)
    return {name: early.get(name, late.get(name)) for name in FIGURES}
