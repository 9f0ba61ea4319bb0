"""Evidence chain: resolve every citation against the DSL index / metrics, verify quoted numbers, score Q_ev.

An evidence item is *valid* when it cites at least one resolvable reference (a DSL id from the index or
a `category.metric` name from the metrics details), cites nothing unresolvable, and every number in it
matches a value of the data it cites within tolerance (quote verification). Accepted values for a DSL
item are its numeric `values` (flattened), its t_start/t_end, its vehicle count and the numbers printed
in its DSL text; for a metric its value and score; any value in [0, 1.5] is also accepted as a percentage.
An item citing nothing is kept but not valid (it is not a citation, so it is never struck).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from uav_debate_eval.debate.llm.structured import ID_RE

#: Id-looking tokens (the DSL's SEG[3], EVENT[2], ...); unresolved ones are hallucinations.
DEFAULT_ID_PATTERN = ID_RE.pattern
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.^])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![A-Za-z0-9_]*\d)")
_UNIT = re.compile(r"\d\s*(?:m/s\^?2|m/s²|m/s|mps|rad/s|deg/s|m|s|deg|°|%|hz|rad|km|ms|pct)(?![a-z])",
                   re.IGNORECASE)
CATEGORIES = ("flight_control", "coordination", "safety", "overall")
_METRIC = re.compile(r"\b(" + "|".join(CATEGORIES) + r")\.([A-Za-z0-9_]+)\b")


def has_data_ref(text: str) -> bool:
    """hasDataRef: a number followed by a unit."""
    return bool(_UNIT.search(text))


@dataclass
class Check:
    """The verdict on one evidence item."""

    item: str
    refs: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    mismatched: list[float] = field(default_factory=list)

    @property
    def cites(self) -> bool:
        return bool(self.refs or self.unresolved)

    @property
    def valid(self) -> bool:
        return bool(self.refs) and not self.unresolved and not self.mismatched

    def reason(self) -> str:
        why = [f"unknown id {u}" for u in self.unresolved]
        why += [f"{x:g} does not match the cited data" for x in self.mismatched]
        return "; ".join(why) or "cites no DSL id or metric"


def _flat_numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)] if math.isfinite(value) else []
    if isinstance(value, dict):
        return [x for v in value.values() for x in _flat_numbers(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat_numbers(v)]
    try:  # numpy scalars and arrays
        return [float(x) for x in list(getattr(value, "flat", [value])) if math.isfinite(float(x))]
    except (TypeError, ValueError):
        return []


class EvidenceVerifier:
    """Checks citations against one segment's DSL index and metrics details."""

    def __init__(self, dsl: Any, metrics: Any, rel_tol: float = 0.02, abs_tol: float = 0.011,
                 id_pattern: str = DEFAULT_ID_PATTERN):
        self.index: dict = dict(getattr(dsl, "index", {}) or {}) if dsl is not None else {}
        self.details: dict = dict(getattr(metrics, "details", {}) or {}) if metrics is not None else {}
        self.scores: dict = dict(getattr(metrics, "scores", {}) or {}) if metrics is not None else {}
        self.rel_tol, self.abs_tol = rel_tol, abs_tol
        self.id_re = re.compile(id_pattern)
        keys = sorted(self.index, key=len, reverse=True)
        self.key_re = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, keys)) + r")(?![A-Za-z0-9_])") \
            if keys else None

    @property
    def valid_ids(self) -> list[str]:
        return list(self.index)

    def metric_refs(self) -> list[str]:
        return [f"{c}.{m}" for c, ms in self.details.items() for m in (ms or {})]

    def quotes(self, per_ref: int = 4) -> dict[str, list[str]]:
        """Exact facts each reference may be quoted with (small models choose among them instead of writing
        numbers): for a DSL item, its kind words plus one `key=value` field of its DSL line; for a metric, its
        value with unit and its score. Only facts that pass `check` are offered."""
        out: dict[str, list[str]] = {}
        for ref, it in self.index.items():
            words = str(getattr(it, "text", "") or "").split()
            words = words[1:] if words and words[0] == ref else words
            head = [w for w in words[:3] if "=" not in w]
            fields = [w for w in words if "=" in w and any(ch.isdigit() for ch in w)]
            out[ref] = [" ".join([*head, f]) for f in fields[:per_ref]] or ([" ".join(head)] if head else [])
        for ref in self.metric_refs():
            cat, _, name = ref.partition(".")
            d = self.details[cat][name] or {}
            facts = []
            if isinstance(d.get("value"), (int, float)) and math.isfinite(d["value"]):
                facts.append(f"value={d['value']:.4g} {d.get('unit') or ''}".rstrip())
            if isinstance(d.get("score"), (int, float)) and math.isfinite(d["score"]):
                facts.append(f"score={d['score']:.3g}")
            out[ref] = facts
        return {ref: [q for q in qs if self.check(f"{ref} {q}").valid] for ref, qs in out.items()}

    def _item_values(self, ref: str) -> list[float]:
        if ref in self.index:
            it = self.index[ref]
            vals = _flat_numbers(getattr(it, "values", {}) or {})
            vals += [float(x) for x in (getattr(it, "t_start", None), getattr(it, "t_end", None)) if x is not None]
            vals.append(float(len(getattr(it, "uavs", []) or [])))
            vals += [float(x) for x in _NUMBER.findall(str(getattr(it, "text", "") or ""))]
            return vals
        cat, _, name = ref.partition(".")
        if name == "score" or not name:
            return _flat_numbers(self.scores.get(cat))
        d = (self.details.get(cat) or {}).get(name) or {}
        return _flat_numbers({"value": d.get("value"), "score": d.get("score")})

    def _matches(self, x: float, values: list[float]) -> bool:
        cands = values + [100.0 * v for v in values if 0.0 <= abs(v) <= 1.5]
        return any(abs(x - v) <= self.abs_tol + self.rel_tol * abs(v) for v in cands)

    def check(self, item: str) -> Check:
        c = Check(item)
        rest = item
        if self.key_re is not None:
            for m in self.key_re.finditer(item):
                if m.group(1) not in c.refs:
                    c.refs.append(m.group(1))
            rest = self.key_re.sub(" ", rest)
        for m in _METRIC.finditer(rest):
            ref = f"{m.group(1)}.{m.group(2)}"
            known = (m.group(2) == "score" and self.scores.get(m.group(1)) is not None) or \
                m.group(2) in (self.details.get(m.group(1)) or {})
            (c.refs if known else c.unresolved).append(ref)
        rest = _METRIC.sub(" ", rest)
        c.unresolved += [u for u in self.id_re.findall(rest) if u not in c.unresolved]
        rest = self.id_re.sub(" ", rest)
        if c.refs:
            values = [v for r in c.refs for v in self._item_values(r)]
            c.mismatched = [float(x) for x in _NUMBER.findall(rest) if not self._matches(float(x), values)]
        return c

    def check_all(self, items: list[str]) -> list[Check]:
        return [self.check(e) for e in items]


def q_evidence(checks: list[Check], text: str) -> float:
    """Q_ev = min(1, sum(valid) / 4 + 0.1 * hasDataRef)."""
    return min(1.0, sum(c.valid for c in checks) / 4.0 + 0.1 * has_data_ref(text))
