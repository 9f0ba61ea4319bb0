"""Every vehicle's samples end to end, for the checker's per-vehicle constraints: one pass over the flight's
samples instead of one per vehicle (each row's numbers are the ones of its vehicle alone)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.quality.assessment import Assessment

#: Samples per block of a pointwise computation.
POINTWISE_BLOCK = 65_536


@dataclass
class Samples:
    """Every vehicle's samples end to end in vehicle order (vehicle j's rows are bounds[j]:bounds[j + 1]), so a
    pointwise check runs once over the flight instead of once per vehicle: each row's numbers are the same."""

    ids: list[str]
    key: np.ndarray  # (n,) each row's vehicle index
    bounds: np.ndarray  # (N + 1,)
    t: np.ndarray
    pos: np.ndarray
    vel: np.ndarray

    @classmethod
    def of(cls, traj: SwarmTrajectory) -> Samples:
        tracks = list(traj.tracks.values())
        lengths = np.array([len(tr) for tr in tracks], dtype=int)
        return cls(traj.uav_ids, np.repeat(np.arange(len(tracks)), lengths), np.concatenate([[0], np.cumsum(lengths)]),
                   np.concatenate([tr.t for tr in tracks]), np.concatenate([tr.pos for tr in tracks]),
                   np.concatenate([tr.vel for tr in tracks]))

    def trusted(self, quality: Assessment, constraint: str) -> np.ndarray:
        """Assessment.trusted of every vehicle's samples, end to end (asked only for the vehicles it names)."""
        ok = np.ones(len(self.t), dtype=bool)
        named = {u for ne in quality.not_evaluable if ne.constraint == constraint for u in ne.uavs}
        for j, u in enumerate(self.ids):
            if u in named:
                sl = slice(self.bounds[j], self.bounds[j + 1])
                ok[sl] = quality.trusted_at(constraint, u, self.t[sl])
        return ok

    def pointwise(self, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """fn(pos, vel) of a function of each sample alone, over blocks of samples (the temporaries of a block
        stay within the CPU cache; every number is the one a single call gives)."""
        n, step = len(self.t), POINTWISE_BLOCK
        if n <= step:
            return fn(self.pos, self.vel)
        return np.concatenate([fn(self.pos[a:a + step], self.vel[a:a + step]) for a in range(0, n, step)])

    def vehicles_with(self, mask: np.ndarray) -> list[int]:
        """The vehicles with a True row in `mask`, in order."""
        return sorted(set(self.key[mask].tolist()))

    def fold_max(self, values: np.ndarray, ok: np.ndarray, start: float) -> float:
        """max(start, each vehicle's largest value on its ok rows, ...) folded in vehicle order (vehicles without
        an ok row left out), as a loop over the vehicles computes it (a maximum of finite numbers is one number
        whatever the order it is found in)."""
        if not ok.any():
            return start
        starts = self.bounds[:-1][np.diff(self.bounds) > 0]
        largest = np.maximum.reduceat(np.where(ok, values, -np.inf), starts)[np.logical_or.reduceat(ok, starts)]
        worst = start
        for v in largest.tolist():
            worst = max(worst, v)
        return worst
