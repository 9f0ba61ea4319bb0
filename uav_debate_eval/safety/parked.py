"""Parked pairs: two vehicles both parked (disarmed: on the ground, motors stopped; or landed, as their land
detectors said: armed and spinning up on the pad, or not disarmed yet after landing) are not held to min_separation
between them, as two drones set out 2 m apart before a flight are no near miss at a 3-m limit. Each is still held
to it against every flying vehicle: a drone landing next to a parked one, or flying into it, counts. Only where the
autopilots said so (their arming and land detector events); a vehicle of which neither is known is never parked."""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.arming import disarmed_at, landed_at
from uav_debate_eval.core.track import Snapshots
from uav_debate_eval.quality.updates import true_spans


def parked_grid(arming: dict, landing: dict, ids: list[str], t: np.ndarray) -> np.ndarray | None:
    """(T, N): vehicle ids[j] disarmed or landed at step i (`arming`, `landing`: core.arming.arming_changes and
    landing_changes of the flight); None when no step has two such vehicles."""
    if len(arming.keys() | landing.keys()) < 2:
        return None
    parked = np.zeros((len(t), len(ids)), dtype=bool)
    for j, u in enumerate(ids):
        if u in arming:
            parked[:, j] = disarmed_at(arming[u], t)
        if u in landing:
            parked[:, j] |= landed_at(landing[u], t)
    return parked if (parked.sum(axis=1) >= 2).any() else None


def not_parked_pairs(keys: np.ndarray, t: np.ndarray, snaps: Snapshots, parked: np.ndarray) -> np.ndarray:
    """Which pair records (key i * N + j at grid time t) are not between two parked vehicles."""
    n = len(snaps.uav_ids)
    k = np.clip(np.searchsorted(snaps.t, t - 1e-9), 0, len(snaps.t) - 1)
    keys = keys.astype(np.int64)
    return ~(parked[k, keys // n] & parked[k, keys % n])


def unpark_nearest(snaps: Snapshots, parked: np.ndarray, d_min: np.ndarray, closest: list,
                   pair_index: np.ndarray | None) -> None:
    """Each step whose closest pair is parked takes the closest pair with a flying vehicle in it (none: no pair)."""
    from scipy.spatial import cKDTree

    index = {u: j for j, u in enumerate(snaps.uav_ids)}
    for k, pair in enumerate(closest):
        if pair is None or not (parked[k, index[pair[0]]] and parked[k, index[pair[1]]]):
            continue
        valid = np.flatnonzero(snaps.valid[k])
        moving = valid[~parked[k, valid]]
        d_min[k], closest[k] = np.nan, None
        if pair_index is not None:
            pair_index[k] = -1
        if not len(moving) or len(valid) < 2:
            continue
        dist, nb = cKDTree(snaps.pos[k, valid]).query(snaps.pos[k, moving], k=2)
        best = int(np.argmin(dist[:, 1]))
        a, b = sorted((int(moving[best]), int(valid[nb[best, 1]])))
        d_min[k], closest[k] = float(dist[best, 1]), (snaps.uav_ids[a], snaps.uav_ids[b])
        if pair_index is not None:
            pair_index[k] = (a, b)


def parked_notes(ids: list[str], t: np.ndarray, parked: np.ndarray | None) -> list[str]:
    """What the report says of it: the spans of the grid `t` where two or more vehicles stood parked."""
    if parked is None:
        return []
    spans = true_spans(t, parked.sum(axis=1) >= 2)
    who = [u for j, u in enumerate(ids) if parked[:, j].any()]
    said = ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in spans[:4]) + (" ..." if len(spans) > 4 else "")
    return [f"min_separation: pairs of parked vehicles (disarmed or landed, as their autopilots logged) are not held "
            f"to it ({', '.join(who[:6])}{' ...' if len(who) > 6 else ''} at {said}); each is held to it against a "
            "flying vehicle"]


def live_pairs(parked: np.ndarray, i: np.ndarray, j: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, ...]:
    """The live monitor's pairs (rows i, j at distance d) but those of two parked vehicles."""
    if not parked.any():
        return i, j, d
    keep = ~(parked[i] & parked[j])
    return i[keep], j[keep], d[keep]


class LiveParking:
    """The live monitor's parked vehicles. Each vehicle's arming and land detector as its autopilot reported them
    (kept across the monitor's reset: they come with no sample, and repeat only when they change), and per slot
    whether its vehicle is parked (disarmed or landed: a pair of two is none) and disarmed (its silence loses no
    flight, as offline: safety.checker)."""

    def __init__(self) -> None:
        self.disarmed: dict[str, bool] = {}
        self.landed: dict[str, bool] = {}
        self.clear()

    def clear(self) -> None:
        """No slots (the monitor's reset)."""
        self.parked = np.zeros(0, dtype=bool)
        self.off = np.zeros(0, dtype=bool)

    def grow(self, extra: int) -> None:
        self.parked = np.concatenate([self.parked, np.zeros(extra, dtype=bool)])
        self.off = np.concatenate([self.off, np.zeros(extra, dtype=bool)])

    def is_parked(self, uav: str) -> bool:
        return self.disarmed.get(uav, False) or self.landed.get(uav, False)

    def place(self, k: int, uav: str) -> None:
        """Slot k now holds `uav`."""
        self.parked[k], self.off[k] = self.is_parked(uav), self.disarmed.get(uav, False)

    def report(self, uav: str, k: int | None, armed: bool | None = None, landed: bool | None = None) -> int:
        """The autopilot's arming or land detector of `uav` (in slot k, None: none yet); 1 when the slot's parking
        changed (the standing pair checks are stale), else 0."""
        if armed is not None:
            self.disarmed[uav] = not armed
        if landed is not None:
            self.landed[uav] = landed
        if k is None:
            return 0
        before = bool(self.parked[k])
        self.place(k, uav)
        return int(before != bool(self.parked[k]))
