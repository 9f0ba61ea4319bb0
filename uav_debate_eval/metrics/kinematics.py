"""Noise-robust kinematics on a uniform grid, shared by the metrics and the DSL.

`Track.acc`/`Track.jerk` are plain finite differences: each differentiation multiplies sensor
noise by roughly 1/dt, so a simulated flight with 2 cm position noise at 20 Hz would look
violently jerky. Here each track is first interpolated onto a uniform grid at its median sample
period, then Savitzky-Golay filters (local polynomial least-squares fits) give
- the smoothed velocity: linear fit over 0.5 s (no overshoot at a step, so a 4 m/s climb reads
  4 m/s and event times stay sharp);
- the acceleration: first derivative of a quadratic fit of the velocity over 2 s;
- the jerk: second derivative of a quadratic fit of the velocity over 2 s.
Every differentiation amplifies noise, hence the longer windows: with 2-5 cm position noise at
5-50 Hz the RMS jerk of a straight line stays below 0.6 m/s^3 (smoothness >= 0.98 with its 0.5
floor) and no spurious sharp turn appears. The fits reproduce constant and linearly changing
velocity exactly, so a constant-speed line keeps exactly zero acceleration and jerk (up to
floating point).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import convolve1d

from uav_debate_eval.core.batches import equal_blocks
from uav_debate_eval.core.interp import VEHICLE_BLOCK, interp_columns, interp_each, same_stamps
from uav_debate_eval.core.track import Track, prime_sample_periods
from uav_debate_eval.metrics.filters import savgol_coeffs
from uav_debate_eval.metrics.vec import norm

#: Savitzky-Golay windows (seconds) for velocity, acceleration and jerk.
SMOOTH_WINDOW_S = 0.5
ACC_WINDOW_S = 2.0
JERK_WINDOW_S = 2.0
#: Below this horizontal speed (m/s) the course over ground is meaningless (hover, noise).
HEADING_MIN_SPEED = 0.3
#: At most this many grid points per track (long flights are evaluated on a coarser grid).
MAX_POINTS = 40_000


@dataclass
class Kinematics:
    """One vehicle on a uniform grid: smoothed velocity and its derivatives."""

    uav_id: str
    t: np.ndarray  # (n,)
    pos: np.ndarray  # (n, 3)
    vel: np.ndarray  # (n, 3) smoothed
    acc: np.ndarray  # (n, 3)
    jerk: np.ndarray  # (n, 3)
    dt: float

    # Derived series are cached: metrics, events and segmentation read them many times (not mutated).
    @functools.cached_property
    def speed(self) -> np.ndarray:
        return norm(self.vel)

    @functools.cached_property
    def hspeed(self) -> np.ndarray:
        return norm(self.vel[:, :2])

    @property
    def vz(self) -> np.ndarray:
        return self.vel[:, 2]

    def heading(self) -> np.ndarray:
        """Unwrapped course over ground (rad); held at the last valid value while below HEADING_MIN_SPEED."""
        return self._heading

    @functools.cached_property
    def _heading(self) -> np.ndarray:
        return held_headings(self.vel, self.hspeed)


def held_headings(vel: np.ndarray, hspeed: np.ndarray) -> np.ndarray:
    """Kinematics.heading() along the samples axis of (samples, 3) velocities, or of a (vehicles, samples, 3)
    stack row by row (each row's numbers are those of its vehicle alone: every step works along that axis)."""
    raw = np.arctan2(vel[..., 1], vel[..., 0])
    ok = hspeed >= HEADING_MIN_SPEED
    n = raw.shape[-1]
    idx = np.where(ok, np.arange(n), -1)
    idx = np.maximum.accumulate(idx, axis=-1)
    first = np.argmax(ok, axis=-1)  # the first sample fast enough (0 where there is none)
    idx = np.where(idx < 0, first[..., None], idx)
    out = np.unwrap(np.take_along_axis(raw, idx, axis=-1), axis=-1)
    out[~ok.any(axis=-1)] = 0.0  # never fast enough: no course
    return out


@functools.lru_cache(maxsize=64)
def _coeffs(window: int, order: int, deriv: int, delta: float) -> np.ndarray:
    return savgol_coeffs(window, order, deriv=deriv, delta=delta)


def savgol(x: np.ndarray, window: int, order: int, deriv: int = 0, delta: float = 1.0, axis: int = 0) -> np.ndarray:
    """Savitzky-Golay filter along `axis` with cached coefficients; the ends are padded with the edge
    value (a vehicle holds its last state), which is much cheaper than scipy's polynomial edge fit."""
    return convolve1d(x, _coeffs(window, order, deriv, float(delta)), axis=axis, mode="nearest")


def _odd_window(n_window: int, n: int, minimum: int) -> int:
    w = max(minimum, n_window | 1)
    if w > n:
        w = n if n % 2 else n - 1
    return w


def smooth_kinematics(track: Track, window_s: float = SMOOTH_WINDOW_S, dt: float | None = None) -> Kinematics:
    """Resample `track` onto a uniform grid and return Savitzky-Golay smoothed velocity, acc and jerk.

    Memoised on the track (tracks are not mutated after ingest): metrics, events and every
    per-segment DSL of one evaluation smooth the same flight once, not once per caller.
    """
    cache = track.__dict__.setdefault("_smoothed", {})
    key = (window_s, dt)
    if key not in cache:
        cache[key] = _smooth(track, window_s, dt)
    return cache[key]


def grid_length(track: Track) -> int:
    """How many points smooth_kinematics(track) has: its grid's, or its samples' when it is too short for one."""
    return len(_grid_times(track, None)[0]) if len(track) >= 2 else len(track)


def adopt_kinematics(track: Track, kin: Kinematics) -> None:
    """Keep `kin` as smooth_kinematics(track) (computed by another process, from the same samples)."""
    track.__dict__.setdefault("_smoothed", {}).setdefault((SMOOTH_WINDOW_S, None), kin)


def forget_kinematics(tracks: list[Track]) -> None:
    """Let go of the smoothed kinematics kept on `tracks` (the flight's once its metrics, events and DSL exist: a
    show flight's take ~2 GB while its segments are evaluated); asked again, they are computed again, the same."""
    for tr in tracks:
        tr.__dict__.pop("_smoothed", None)


def smooth_tracks(tracks: list[Track], window_s: float = SMOOTH_WINDOW_S, dt: float | None = None) -> list[Kinematics]:
    """smooth_kinematics of every track, the tracks on the same grid filtered together (one convolution per
    derivative over a (vehicles, steps, 3) stack: the same numbers, line by line, as one track at a time)."""
    out: list[Kinematics | None] = []
    pending: list[tuple[int, Track, tuple]] = []  # (index, track, its grid) of the tracks left to filter
    for tr in tracks:
        out.append(tr.__dict__.setdefault("_smoothed", {}).get((window_s, dt)))
    todo = [i for i, hit in enumerate(out) if hit is None and len(tracks[i]) >= 2]
    prime_sample_periods(tuple(tracks[i] for i in todo))  # a window's tracks: their own periods, in one pass
    # every track's positions and velocities on its grid, in one pass for the tracks with the same stamps and grid
    grids: dict[int, tuple[np.ndarray, float]] = {}  # the tracks sharing stamps (SharedStamps) share their grid
    for i in todo:
        if id(tracks[i].t) not in grids:
            grids[id(tracks[i].t)] = _grid_times(tracks[i], dt)
    for i, kin in _from_flights(tracks, todo, grids, window_s, dt).items():  # a window's: its flight's, edges redone
        out[i] = tracks[i].__dict__["_smoothed"][(window_s, dt)] = kin
    todo = [i for i in todo if out[i] is None]
    times = [grids[id(tracks[i].t)][0] for i in todo]
    stamps = [tracks[i].t for i in todo]
    by_stamps = same_stamps(stamps)
    on_grid = dict(zip(todo, zip(interp_each(times, stamps, [tracks[i].pos for i in todo], by_stamps),
                                 interp_each(times, stamps, [tracks[i].vel for i in todo], by_stamps), strict=True),
                       strict=True))
    for i, tr in enumerate(tracks):
        cache = tr.__dict__["_smoothed"]
        if out[i] is None:
            grid = _grid(tr, window_s, dt, on_grid.get(i), grids.get(id(tr.t)))
            if isinstance(grid, Kinematics):
                out[i] = cache[(window_s, dt)] = grid
            else:
                pending.append((i, tr, grid))
    # the tracks of one grid length, step and windows filtered together
    for block in equal_blocks([(len(g[0]), *g[3:]) for _, _, g in pending], VEHICLE_BLOCK):
        members = [pending[b] for b in block]
        step, w, wa, wj = members[0][2][3:]
        vel = np.stack([g[2] for _, _, g in members])
        v_s, acc, jerk = _filtered(vel, step, w, wa, wj, axis=1)
        made = _block_kinematics([tr for _, tr, _ in members], [g[0] for _, _, g in members],
                                 [g[1] for _, _, g in members], v_s, acc, jerk, step)
        for (i, tr, _), kin in zip(members, made, strict=True):
            out[i] = tr.__dict__["_smoothed"][(window_s, dt)] = kin
    return out  # type: ignore[return-value]


def _block_kinematics(tracks: list[Track], times: Sequence[np.ndarray], pos: Sequence[np.ndarray] | np.ndarray,
                      vel: np.ndarray, acc: np.ndarray, jerk: np.ndarray, step: float) -> list[Kinematics]:
    """Kinematics of a block of vehicles from their (vehicles, steps, 3) filtered arrays, with the speeds every caller
    asks for computed for the block in two passes (what the cached properties compute, row by row)."""
    speed, hspeed = norm(vel), norm(vel[..., :2])
    out = []
    for r, tr in enumerate(tracks):
        kin = Kinematics(tr.uav_id, times[r], pos[r], vel[r], acc[r], jerk[r], step)
        kin.__dict__.update(speed=speed[r], hspeed=hspeed[r])
        out.append(kin)
    return out


def _smooth(track: Track, window_s: float, dt: float | None) -> Kinematics:
    grid = _grid(track, window_s, dt)
    if isinstance(grid, Kinematics):
        return grid
    t, pos, vel, step, w, wa, wj = grid
    v_s, acc, jerk = _filtered(vel, step, w, wa, wj, axis=0)
    return Kinematics(track.uav_id, t, pos, v_s, acc, jerk, step)


def _grid_times(track: Track, dt: float | None) -> tuple[np.ndarray, float]:
    """The uniform grid of a track of at least two samples, and its step."""
    span = float(track.t[-1] - track.t[0])
    dt = dt or track.sample_period
    dt = max(dt, span / (MAX_POINTS - 1))
    n = int(np.floor(span / dt + 1e-9)) + 1
    return track.t[0] + dt * np.arange(n), dt


def _grid(track: Track, window_s: float, dt: float | None, values: tuple[np.ndarray, np.ndarray] | None = None,
          grid: tuple[np.ndarray, float] | None = None) -> Kinematics | tuple:
    """(t, pos, vel, step, w, wa, wj) of the track on its uniform grid, or the finished Kinematics of a track too
    short to filter. `values`: the positions and velocities on that grid when already interpolated; `grid`: the grid
    and its step (_grid_times) when already made."""
    n_in = len(track)
    if n_in < 2:
        z = np.zeros((n_in, 3))
        return Kinematics(track.uav_id, track.t.copy(), track.pos.copy(), track.vel.copy(), z, z.copy(), 0.0)
    t, dt = _grid_times(track, dt) if grid is None else grid
    n = len(t)
    if values is None:
        values = (np.column_stack([np.interp(t, track.t, track.pos[:, k]) for k in range(3)]),
                  np.column_stack([np.interp(t, track.t, track.vel[:, k]) for k in range(3)]))
    pos, vel = values
    windows = _windows(window_s, dt, n)
    if windows is None:
        z = np.zeros_like(vel)
        return Kinematics(track.uav_id, t, pos, vel, z, z.copy(), dt)
    return (t, pos, vel, dt, *windows)


def _windows(window_s: float, dt: float, n: int) -> tuple[int, int, int] | None:
    """The Savitzky-Golay windows (samples) of velocity, acceleration and jerk on a grid of n steps of dt; None
    when the grid is too short to filter."""
    w = _odd_window(int(round(window_s / dt)), n, 3)
    if w < 3:
        return None
    wa = _odd_window(int(round(window_s * ACC_WINDOW_S / SMOOTH_WINDOW_S / dt)), n, 3)
    wj = _odd_window(int(round(window_s * JERK_WINDOW_S / SMOOTH_WINDOW_S / dt)), n, 3)
    return w, wa, wj


#: A window's grid is its flight's when its instants are the flight's within this fraction of a step (the same
#: stamps give grids that differ in the last bits only).
GRID_MATCH = 1e-9


def _from_flights(tracks: list[Track], todo: list[int], grids: dict[int, tuple[np.ndarray, float]], window_s: float,
                  dt: float | None) -> dict[int, Kinematics]:
    """The kinematics of the segment windows' tracks (`todo`) whose flight's are known and whose grid is the
    flight's (SwarmTrajectory.window links each cut track to its flight's): inside the window the filters see the
    same samples as on the flight, so its values are the flight's; only the first and last half filter width, where
    the window holds its edge value (mode "nearest"), are filtered again from the window's own samples there, as the
    whole window would be. Tracks sharing stamps and a flight grid are done a block at a time."""
    groups: dict[tuple[int, int], list[tuple[int, Kinematics]]] = {}
    for i in todo:
        flight_track = tracks[i].__dict__.get("_cut_from")
        kin = None if flight_track is None else flight_track.__dict__.get("_smoothed", {}).get((window_s, dt))
        if kin is not None and kin.dt > 0:
            groups.setdefault((id(tracks[i].t), id(kin.t)), []).append((i, kin))
    out: dict[int, Kinematics] = {}
    for members in groups.values():
        grid = grids[id(tracks[members[0][0]].t)]
        for a in range(0, len(members), VEHICLE_BLOCK):
            block = members[a:a + VEHICLE_BLOCK]
            made = _block_from_flight([tracks[i] for i, _ in block], [kin for _, kin in block], grid, window_s)
            out.update(zip([i for i, _ in block], made, strict=True) if made else ())
    return out


def _block_from_flight(tracks: list[Track], flight: list[Kinematics], grid: tuple[np.ndarray, float],
                       window_s: float) -> list[Kinematics]:
    """Kinematics of window tracks with one stamps array whose flight kinematics share one grid; [] when the window's
    grid or filters are not the flight's (the caller filters the window itself)."""
    t, step = grid
    n, f0 = len(t), flight[0]
    windows = _windows(window_s, step, n)
    if windows is None or windows != _windows(window_s, f0.dt, len(f0.t)):
        return []
    h = max(windows) // 2
    j = int(round((t[0] - f0.t[0]) / f0.dt))
    if n < 4 * h + 2 or j < 0 or j + n > len(f0.t) or max(abs(t[0] - f0.t[j]), abs(t[-1] - f0.t[j + n - 1])) > \
            GRID_MATCH * f0.dt:
        return []
    stamps = tracks[0].t
    # the samples each edge's grid points interpolate between (np.interp's numbers: the same neighbours)
    left = slice(0, min(len(stamps), int(np.searchsorted(stamps, t[2 * h - 1], side="right")) + 1))
    right = slice(max(int(np.searchsorted(stamps, t[n - 2 * h], side="right")) - 1, 0), len(stamps))
    edges = []
    for q, rows in ((t[:2 * h], left), (t[n - 2 * h:], right)):
        both = interp_columns(q, stamps[rows], np.stack([np.concatenate([tr.pos[rows], tr.vel[rows]], axis=1)
                                                         for tr in tracks], axis=1))  # (2h, vehicles, 6)
        pos = both[..., :3].transpose(1, 0, 2)
        edges.append((pos, *_filtered(np.ascontiguousarray(both[..., 3:].transpose(1, 0, 2)), step, *windows,
                                      axis=1)))
    inside = slice(j + h, j + n - h)
    parts = []
    for e, name in enumerate(("pos", "vel", "acc", "jerk")):
        whole = np.empty((len(tracks), n, 3))
        whole[:, :h] = edges[0][e][:, :h]
        for r, k in enumerate(flight):  # one copy of each row (a stack first would be two)
            whole[r, h:n - h] = getattr(k, name)[inside]
        whole[:, n - h:] = edges[1][e][:, h:]
        parts.append(whole)
    pos, vel, acc, jerk = parts
    return _block_kinematics(tracks, [t] * len(tracks), pos, vel, acc, jerk, step)


def _filtered(vel: np.ndarray, dt: float, w: int, wa: int, wj: int, axis: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Smoothed velocity, acceleration and jerk along the time axis."""
    v_s = savgol(vel, w, 1, axis=axis)
    acc = savgol(vel, wa, min(2, wa - 1), deriv=1, delta=dt, axis=axis)
    jerk = savgol(vel, wj, 2, deriv=2, delta=dt, axis=axis) if wj >= 3 else np.zeros_like(vel)
    return v_s, acc, jerk


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Half-open index runs [i0, i1) where mask is True."""
    if not len(mask):
        return []
    m = np.concatenate([[False], mask.astype(bool), [False]])
    edges = np.flatnonzero(np.diff(m.astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]
