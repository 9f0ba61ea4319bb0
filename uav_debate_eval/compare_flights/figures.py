"""Overlaid comparison figures as PNG bytes: top-down tracks, separation timeline, speed and altitude.

One colour per flight (every vehicle of a flight in it), on the common axis chosen by compare.align. The first run
of each flight is drawn. Legends name flights by key only (never file names or vehicle ids).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uav_debate_eval.report.figures import _decimate, _figure, _min_envelope, _png

FLIGHT_COLORS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f", "#5d4037", "#9e9d24")
CAPTIONS = {
    "tracks_xy": "Top-down tracks (ENU) of every vehicle, one colour per flight; start o",
    "separation": "Minimum pairwise separation per flight with the limit (red) on the common axis",
    "speed": "Mean vehicle speed per flight on the common axis",
    "altitude": "Mean vehicle altitude per flight on the common axis",
}


STYLES = ("-", "--", ":", "-.")


def _color(i: int) -> str:
    return FLIGHT_COLORS[i % len(FLIGHT_COLORS)]


def _style(i: int) -> str:
    """Each flight its own dash too, so where the flights coincide the one drawn first still shows."""
    return STYLES[i % len(STYLES)]


def tracks_xy(flights: list[Any]):
    fig = _figure(6.5, 5.5, (0.12, 0.1, 0.97, 0.97))
    ax = fig.add_subplot()
    for i, fl in enumerate(flights):
        for j, tr in enumerate(fl.runs[0].traj.tracks.values()):
            k = _decimate(len(tr))
            ax.plot(tr.pos[k, 0], tr.pos[k, 1], lw=1, color=_color(i), ls=_style(i), alpha=0.8,
                    label=f"flight {fl.key}" if j == 0 else None)
            if len(tr):
                ax.plot(tr.pos[0, 0], tr.pos[0, 1], "o", ms=4, color=_color(i))
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def separation(flights: list[Any], axes: list, axis_label: str):
    fig = _figure(8, 3.4, (0.08, 0.16, 0.98, 0.97))
    ax = fig.add_subplot()
    limits = set()
    for i, (fl, fn) in enumerate(zip(flights, axes, strict=True)):
        ev = fl.runs[0]
        t, d = (np.asarray(x, dtype=float) for x in (ev.safety.separation.t, ev.safety.separation.d_min))
        if len(t):
            te, de = _min_envelope(t, d)
            ax.plot(fn(te), de, lw=1.2, color=_color(i), ls=_style(i), label=f"flight {fl.key}")
        if ev.mission.constraints.min_separation_m is not None:
            limits.add(ev.mission.constraints.min_separation_m)
    for lim in sorted(limits):
        ax.axhline(lim, color="red", lw=1, label=f"limit {lim:g} m")
    _finish(ax, axis_label, "distance [m]")
    ax.set_ylim(bottom=0)
    return fig


def _mean_series(ev: Any, which: str) -> tuple[np.ndarray, np.ndarray]:
    snaps = ev.traj.resample()
    valid = snaps.valid
    if which == "speed":
        vals = np.linalg.norm(snaps.vel, axis=2)
    else:
        vals = snaps.pos[..., 2]
    vals = np.where(valid, vals, np.nan)
    with np.errstate(invalid="ignore"):
        mean = np.nanmean(np.where(valid.any(axis=1)[:, None], vals, 0.0), axis=1)
    return np.asarray(snaps.t, dtype=float), mean


def series(flights: list[Any], axes: list, axis_label: str, which: str):
    fig = _figure(8, 3.4, (0.08, 0.16, 0.98, 0.97))
    ax = fig.add_subplot()
    for i, (fl, fn) in enumerate(zip(flights, axes, strict=True)):
        t, v = _mean_series(fl.runs[0], which)
        k = _decimate(len(t), 1500)
        ax.plot(fn(t[k]), v[k], lw=1.2, color=_color(i), ls=_style(i), label=f"flight {fl.key}")
    _finish(ax, axis_label, "mean speed [m/s]" if which == "speed" else "mean altitude z [m]")
    return fig


def _finish(ax, xlabel: str, ylabel: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")


def render_comparison_figures(flights: list[Any], axes: list, axis_label: str) -> dict[str, bytes]:
    """{name: PNG bytes} in CAPTIONS order."""
    return {"tracks_xy": _png(tracks_xy(flights)),
            "separation": _png(separation(flights, axes, axis_label)),
            "speed": _png(series(flights, axes, axis_label, "speed")),
            "altitude": _png(series(flights, axes, axis_label, "altitude"))}
