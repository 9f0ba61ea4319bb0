"""Mission vehicle names applied to a loaded trajectory (every reader uses it; no reader imports another)."""

from __future__ import annotations

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.trajectory import SwarmTrajectory


def apply_names(traj: SwarmTrajectory, names: list[str] | None, source: str) -> SwarmTrajectory:
    """Apply a mission's `uavs`: keep those vehicles if present, else rename in order when the counts match."""
    if not names:
        return traj
    have = traj.uav_ids
    if set(names) <= set(have):
        extra = [u for u in have if u not in names]
        if extra:
            traj.ingest.notes.append(f"vehicles not in the mission's uavs ignored: {', '.join(extra)}")
            traj.tracks = {u: traj.tracks[u] for u in names}
        return traj
    if len(names) == len(have) and not set(names) & set(have):
        traj.tracks = {new: _renamed(traj.tracks[old], new) for old, new in zip(have, names, strict=True)}
        traj.ingest.notes.append("vehicles renamed from the mission's uavs in order: "
                                 + ", ".join(f"{o}->{n}" for o, n in zip(have, names, strict=True)))
        return traj
    missing = [u for u in names if u not in have]
    raise InputError(f"{source}: mission uavs {few(missing)} not found in the input (has: {few(have)})")


def few(items: list[str], limit: int = 8) -> str:
    """The first `limit` items and how many more: a show's 500 names would make a one-line error a page long."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _renamed(track, name: str):
    track.uav_id = name
    return track
