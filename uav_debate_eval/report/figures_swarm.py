"""Figures for large swarms (more than MANY_VEHICLES): a drawing per vehicle and a legend entry each are
unreadable at hundreds of vehicles and cost seconds, so these views draw

- every vehicle's track decimated into one line collection (one artist, no legend entries),
- a density view of where the swarm flew (a 2-D histogram of every sample),
- the worst pairs highlighted with their own colour and legend entry (vehicles of separation violations
  first, then the closest pair of the flight, then vehicles of other violations),
- altitude and speed as the swarm's min-max band and median, with the highlighted vehicles on top.
Every violation keeps its marker (figures.py places them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.collections import LineCollection

from uav_debate_eval.metrics.vec import nanmedian0

MANY_VEHICLES = 20
TRACK_POINTS = 120  # per vehicle in the shared line collection
TRACK_POINTS_3D = 40
HIGHLIGHT = 6  # vehicles (three pairs)
GRID_POINTS = 600
HIGHLIGHT_COLORS = ("#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


def is_many(traj: Any) -> bool:
    return len(traj.uav_ids) > MANY_VEHICLES


def highlighted(ev: Any) -> list[str]:
    """Up to HIGHLIGHT vehicles: separation violations' pairs, the closest pair of the flight, other violations."""
    picked: list[str] = []
    violations = ev.report["violations"]
    sep = [v for v in violations if v["constraint"] == "min_separation"]
    for v in sorted(sep, key=lambda v: (v["worst_value"] is None, v["worst_value"] or 0.0)):
        picked.extend(v["uavs"])
    timeline = ev.safety.separation
    d = np.asarray(timeline.d_min, dtype=float)
    if len(d) and np.isfinite(d).any():
        pair = timeline.pairs[int(np.nanargmin(d))]
        picked.extend(pair or ())
    for v in violations:
        picked.extend(v["uavs"])
    names = [u for u in dict.fromkeys(picked) if u in ev.traj.tracks]
    return names[:HIGHLIGHT]


def _decimated(tr: Any, points: int) -> np.ndarray:
    n = len(tr)
    return np.arange(n) if n <= points else np.linspace(0, n - 1, points).astype(int)


def draw_xy(ax, ev: Any, label: Any) -> None:
    """Density of every sample, all tracks decimated in one collection, the highlighted vehicles on top."""
    traj = ev.traj
    xy = np.concatenate([tr.pos[:, :2] for tr in traj.tracks.values()])
    counts, xe, ye = np.histogram2d(xy[:, 0], xy[:, 1], bins=160)
    ax.imshow(np.log1p(counts.T), extent=(xe[0], xe[-1], ye[0], ye[-1]), origin="lower", cmap="Blues",
              aspect="auto", interpolation="nearest", alpha=0.8, zorder=1)
    segments = [tr.pos[_decimated(tr, TRACK_POINTS), :2] for tr in traj.tracks.values()]
    ax.add_collection(LineCollection(segments, colors="#444", linewidths=0.3, alpha=0.35, zorder=2,
                                     label=f"all {len(segments)} vehicles (decimated)"))
    for u, color in zip(highlighted(ev), HIGHLIGHT_COLORS, strict=False):
        tr = traj.tracks[u]
        k = _decimated(tr, 800)
        ax.plot(tr.pos[k, 0], tr.pos[k, 1], lw=1.4, color=color, label=label(u), zorder=3)
    ax.autoscale_view()


def draw_3d(ax, ev: Any, label: Any) -> None:
    from mpl_toolkits.mplot3d.art3d import Line3DCollection

    traj = ev.traj
    segments = [tr.pos[_decimated(tr, TRACK_POINTS_3D)] for tr in traj.tracks.values()]
    ax.add_collection3d(Line3DCollection(segments, colors="#444", linewidths=0.3, alpha=0.3))
    lo = np.min([s.min(axis=0) for s in segments], axis=0)
    hi = np.max([s.max(axis=0) for s in segments], axis=0)
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_zlim(lo[2], hi[2] if hi[2] > lo[2] else lo[2] + 1.0)
    for u, color in zip(highlighted(ev), HIGHLIGHT_COLORS, strict=False):
        tr = traj.tracks[u]
        k = _decimated(tr, 300)
        ax.plot(tr.pos[k, 0], tr.pos[k, 1], tr.pos[k, 2], lw=1.2, color=color, label=label(u))


def swarm_bands(traj: Any, points: int = GRID_POINTS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t grid, altitude (3, T), speed (3, T)) as min / median / max over the vehicles flying at each time."""
    t = np.linspace(traj.t_start, traj.t_end, points)
    alt = np.full((len(traj.tracks), points), np.nan)
    speed = np.full_like(alt, np.nan)
    for i, tr in enumerate(traj.tracks.values()):
        inside = (t >= tr.t[0]) & (t <= tr.t[-1])
        alt[i, inside] = np.interp(t[inside], tr.t, tr.pos[:, 2])
        speed[i, inside] = np.interp(t[inside], tr.t, tr.speed)

    def stats(a: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (nobody flying) stay NaN
                return np.vstack([np.nanmin(a, 0), nanmedian0(a), np.nanmax(a, 0)])

    return t, stats(alt), stats(speed)


def draw_altitude_speed(a1, a2, ev: Any, label: Any) -> None:
    t, alt, speed = swarm_bands(ev.traj)
    n = len(ev.traj.tracks)
    for ax, band, what in ((a1, alt, "altitude"), (a2, speed, "speed")):
        ax.fill_between(t, band[0], band[2], color="#9ecae1", alpha=0.6, lw=0, label=f"{what} min-max ({n} vehicles)")
        ax.plot(t, band[1], color="#08519c", lw=1, label="median")
    for u, color in zip(highlighted(ev), HIGHLIGHT_COLORS, strict=False):
        tr = ev.traj.tracks[u]
        k = _decimated(tr, 800)
        a1.plot(tr.t[k], tr.pos[k, 2], lw=1, color=color, label=label(u))
        a2.plot(tr.t[k], tr.speed[k], lw=1, color=color)
