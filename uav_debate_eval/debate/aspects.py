"""The evaluation topics a mission's panel should speak to (the paper's coverage taxonomy), each as one verified fact
of the segment: a metric with its value and score, a safety margin, or the segment's turn events.

An agent is asked only about the topics of its persona's category that no one has spoken to yet in this mission
(coverage is a property of the mission's output, not of each segment); it answers `ok` or `concern` per aspect id,
and the tool writes the sentence. Three agents thus cover the twelve topics for little more than one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uav_debate_eval.debate.cite import fmt, metric_evidence

#: topic -> (persona category, metric "category.name" candidates, words that show the topic was spoken to)
TOPICS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "tracking accuracy": ("flight_control", ("flight_control.tracking_error", "coordination.task_completion"),
                          ("tracking", "waypoint", "deviation", "path error")),
    "smoothness": ("flight_control", ("flight_control.smoothness",), ("jerk", "smooth")),
    "heading and turns": ("flight_control", (), ("heading", "turn", "course")),
    "altitude": ("flight_control", ("flight_control.altitude_stability",), ("altitude", "vertical", "climb")),
    "speed": ("flight_control", ("flight_control.speed_consistency",), ("speed", "velocity")),
    "efficiency": ("flight_control", ("flight_control.energy_efficiency",), ("efficiency", "energy", "battery")),
    "formation": ("coordination", ("coordination.formation_stability",), ("formation",)),
    "spacing and cohesion": ("coordination", ("coordination.coordination_delay",),
                             ("spacing", "cohesion", "neighbour", "group")),
    "communication": ("coordination", ("coordination.communication_quality", "safety.data_integrity"),
                      ("communication", "link", "telemetry", "stale")),
    "separation": ("safety", ("safety.separation_margin", "safety.proximity_exposure"),
                   ("separation", "proximity", "collision")),
    "geofence": ("safety", (), ("geofence", "fence")),
    "margins": ("safety", ("safety.envelope_margin", "safety.constraint_compliance"), ("margin", "envelope")),
}
#: A metric scoring below this, or a margin using at least this share of its limit, is a concern.
CONCERN_SCORE = 0.5
CONCERN_RATIO = 0.9


@dataclass
class Aspect:
    id: str  # A1..
    topic: str
    category: str
    fact: str  # the verified fact, citable as evidence when it names a metric
    concern: bool  # what the facts suggest (the rules agents answer it)
    metric: bool = False

    def line(self) -> str:
        return f"{self.id} {self.topic}: {self.fact}"


def spoken(text: str) -> set[str]:
    """The topics `text` already speaks to."""
    low = text.lower()
    return {t for t, (_, _, words) in TOPICS.items() if any(w in low for w in words)}


def _metric_fact(metrics: Any, names: tuple[str, ...]) -> tuple[str, bool] | None:
    details = getattr(metrics, "details", {}) or {}
    for ref in names:
        cat, _, name = ref.partition(".")
        d = (details.get(cat) or {}).get(name)
        if isinstance(d, dict) and isinstance(d.get("value"), (int, float)):
            score = d.get("score")
            return metric_evidence(cat, name, d), isinstance(score, (int, float)) and score < CONCERN_SCORE
    return None


def _turn_fact(ctx: Any) -> tuple[str, bool]:
    from uav_debate_eval.debate.router import segment_events

    turns = [e for e in segment_events(ctx.dsl, ctx.t_start, ctx.t_end) if e.type == "sharp_turn"]
    if not turns:
        return "no sharp turn event in the segment", False
    worst = max(turns, key=lambda e: abs(float(e.value or 0.0)))
    return (f"{len(turns)} sharp turn event(s), largest {fmt(abs(float(worst.value or 0.0)))} deg "
            f"({worst.id})", False)


def _geofence_fact(ctx: Any) -> tuple[str, bool]:
    m = (getattr(ctx.safety, "margins", {}) or {}).get("geofence")
    if not m:
        return "no geofence margin was checked", False
    ratio = m.get("ratio")
    return (f"geofence margin worst {fmt(m.get('worst_value'))} m, limit {fmt(m.get('limit'))} m, "
            f"ratio {fmt(ratio)}", isinstance(ratio, (int, float)) and ratio >= CONCERN_RATIO)


def _dsl_fact(ctx: Any, kind: str) -> tuple[str, bool] | None:
    """The segment's first DSL line of `kind` (it starts with its id, so it is citable as it stands)."""
    for item in (getattr(ctx.dsl, "index", {}) or {}).values():
        if str(item.kind).upper() == kind and str(getattr(item, "text", "")).startswith(item.id):
            return str(item.text), False
    return None


