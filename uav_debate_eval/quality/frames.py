"""Frames: place per-vehicle local frames, find one vehicle recorded twice, and say when frames are unverified.

Autopilots report local position in a frame of their own (MAVROS `local_position`, PX4 local NED without a
global reference). Separation between two such vehicles is only meaningful once their frames are placed in one
world frame: by the data (global position, reference lat/lon) or by the mission's `frames:` key. What cannot be
placed is said, never silently assumed.
"""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.frames import yaw_matrix
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.records import Finding, NotEvaluable
from uav_debate_eval.core.track import Track
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.quality.updates import distinct_updates

#: Track.frame of a source whose positions are in its own local frame, not yet placed in the world frame.
LOCAL = "local"
#: Track.frame of a local frame placed by the mission's origin (here, or by the live input as it received it).
PLACED = "mission"
#: Two tracks whose updates differ by one constant offset to within this (m) are one vehicle recorded twice.
DUPLICATE_TOL_M = 1e-3
DUPLICATE_MIN_PATH_M = 1.0
DUPLICATE_MIN_MATCH = 0.95
#: Every local track starting this close (m, horizontal) to its own origin contradicts one shared frame.
OWN_ORIGIN_M = 1.0
FIX_KEY = "frames: {<vehicle>: {origin: [x, y, z], yaw_deg: 0}} (or frames: shared) in the mission file"


def place_frames(traj: SwarmTrajectory, mission: Mission) -> list[str]:
    """Apply the mission's per-vehicle origins (rotation about z, then translation); returns notes."""
    notes = []
    for uav, frame in mission.frame_origins.items():
        if uav not in traj.tracks:
            notes.append(f"frames: {uav} is not a vehicle of this flight; its origin was not used")
            continue
        if traj.tracks[uav].frame == PLACED:  # the live input placed it as it received it (PX4's spawn offsets)
            notes.append(f"{uav}: local frame placed at the mission's origin {list(frame.origin)} as received")
            continue
        tr = traj.tracks[uav] = traj.tracks[uav].select(slice(None))  # a new track: the input stays as read
        rot = yaw_matrix(frame.yaw_deg)
        tr.pos = tr.pos @ rot.T + np.asarray(frame.origin)
        tr.vel = tr.vel @ rot.T
        tr.frame = PLACED
        notes.append(f"{uav}: local frame placed by the mission at origin {list(frame.origin)}, "
                     f"yaw {frame.yaw_deg:g} deg")
    return notes


def duplicates(traj: SwarmTrajectory) -> list[Finding]:
    """Drop every track that repeats another at a constant offset (the same estimate in another frame).

    Only a source in a local frame of its own can be another's double: tracks in the declared world frame (a
    simulator, motion capture, the contract CSV) are distinct vehicles even when they fly identical paths.
    """
    findings = _recorded_twice(traj)
    ids = traj.uav_ids
    dropped: set[str] = set()
    if not any(tr.frame == LOCAL for tr in traj.tracks.values()):
        return findings  # no pair has a track in a local frame
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            if a in dropped or b in dropped or LOCAL not in (traj.tracks[a].frame, traj.tracks[b].frame):
                continue
            offset = _constant_offset(traj.tracks[a], traj.tracks[b])
            if offset is None:
                continue
            keep, drop = _preferred(traj.tracks[a], traj.tracks[b])
            dropped.add(drop.uav_id)
            t0 = max(float(keep.t[0]), float(drop.t[0]))
            t1 = min(float(keep.t[-1]), float(drop.t[-1]))
            findings.append(Finding(
                "duplicate_vehicle", [keep.uav_id, drop.uav_id], t0, t1,
                f"{drop.uav_id} ({drop.source or 'source'}) is {keep.uav_id} recorded twice: same motion at a "
                f"constant offset of {np.linalg.norm(offset):.2f} m; kept {keep.uav_id}, never checked against "
                "its own double", ["min_separation"], {"offset_m": [float(x) for x in offset]}))
    for u in dropped:
        del traj.tracks[u]
    return findings


