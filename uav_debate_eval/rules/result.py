"""One mission rule's outcome (RuleResult), apart from its evaluation (rules.check): plain data with light imports, so
the process that draws the report figures unpickles a safety result holding rules without loading the evaluators."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from uav_debate_eval.stl.spec import Rule
from uav_debate_eval.stl.syntax import constants_of


@dataclass
class RuleResult:
    """One rule's outcome (the report's `rules` entry) and what the report's other parts draw from it."""

    rule: Rule
    satisfied: bool | None
    robustness: float | None
    worst: list[str]
    intervals: list[tuple[float, float]]
    #: (uavs, t_start, t_end, worst robustness, steps) of each failing run of a vehicle / pair / the swarm
    failures: list[tuple[list[str], float, float, float, int]] = field(default_factory=list)
    #: (uavs, t_start, t_end) where the data cannot tell whether the body holds
    unknown: list[tuple[list[str], float, float]] = field(default_factory=list)
    #: the body's robustness per grid step, minimum over the vehicles / pairs evaluated (figures)
    timeline: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    evaluated: int = 0
    columns: int = 0

    def near_failing(self, fraction: float) -> bool:
        """Failed, or held by less than `fraction` of the largest threshold its formula compares with (at least 1)."""
        if self.satisfied is False:
            return True
        if self.robustness is None:
            return False
        return self.robustness < fraction * max([1.0, *(abs(v) for v in constants_of(self.rule.formula))])

    def to_dict(self) -> dict:
        r = self.rule
        return {"id": r.id, "severity": r.severity, "over": r.over, "stl": r.stl, "satisfied": self.satisfied,
                "robustness": self.robustness,
                "worst": list(self.worst), "intervals": [[a, b] for a, b in self.intervals],
                "horizon_s": r.horizon_s, "evaluated": self.evaluated, "of": self.columns}
