"""Trust the data before the verdict (CONTRACT.md §3b): what the recording did, told apart from what the swarm did.

`assess(traj, mission)` runs before the safety verifier. It places per-vehicle frames the mission gives, drops a
vehicle recorded twice, leaves one-frame excursions out of every check, derives kinematics from distinct
updates, marks estimator-invalid spans and GPS glitches, each as a data-quality finding; the verifier then checks
the clean trajectory and lists what it could not evaluate. Nothing here removes a sustained exceedance: a real hazard
stays a violation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from uav_debate_eval.core.arming import arming_changes, disarmed_at
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.records import DataQuality, Finding, NotEvaluable
from uav_debate_eval.core.track import Track, finite_difference
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.quality.frames import duplicates, place_frames, verify_frames
from uav_debate_eval.quality.gnss import gnss_glitches, vehicle_class
from uav_debate_eval.quality.jumps import Excursion, excursions_of, steps
from uav_debate_eval.quality.updates import Updates, distinct_updates, source_velocity, true_spans

#: Constraints that rest on a position estimate (not evaluable where the estimator says it is invalid).
POSITION_CHECKS = ("min_separation", "max_speed", "max_vertical_speed", "geofence")
#: Of those, the checks an altitude and vertical velocity decide alone.
VERTICAL_CHECKS = ("max_vertical_speed",)
#: A checked constraint not evaluable over at least this share of the vehicle-time is "a material part".
MATERIAL_FRACTION = 0.25


@dataclass
class Assessment:
    """The clean trajectory the checks run on, and what was found about the recording."""

    traj: SwarmTrajectory
    findings: list[Finding] = field(default_factory=list)
    not_evaluable: list[NotEvaluable] = field(default_factory=list)
    #: (uav, flight time, metres, seconds) of position steps that persist (never explained away)
    steps: list[tuple[str, float, float, float]] = field(default_factory=list)

    def data_quality(self, traj: SwarmTrajectory, checked: list[str]) -> DataQuality:
        """The report block: poor when a checked constraint is not evaluable over a material part of the flight."""
        poor = bool(self.material_gaps(traj, checked))
        status = "poor" if poor else "degraded" if self.findings or self.not_evaluable else "good"
        return DataQuality(status, sorted(self.findings, key=lambda f: (f.t_start, f.kind)), self.not_evaluable)

    def for_window(self, traj: SwarmTrajectory) -> Assessment:
        """This assessment seen from a window of its clean trajectory (findings that overlap it)."""
        lo, hi = traj.t_start, traj.t_end
        return Assessment(traj, [f for f in self.findings if f.t_end >= lo and f.t_start <= hi],
                          list(self.not_evaluable), list(self.steps))

    def trusted(self, constraint: str, track: Track) -> np.ndarray:
        """Samples of `track` on which `constraint` can be checked (not listed as not evaluable for it)."""
        return self.trusted_at(constraint, track.uav_id, track.t)

    def trusted_at(self, constraint: str, uav: str, t: np.ndarray) -> np.ndarray:
        """Which of vehicle `uav`'s sample times `t` `constraint` can be checked at."""
        ok = np.ones(len(t), dtype=bool)
        for ne in self.not_evaluable:
            if ne.constraint == constraint and uav in ne.uavs:
                lo = -np.inf if ne.t_start is None else ne.t_start
                hi = np.inf if ne.t_end is None else ne.t_end
                ok &= ~((t >= lo) & (t <= hi))
        return ok

    def material_gaps(self, traj: SwarmTrajectory, checked: list[str]) -> list[str]:
        """Checked constraints not evaluable over at least MATERIAL_FRACTION of the vehicle-time."""
        total = sum(max(float(tr.t[-1] - tr.t[0]), 1e-9) for tr in traj.tracks.values()) or 1e-9
        out = []
        for name in checked:
            lost = 0.0
            for ne in self.not_evaluable:
                if ne.constraint != name or ne.on_ground:
                    continue
                span = (ne.t_end if ne.t_end is not None else traj.t_end) - (
                    ne.t_start if ne.t_start is not None else traj.t_start)
                lost += span * (len(traj.tracks) if len(ne.uavs) != 1 else 1)
            if lost >= MATERIAL_FRACTION * total:
                out.append(name)
        return out


def assess(traj: SwarmTrajectory, mission: Mission) -> Assessment:
    """See the module docstring; `traj` is not modified (its tracks are replaced in the returned copy)."""
    clean = SwarmTrajectory(dict(traj.tracks), traj.ingest, traj.name, traj.t0)
    out = Assessment(clean, list(traj.ingest.findings), list(traj.ingest.not_evaluable))
    traj.ingest.notes.extend(place_frames(clean, mission))
    out.findings.extend(duplicates(clean))
    tracks = list(clean.tracks.items())
    updates = [distinct_updates(tr) for _, tr in tracks]
    a_maxes = [mission.thresholds.accel_bound(vehicle_class(traj, mission, u)) for u, _ in tracks]
    excursed = excursions_of([(*_updated(tr, upd), a_max) for (_, tr), upd, a_max in zip(tracks, updates, a_maxes,
                                                                                    strict=True)])
    for (u, tr), upd, a_max, away in zip(tracks, updates, a_maxes, excursed, strict=True):
        clean.tracks[u] = _clean_track(tr, upd, away, a_max, mission, out)
    out.findings.extend(_invalid_spans(clean, mission, out.not_evaluable))
    found, lost = verify_frames(clean, mission)
    out.findings.extend(found)
    out.not_evaluable.extend(lost)
    out.findings.extend(_recording_ends(clean, mission))
    out.findings.extend(gnss_glitches(clean, mission, out.findings))
    clean.assessment = out
    return out


