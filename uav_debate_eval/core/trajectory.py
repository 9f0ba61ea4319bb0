"""The swarm trajectory: clean per-vehicle time series built from messy samples.

Every front end (CSV, bags, ULog, live buffers, the simulator) ends in
:meth:`SwarmTrajectory.from_columns`, so sorting, de-duplication, NaN handling and
gap detection happen in exactly one place and are reported, never silent.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from uav_debate_eval.core.batches import equal_blocks
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.interp import SharedStamps, interp_vehicles, same_stamps
from uav_debate_eval.core.memo import memo
from uav_debate_eval.core.records import Gap, IngestReport
from uav_debate_eval.core.stamp_findings import clock_back_finding, restart_finding, stray_finding
from uav_debate_eval.core.stamps import RESTART_S, ahead_strays, clock_restarts, restarts_alone, stray_stamps
from uav_debate_eval.core.vehicle_codes import VehicleCodes, natural_key

#: A coordinate this far from the frame's origin (m) is no position (a flipped exponent bit of a logged float reads
#: as 1e308; its square overflows): the row is dropped and counted as out_of_range, as a NaN row is.
MAX_COORD_M = 1e9
#: A recorded speed component this large (m/s) is no velocity (the same bit read as a speed): far beyond any vehicle,
#: far below a square's overflow. Checks compare speeds clipped to it.
MAX_SPEED_MPS = 1e6


def positions_ok(pos: np.ndarray) -> np.ndarray:
    """Rows of `pos` (n, 3) that are positions: finite and within MAX_COORD_M (a NaN fails both comparisons)."""
    return np.asarray(((pos < MAX_COORD_M) & (pos > -MAX_COORD_M)).all(axis=1))


#: A gap is a silence longer than this many median sample periods (and at least MIN_GAP_S).
GAP_FACTOR = 5.0
MIN_GAP_S = 0.2


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


def _vehicle_groups(uav_id: np.ndarray | list[str] | VehicleCodes, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct names of the kept rows, each kept row's index into them): np.unique(..., return_inverse)."""
    if isinstance(uav_id, VehicleCodes):
        names = np.asarray(uav_id.names, dtype=str)
        if len(np.unique(names)) == len(names):
            present = np.flatnonzero(np.bincount(uav_id.codes[kept], minlength=len(names)))  # np.unique, one pass
            order = np.argsort(names[present], kind="stable")
            rank = np.zeros(len(names), dtype=np.intp)
            rank[present[order]] = np.arange(len(order))
            return names[present[order]], rank[uav_id.codes[kept]]
        uav_id = uav_id.strings()
    return np.unique(np.asarray(uav_id).astype(str)[kept], return_inverse=True)


