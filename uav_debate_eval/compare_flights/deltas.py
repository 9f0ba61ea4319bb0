"""Deterministic metric deltas between two flights: every metric's A, B, delta and which direction is better.

Each metric's 0..1 score is monotone in its value (metrics/ documents the formulas), so the flight with the
higher score is the better one; `better` says whether a higher or a lower *value* is better. With several runs
per side the means are compared and Hedges' g gets a bootstrap confidence interval (scipy.stats.bootstrap).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: The score gap under which a metric counts as no difference (scores are rounded to 1e-6 in reports).
TIE_EPS = 1e-3
CATEGORIES = ("flight_control", "coordination", "safety")
#: Direction of each metric's raw value (the score is always higher-is-better).
VALUE_DIRECTION = {
    "smoothness": "lower", "altitude_stability": "lower", "speed_consistency": "lower",
    "energy_efficiency": "lower", "formation_stability": "lower", "communication_quality": "higher",
    "coordination_delay": "lower", "task_completion": "higher", "separation_margin": "higher",
    "proximity_exposure": "lower", "emergency_response": "lower", "constraint_compliance": "lower",
    "envelope_margin": "lower", "data_integrity": "lower",
}


def metric_table(report: dict) -> dict[str, dict]:
    """{"scores.overall": {...}, "safety.separation_margin": {"score", "value", "unit", "category"}, ...}."""
    out: dict[str, dict] = {}
    for cat, score in report.get("scores", {}).items():
        out[f"scores.{cat}"] = {"score": score, "value": score, "unit": "score", "category": cat}
    for cat, metrics in (report.get("metrics", {}).get("details") or {}).items():
        for name, m in metrics.items():
            out[f"{cat}.{name}"] = {"score": m.get("score"), "value": m.get("value"), "unit": m.get("unit", ""),
                                    "category": cat}
    out["counts.violations"] = {"score": None, "value": len(report.get("violations", [])), "unit": "count",
                                "category": "safety"}
    return out


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(vals)) if vals else None


def metric_deltas(reports_a: list[dict], reports_b: list[dict], keys: tuple[str, str] = ("A", "B"),
                  seed: int = 0) -> dict[str, dict]:
    """Every metric present in either flight: a, b (values, means over runs), delta = b - a, better direction,
    the scores, and which flight is better (`winner`: a key or "tie"; None when a side lacks it)."""
    tables_a = [metric_table(r) for r in reports_a]
    tables_b = [metric_table(r) for r in reports_b]
    names = list(dict.fromkeys([n for t in tables_a + tables_b for n in t]))
    out: dict[str, dict] = {}
    for name in names:
        rows_a = [t[name] for t in tables_a if name in t]
        rows_b = [t[name] for t in tables_b if name in t]
        ref = (rows_a or rows_b)[0]
        a, b = _mean([r["value"] for r in rows_a]), _mean([r["value"] for r in rows_b])
        sa, sb = _mean([r["score"] for r in rows_a]), _mean([r["score"] for r in rows_b])
        metric = name.split(".", 1)[1]
        better = ("higher" if name.startswith("scores.") else "lower" if name == "counts.violations"
                  else VALUE_DIRECTION.get(metric, "higher_score"))
        row: dict[str, Any] = {"category": ref["category"], "unit": ref["unit"], "a": _r(a), "b": _r(b),
                               "delta": _r(None if a is None or b is None else b - a), "better": better,
                               "score_a": _r(sa), "score_b": _r(sb), "winner": _winner(name, a, b, sa, sb, keys)}
        if len(rows_a) > 1 and len(rows_b) > 1:
            row["effect"] = effect_size([r["score"] if r["score"] is not None else r["value"] for r in rows_a],
                                        [r["score"] if r["score"] is not None else r["value"] for r in rows_b],
                                        seed=seed)
        out[name] = row
    return out


def _winner(name: str, a, b, sa, sb, keys: tuple[str, str]) -> str | None:
    if name == "counts.violations":
        if a is None or b is None:
            return None
        return "tie" if a == b else keys[0] if a < b else keys[1]
    if sa is None or sb is None:
        return None
    return "tie" if abs(sb - sa) < TIE_EPS else keys[0] if sa > sb else keys[1]


def _r(v: float | None) -> float | None:
    return None if v is None else round(float(v), 6)


def effect_size(xa: list[float | None], xb: list[float | None], seed: int = 0, confidence: float = 0.95) -> dict:
    """Hedges' g of B against A (positive: B scores higher) with a percentile bootstrap interval."""
    from scipy import stats

    a = np.array([x for x in xa if x is not None], dtype=float)
    b = np.array([x for x in xb if x is not None], dtype=float)
    if len(a) < 2 or len(b) < 2:
        return {"hedges_g": None, "ci": None, "n_a": len(a), "n_b": len(b)}

    def g(x, y, axis=-1):
        nx, ny = x.shape[axis], y.shape[axis]
        pooled = np.sqrt(((nx - 1) * np.var(x, axis=axis, ddof=1) + (ny - 1) * np.var(y, axis=axis, ddof=1))
                         / (nx + ny - 2))
        diff = np.mean(y, axis=axis) - np.mean(x, axis=axis)
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(pooled > 0, diff / np.where(pooled > 0, pooled, 1.0), 0.0)
        return d * (1 - 3 / (4 * (nx + ny) - 9))

    point = float(g(a, b))
    if np.ptp(np.concatenate([a, b])) == 0:
        return {"hedges_g": 0.0, "ci": [0.0, 0.0], "n_a": len(a), "n_b": len(b), "confidence": confidence}
    res = stats.bootstrap((a, b), g, n_resamples=999, confidence_level=confidence, method="percentile",
                          random_state=np.random.default_rng(seed), vectorized=True)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    ci = None if not (math.isfinite(lo) and math.isfinite(hi)) else [round(lo, 4), round(hi, 4)]
    return {"hedges_g": round(point, 4), "ci": ci, "n_a": len(a), "n_b": len(b), "confidence": confidence}


def category_scores(reports: list[dict]) -> dict[str, float | None]:
    """Mean category scores over a flight's runs."""
    return {c: _mean([r.get("scores", {}).get(c) for r in reports]) for c in (*CATEGORIES, "overall")}
