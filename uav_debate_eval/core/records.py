"""Plain records shared by safety, DSL, debate and report: named exactly as the report contract."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: Violation `constraint` values fixed by the contract (CONTRACT.md §3).
CONSTRAINT_NAMES = ("min_separation", "max_speed", "max_vertical_speed", "geofence", "stale_data")


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

    def to_dict(self) -> dict:
        return asdict(self)


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
        d = asdict(self)
        if not d["extra"]:
            d.pop("extra")
        return d