def _vehicles(ctx: Any) -> int:
    tracks = getattr(getattr(ctx, "traj", None), "tracks", None)
    if tracks:
        return len(tracks)
    head = str(getattr(ctx.dsl, "text", "")).split("\n", 1)[0]
    return next((int(w[5:]) for w in head.split() if w.startswith("uavs=") and w[5:].isdigit()), 0)


def _separation_fact(ctx: Any) -> tuple[str, bool] | None:
    m = (getattr(ctx.safety, "margins", {}) or {}).get("min_separation") or {}
    if isinstance(m.get("worst_value"), (int, float)):
        ratio = m.get("ratio")
        return (f"closest pair {fmt(m['worst_value'])} m, limit {fmt(m.get('limit'))} m",
                isinstance(ratio, (int, float)) and ratio >= CONCERN_RATIO)
    return None


def _fallback(ctx: Any, topic: str) -> tuple[str, bool] | None:
    """A topic's fact when no metric states it: the DSL, the checker's margins, or the flight's own shape."""
    if topic == "heading and turns":
        return _turn_fact(ctx)
    if topic == "geofence":
        return _geofence_fact(ctx)
    if topic == "tracking accuracy":
        return _dsl_fact(ctx, "WAYPTS")
    if topic == "separation":
        return _separation_fact(ctx) or (("one vehicle: no pair to keep apart", False) if _vehicles(ctx) == 1
                                         else None)
    if topic in ("formation", "spacing and cohesion") and _vehicles(ctx) == 1:
        return f"one vehicle: no {topic} to keep", False
    return None


def aspects(ctx: Any, unspoken: set[str]) -> list[Aspect]:
    """The segment's fact for every still unspoken topic, ids A1.. in TOPICS order."""
    out: list[Aspect] = []
    for topic, (category, names, _) in TOPICS.items():
        if topic not in unspoken:
            continue
        metric = _metric_fact(ctx.metrics, names) if names else None
        fact = metric or _fallback(ctx, topic)
        if fact is not None:
            citable = metric is not None or fact[0].split(" ", 1)[0].endswith("]")
            out.append(Aspect(f"A{len(out) + 1}", topic, category, fact[0], fact[1], citable))
    return out


def for_persona(items: list[Aspect], category: str, single: bool) -> list[Aspect]:
    """A persona's aspects: those of its category (all of them for a panel of one or a generalist)."""
    return list(items) if single or category not in {c for c, _, _ in TOPICS.values()} else \
        [a for a in items if a.category == category]


def answer_text(answers: list[dict], items: list[Aspect]) -> str:
    """The tool's sentence for an agent's aspect answers: topic, stance and fact of each."""
    by_id = {a.id: a for a in items}
    parts = [f"{by_id[x['id']].topic} {'a concern' if x['stance'] == 'concern' else 'ok'} "
             f"({by_id[x['id']].fact})" for x in answers if x.get("id") in by_id]
    return ("Aspects: " + "; ".join(parts) + ".") if parts else ""


def evidence(answers: list[dict], items: list[Aspect]) -> list[str]:
    by_id = {a.id: a for a in items}
    return [by_id[x["id"]].fact for x in answers if x.get("id") in by_id and by_id[x["id"]].metric]


def rules_answers(items: list[Aspect]) -> list[dict]:
    return [{"id": a.id, "stance": "concern" if a.concern else "ok"} for a in items]


def schema(items: list[Aspect]) -> dict:
    """The `concerns` of an answer: ids of the aspects the agent finds a concern (the others read ok)."""
    return {"type": "array", "items": {"type": "string", "enum": [a.id for a in items]}, "minItems": 0,
            "maxItems": len(items)}