def _updated(tr: Track, upd: Updates) -> tuple[np.ndarray, np.ndarray]:
    """(t, pos) of the track's distinct updates; the track's own arrays when every sample is one (no copy)."""
    if len(upd.index) == len(tr):
        return tr.t, tr.pos
    return tr.t[upd.index], tr.pos[upd.index]


def _clean_track(tr: Track, upd: Updates, excursed: list[Excursion], a_max: float, mission: Mission,
                 out: Assessment) -> Track:
    """Leave out one-frame excursions (`excursed`: those of its distinct updates `upd`), note persistent steps, and
    set source-aware velocity."""
    u = tr.uav_id
    tu, pu = tr.t[upd.index], tr.pos[upd.index]
    drop = np.zeros(len(tr), dtype=bool)
    for ex in excursed:
        nxt = upd.index[ex.last + 1]
        drop[upd.index[ex.first]:nxt] = True
        out.findings.append(Finding(
            "position_jump", [u], ex.t_start, ex.t_end,
            f"{u} left its path by {ex.distance_m:.2f} m for {max(ex.t_end - ex.t_start, 0.0) * 1000:.0f} ms and "
            f"came back (implied {ex.implied_mps:.0f} m/s, beyond {a_max:g} m/s^2): a recording artefact "
            "(motion-capture swap or estimator glitch); those samples are left out of every check",
            list(POSITION_CHECKS), {"distance_m": float(ex.distance_m), "implied_mps": float(ex.implied_mps)}))
    if drop.any():
        kept = ~drop
        tr = tr.select(kept, vel=finite_difference(tr.pos[kept], tr.t[kept]) if tr.vel_derived else None)
        upd = distinct_updates(tr)
        tu, pu = tr.t[upd.index], tr.pos[upd.index]
    for i, dist, dt in steps(tu, pu, mission.constraints.max_speed_mps):
        t = float(tu[i])
        out.steps.append((u, t, dist, dt))
        out.findings.append(Finding(
            "position_jump", [u], float(tu[i - 1]), t,
            f"{u} jumped {dist:.2f} m in {dt * 1000:.0f} ms and stayed there: not explained as a one-frame "
            "artefact (it persists; an estimator reset would look the same), so any violation it causes stays",
            ["max_speed", "max_vertical_speed"], {"distance_m": float(dist), "persists": True}))
    vel, found = source_velocity(tr, upd, a_max)
    out.findings.extend(found)
    return tr.select(slice(None), vel=vel) if vel is not tr.vel else tr


def _invalid_spans(traj: SwarmTrajectory, mission: Mission, not_evaluable: list[NotEvaluable]) -> list[Finding]:
    """Spans the estimator flags invalid (PX4 xy/z_valid, CSV gps_ok, Odometry covariance): where it still holds its
    altitude and vertical velocity valid (Track.est_z_valid: no GPS, a barometer), only the checks that need the
    horizontal position are lost there. Their parts while the vehicle stood disarmed (its autopilot said so: an EKF
    aligning on the ground before arming) are not evaluable `on_ground`: no flight's check is lost there."""
    checked = [c for c in POSITION_CHECKS if c in mission.constraints.checked]
    horizontal = [c for c in checked if c not in VERTICAL_CHECKS]
    arming = arming_changes(traj.ingest.log_events)
    found = []
    for u, tr in traj.tracks.items():
        if tr.est_valid is None or tr.est_valid.all():
            continue
        altitude = tr.est_z_valid if tr.est_z_valid is not None else tr.est_valid
        parked = disarmed_at(arming[u], tr.t) if u in arming else np.zeros(len(tr.t), bool)
        for lost, constraints, words in ((~tr.est_valid & ~altitude, checked, "position"),
                                         (~tr.est_valid & altitude, horizontal, "horizontal position")):
            for a, b in true_spans(tr.t, lost):
                found.append(Finding(
                    "estimator_invalid", [u], a, b,
                    f"{u}: the estimator flags its position invalid from {a:.1f} to {b:.1f} s; position-based checks "
                    "there are not evaluable" if words == "position" else
                    f"{u}: the estimator flags its horizontal position invalid from {a:.1f} to {b:.1f} s and its "
                    "altitude valid; checks of the horizontal position there are not evaluable, the vertical ones hold",
                    constraints))
            for on_ground in (False, True):
                reason = f"estimator reports {u}'s {words} invalid" + (" while it stood disarmed" if on_ground else "")
                for a, b in true_spans(tr.t, lost & (parked if on_ground else ~parked)):
                    not_evaluable.extend(NotEvaluable(c, [u], reason, a, b, on_ground) for c in constraints)
    return found


def _recording_ends(traj: SwarmTrajectory, mission: Mission) -> list[Finding]:
    """A vehicle whose own recording ended before the flight's end: silence after it is no stale data."""
    limit = mission.constraints.stale_timeout_s
    end = traj.t_end
    found = []
    for u, tr in traj.tracks.items():
        stop = tr.recording_end
        if stop is not None and stop - float(tr.t[-1]) <= (limit or 0.0):
            traj.ingest.silent.pop(u, None)  # it did not fall silent: its recorder stopped
        if stop is None or limit is None or end - stop <= limit:
            continue
        found.append(Finding(
            "end_of_recording", [u], stop, end,
            f"{u}'s recording ({tr.source or 'its file'}) ends at {stop:.2f} s, {end - stop:.2f} s before the flight's "
            "last sample: no data after it is not silence", ["stale_data"]))
    return found
