"""How a citation reads in evidence: a DSL item by its own line, a metric by its value and score; shared by the rules
agents and the text the tool composes from choices."""

from __future__ import annotations

from typing import Any


def fmt(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


def dsl_evidence(item: Any) -> str:
    """The item's own DSL line (it starts with its id), so every number quoted is the item's data."""
    text = str(getattr(item, "text", "") or "").strip()
    return text if text.startswith(item.id) else f"{item.id}: {text or item.kind}"


def metric_evidence(cat: str, name: str, d: dict) -> str:
    unit = f" {d['unit']}" if d.get("unit") else ""
    value = f" = {fmt(d['value'])}{unit}" if isinstance(d.get("value"), (int, float)) else ""
    score = f" (score {fmt(d['score'])})" if isinstance(d.get("score"), (int, float)) else ""
    return f"{cat}.{name}{value}{score}"
