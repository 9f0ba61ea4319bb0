"""Ground truth of a simulated flight: what was injected, who, when, and what a checker should report.

Times come from the generated samples (not from the commands), so an evaluator can score itself
against them exactly: e.g. a near miss's interval is where the recorded separation is below the limit.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from uav_debate_eval.core.errors import InputError


@dataclass
class TruthFault:
    """One injected fault (or a route corner, kind "route_turn") and the verdict it should produce."""

    kind: str
    uavs: list[str]
    t_start: float
    t_end: float
    expect_constraint: str | None  # contract Violation.constraint name, or None: no violation expected
    expect_event: str | None  # Event.type that should be detected, or None
    detail: dict = field(default_factory=dict)  # measured figures, e.g. {"min_separation_m": 0.31}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TruthFault:
        return cls(str(d["kind"]), [str(u) for u in d["uavs"]], float(d["t_start"]), float(d["t_end"]),
                   d.get("expect_constraint"), d.get("expect_event"), dict(d.get("detail") or {}))


def truth_to_json(truth: list[TruthFault], meta: dict | None = None) -> str:
    return json.dumps({"meta": meta or {}, "faults": [f.to_dict() for f in truth]}, indent=2)


def load_truth(path: str | Path) -> list[TruthFault]:
    """Read a truth.json written by SimResult.write."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return [TruthFault.from_dict(d) for d in doc["faults"]]
    except OSError as exc:
        raise InputError(f"{path}: cannot read truth file: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a simulator truth file: {exc}") from None
