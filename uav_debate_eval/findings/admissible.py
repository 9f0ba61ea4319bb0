"""Which choices the verified facts admit: per segment the labels a panel may give it, per finding the reasons it
may be endorsed or disputed for. Every backend is held to the same sets (`local`: grammar enums, `openai`: schema
enums and a post-check, `rules`: its own choices), so no backend can rate a vetoed segment safe or call a real
event an artefact without a data-quality finding behind it.

Labels: a segment with a hard violation or a veto admits only `risky`; otherwise `safe` and `borderline`, `risky`
too where a warning-level finding supports it, and `inconclusive` too where a checked constraint is not evaluable
over at least MATERIAL_FRACTION of the segment's vehicle-time.

Dispute reasons (a hazard may be disputed only as a supported `sensor_artefact`, and its violation stands):
- `sensor_artefact`: the finding overlaps a data-quality finding in time and in vehicles;
- `within_tolerance`: warnings and info findings (margins, predictions, events, metrics), never hazards nor a warning
  that overlaps a hazard in time and vehicles (an altitude-rate event during a max_vertical_speed violation is that
  violation seen as an event);
- `outside_mission_scope`: kinds no constraint or threshold of the mission covers (route turns, metric scores, a
  formation breach without formation offsets, a waypoint miss without waypoints);
- `needs_more_data`: short evidence, a finding spanning less than SHORT_S seconds or fewer than SHORT_SAMPLES
  sample periods.
Endorse reasons: `confirmed_by_data` and `mission_impact` always; `safety_critical` for hazards and warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from uav_debate_eval.quality.assessment import MATERIAL_FRACTION

ENDORSE_REASONS = ("confirmed_by_data", "safety_critical", "mission_impact")
DISPUTE_REASONS = ("sensor_artefact", "within_tolerance", "outside_mission_scope", "needs_more_data")
REASONS = ENDORSE_REASONS + DISPUTE_REASONS
LABELS = ("safe", "borderline", "risky", "inconclusive")
#: needs_more_data: evidence shorter than this (s) ...
SHORT_S = 0.5
#: ... or than this many sample periods.
SHORT_SAMPLES = 3
#: The mission setting that constrains each kind of finding (None: nothing of the mission covers it).
_SCOPE: dict[str, tuple[str, ...]] = {
    "warning:cpa": ("min_separation_m",), "warning:geofence": ("geofence",),
    "proximity": ("min_separation_m", "proximity_warning_m"),
    "altitude_rate": ("max_vertical_speed_mps", "altitude_rate_mps"), "link_loss": ("stale_timeout_s",),
    "sharp_turn": ("sharp_turn_deg",), "formation_breach": ("formation_offsets",), "waypoint_miss": ("waypoints",),
    "route_turns": (), "low_score": (), "all_clear": ()}


@dataclass(frozen=True)
class Admissible:
    """The choices a segment's facts admit. `verifier_label` is the segment's label by the verifier's rules and
    `deciding` the id of the finding that decides it ("" when nothing above info does)."""

    labels: tuple[str, ...]
    reasons: dict[str, tuple[str, ...]] = field(default_factory=dict)  # finding id -> admissible reasons
    verifier_label: str = "safe"
    deciding: str = ""

    def endorse(self, fid: str) -> tuple[str, ...]:
        return tuple(r for r in self.reasons.get(fid, ()) if r in ENDORSE_REASONS)

    def dispute(self, fid: str) -> tuple[str, ...]:
        return tuple(r for r in self.reasons.get(fid, ()) if r in DISPUTE_REASONS)

    def allows(self, choice: dict) -> bool:
        """A choice {id, stance, reason} whose reason the facts admit and whose stance matches the reason."""
        reason = choice.get("reason")
        stance = "endorse" if reason in ENDORSE_REASONS else "dispute"
        return reason in self.reasons.get(str(choice.get("id")), ()) and choice.get("stance", stance) == stance

    def allows_label(self, label: str | None) -> bool:
        return label in self.labels

    @property
    def label_open(self) -> bool:
        return len(self.labels) > 1

    def to_dict(self) -> dict:
        return {"labels": list(self.labels), "reasons": {k: list(v) for k, v in self.reasons.items()},
                "verifier_label": self.verifier_label, "deciding": self.deciding}

    @classmethod
    def from_dict(cls, d: dict) -> Admissible:
        return cls(tuple(d.get("labels") or ()), {k: tuple(v) for k, v in (d.get("reasons") or {}).items()},
                   str(d.get("verifier_label") or "safe"), str(d.get("deciding") or ""))


def _spans(safety: Any, findings: list) -> list[tuple[float, float, set[str]]]:
    """(t0, t1, vehicles) of every data-quality fact: the recording's artefacts and unevaluable spans, and the
    segment's data-quality findings (data gaps); no vehicles means the whole swarm."""
    dq = getattr(safety, "data_quality", None)
    out = [(float(f.t_start), float(f.t_end), set(f.uavs)) for f in getattr(dq, "findings", []) or []]
    out += [(float(n.t_start), float(n.t_end), set(n.uavs)) for n in getattr(dq, "not_evaluable", []) or []
            if n.t_start is not None and n.t_end is not None]
    out += [(float(f.t_start), float(f.t_end), set(f.uavs)) for f in findings if f.severity == "data_quality"]
    return out


