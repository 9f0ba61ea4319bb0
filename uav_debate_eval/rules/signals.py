"""The rules' signals on the flight's common grid (the checker's: `traj.resample(max_gap_s=stale_timeout_s,
own_gaps=True)`), as (steps, columns) arrays with the steps each cannot be read at: a vehicle without data there, or
a span the data-quality pass lists as not evaluable for the check the signal rests on (CONTRACT.md §3b)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import cKDTree

from uav_debate_eval.core.mission import Geofence
from uav_debate_eval.core.track import Snapshots
from uav_debate_eval.metrics.vec import norm

#: The constraint whose data-quality exclusions a signal shares (positions: geofence; velocities: the speed checks;
#: distances between vehicles: min_separation).
BASIS = {"x": "geofence", "y": "geofence", "z": "geofence", "fence_margin": "geofence",
         "vx": "max_speed", "vy": "max_speed", "speed": "max_speed", "hspeed": "max_speed",
         "vz": "max_vertical_speed", "nearest": "min_separation", "separation": "min_separation",
         "closing_speed": "min_separation"}
#: Up to this many vehicles `nearest` compares all pairs of a block of steps; above, a kd-tree per step.
DENSE_NEAREST = 64
BLOCK = 400_000


@dataclass
class Grid:
    """The flight's grid: positions, velocities and, per check basis, where each vehicle can be read."""

    snaps: Snapshots
    known: dict[str, np.ndarray]  # basis -> (T, N) bool
    geofence: Geofence | None = None
    min_separation: np.ndarray | None = None  # (T,) the checker's separation timeline, when it ran on this grid
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def t(self) -> np.ndarray:
        return self.snaps.t

    @property
    def dt(self) -> float:
        return float(self.snaps.t[1] - self.snaps.t[0]) if len(self.snaps.t) > 1 else 0.1

    def readable(self, basis: str | None) -> np.ndarray:
        if basis is None:
            return self.snaps.valid
        return self.known.get(basis, self.snaps.valid)

    def vehicle(self, name: str) -> tuple[np.ndarray, np.ndarray | None]:
        """(T, N) values of a vehicle signal and where they are unknown (None: everywhere known)."""
        key = ("v", name)
        if key not in self._cache:
            self._cache[key] = self._vehicle(name)
        return self._cache[key]

    def _vehicle(self, name: str) -> tuple[np.ndarray, np.ndarray | None]:
        s = self.snaps
        if name == "t":
            return np.broadcast_to(s.t[:, None], s.valid.shape), None
        axis = {"x": 0, "y": 1, "z": 2}
        if name in axis:
            values = s.pos[..., axis[name]]
        elif name in ("vx", "vy", "vz"):
            values = s.vel[..., axis[name[1]]]
        elif name == "speed":
            values = norm(s.vel)
        elif name == "hspeed":
            values = norm(s.vel[..., :2])
        elif name == "fence_margin":
            assert self.geofence is not None  # the mission loader refuses fence_margin without a geofence
            values = -self.geofence.outside_distance(s.pos)
        else:  # nearest
            values = self._nearest()
        ok = self.readable(BASIS[name])
        if name == "nearest":
            ok = ok & np.isfinite(values)
        return values, None if ok.all() else ~ok

    def _nearest(self) -> np.ndarray:
        """Each vehicle's distance to the nearest other readable vehicle (inf: none)."""
        s, ok = self.snaps, self.readable("min_separation")
        T, N = ok.shape
        out = np.full((T, N), np.inf)
        if N < 2:
            return out
        if N <= DENSE_NEAREST:
            step = max(1, BLOCK // (N * N))
            rows = np.arange(N)
            for a in range(0, T, step):
                p, k = s.pos[a:a + step], ok[a:a + step]
                # |p|^2 + |q|^2 - 2 p.q finds each vehicle's nearest (a batched matrix product); the distance
                # itself is then taken exactly from the difference of the two positions
                sq = np.einsum("tnk,tnk->tn", p, p)
                d2 = sq[:, :, None] + sq[:, None, :] - 2.0 * np.matmul(p, p.transpose(0, 2, 1))
                d2[~(k[:, :, None] & k[:, None, :])] = np.inf
                d2[:, rows, rows] = np.inf
                j = d2.argmin(axis=2)
                exact = norm(p - np.take_along_axis(p, j[:, :, None], axis=1))
                out[a:a + step] = np.where(np.isfinite(np.take_along_axis(d2, j[:, :, None], axis=2)[..., 0]),
                                           exact, np.inf)
            return out
        for i in range(T):
            idx = np.flatnonzero(ok[i])
            if len(idx) >= 2:
                d, _ = cKDTree(s.pos[i, idx]).query(s.pos[i, idx], k=2)
                out[i, idx] = d[:, 1]
        return out

    def pair_values(self, first: np.ndarray, second: np.ndarray):
        """An Evaluator's signal function over the pairs (first[k], second[k]): each pair signal's values, computed
        once however often the formula compares it (the unknown steps are NaN already: the live grid's)."""
        values: dict[str, np.ndarray] = {}

        def fetch(name: str):
            if name not in values:
                values[name] = self.pair(name, first, second)[0]
            return values[name], None
        return fetch

    def pair(self, name: str, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(T, P) values of a pair signal for the pairs (first[k], second[k])."""
        if name.startswith(("a.", "b.")):
            values, unknown = self.vehicle(name[2:])
            cols = first if name[0] == "a" else second
            return values[:, cols], None if unknown is None else unknown[:, cols]
        if name == "t":
            return np.broadcast_to(self.snaps.t[:, None], (len(self.snaps.t), len(first))), None
        s = self.snaps
        dp = s.pos[:, second] - s.pos[:, first]
        sep = norm(dp)
        if name == "separation":
            values = sep
        else:  # closing_speed: how fast the distance shrinks
            dv = s.vel[:, second] - s.vel[:, first]
            with np.errstate(invalid="ignore", divide="ignore"):
                values = -np.einsum("tpk,tpk->tp", dp, dv) / sep
            values = np.where(sep > 0, values, 0.0)
        ok = self.readable("min_separation")
        both = ok[:, first] & ok[:, second]
        return values, None if both.all() else ~both

    def swarm(self, name: str) -> tuple[np.ndarray, np.ndarray | None]:
        """(T, 1) values of a swarm signal, over the vehicles readable at each step."""
        s = self.snaps
        ok = self.readable("min_separation")
        count = ok.sum(axis=1)
        if name == "t":
            return s.t[:, None], None
        if name == "n_vehicles":
            return s.valid.sum(axis=1).astype(float)[:, None], None
        need = 2 if name in ("min_separation",) else 1
        if name == "min_separation":
            values = self.min_separation if self.min_separation is not None else self._nearest().min(axis=1)
        elif name == "mean_speed":
            ok = self.readable("max_speed")
            count = ok.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                values = np.where(ok, norm(s.vel), 0.0).sum(axis=1) / count
        else:
            w = ok[..., None]
            with np.errstate(invalid="ignore", divide="ignore"):
                centroid = np.where(w, s.pos, 0.0).sum(axis=1) / count[:, None]
            if name == "centroid_z":
                values = centroid[:, 2]
            else:  # spread: the largest distance from the centroid
                values = np.where(ok, norm(s.pos - centroid[:, None, :]), -np.inf).max(axis=1)
        unknown = (count < need) | ~np.isfinite(values)
        return np.asarray(values, dtype=float)[:, None], unknown[:, None] if unknown.any() else None
