"""Report figures: decimated lines, and the markers the captions promise (violations, events, the separation
limit and the veto intervals)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from uav_debate_eval.report import figures
from uav_debate_eval.report.captions import CAPTIONS
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate


@pytest.fixture(scope="module")
def ev():
    sim = simulate("formation", seed=1, duration_s=80, rate_hz=20, faults=["near_miss", "sharp_turn"])
    ev = evaluate(sim.traj, sim.mission)
    assert ev.n_violations >= 1 and ev.report["events"] and ev.safety.veto_intervals
    assert min(len(tr) for tr in sim.traj.tracks.values()) > figures.MAX_POINTS
    return ev


def _collections(ax) -> dict[str, object]:
    return {c.get_label(): c for c in ax.collections}


def test_trajectories_are_decimated_and_mark_violations_and_events(ev):
    fig = figures.trajectory_xy(ev)
    (ax,) = fig.axes
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    for u in ev.traj.uav_ids:
        assert len(lines[u].get_xdata()) == figures.MAX_POINTS
    marks = _collections(ax)
    assert len(marks["violation"].get_offsets()) == sum(len(v["uavs"]) for v in ev.report["violations"])
    assert len(marks["event"].get_offsets()) == sum(len(e["uavs"]) for e in ev.report["events"])
    plt.close(fig)
    fig = figures.trajectory_3d(ev)
    assert {"violation", "event"} <= set(_collections(fig.axes[0]))
    plt.close(fig)


def test_separation_keeps_the_closest_approach_limit_and_vetoes(ev):
    fig = figures.separation(ev)
    (ax,) = fig.axes
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    d = np.asarray(ev.safety.separation.d_min, dtype=float)
    curve = lines["min separation"]
    assert len(curve.get_ydata()) <= 2 * figures.MAX_POINTS < len(d)
    assert np.nanmin(curve.get_ydata()) == np.nanmin(d)  # the decimation keeps every bin's minimum
    limit = ev.mission.constraints.min_separation_m
    assert list(lines[f"limit {limit:g} m"].get_ydata()) == [limit, limit]
    spans = [(p.get_x(), p.get_x() + p.get_width()) for p in ax.patches]
    np.testing.assert_allclose(spans, ev.safety.veto_intervals)
    plt.close(fig)


def test_every_figure_renders_to_png(ev):
    before = plt.get_fignums()
    pngs = figures.render_figures(ev)
    assert list(pngs) == [n for n in CAPTIONS if n != "rules"]  # no mission rule near failing: no rules figure
    assert all(p[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs.values())
    assert plt.get_fignums() == before  # rendering closes its figures