def _overlapping(f: Any, spans: list[tuple[float, float, set[str]]]) -> bool:
    """A span (of a data-quality fact, or of a hazard) overlapping the finding in time and in vehicles."""
    uavs = set(f.uavs)
    return any(t0 <= f.t_end and t1 >= f.t_start and (not u or not uavs or u & uavs) for t0, t1, u in spans)


def _constrained(kind: str, mission: Any) -> bool:
    """Whether a constraint or threshold of the mission covers this kind of finding (unknown kinds: covered)."""
    if kind.startswith(("violation:", "margin:", "data_quality:", "not_evaluable:", "data_gap")):
        return True
    if kind not in _SCOPE:
        return True
    if mission is None:
        return bool(_SCOPE[kind])
    parts = (getattr(mission, "constraints", None), getattr(mission, "thresholds", None), mission)
    return any(getattr(part, name, None) not in (None, {}, []) for name in _SCOPE[kind] for part in parts)


def _short(f: Any, sample_period: float | None) -> bool:
    span = float(f.t_end) - float(f.t_start)
    return span < SHORT_S or (sample_period is not None and span < SHORT_SAMPLES * sample_period)


def finding_reasons(f: Any, spans: list, mission: Any, sample_period: float | None,
                    hazards: list | None = None) -> tuple[str, ...]:
    """The reasons one finding may be endorsed or disputed for (see the module docstring); `hazards`: the segment's
    hazard findings."""
    endorse = ["confirmed_by_data", "mission_impact"]
    if f.severity in ("hazard", "warning"):
        endorse.insert(1, "safety_critical")
    supported = f.severity != "data_quality" and _overlapping(f, spans)
    if f.severity == "hazard":
        return (*endorse, *(("sensor_artefact",) if supported else ()))
    dispute = ["sensor_artefact"] if supported else []
    part_of_hazard = f.severity == "warning" and _overlapping(
        f, [(float(h.t_start), float(h.t_end), set(h.uavs)) for h in hazards or []])
    if f.severity in ("warning", "info") and not part_of_hazard:
        dispute.append("within_tolerance")
    if f.severity != "data_quality" and not _constrained(f.kind, mission):
        dispute.append("outside_mission_scope")
    if _short(f, sample_period):
        dispute.append("needs_more_data")
    return (*endorse, *dispute)


def _material_gap(findings: list, t_range: tuple[float, float] | None, n_vehicles: int) -> Any:
    """The first not-evaluable finding of a checked constraint that covers MATERIAL_FRACTION of the segment's
    vehicle-time, or None."""
    if t_range is None:
        return None
    t0, t1 = t_range
    total = max(t1 - t0, 1e-9) * max(n_vehicles, 1)
    lost: dict[str, float] = {}
    for f in findings:
        if not f.kind.startswith("not_evaluable:") or f.severity != "data_quality":  # info: on the ground
            continue
        overlap = max(0.0, min(f.t_end, t1) - max(f.t_start, t0))
        lost[f.kind] = lost.get(f.kind, 0.0) + overlap * (len(f.uavs) if f.uavs else max(n_vehicles, 1))
        if lost[f.kind] >= MATERIAL_FRACTION * total:
            return f
    return None


def admissible(findings: list, safety: Any = None, mission: Any = None, t_range: tuple[float, float] | None = None,
               vetoed: bool = False, sample_period: float | None = None, n_vehicles: int = 0) -> Admissible:
    """The labels and, per finding, the reasons the facts of one segment admit. `vetoed`: a violation or a veto
    overlaps the segment (a hazard finding implies it)."""
    spans = _spans(safety, findings)
    hazards = [f for f in findings if f.severity == "hazard"]
    reasons = {f.id: finding_reasons(f, spans, mission, sample_period, hazards) for f in findings}
    if vetoed or hazards:
        return Admissible(("risky",), reasons, "risky", hazards[0].id if hazards else "")
    n = n_vehicles or len({u for f in findings for u in f.uavs})
    gap = _material_gap(findings, t_range, n)
    margins = [f for f in findings if f.kind.startswith("margin:")]
    labels = ["safe", "borderline"]
    if any(f.severity == "warning" for f in findings):
        labels.append("risky")
    if gap is not None:
        labels.append("inconclusive")
        return Admissible(tuple(labels), reasons, "inconclusive", gap.id)
    if margins:
        return Admissible(tuple(labels), reasons, "borderline", margins[0].id)
    return Admissible(tuple(labels), reasons, "safe", "")
