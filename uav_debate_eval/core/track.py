"""One vehicle's cleaned samples (Track) and the swarm on one time grid (Snapshots), with the row checks every
reader's samples pass before they become a track.

Split from core.trajectory, which builds these from messy columns: the types the metrics, checks and DSL read sit
here, below the cleaning.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from uav_debate_eval.core.batches import equal_blocks

#: A coordinate this far from the frame's origin (m) is no position (a flipped exponent bit of a logged float reads
#: as 1e308; its square overflows): the row is dropped and counted as out_of_range, as a NaN row is.
MAX_COORD_M = 1e9
#: A recorded speed component this large (m/s) is no velocity (the same bit read as a speed): far beyond any vehicle,
#: far below a square's overflow. Checks compare speeds clipped to it.
MAX_SPEED_MPS = 1e6


def positions_ok(pos: np.ndarray) -> np.ndarray:
    """Rows of `pos` (n, 3) that are positions: finite and within MAX_COORD_M (a NaN fails both comparisons)."""
    return np.asarray(((pos < MAX_COORD_M) & (pos > -MAX_COORD_M)).all(axis=1))


def finite_difference(values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """d(values)/dt by second-order central differences on a non-uniform grid (first-order at the ends)."""
    if len(t) < 2:
        return np.zeros_like(values, dtype=float)
    return np.gradient(values, t, axis=0)


@dataclass
class Track:
    """One vehicle's cleaned samples: strictly increasing t, finite positions (ENU, metres).

    `vel_derived` is False when the source measured velocity (Odometry twist, MAVROS velocity_local, PX4
    vx/vy/vz, CSV vx/vy/vz). `est_valid` is the estimator's own per-sample validity (PX4 xy_valid & z_valid,
    Odometry covariance) where the source has one; `est_z_valid` its validity of the altitude and vertical velocity
    alone, where the source says so apart (PX4 z_valid & v_z_valid, ArduPilot's vertical flags): a sample whose
    horizontal position alone is invalid keeps its vertical checks. `source` names where the track came from (topic
    or file); `recording_end` is the flight time at which that source stopped recording (None: the flight's end), so the
    end of one vehicle's file is not silence; `receive_time` says the stamps are receive times (no header).
    """

    uav_id: str
    t: np.ndarray
    pos: np.ndarray
    vel: np.ndarray
    vel_derived: bool = True
    quat: np.ndarray | None = None
    link_ok: np.ndarray | None = None
    gps_ok: np.ndarray | None = None
    battery_pct: np.ndarray | None = None
    est_valid: np.ndarray | None = None
    source: str = ""
    recording_end: float | None = None
    receive_time: bool = False
    #: "" for the shared world frame the format declares; "local" for a source's own unplaced local frame
    frame: str = ""
    est_z_valid: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.t)

    def drop_redundant_validity(self) -> None:
        """No validity arrays that say nothing: est_valid all true, est_z_valid where it adds no valid altitude."""
        if self.est_valid is not None and self.est_valid.all():
            self.est_valid = None
        if self.est_valid is None or (self.est_z_valid is not None and not (self.est_z_valid & ~self.est_valid).any()):
            self.est_z_valid = None

    @cached_property
    def acc(self) -> np.ndarray:
        return finite_difference(self.vel, self.t)

    @cached_property
    def jerk(self) -> np.ndarray:
        return finite_difference(self.acc, self.t)

    @cached_property
    def speed(self) -> np.ndarray:
        return np.linalg.norm(self.vel, axis=1)

    @cached_property
    def horizontal_speed(self) -> np.ndarray:
        return np.linalg.norm(self.vel[:, :2], axis=1)

    @cached_property
    def heading(self) -> np.ndarray:
        """Course over ground in radians (atan2(vy, vx)), unwrapped so differences are turn angles."""
        return np.unwrap(np.arctan2(self.vel[:, 1], self.vel[:, 0]))

    @cached_property  # a track is not changed after ingest; every metric and the DSL ask for it
    def sample_period(self) -> float:
        return float(np.median(np.diff(self.t))) if len(self.t) > 1 else 0.0

    def slice(self, t0: float, t1: float) -> Track:
        return self.select(self.rows_between(t0, t1))

    def rows_between(self, t0: float, t1: float) -> builtins.slice:
        """The rows with t0 <= t <= t1."""
        i0 = np.searchsorted(self.t, t0, side="left")
        i1 = np.searchsorted(self.t, t1, side="right")
        return builtins.slice(int(i0), int(i1))

    def select(self, rows: builtins.slice | np.ndarray, vel: np.ndarray | None = None, t: np.ndarray | None = None
               ) -> Track:
        """The samples `rows` (a slice, indexes or a mask) as a new track; `vel` replaces the velocity; `t`: the
        stamps of those rows when the caller has them (the one array the vehicles with these stamps share)."""
        def cut(a):
            return None if a is None else a[rows]

        if t is None:  # all rows: the same stamps array (vehicles sharing one keep sharing it)
            t = self.t if isinstance(rows, builtins.slice) and rows == builtins.slice(None) else self.t[rows]
        return Track(
            self.uav_id, t, self.pos[rows], self.vel[rows] if vel is None else vel, self.vel_derived,
            cut(self.quat), cut(self.link_ok), cut(self.gps_ok), cut(self.battery_pct), cut(self.est_valid),
            self.source, self.recording_end, self.receive_time, self.frame, cut(self.est_z_valid),
        )

    def position_at(self, t: np.ndarray) -> np.ndarray:
        """Linearly interpolated positions at times t (clamped at the ends)."""
        return np.column_stack([np.interp(t, self.t, self.pos[:, k]) for k in range(3)])


@dataclass
class Snapshots:
    """All vehicles on one common time grid; `valid[i, j]` is False where vehicle j has no data."""

    t: np.ndarray  # (T,)
    uav_ids: list[str]
    pos: np.ndarray  # (T, N, 3)
    vel: np.ndarray  # (T, N, 3)
    valid: np.ndarray  # (T, N) bool

    def first_row_in(self, whole: Snapshots) -> int | None:
        """The row of `whole` these steps begin at when they are rows of it (the same vehicles, instants and
        positions: a segment window's grid on its flight's), else None. Validity may differ (a window's edges)."""
        if self.uav_ids != whole.uav_ids or not len(self.t):
            return None
        a = int(np.searchsorted(whole.t, self.t[0]))
        rows = slice(a, a + len(self.t))
        return a if np.array_equal(whole.t[rows], self.t) and np.array_equal(whole.pos[rows], self.pos) else None


_OPTIONAL_1D = ("link_ok", "gps_ok", "battery_pct", "est_valid", "est_z_valid")


def prime_sample_periods(tracks: tuple[Track, ...]) -> None:
    """Track.sample_period of the tracks not asked yet: once per stamps array (SharedStamps), the arrays of one
    length in one pass (each row's median is its own track's: the same partition and mean along that row)."""
    sharing: dict[int, list[Track]] = {}  # id(stamps) -> the tracks with them
    for tr in tracks:
        if len(tr) > 1 and "sample_period" not in tr.__dict__:
            sharing.setdefault(id(tr.t), []).append(tr)
    heads = [group[0] for group in sharing.values()]
    for block in equal_blocks([len(tr) for tr in heads], 256):
        rows = [heads[i] for i in block]
        medians = (np.median(np.diff(np.stack([tr.t for tr in rows]), axis=1), axis=1).tolist() if len(rows) > 1
                   else [rows[0].sample_period])
        for head, m in zip(rows, medians, strict=True):
            for tr in sharing[id(head.t)]:
                tr.__dict__["sample_period"] = float(m)


def make_track(u: str, t: np.ndarray, pos: np.ndarray, extras: dict) -> Track:
    vel = extras["vel"]
    if vel is None:
        vel, vel_derived = finite_difference(pos, t), True
    else:
        bad = ~np.isfinite(vel).all(axis=1)
        vel = vel.copy()
        if bad.any():  # only then are velocities derived from the positions
            vel[bad] = finite_difference(pos, t)[bad]
        vel_derived = bool(bad.all())
    opt = {k: extras[k] for k in _OPTIONAL_1D}
    quat = extras["quat"]
    return Track(u, t, pos, vel, vel_derived, quat, opt["link_ok"], opt["gps_ok"], opt["battery_pct"], opt["est_valid"],
                 est_z_valid=opt["est_z_valid"])
