"""What a safety check found (SafetyResult), apart from the checker that finds it: plain data with light imports, so
the process that draws the report figures unpickles it without loading the checker's spatial indexes (scipy)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from uav_debate_eval.core.records import DataQuality, Violation

if TYPE_CHECKING:
    from uav_debate_eval.safety.grid_pairs import GridPairs

SNAPSHOT_POLICY_OFFLINE = "common grid at the median sample period, linear interpolation, no data across silences"


class SeparationTimeline(NamedTuple):
    """Minimum pairwise distance per grid step (NaN with < 2 valid vehicles) and the closest pair."""

    t: np.ndarray
    d_min: np.ndarray
    pairs: list[tuple[str, str] | None]


@dataclass
class SafetyResult:
    """The hard constraints' outcome over a trajectory (safety.checker.check_trajectory)."""

    violations: list[Violation]
    warnings: list[dict]
    integrity_faults: list[dict]
    margins: dict[str, dict]
    separation: SeparationTimeline
    veto_intervals: list[tuple[float, float]]
    label: str
    snapshot_policy: str = SNAPSHOT_POLICY_OFFLINE
    notes: list[str] = field(default_factory=list)
    data_quality: DataQuality = field(default_factory=DataQuality)
    #: each grid step's closest pair and close pairs when the separation came from the kd-tree pass, so the
    #: metrics' pass over the very same grid (metrics.swarm) and the checks of the flight's segment windows reuse
    #: them; not pickled
    nearest: GridPairs | None = field(default=None, repr=False, compare=False)
    #: the mission rules' results (rules.check.RuleResult), the flight's in a segment window
    rules: list = field(default_factory=list)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "nearest": None}

    @property
    def vetoed(self) -> bool:
        return bool(self.veto_intervals)

    def to_dict(self) -> dict:
        sep = self.separation
        closest = None
        if len(sep.d_min) and np.isfinite(sep.d_min).any():
            k = int(np.nanargmin(sep.d_min))
            closest = {"t": float(sep.t[k]), "d_min": float(sep.d_min[k]), "uavs": list(sep.pairs[k] or [])}
        return {
            "label": self.label,
            "vetoed": self.vetoed,
            "violations": [v.to_dict() for v in self.violations],
            "warnings": list(self.warnings),
            "integrity_faults": list(self.integrity_faults),
            "margins": {k: dict(v) for k, v in self.margins.items()},
            "veto_intervals": [[a, b] for a, b in self.veto_intervals],
            "closest_approach": closest,
            "snapshot_policy": self.snapshot_policy,
            "notes": list(self.notes),
            "data_quality_status": self.data_quality.status,
        }
