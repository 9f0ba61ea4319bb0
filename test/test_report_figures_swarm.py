"""Figures for large swarms: decimated tracks in one collection, a density view, the worst pairs highlighted,
a handful of legend entries, and still every violation marked."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from uav_debate_eval.report import figures, figures_swarm
from uav_debate_eval.report.captions import CAPTIONS
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate


@pytest.fixture(scope="module")
def ev():
    sim = simulate("grid", seed=0, n_uavs=64, duration_s=60, faults=["near_miss", "overspeed"])
    ev = evaluate(sim.traj, sim.mission)
    assert {v["constraint"] for v in ev.report["violations"]} == {"min_separation", "max_speed"}
    return ev


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_highlighted_vehicles_are_the_violating_pair_first(ev):
    near = next(v for v in ev.report["violations"] if v["constraint"] == "min_separation")
    fast = next(v for v in ev.report["violations"] if v["constraint"] == "max_speed")
    picked = figures_swarm.highlighted(ev)
    assert picked[:2] == near["uavs"]
    assert set(fast["uavs"]) <= set(picked)
    assert len(picked) <= figures_swarm.HIGHLIGHT


def test_top_down_view_scales(ev):
    fig = figures.trajectory_xy(ev)
    (ax,) = fig.axes
    assert len(ax.images) == 1  # the density view
    (tracks,) = [c for c in ax.collections if c.get_label().startswith("all ")]
    assert len(tracks.get_segments()) == 64
    assert max(len(s) for s in tracks.get_segments()) <= figures_swarm.TRACK_POINTS
    legend = _legend(ax)
    assert len(legend) <= figures_swarm.HIGHLIGHT + 4
    assert set(figures_swarm.highlighted(ev)) <= set(legend)
    (marks,) = [c for c in ax.collections if c.get_label() == "violation"]
    assert len(marks.get_offsets()) == sum(len(v["uavs"]) for v in ev.report["violations"])
    plt.close(fig)


def test_altitude_speed_shows_the_swarm_band_and_the_overspeed(ev):
    t, alt, speed = figures_swarm.swarm_bands(ev.traj)
    fast = next(v for v in ev.report["violations"] if v["constraint"] == "max_speed")
    assert np.nanmax(speed[2]) > ev.mission.constraints.max_speed_mps  # the band's top shows the overspeed
    assert np.all(speed[0] <= speed[1] + 1e-12) and np.all(speed[1] <= speed[2] + 1e-12)
    i = int(np.nanargmax(speed[2]))
    assert fast["t_start"] - 1.0 <= t[i] <= fast["t_end"] + 1.0
    fig = figures.altitude_speed(ev)
    legend = _legend(fig.axes[0])
    assert len(legend) <= figures_swarm.HIGHLIGHT + 2 and "altitude min-max (64 vehicles)" in legend
    plt.close(fig)


def test_every_figure_renders(ev):
    pngs = figures.render_figures(ev)
    assert list(pngs) == [n for n in CAPTIONS if n != "rules"]  # no mission rule near failing: no rules figure
    assert all(p[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs.values())


@pytest.mark.parametrize("size", ["few", "swarm"])
def test_each_figure_needs_only_what_figures_needs_says(ev, size):
    """The figure child draws a figure as soon as the inputs figures.NEEDS names exist: each figure is drawn from a
    view holding only those (a missing one would be a KeyError or an AttributeError on None)."""
    from types import SimpleNamespace

    if size == "few":
        sim = simulate("formation", seed=0, faults=["near_miss"])
        full = evaluate(sim.traj, sim.mission)
    else:
        full = ev
    for name, fn in figures.FIGURES.items():
        needs = figures.NEEDS[name]
        view = SimpleNamespace(traj=full.traj, mission=full.mission,
                               safety=full.safety if "safety" in needs else None,
                               report={k: v for k, v in full.report.items() if k in needs})
        plt.close(fn(view))
