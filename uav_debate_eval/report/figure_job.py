"""The report figures drawn on the second core while the segments are evaluated and the panel debates.

Drawing a large swarm's figures takes about a second of matplotlib (half of it loading the library); each figure
needs the trajectory and some of: the safety result, the violations and events, the metrics' scores, the debate
(figures.NEEDS). A forked child (uav_debate_eval.runner.forked), started with the trajectory as read before the
evaluation's stages load, loads matplotlib while this process loads them and cleans the trajectory (quality.assess);
when the assessment changed no track (the usual clean recording) the child draws the trajectory it has, else it gets
the clean one (a small flight) or cleans it itself (the same result as here). It then
receives each result as soon as it exists (the same objects the report is built from, pickled) and draws every
figure whose inputs are complete. Should the child fail, the parent draws the figures itself, so a report never
lacks them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from uav_debate_eval.runner.forked import Forked, can_fork

#: A cleaned trajectory of at most this many samples is sent to the figure child (pickled: some ms); a larger one
#: the child cleans itself, on the other core.
SEND_CLEAN_SAMPLES = 200_000


class FigureJob:
    """Figures drawn in a forked child, started with the trajectory as read (it loads matplotlib while this process
    assesses the trajectory; `clean_ready` tells it whether it must clean its copy too). Each result goes to the
    child as soon as it exists (`safety_ready`, `events_ready`, `scores_ready`), and the child draws every figure
    whose inputs are complete; `pngs(debate)` hands it the debate section and returns {name: PNG}."""

    def __init__(self, traj: Any = None, mission: Any = None):
        """Forked with the flight as read, or without it (a small input: the child loads matplotlib while this
        process reads the input; `flight_ready` sends the flight)."""
        self.view = SimpleNamespace(traj=traj, mission=mission, safety=None, report={})
        self.child: Forked | None = Forked(_draw, traj, mission)

    def flight_ready(self, traj: Any, mission: Any) -> None:
        """The flight as read, for a job forked before the read (pickled to the child: a small input)."""
        self.view.traj, self.view.mission = traj, mission
        self._send("flight", (traj, mission))

    def clean_ready(self, clean: Any) -> None:
        """The assessed trajectory (drawn here should the child fail); the child learns whether it differs from the
        trajectory as read, and gets a small one that does (cleaning its copy would load the assessment's
        libraries there: the child started before this process loaded them, to load matplotlib meanwhile)."""
        same = clean.tracks.keys() == self.view.traj.tracks.keys() and all(
            tr is self.view.traj.tracks[u] for u, tr in clean.tracks.items())
        self.view.traj = clean
        self._send("clean", same if same or clean.n_samples > SEND_CLEAN_SAMPLES else clean)

    def safety_ready(self, safety: Any) -> None:
        self.view.safety = safety
        self._send("safety", safety)
        # the same values build_report puts in the report for these keys
        self._report({"violations": [v.to_dict() for v in safety.violations]})

    def events_ready(self, events: list) -> None:
        self._report({"events": [e.to_dict() for e in events]})

    def scores_ready(self, metrics: Any) -> None:
        self._report({"scores": {k: metrics.scores.get(k) for k in ("flight_control", "coordination", "safety",
                                                                    "overall")}})

    def _report(self, part: dict) -> None:
        self.view.report = {**self.view.report, **part}
        self._send("report", part)

    def _send(self, tag: str, value: Any) -> None:
        if self.child is not None:
            try:
                self.child.send((tag, value))
            except OSError:  # the child is gone: pngs() draws here
                self.cancel()

    def pngs(self, debate: dict) -> dict[str, bytes]:
        child, self.child = self.child, None
        if child is not None:
            try:
                child.send(("report", {"debate": debate}))
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


def start_figure_job(traj: Any = None, mission: Any = None) -> FigureJob | None:
    """A FigureJob when this process can fork, else None (the writer draws the figures); without the flight, the
    flight goes to it once read (FigureJob.flight_ready)."""
    return FigureJob(traj, mission) if can_fork() else None


def _draw(inbox: Any, traj: Any, mission: Any) -> dict[str, bytes]:
    from uav_debate_eval.report.figures import FIGURES, NEEDS, render_figures

    if traj is None:  # forked before the read
        _, (traj, mission) = inbox.recv()
    _, clean = inbox.recv()  # ("clean", whether the assessment left every track as read, or the clean trajectory)
    if clean is False:
        from uav_debate_eval.quality.assessment import assess

        traj = assess(traj, mission).traj
    elif clean is not True:
        traj = clean
    view = SimpleNamespace(traj=traj, mission=mission, safety=None, report={})
    known: set[str] = set()
    drawn: dict[str, bytes] = {}
    tried: set[str] = set()  # a figure with nothing to draw (e.g. no rule near failing) is tried, not drawn
    while len(tried) < len(FIGURES):
        tag, value = inbox.recv()
        if tag == "safety":
            view.safety = value
            known.add("safety")
        else:
            view.report = {**view.report, **value}
            known.update(value)
        ready = tuple(n for n in FIGURES if n not in tried and NEEDS[n] <= known)
        drawn.update(render_figures(view, ready))
        tried.update(ready)
    return {name: drawn[name] for name in FIGURES if name in drawn}