def _recorded_twice(traj: SwarmTrajectory) -> list[Finding]:
    """Drop every track whose samples are another's, stamp for stamp (a log given twice: two copies of a PX4 log,
    their vehicles named by their files, read as two vehicles 0 m apart, a violation); any frame. Candidates share
    their first stamp and position (one pass, not every pair of a show)."""
    first: dict[tuple, list[str]] = {}
    for u, tr in traj.tracks.items():
        first.setdefault((float(tr.t[0]), *tr.pos[0].tolist(), len(tr)), []).append(u)
    findings = []
    for group in first.values():
        for u in group[1:]:
            keep, drop = traj.tracks[group[0]], traj.tracks[u]
            if np.array_equal(keep.t, drop.t) and np.array_equal(keep.pos, drop.pos):
                del traj.tracks[u]
                findings.append(Finding(
                    "duplicate_vehicle", [keep.uav_id, u], float(keep.t[0]), float(keep.t[-1]),
                    f"{u} ({drop.source or 'source'}) is {keep.uav_id} recorded twice: the same samples, stamp for "
                    f"stamp; kept {keep.uav_id}, never checked against its own double", ["min_separation"],
                    {"offset_m": [0.0, 0.0, 0.0]}))
    return findings


def _constant_offset(a: Track, b: Track) -> np.ndarray | None:
    """The offset a - b when b's updates are a's shifted by one constant vector, else None."""
    ua, ub = distinct_updates(a).index, distinct_updates(b).index
    ta, pa, tb, pb = a.t[ua], a.pos[ua], b.t[ub], b.pos[ub]
    lo, hi = max(ta[0], tb[0]), min(ta[-1], tb[-1])
    inside = (tb >= lo) & (tb <= hi)
    if hi - lo < 2.0 or inside.sum() < 10 or len(ta) < 2:
        return None
    tb, pb = tb[inside], pb[inside]
    k = np.clip(np.searchsorted(ta, tb), 1, len(ta) - 1)
    k -= (tb - ta[k - 1]) < (ta[k] - tb)  # nearest update of a in time
    for p in (pa[k], pb):
        if np.linalg.norm(np.diff(p, axis=0), axis=1).sum() < DUPLICATE_MIN_PATH_M:
            return None  # parked vehicles sit at a constant offset without being one
    diff = pa[k] - pb
    offset = np.median(diff, axis=0)
    match = np.linalg.norm(diff - offset, axis=1) <= DUPLICATE_TOL_M
    return offset if match.mean() >= DUPLICATE_MIN_MATCH else None


def _preferred(a: Track, b: Track) -> tuple[Track, Track]:
    """Keep the namespaced source (a vehicle's own topic) over a driver's bare one, then the longer track."""
    def rank(tr: Track) -> tuple:
        return (tr.uav_id != "uav", tr.frame != LOCAL, len(tr))
    return (a, b) if rank(a) >= rank(b) else (b, a)


def verify_frames(traj: SwarmTrajectory, mission: Mission) -> tuple[list[Finding], list[NotEvaluable]]:
    """Separation between vehicles in unplaced local frames: unverified, or not evaluable when contradicted."""
    if len(traj.tracks) < 2 or mission.frames_shared or mission.constraints.min_separation_m is None:
        return [], []
    local = [u for u, tr in traj.tracks.items() if tr.frame == LOCAL]
    if not local:
        return [], []
    t0, t1 = traj.t_start, traj.t_end
    starts = np.array([traj.tracks[u].pos[0, :2] for u in local])
    own_origin = len(local) >= 2 and bool((np.linalg.norm(starts, axis=1) < OWN_ORIGIN_M).all())
    if own_origin:
        detail = (f"{', '.join(local)} each start within {OWN_ORIGIN_M:g} m of their own origin: their local frames "
                  f"are not one frame, so separation and the geofence cannot be checked; set {FIX_KEY}")
        lost = [NotEvaluable("min_separation", list(traj.uav_ids), detail, t0, t1)]
        if mission.constraints.geofence is not None:
            lost += [NotEvaluable("geofence", [u], detail, float(traj.tracks[u].t[0]), float(traj.tracks[u].t[-1]))
                     for u in local]
        return [Finding("frames_misaligned", local, t0, t1, detail, ["min_separation", "geofence"])], lost
    detail = (f"{', '.join(local)} report positions in per-vehicle local frames that the data does not place in "
              f"one frame; separation was checked assuming they coincide; set {FIX_KEY} to confirm")
    return [Finding("frames_unverified", local, t0, t1, detail, ["min_separation"])], []
