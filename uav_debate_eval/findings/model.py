"""The verified finding: the one type the catalogue builds and everything else (recommendations, admissibility,
the panel's choices) reads; its own module so the arrows point one way."""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERITY = ("hazard", "warning", "data_quality", "info")


@dataclass
class VerifiedFinding:
    """One finding; `weight` (0..1+, larger = more important) orders findings of one severity."""

    kind: str
    severity: str
    sentence: str
    t_start: float
    t_end: float
    uavs: list[str]
    refs: list[str]
    recommendations: list[str]
    key: str
    weight: float = 0.0
    id: str = ""
    panel: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = {"id": self.id, "kind": self.kind, "severity": self.severity, "sentence": self.sentence,
             "t_start": round(float(self.t_start), 3), "t_end": round(float(self.t_end), 3),
             "uavs": list(self.uavs), "refs": list(self.refs), "recommendations": list(self.recommendations),
             "key": self.key}
        if self.panel:
            d["panel"] = dict(self.panel)
        return d
