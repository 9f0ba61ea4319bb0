"""The result of one live check (`SafetyMonitor.update`): what the node publishes and the flight record keeps."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SafetyState:
    """Result of one update: the veto, whether it just changed, and the evidence behind it."""

    veto: bool
    changed: bool
    active: list[dict]  # one per violated constraint: constraint, uavs, value, limit, t (+ pairs, count)
    warnings: list[dict]  # predictive: cpa / time_to_geofence, never part of the veto
    snapshot_policy: str
    t: float = 0.0
    values: dict[str, dict] = field(default_factory=dict)  # current worst value and limit per checked constraint
    stale: list[str] = field(default_factory=list)
    clock_reset: bool = False
    ended: list[str] = field(default_factory=list)  # vehicles whose flight is over (no veto for their silence)
    #: data-quality faults seen now (kind, uavs, t): the veto still acts on them, the status names them apart
    data_quality: list[dict] = field(default_factory=list)
    #: the mission rules' live status (rules.monitor.RuleMonitor.status: live, delay_s, robustness, failing)
    rules: list[dict] = field(default_factory=list)
