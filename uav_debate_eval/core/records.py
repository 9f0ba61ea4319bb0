"""Plain records shared by ingest, safety, DSL, debate and report: named exactly as the report contract."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

#: Violation `constraint` values fixed by the contract (CONTRACT.md §3).
CONSTRAINT_NAMES = ("min_separation", "max_speed", "max_vertical_speed", "geofence", "stale_data", "attitude_control")


@dataclass
class Violation:
    """One interval during which a hard constraint c_k(x) <= 0 did not hold."""

    constraint: str
    t_start: float
    t_end: float
    uavs: list[str]
    worst_value: float | None
    limit: float | None
    detail: str = ""
    #: samples in this episode (exceedances closer together than the hold time are one episode)
    samples: int | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["samples"] is None:
            d.pop("samples")
        return d


@dataclass
class Event:
    """A noteworthy moment or interval (sharp turn, altitude rate, proximity, ...) with a citable id."""

    id: str
    type: str
    t: float
    uavs: list[str]
    t_end: float | None = None
    value: float | None = None
    unit: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """As `asdict` (the fields in order, `extra` a deep copy; left out when empty), without its recursion over
        every field: a show's per-drone logs hold ten thousand events (0.3 s)."""
        d = {"id": self.id, "type": self.type, "t": self.t, "uavs": list(self.uavs), "t_end": self.t_end,
             "value": self.value, "unit": self.unit}
        if self.extra:
            d["extra"] = copy.deepcopy(self.extra)
        return d


#: Data-quality finding kinds (CONTRACT.md §3b); a finding is an artefact of the recording, not a hazard.
FINDING_KINDS = ("repeated_samples", "timing_jitter", "position_jump", "estimator_invalid", "frames_unverified",
                 "frames_misaligned", "duplicate_vehicle", "end_of_recording", "velocity_mismatch", "not_a_vehicle",
                 "gps_glitch", "ekf_lane_switch", "logging_gap", "home_reset", "stray_stamp", "velocity_spike",
                 "clock_restart", "clock_back")


@dataclass
class Finding:
    """One data-quality finding: what the recording did, where, and which constraints it touches."""

    kind: str
    uavs: list[str]
    t_start: float
    t_end: float
    detail: str
    affects: list[str] = field(default_factory=list)
    values: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        if not d["values"]:
            d.pop("values")
        return d


@dataclass
class NotEvaluable:
    """A constraint check the data makes impossible over an interval (None: the whole flight). `on_ground`: the
    vehicles stood disarmed all of it (motors stopped on the ground: no flight's check is lost there)."""

    constraint: str
    uavs: list[str]
    reason: str
    t_start: float | None = None
    t_end: float | None = None
    on_ground: bool = False

    def to_dict(self) -> dict:
        out = asdict(self)
        if not self.on_ground:
            del out["on_ground"]
        return out


@dataclass
class DataQuality:
    """The report's `data_quality` block: status good | degraded | poor, findings, checks not evaluable."""

    status: str = "good"
    findings: list[Finding] = field(default_factory=list)
    not_evaluable: list[NotEvaluable] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"status": self.status, "findings": [f.to_dict() for f in self.findings],
                "not_evaluable": [n.to_dict() for n in self.not_evaluable]}


@dataclass
class Gap:
    uav: str
    t_start: float
    t_end: float

    @property
    def duration(self) -> float:
        return self.t_end - self.t_start


@dataclass
class IngestReport:
    """What ingest dropped or noticed, counted per reason, so nothing is lost silently."""

    rows_in: int = 0
    rows_kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    out_of_order: int = 0
    gaps: list[Gap] = field(default_factory=list)
    silent: dict[str, float] = field(default_factory=dict)  # uav -> last stamp, for vehicles that stopped early
    notes: list[str] = field(default_factory=list)
    #: data-quality findings ingest can already tell (frames, duplicate tracks, what is not a vehicle, ...)
    findings: list[Finding] = field(default_factory=list)
    not_evaluable: list[NotEvaluable] = field(default_factory=list)
    #: what was taken as a vehicle and why: [{"uav", "source", "vehicle": bool, "why"}]
    vehicles: list[dict] = field(default_factory=list)
    #: what the autopilot logged (flight modes, errors, failsafes, events, mission commands), in flight time
    log_events: list[Event] = field(default_factory=list)
    #: per vehicle: GPS fixes (flight time (n,), world ENU (n, 3)) beside the estimate, for the glitch check
    gnss: dict[str, tuple] = field(default_factory=dict)
    #: per vehicle, what its autopilot log says it is: vehicle_class, firmware, estimator, sitl
    autopilot: dict[str, dict] = field(default_factory=dict)
    #: per vehicle: (flight time (n,), roll/pitch (n, 2) deg, their targets (n, 2) deg, armed in an attitude-
    #: controlling mode (n,)), where the log records the autopilot's attitude target (constraint attitude_control)
    attitude: dict[str, tuple] = field(default_factory=dict)
    #: per vehicle: the autopilot parameters that set limits (core.vehicle_limits), used when no mission gives any
    params: dict[str, dict[str, float]] = field(default_factory=dict)

    def count(self, reason: str, n: int) -> None:
        if n:
            self.dropped[reason] = self.dropped.get(reason, 0) + int(n)

    def merge(self, other: IngestReport) -> None:
        self.rows_in += other.rows_in
        self.rows_kept += other.rows_kept
        for k, v in other.dropped.items():
            self.count(k, v)
        self.out_of_order += other.out_of_order
        self.gaps.extend(other.gaps)
        self.silent.update(other.silent)
        self.notes.extend(other.notes)
        self.findings.extend(other.findings)
        self.not_evaluable.extend(other.not_evaluable)
        self.log_events.extend(other.log_events)
        self.gnss.update(other.gnss)
        self.autopilot.update(other.autopilot)
        self.attitude.update(other.attitude)
        self.params.update(other.params)

    def to_dict(self) -> dict:
        return {
            "rows_in": self.rows_in,
            "rows_kept": self.rows_kept,
            "dropped": dict(self.dropped),
            "out_of_order": self.out_of_order,
            "gaps": [
                {"uav": g.uav, "t_start": g.t_start, "t_end": g.t_end, "duration_s": float(g.duration)}
                for g in self.gaps
            ],
            "silent": dict(self.silent),
            "notes": list(self.notes),
            "vehicles": list(self.vehicles),
            **({"autopilot": {u: dict(v) for u, v in self.autopilot.items()}} if self.autopilot else {}),
        }