@dataclass
class SwarmTrajectory:
    """Per-vehicle tracks sharing one clock and one ENU world frame, plus the ingest report.

    Times are flight time (CONTRACT.md §3a): seconds since the flight's first sample. `t0` is the input
    clock's value at flight time 0 (unix seconds for bags and live streams), so absolute times can be recovered.
    """

    tracks: dict[str, Track]
    ingest: IngestReport = field(default_factory=IngestReport)
    name: str = ""
    t0: float = 0.0
    #: the data-quality assessment this trajectory is the clean result of (quality.Assessment), kept by windows
    #: so a segment is checked with the flight's findings instead of being assessed again
    assessment: Any = field(default=None, repr=False, compare=False)
    #: the whole flight a window was cut from (None for a flight): a window is evaluated on the flight's time grid
    flight: SwarmTrajectory | None = field(default=None, repr=False, compare=False)

    @property
    def uav_ids(self) -> list[str]:
        return list(self.tracks)

    @property
    def t_start(self) -> float:
        return min(float(tr.t[0]) for tr in self.tracks.values()) if self.tracks else 0.0

    @property
    def t_end(self) -> float:
        return max(float(tr.t[-1]) for tr in self.tracks.values()) if self.tracks else 0.0

    @property
    def duration(self) -> float:
        return self.t_end - self.t_start

    @property
    def n_samples(self) -> int:
        return sum(len(tr) for tr in self.tracks.values())

    @property
    def sample_period(self) -> float:
        """The median of the vehicles' sample periods (kept while the tracks are the same objects: every stage asks);
        a window's is its flight's, the step of the grid it is evaluated on."""
        if self.flight is not None:
            return self.flight.sample_period
        tracks = tuple(self.tracks.values())

        def median() -> float:
            prime_sample_periods(tracks)
            periods = [tr.sample_period for tr in tracks if len(tr) > 1]
            return float(np.median(periods)) if periods else 0.0

        return memo(self, "sample_period", tracks, median)

    def window(self, t0: float, t1: float) -> SwarmTrajectory:
        """The samples with t0 <= t <= t1; vehicles with no sample there are left out.

        A window keeps its flight: its sample period is the flight's, and its common grid at that period is the
        flight's steps within it (same instants, the flight's interpolated values), so each step of a segment has
        the flight's positions and distances at that instant. A coarser grid (very long windows) is its own.
        """
        cuts: dict[int, tuple[builtins.slice, np.ndarray]] = {}  # per stamps array: vehicles sharing it share its cut
        tracks = {}
        for u, tr in self.tracks.items():
            if (cut := cuts.get(id(tr.t))) is None:
                rows = tr.rows_between(t0, t1)
                cut = cuts[id(tr.t)] = (rows, tr.t[rows])
            tracks[u] = tr.select(cut[0], t=cut[1])
            # its flight's track (metrics.kinematics takes the flight's smoothed values inside the window)
            tracks[u].__dict__["_cut_from"] = tr.__dict__.get("_cut_from", tr)
        return SwarmTrajectory({u: tr for u, tr in tracks.items() if len(tr)}, self.ingest, self.name, self.t0,
                               self.assessment, self.flight if self.flight is not None else self)

    def resample(self, dt: float | None = None, max_gap_s: float | None = None, own_gaps: bool = False) -> Snapshots:
        """Interpolate every vehicle onto one grid; samples inside gaps longer than max_gap_s are invalid (`own_gaps`
        without max_gap_s: longer than GAP_FACTOR of the vehicle's median interval and MIN_GAP_S, a silence).

        The interpolated positions and velocities (read-only) are kept per step for this trajectory: the checker and
        the metrics ask for the same grid with different gap rules; each call gets its own validity.
        """
        if not self.tracks:
            raise InputError("trajectory has no vehicles")
        dt = dt or self.sample_period or 0.1
        grid, pos, vel = self._interpolated(dt)
        ids = self.uav_ids
        valid = np.zeros((len(grid), len(ids)), dtype=bool)
        stamps = [self.tracks[u].t for u in ids]
        for group in self._stamp_groups():  # a vehicle's validity depends on its stamps only
            t = stamps[group[0]]
            inside = (grid >= t[0] - 1e-9) & (grid <= t[-1] + 1e-9)
            bound, whole = max_gap_s, self.flight.tracks.get(ids[group[0]]) if self.flight is not None else None
            if bound is None and own_gaps:  # from the whole flight's stamps: a window judges silences as its flight
                d = np.diff(t if whole is None else whole.t)
                bound = max(MIN_GAP_S, GAP_FACTOR * float(np.median(d))) if len(d) > 1 else None
            if bound is not None and len(t) > 1:
                k = np.clip(np.searchsorted(t, grid, side="right"), 1, len(t) - 1)
                inside &= (t[k] - t[k - 1]) <= bound
            valid[:, group] = inside[:, None]
        return Snapshots(grid, ids, pos, vel, valid)

    def _stamp_groups(self) -> list[list[int]]:
        """core.interp.same_stamps of the tracks' stamps (in track order), kept while the tracks are the same."""
        tracks = tuple(self.tracks.values())
        return memo(self, "stamp_groups", tracks, lambda: same_stamps([tr.t for tr in tracks]))

    def _interpolated(self, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(grid, positions, velocities) at step dt, kept while the tracks are the same objects."""
        tracks = tuple(self.tracks.values())

        def interpolate() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            if self.flight is not None and dt == self.flight.sample_period:  # the flight's steps within the window
                grid, pos, vel = self.flight._interpolated(dt)
                a = int(np.searchsorted(grid, self.t_start - 1e-9, side="left"))
                b = int(np.searchsorted(grid, self.t_end + 1e-9, side="right"))
                if list(self.tracks) == self.flight.uav_ids:
                    return grid[a:b], pos[a:b], vel[a:b]
                column = {u: k for k, u in enumerate(self.flight.tracks)}
                cols = [column[u] for u in self.tracks]
                pos, vel = pos[a:b][:, cols], vel[a:b][:, cols]
                pos.setflags(write=False)
                vel.setflags(write=False)
                return grid[a:b], pos, vel
            n = int(np.floor((self.t_end - self.t_start) / dt + 1e-9)) + 1
            grid = self.t_start + dt * np.arange(n)
            stamps, groups = [tr.t for tr in tracks], self._stamp_groups()
            pos = interp_vehicles(grid, stamps, [tr.pos for tr in tracks], groups)  # np.interp per vehicle and axis
            vel = interp_vehicles(grid, stamps, [tr.vel for tr in tracks], groups)
            for arr in (grid, pos, vel):
                arr.setflags(write=False)
            return grid, pos, vel

        return memo(self, ("grid", dt), tracks, interpolate)

    @classmethod
    def from_columns(
        cls,
        t: np.ndarray,
        uav_id: np.ndarray | list[str] | VehicleCodes,
        pos: np.ndarray,
        vel: np.ndarray | None = None,
        quat: np.ndarray | None = None,
        link_ok: np.ndarray | None = None,
        gps_ok: np.ndarray | None = None,
        battery_pct: np.ndarray | None = None,
        est_valid: np.ndarray | None = None,
        est_z_valid: np.ndarray | None = None,
        name: str = "",
        gap_s: float | None = None,
        origin: float | None = None,
    ) -> SwarmTrajectory:
        """Build from long-format samples in any order; drops and counts bad rows.

        Stamps become flight time: `origin` (the input clock at flight time 0; default the earliest
        kept stamp) is subtracted and kept as `t0`.

        Rows with a non-finite time or position are dropped (`nan`); exact repeats of
        (vehicle, stamp, values) are dropped (`duplicate`); a repeated stamp with different
        values keeps the first row (`conflicting_duplicate`). Out-of-order rows are sorted
        and counted. Non-finite velocities are re-derived from positions.
        """
        t = np.asarray(t, dtype=float)
        if not isinstance(uav_id, VehicleCodes):
            uav_id = np.asarray(uav_id).astype(str)
        pos = np.asarray(pos, dtype=float).reshape(-1, 3)
        n = len(t)
        if len(uav_id) != n or len(pos) != n:
            raise InputError(f"column lengths differ: t={n}, uav_id={len(uav_id)}, pos={len(pos)}")
        report = IngestReport(rows_in=n)
        extras = {
            "vel": None if vel is None else np.asarray(vel, dtype=float).reshape(-1, 3),
            "quat": None if quat is None else np.asarray(quat, dtype=float).reshape(-1, 4),
            "link_ok": None if link_ok is None else np.asarray(link_ok, dtype=float),
            "gps_ok": None if gps_ok is None else np.asarray(gps_ok, dtype=float),
            "battery_pct": None if battery_pct is None else np.asarray(battery_pct, dtype=float),
            "est_valid": None if est_valid is None else np.asarray(est_valid, dtype=bool),
            "est_z_valid": None if est_z_valid is None else np.asarray(est_z_valid, dtype=bool),
        }
        ok = np.isfinite(t) & positions_ok(pos)
        all_ok = bool(ok.all())
        if not all_ok:
            finite = np.isfinite(t) & np.isfinite(pos).all(axis=1)
            report.count("nan", int((~finite).sum()))
            report.count("out_of_range", int((finite & ~ok).sum()))
        stray, earlier_rows, clock_back = stray_stamps(t if all_ok else t[ok]), None, None
        if stray is not None:
            stray_mask, limit = stray
            stray_rows = np.flatnonzero(ok)[stray_mask]
            ok[stray_rows] = False
            report.count("stray_stamp", len(stray_rows))
        # Group by vehicle with one stable sort (O(n log n), not one pass per vehicle); within a
        # vehicle, equal stamps keep their input order so "keep the first" is well defined.
        kept, names, code, input_order, steps = _by_vehicle(t, uav_id, ok)
        ahead_rows = None
        if (steps < -RESTART_S).any():  # a vehicle's clock went back: a stray stamp ahead, or a new run?
            vehicle_rows = np.searchsorted(code[input_order], np.arange(len(names) + 1))
            ahead = ahead_strays(t[kept[input_order]], vehicle_rows)
            if ahead is not None:
                ahead_rows = kept[input_order][ahead]
                ok[ahead_rows] = False
                report.count("stray_stamp", len(ahead_rows))
                kept, names, code, input_order, steps = _by_vehicle(t, uav_id, ok)
                vehicle_rows = np.searchsorted(code[input_order], np.arange(len(names) + 1))
        if (steps < -RESTART_S).any():  # a new run of the recording?
            earlier = clock_restarts(t[kept[input_order]], vehicle_rows)
            alone = None if earlier is None else restarts_alone(t[kept[input_order]], kept[input_order], vehicle_rows,
                                                                earlier)
            if alone is not None:  # a vehicle's clock restarted alone: its later rows are off the flight's clock
                back, where = alone
                clock_back = (kept[input_order][back], where)
                ok[clock_back[0]] = False
                report.count("clock_back", len(clock_back[0]))
            if earlier is not None and earlier.any():
                earlier_rows = kept[input_order][earlier]
                ok[earlier_rows] = False
                report.count("earlier_run", len(earlier_rows))
            if earlier is not None:
                kept, names, code, input_order, steps = _by_vehicle(t, uav_id, ok)
        backwards = int((steps < 0).sum())
        report.out_of_order += backwards
        if origin is None:
            origin = float(t[ok].min()) if ok.any() else 0.0
        if stray is not None:
            report.findings.append(stray_finding(t, uav_id, ok, stray_rows, origin, limit))
        if ahead_rows is not None:
            report.findings.append(stray_finding(t, uav_id, ok, ahead_rows, origin, RESTART_S))
        if earlier_rows is not None:
            report.findings.append(restart_finding(t, uav_id, ok, earlier_rows, origin))
        if clock_back is not None:
            report.findings.append(clock_back_finding(uav_id, *clock_back, origin))
        t = t - origin
        # rows in time order within each vehicle already: the stable sort by vehicle is the (vehicle, time) order
        by_vehicle_time = np.lexsort((t[kept], code)) if backwards else input_order
        order = kept[by_vehicle_time]
        bounds = np.searchsorted(code[by_vehicle_time], np.arange(len(names) + 1))

        # every column gathered once in (vehicle, time) order; a vehicle's rows are then one slice of it
        t, pos = t[order], pos[order]
        extras = {key: None if a is None else a[order] for key, a in extras.items()}
        tracks: dict[str, Track] = {}
        stamps = SharedStamps()
        for k in sorted(range(len(names)), key=lambda i: natural_key(str(names[i]))):
            u = str(names[k])
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            rows: slice | np.ndarray = slice(lo, hi)
            tu = t[rows]
            same_t = np.concatenate([[False], np.diff(tu) == 0])
            if same_t.any():
                vel_rows = extras["vel"]
                values = np.column_stack([pos[rows]] + ([] if vel_rows is None else
                                                        [vel_rows[rows].reshape(hi - lo, -1)]))
                prev_same = np.concatenate([[False], (values[1:] == values[:-1]).all(axis=1)])
                report.count("duplicate", int((same_t & prev_same).sum()))
                report.count("conflicting_duplicate", int((same_t & ~prev_same).sum()))
                rows = lo + np.flatnonzero(~same_t)
                tu = t[rows]
            cut = {key: None if a is None else a[rows] for key, a in extras.items()}
            tracks[u] = _make_track(u, stamps.shared(tu), pos[rows], cut)
        report.rows_kept = sum(len(tr) for tr in tracks.values())
        traj = cls(tracks, report, name, float(origin))
        traj._detect_gaps(gap_s)
        return traj

    def _detect_gaps(self, gap_s: float | None) -> None:
        if not self.tracks:
            return
        limit = gap_s if gap_s is not None else max(MIN_GAP_S, GAP_FACTOR * (self.sample_period or 0.0))
        end = self.t_end
        for u, tr in self.tracks.items():
            d = np.diff(tr.t)
            for i in np.flatnonzero(d > limit):
                self.ingest.gaps.append(Gap(u, float(tr.t[i]), float(tr.t[i + 1])))
            if end - tr.t[-1] > limit:
                self.ingest.silent[u] = float(tr.t[-1])


def _by_vehicle(t: np.ndarray, uav_id: np.ndarray | VehicleCodes, ok: np.ndarray):
    """(kept rows, vehicle names, each kept row's vehicle code, the kept rows' order by vehicle then recording
    order, each step between a vehicle's consecutive rows in that order (the stamp difference; +inf between two
    vehicles))."""
    kept = np.flatnonzero(ok)
    names, code = _vehicle_groups(uav_id, kept)
    # the same stable order either way; on 16-bit codes numpy's stable sort is a radix sort (~3x faster)
    input_order = np.argsort(code.astype(np.uint16) if len(names) <= 1 << 16 else code, kind="stable")
    code_sorted = code[input_order]
    steps = np.diff(t[kept[input_order]])
    steps[code_sorted[1:] != code_sorted[:-1]] = np.inf
    return kept, names, code, input_order, steps


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


def _make_track(u: str, t: np.ndarray, pos: np.ndarray, extras: dict) -> Track:
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
