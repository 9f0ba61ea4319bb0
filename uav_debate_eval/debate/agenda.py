"""What the panel is asked about, within a mission's token budget (D3's budgeted stopping).

Every verified finding gets a priority tier: 0 a hazard; 1 a warning that shares a vehicle with a hazard of the
mission or overlaps one in time; 2 any other warning or data-quality finding; 3 info. Segments are debated in
order of their most urgent finding (then in time), each with an agenda of the findings that fit; what the budget
leaves out stays in the report, marked not debated with the reason.

Each agent is asked only about the findings of its persona (`BIAS_KINDS`) and the hazards.
Findings of one kind and vehicle set read as one line with all their ids (`group`), and a choice on one of them
applies to every one (`expand`), so twenty overspeed intervals of one vehicle cost one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Which findings each persona bias looks at (kind prefixes; a neutral persona looks at every kind).
BIAS_KINDS = {
    "zero_trust": ("violation:", "warning:", "margin:", "proximity", "altitude_rate", "link_loss", "data_gap",
                   "data_quality:", "not_evaluable:", "low_score:safety"),
    "precision": ("violation:max_speed", "violation:max_vertical_speed", "sharp_turn", "altitude_rate",
                  "waypoint_miss", "low_score:flight_control", "route_turns", "violation:geofence"),
    "cohesion": ("violation:min_separation", "warning:cpa", "proximity", "formation_breach", "link_loss",
                 "waypoint_miss", "low_score:coordination", "violation:stale_data"),
}
TIERS = ("hazard", "warning near a hazard", "other finding", "info")
#: Seconds around a hazard within which a warning counts as touching it.
NEAR_S = 1.0


def finding_kind(f: Any) -> str:
    return f"low_score:{f.refs[0]}" if f.kind == "low_score" and f.refs else f.kind


def tiers(segment_findings: list[list[Any]]) -> list[dict[str, int]]:
    """Per segment: finding id -> tier (0 hazard, 1 warning touching a hazard's vehicles or time, 2 other, 3 info)."""
    hazards = [f for fs in segment_findings for f in fs if f.severity == "hazard"]

    def touches(f: Any) -> bool:
        return any(set(f.uavs) & set(h.uavs) or (f.t_start <= h.t_end + NEAR_S and f.t_end >= h.t_start - NEAR_S)
                   for h in hazards)

    def tier(f: Any) -> int:
        if f.severity == "hazard":
            return 0
        if f.severity == "info":
            return 3
        return 1 if f.severity == "warning" and touches(f) else 2

    return [{f.id: tier(f) for f in fs} for fs in segment_findings]


def group(findings: list[Any]) -> dict[str, list[str]]:
    """Lead id -> ids of the findings of one kind, severity and vehicle set (in finding order)."""
    out: dict[tuple, list[str]] = {}
    for f in findings:
        out.setdefault((f.kind, f.severity, tuple(sorted(f.uavs))), []).append(f.id)
    return {ids[0]: ids for ids in out.values()}


def expand(choices: list[dict], groups: dict[str, list[str]], adm: Any = None) -> list[dict]:
    """A choice on any finding of a group applies to all of them (where the facts admit it), each id once."""
    member = {i: lead for lead, ids in groups.items() for i in ids}
    out: dict[str, dict] = {}
    for c in choices:
        for i in groups.get(member.get(c["id"], c["id"]), [c["id"]]):
            choice = {**c, "id": i}
            if i not in out and (i == c["id"] or adm is None or adm.allows(choice)):
                out[i] = choice
    return list(out.values())


def assign(findings: list[Any], personas: list[Any]) -> list[list[Any]]:
    """Per persona, the findings it is asked about: every hazard (the panel weighs each one), the rest by the
    persona's bias, else to the persona with the fewest; every persona gets at least the most important finding."""
    if len(personas) == 1 or not findings:
        return [list(findings) for _ in personas]
    out: list[list[Any]] = [[] for _ in personas]
    for f in findings:
        kind = finding_kind(f)
        takers = [i for i, p in enumerate(personas)
                  if kind.startswith(BIAS_KINDS.get(p.bias, ("",))) or f.severity == "hazard"]
        for i in takers or [min(range(len(out)), key=lambda j: len(out[j]))]:
            out[i].append(f)
    return [fs or [findings[0]] for fs in out]


@dataclass
class LeftOut:
    """A finding the budget left out: where, which, why."""

    segment: str
    id: str
    tier: int
    reason: str

    def to_dict(self) -> dict:
        return {"segment": self.segment, "id": self.id, "reason": self.reason}


@dataclass
class Ledger:
    """The mission's token budget: every call is reserved before it is made (prompt + the completion cap) and
    charged what it cost; `reserved` holds back what the higher-priority segments still to come need."""

    budget: int
    spent: int = 0
    reserved: int = 0
    left_out: list[LeftOut] = field(default_factory=list)

    @property
    def free(self) -> int:
        return self.budget - self.spent - self.reserved

    def fits(self, tokens: int) -> bool:
        return tokens <= self.free

    def charge(self, tokens: int) -> None:
        self.spent += tokens

    def to_dict(self) -> dict:
        return {"budget": self.budget, "spent": self.spent, "left": max(0, self.budget - self.spent),
                "left_out": {"count": len(self.left_out),
                             "ids": [f"{x.segment}/{x.id}" for x in self.left_out],
                             "reasons": sorted({x.reason for x in self.left_out})}}
