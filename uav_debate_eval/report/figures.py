"""Report figures as PNG bytes (matplotlib, Agg backend, no display needed).

Long flights are decimated for drawing only (MAX_POINTS per vehicle); markers use the exact times. Large
swarms get density views and the worst pairs highlighted instead of a line and a legend entry per vehicle
(figures_swarm.py); every violation keeps its marker.
Drawing dominates the report's cost, so each figure is laid out with fixed margins (tight_layout
draws every figure an extra time), legends have fixed places ("best" searches every plotted point),
per-vehicle start/end markers are one scatter each instead of a line object per vehicle, and the 3-D
view has no legend of its own (same colours as the top-down view) and fewer ticks.
"""

from __future__ import annotations

import io
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from uav_debate_eval.report import figures_swarm as swarm  # noqa: E402

MAX_POINTS = 800  # per vehicle and line: more than the pixels of the figure
MAX_POINTS_3D = 300
DPI = 80


def _decimate(n: int, limit: int = MAX_POINTS) -> np.ndarray:
    return np.arange(n) if n <= limit else np.linspace(0, n - 1, limit).astype(int)


def _min_envelope(t: np.ndarray, d: np.ndarray, bins: int = 2 * MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Decimate a separation series keeping each bin's minimum, so no close approach disappears from the plot."""
    n = len(t)
    if n <= bins:
        return t, d
    size = -(-n // bins)
    nb = -(-n // size)
    v = np.full(nb * size, np.inf)
    v[:n] = np.where(np.isnan(d), np.inf, d)
    idx = np.arange(nb) * size + np.argmin(v.reshape(nb, size), axis=1)
    return t[idx], d[idx]


def _figure(width: float, height: float, margins: tuple[float, float, float, float], **kw):
    """A figure at the output DPI with fixed (left, bottom, right, top) margins for all its axes."""
    fig = plt.figure(figsize=(width, height), dpi=DPI)
    left, bottom, right, top = margins
    fig.subplots_adjust(left=left, bottom=bottom, right=right, top=top, **kw)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def _label(name: str) -> str:
    """A vehicle name as literal legend text (no mathtext from `$`, not hidden by a leading `_`)."""
    return name.replace("$", r"\$") if not name.startswith("_") else " " + name.replace("$", r"\$")


def _colors(ids: list[str]) -> dict[str, Any]:
    cmap = plt.get_cmap("tab10" if len(ids) <= 10 else "tab20")
    return {u: cmap(i % cmap.N) for i, u in enumerate(ids)}


def _markers(ev: Any) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """(t, uav) for the worst point of each violation and each event."""
    viol = []
    for v in ev.report["violations"]:
        for u in v["uavs"]:
            viol.append((float(v["t_start"]), u))
    events = [(float(e["t"]), u) for e in ev.report["events"] for u in e["uavs"]]
    return viol, events


def _at(traj: Any, marks: list[tuple[float, str]]) -> np.ndarray:
    pts = [traj.tracks[u].position_at(np.array([t]))[0] for t, u in marks if u in traj.tracks]
    return np.asarray(pts).reshape(-1, 3)


def trajectory_xy(ev: Any):
    traj = ev.traj
    colors = _colors(traj.uav_ids)
    fig = _figure(6.4, 5.6, (0.12, 0.09, 0.97, 0.98))
    ax = fig.add_subplot()
    many = swarm.is_many(traj)
    if many:
        swarm.draw_xy(ax, ev, _label)
    else:
        for u, tr in traj.tracks.items():
            k = _decimate(len(tr))
            ax.plot(tr.pos[k, 0], tr.pos[k, 1], lw=1.2, color=colors[u], label=_label(u))
        ends = np.array([[tr.pos[0, :2], tr.pos[-1, :2]] for tr in traj.tracks.values()])
        c = [colors[u] for u in traj.tracks]
        ax.scatter(ends[:, 0, 0], ends[:, 0, 1], marker="o", s=16, color=c, zorder=3)
        ax.scatter(ends[:, 1, 0], ends[:, 1, 1], marker="s", s=16, color=c, zorder=3)
    viol, events = _markers(ev)
    pe = _at(traj, events[:400])
    if len(pe):
        ax.scatter(pe[:, 0], pe[:, 1], marker="^", s=22, facecolors="none", edgecolors="#555", label="event", zorder=3)
    pv = _at(traj, viol)  # every violation, however many
    if len(pv):
        ax.scatter(pv[:, 0], pv[:, 1], marker="x", s=60, color="red", linewidths=2, label="violation", zorder=4)
    fence = ev.mission.constraints.geofence
    if fence is not None and all(map(math.isfinite, (*fence.min[:2], *fence.max[:2]))):  # open sides: not drawn
        (x0, y0, _), (x1, y1, _) = fence.min, fence.max
        ax.plot([x0, x1, x1, x0, x0], [y0, y0, y1, y1, y0], "--", color="#888", lw=1, label="geofence")
    ax.set_xlabel("x east [m]")
    ax.set_ylabel("y north [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right", ncol=2 if len(traj.uav_ids) > 6 and not many else 1)
    return fig


def trajectory_3d(ev: Any):
    traj = ev.traj
    colors = _colors(traj.uav_ids)
    fig = _figure(6.4, 5.6, (0.0, 0.02, 0.95, 1.0))
    ax = fig.add_subplot(projection="3d")
    if swarm.is_many(traj):
        swarm.draw_3d(ax, ev, _label)
    else:
        for u, tr in traj.tracks.items():
            k = _decimate(len(tr), MAX_POINTS_3D)
            ax.plot(tr.pos[k, 0], tr.pos[k, 1], tr.pos[k, 2], lw=1.0, color=colors[u], label=_label(u))
    viol, events = _markers(ev)
    pe = _at(traj, events[:400])
    if len(pe):
        ax.scatter(pe[:, 0], pe[:, 1], pe[:, 2], marker="^", s=18, facecolors="none", edgecolors="#555",
                   label="event")
    pv = _at(traj, viol)
    if len(pv):
        ax.scatter(pv[:, 0], pv[:, 1], pv[:, 2], marker="x", s=50, color="red", label="violation")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")
    ax.locator_params(nbins=4)  # 3-D tick labels are costly to place; the top-down view has the detail
    return fig


def separation(ev: Any):
    sep = ev.safety.separation
    c, th = ev.mission.constraints, ev.mission.thresholds
    fig = _figure(8, 3.4, (0.08, 0.16, 0.98, 0.97))
    ax = fig.add_subplot()
    t = np.asarray(sep.t, dtype=float)
    d = np.asarray(sep.d_min, dtype=float)
    if len(t):
        ax.plot(*_min_envelope(t, d), color="#1f77b4", lw=1.2, label="min separation")
    else:
        ax.text(0.5, 0.5, "fewer than two vehicles: no separation", ha="center", transform=ax.transAxes)
    if c.min_separation_m is not None:
        ax.axhline(c.min_separation_m, color="red", lw=1.2, ls="-", label=f"limit {c.min_separation_m:g} m")
        ax.axhline(th.proximity(c), color="orange", lw=1, ls="--", label=f"warning {th.proximity(c):g} m")
    for i, (a, b) in enumerate(ev.safety.veto_intervals):
        ax.axvspan(a, b, color="red", alpha=0.15, label="veto" if i == 0 else None)
    _data_quality_spans(ax, ev, "min_separation")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("distance [m]")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    return fig


def _data_quality_spans(ax, ev: Any, constraint: str) -> bool:
    """Grey-hatched spans of the data-quality findings that touch `constraint` (artefacts, not hazards)."""
    dq = getattr(ev.safety, "data_quality", None)
    found = dq.findings if dq else []
    spans = [f for f in found if constraint in f.affects and f.t_end - f.t_start < ev.traj.duration]
    for i, f in enumerate(spans):
        a, b = (f.t_start, f.t_end) if f.t_end > f.t_start else (f.t_start - 0.05, f.t_start + 0.05)
        ax.axvspan(a, b, facecolor="none", edgecolor="#777", hatch="//", lw=0,
                   label="data quality finding" if i == 0 else None)
    return bool(spans)


def altitude_speed(ev: Any):
    traj = ev.traj
    colors = _colors(traj.uav_ids)
    c = ev.mission.constraints
    fig = _figure(8, 5, (0.08, 0.1, 0.98, 0.98), hspace=0.08)
    a1, a2 = fig.subplots(2, 1, sharex=True)
    many = swarm.is_many(traj)
    if many:
        swarm.draw_altitude_speed(a1, a2, ev, _label)
    else:
        for u, tr in traj.tracks.items():
            k = _decimate(len(tr))
            a1.plot(tr.t[k], tr.pos[k, 2], lw=1, color=colors[u], label=_label(u))
            a2.plot(tr.t[k], tr.speed[k], lw=1, color=colors[u])
    if c.max_speed_mps is not None:
        a2.axhline(c.max_speed_mps, color="red", lw=1, label=f"max speed {c.max_speed_mps:g} m/s")
    if _data_quality_spans(a2, ev, "max_speed") or c.max_speed_mps is not None:
        a2.legend(fontsize=7, loc="upper right")
    if c.geofence is not None:
        for wall in (c.geofence.max[2], c.geofence.min[2]):
            if math.isfinite(wall):
                a1.axhline(wall, color="#888", ls="--", lw=1)
    a1.set_ylabel("z [m]")
    a2.set_ylabel("speed [m/s]")
    a2.set_xlabel("t [s]")
    for a in (a1, a2):
        a.grid(alpha=0.3)
    a1.legend(fontsize=7, loc="upper right", ncol=4 if many else min(5, len(traj.uav_ids)))
    return fig


def scores(ev: Any):
    s = ev.report["scores"]
    names = ["flight_control", "coordination", "safety", "overall"]
    vals = [s.get(n) for n in names]
    fig = _figure(6, 3, (0.11, 0.1, 0.98, 0.97))
    ax = fig.add_subplot()
    bars = ax.bar(names, [v if v is not None else 0 for v in vals], color=["#4c72b0", "#55a868", "#c44e52", "#333"])
    for b, v in zip(bars, vals, strict=True):
        ax.text(b.get_x() + b.get_width() / 2, (v or 0) + 0.02, "n/a" if v is None else f"{v:.2f}", ha="center",
                fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("score")
    ax.grid(axis="y", alpha=0.3)
    return fig


def round_series(debate: dict) -> tuple[list[int], list[float | None], list[float | None]]:
    """Per-round consensus and mean response quality from the report's debate object (None if absent)."""
    idx, cons, qual = [], [], []
    per_round = (debate.get("consensus") or {}).get("per_round") or []
    for i, rnd in enumerate(debate.get("rounds") or []):
        idx.append(int(rnd.get("index", i)))
        c = rnd.get("consensus")
        if isinstance(c, dict):
            c = c.get("overall")
        if c is None and i < len(per_round):
            c = per_round[i] if not isinstance(per_round[i], dict) else per_round[i].get("overall")
        q = rnd.get("quality")
        if isinstance(q, dict):
            q = q.get("mean", q.get("overall"))
        if q is None:
            qs = [r.get("quality") for r in rnd.get("responses", []) if isinstance(r.get("quality"), (int, float))]
            q = float(np.mean(qs)) if qs else None
        cons.append(c if isinstance(c, (int, float)) else None)
        qual.append(q if isinstance(q, (int, float)) else None)
    return idx, cons, qual


def debate_rounds(ev: Any):
    idx, cons, qual = round_series(ev.report["debate"])
    fig = _figure(6, 3, (0.09, 0.16, 0.98, 0.97))
    ax = fig.add_subplot()
    drawn = False
    for series, name, style in ((cons, "consensus", "o-"), (qual, "quality", "s--")):
        pts = [(i, v) for i, v in zip(idx, series, strict=True) if v is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=name)
            drawn = True
    if drawn:
        ax.set_xticks(idx)
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no per-round consensus or quality recorded", ha="center", transform=ax.transAxes)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("round")
    ax.grid(alpha=0.3)
    return fig


def rules(ev: Any):
    """Robustness over time of the mission rules that failed or came near failing (None: no such rule)."""
    fraction = ev.mission.thresholds.borderline_fraction
    shown = [r for r in getattr(ev.safety, "rules", None) or [] if r.timeline is not None and r.near_failing(fraction)]
    if not shown:
        return None
    fig = _figure(8, 1.2 + 1.6 * len(shown), (0.08, 0.5 / (1.2 + 1.6 * len(shown)) + 0.04, 0.98, 0.97), hspace=0.35)
    axes = np.atleast_1d(fig.subplots(len(shown), 1, sharex=True))
    for ax, r in zip(axes, shown, strict=True):
        t, rob = r.timeline
        finite = np.isfinite(rob)
        ax.plot(*_min_envelope(t[finite], rob[finite]), color="#1f77b4", lw=1.1, label=f"{r.rule.id} ({r.rule.over})")
        ax.axhline(0.0, color="red", lw=1)
        for i, (a, b) in enumerate(r.intervals):
            ax.axvspan(a, b if b > a else a + 0.05, color="red", alpha=0.15, label="fails" if i == 0 else None)
        ax.set_ylabel("robustness")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel("t [s]")
    return fig


#: Figure name -> builder returning the matplotlib Figure (rendered and closed by render_figures), or None when the
#: flight has nothing to draw for it.
FIGURES = {"trajectory_xy": trajectory_xy, "trajectory_3d": trajectory_3d, "separation": separation,
           "altitude_speed": altitude_speed, "rules": rules, "scores": scores, "debate_rounds": debate_rounds}


#: What each figure needs besides the trajectory and the mission: the safety result and report sections (the figure
#: child draws each one as soon as these exist: report/figure_job.py).
NEEDS = {"trajectory_xy": {"safety", "violations", "events"}, "trajectory_3d": {"safety", "violations", "events"},
         "separation": {"safety"}, "altitude_speed": {"safety", "violations"}, "rules": {"safety"},
         "scores": {"scores"}, "debate_rounds": {"debate"}}


def render_figures(ev: Any, names: tuple[str, ...] | None = None) -> dict[str, bytes]:
    """The report figures (all, or those in `names`) as {name: PNG bytes}, in the order of report.captions.CAPTIONS."""
    drawn = ((name, fn(ev)) for name, fn in FIGURES.items() if names is None or name in names)
    return {name: _png(fig) for name, fig in drawn if fig is not None}
