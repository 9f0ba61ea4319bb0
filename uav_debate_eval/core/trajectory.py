"""The swarm trajectory: clean per-vehicle time series built from messy samples.

Every front end (CSV, bags, ULog, live buffers, the simulator) ends in
:meth:`SwarmTrajectory.from_columns`, so sorting, de-duplication, NaN handling and
gap detection happen in exactly one place and are reported, never silent.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.interp import SharedStamps, interp_vehicles, same_stamps
from uav_debate_eval.core.memo import memo
from uav_debate_eval.core.records import Gap, IngestReport
from uav_debate_eval.core.stamp_findings import clock_back_finding, restart_finding, stray_finding
from uav_debate_eval.core.stamps import (
    RESTART_S,
    ahead_strays,
    behind_strays,
    clock_restarts,
    restarts_alone,
    stray_stamps,
)
from uav_debate_eval.core.track import Snapshots, Track, make_track, positions_ok, prime_sample_periods
from uav_debate_eval.core.vehicle_codes import VehicleCodes, natural_key

#: A gap is a silence longer than this many median sample periods (and at least MIN_GAP_S).
GAP_FACTOR = 5.0
MIN_GAP_S = 0.2


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
        ahead_rows = None  # rows stamped off their vehicle's clock, which goes on where it was (ahead or behind)
        if (steps < -RESTART_S).any():  # a vehicle's clock went back: a stray stamp, or a new run?
            vehicle_rows = np.searchsorted(code[input_order], np.arange(len(names) + 1))
            for strays in (ahead_strays, behind_strays):
                found = strays(t[kept[input_order]], vehicle_rows)
                if found is None:
                    continue
                off_clock = kept[input_order][found]
                ok[off_clock] = False
                report.count("stray_stamp", len(off_clock))
                ahead_rows = off_clock if ahead_rows is None else np.concatenate([ahead_rows, off_clock])
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
            tracks[u] = make_track(u, stamps.shared(tu), pos[rows], cut)
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
