"""A mission rule (CONTRACT.md §2a): its id, severity, quantifier and parsed formula, checked when the mission loads.

Unknown signals and vehicle references the quantifier does not bind (`a.z` in a per-vehicle rule, `z` in a per-pair
one) are load-time errors, never a surprise during a flight.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from uav_debate_eval.stl.syntax import Formula, FormulaError, future_horizon, parse_formula, signals_of

#: Each vehicle's signals (`t` is flight time).
VEHICLE_SIGNALS = ("x", "y", "z", "vx", "vy", "vz", "speed", "hspeed", "t", "fence_margin", "nearest")
#: Each pair's own signals; `a.<s>` / `b.<s>` read the two vehicles' (any vehicle signal but `t`).
PAIR_SIGNALS = ("separation", "closing_speed", "t")
SWARM_SIGNALS = ("min_separation", "spread", "centroid_z", "mean_speed", "n_vehicles", "t")
QUANTIFIERS = ("each_vehicle", "each_pair", "swarm")
SEVERITIES = ("hard", "soft")
RULE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str  # hard | soft
    over: str  # each_vehicle | each_pair | swarm
    stl: str
    formula: Formula = field(repr=False, compare=False)

    @property
    def horizon_s(self) -> float | None:
        """How far ahead the formula reads from a step (None: to the end of the flight)."""
        return future_horizon(self.formula)

    @property
    def signals(self) -> list[str]:
        return list(dict.fromkeys(s.name for s in signals_of(self.formula)))


def known_signals(over: str) -> list[str]:
    if over == "each_vehicle":
        return list(VEHICLE_SIGNALS)
    if over == "swarm":
        return list(SWARM_SIGNALS)
    return [*PAIR_SIGNALS, *(f"{v}.{s}" for v in "ab" for s in VEHICLE_SIGNALS if s != "t")]


def make_rule(rule_id: str, severity: str, over: str, stl: str, geofence: bool = True) -> Rule:
    """The checked rule; FormulaError (with the column in `stl`) for a formula that does not parse or names a signal
    the quantifier does not give. `geofence`: whether the mission has one (`fence_margin` needs it)."""
    formula = parse_formula(stl)
    known = known_signals(over)
    for sig in signals_of(formula):
        name = sig.name
        if name in known:
            if name.split(".")[-1] == "fence_margin" and not geofence:
                raise FormulaError(f"'{name}' needs constraints.geofence in the mission", sig.column)
            continue
        if "." in name and over != "each_pair":
            raise FormulaError(f"'{name}': a vehicle reference (a./b.) is bound only by over: each_pair", sig.column)
        if over == "each_pair" and name in VEHICLE_SIGNALS:
            raise FormulaError(f"'{name}': name the vehicle of the pair, a.{name} or b.{name}", sig.column)
        raise FormulaError(f"unknown signal '{name}' for over: {over}; known: {', '.join(known)}", sig.column)
    return Rule(rule_id, severity, over, stl, formula)
