"""comparison.json: flights, metric deltas, the debate of every pair, the ranking, audit, verdict and tokens.

Two flights: one pair. More: every pair is debated and ranked by Copeland score (wins minus losses; the judge's
summed scores break equal Copeland scores for the order, but the winner is `tie` when the top is shared).
`metric_deltas`, `judge`, `jury` and `bias_audit` at the top level are those of the first two flights (A vs B,
what --fail-if-worse gates on); `pairs` holds every pair.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from uav_debate_eval import __version__
from uav_debate_eval.compare_flights.deltas import category_scores, metric_deltas

SCHEMA_VERSION = 1
SCHEMA_FILE = "comparison.schema.json"


class ComparisonSchemaError(ValueError):
    """A comparison that does not match the schema: a bug in the producer."""


@cache
def load_schema(path: str | None = None) -> dict:
    if path is not None:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    return json.loads(resources.files("uav_debate_eval.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def validate_comparison(doc: dict, schema_path: str | None = None) -> None:
    errors = sorted(jsonschema.Draft202012Validator(load_schema(schema_path)).iter_errors(doc),
                    key=lambda e: list(e.absolute_path))
    if errors:
        raise ComparisonSchemaError("; ".join(f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
                                              for e in errors[:10]))


def deanonymise(text: str, anonymisation: dict[str, str]) -> str:
    """Flight 1 / Flight 2 -> the flight keys, for the reader (prompts never saw the keys)."""
    return re.sub(r"Flight ([12])", lambda m: f"flight {anonymisation[f'Flight {m.group(1)}']}", text)


def ranking(keys: list[str], pairs: list[dict]) -> list[dict]:
    rows: dict[str, dict[str, Any]] = {k: {"key": k, "wins": 0, "losses": 0, "ties": 0, "judge_total": 0.0}
                                       for k in keys}
    for p in pairs:
        a, b = p["flights"]
        if p["winner"] == "tie":
            rows[a]["ties"] += 1
            rows[b]["ties"] += 1
        else:
            loser = b if p["winner"] == a else a
            rows[p["winner"]]["wins"] += 1
            rows[loser]["losses"] += 1
        anon = {v: k for k, v in p["anonymisation"].items()}
        for k in (a, b):
            rows[k]["judge_total"] += p["judge"]["totals"][anon[k]]
    out = sorted(rows.values(), key=lambda r: (-(r["wins"] - r["losses"]), -r["judge_total"], keys.index(r["key"])))
    for i, r in enumerate(out):
        r["copeland"] = r["wins"] - r["losses"]
        r["judge_total"] = round(r["judge_total"], 2)
        r["rank"] = i + 1
    return out


def _top(rank: list[dict]) -> str:
    if len(rank) > 1 and rank[0]["copeland"] == rank[1]["copeland"]:
        return "tie"
    return rank[0]["key"]


def _audit_ranking(keys: list[str], pairs: list[dict]) -> list[dict]:
    swapped = [{**p, "winner": p["bias_audit"]["swapped_winner"]} for p in pairs]
    return ranking(keys, swapped)


def build_comparison(flights: list[Any], pairs: list[dict], protocol: str, alignment: dict, backend: str,
                     model: str | None, notes: list[str], seed: int) -> dict:
    keys = [f.key for f in flights]
    first = pairs[0]
    rank = ranking(keys, pairs)
    anon = first["anonymisation"]
    claims = [{"text": deanonymise(c["text"], anon), "cites": c["cites"]} for c in first["judge"]["claims"]]
    winner = first["winner"] if len(flights) == 2 else _top(rank)
    tokens = {"protocol": protocol, **_sum_tokens([p["tokens"] for p in pairs])}
    doc = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "uav-debate-eval", "version": __version__},
        "flights": [{"key": f.key, "inputs": f.inputs, "label": f.label, "scores": category_scores(f.reports),
                     "violations": f.n_violations, "runs": len(f.runs),
                     "data_quality": [(r.get("data_quality") or {}).get("status", "n/a") for r in f.reports],
                     "reports": [_rel(f, i) for i in range(len(f.runs))]} for f in flights],
        "winner": winner,
        "metric_deltas": metric_deltas(flights[0].reports, flights[1].reports, keys=(keys[0], keys[1]), seed=seed),
        "protocol": protocol,
        "backend": {"name": backend, "model": model},
        "alignment": alignment,
        "anonymisation": anon,
        "judge": {**first["judge"], "claims": claims},
        "jury": first["jury"],
        "bias_audit": {"swapped_winner": first["bias_audit"]["swapped_winner"] if len(flights) == 2
                       else _top(_audit_ranking(keys, pairs)),
                       "consistent": all(p["bias_audit"]["consistent"] for p in pairs),
                       "pairs": [{"flights": p["flights"], "winner": p["panel_winner"],
                                  "swapped_winner": p["bias_audit"]["swapped_winner"],
                                  "consistent": p["bias_audit"]["consistent"]} for p in pairs]},
        "verdict": {"summary": _summary(flights, pairs, winner, claims),
                    "recommendations": [deanonymise(r, anon) for r in first["judge"]["recommendations"]],
                    "reason": first["reason"], "overridden": any(p["overridden"] for p in pairs)},
        "debate": {"protocol": protocol, "stop_reason": first["stop_reason"], "rounds": first["rounds"],
                   "score_history": first["score_history"], "arguments": first["arguments"],
                   "failures": [f for p in pairs for f in p["failures"]]},
        "pairs": [{k: v for k, v in p.items() if k != "transcript"} for p in pairs],
        "ranking": rank,
        "tokens": tokens,
        "notes": notes,
    }
    return doc


def _rel(flight: Any, i: int) -> str:
    return f"{flight.key}/report.json" if len(flight.runs) == 1 else f"{flight.key}/{flight.run_names[i]}/report.json"


def _summary(flights: list[Any], pairs: list[dict], winner: str, claims: list[dict]) -> str:
    first = pairs[0]
    a, b = first["flights"]
    if len(flights) == 2:
        text = (f"{winner} is the better flight." if winner != "tie" else f"{a} and {b} are level (tie).")
    else:
        text = f"Ranking over {len(flights)} flights: winner {winner}."
    text += f" {first['reason'][0].upper()}{first['reason'][1:]}." if first["reason"] else ""
    text += " " + " ".join(f"{c['text']} ({', '.join(c['cites'])})." for c in claims)
    return text.strip()


def _sum_tokens(ledgers: list[dict]) -> dict:
    out: dict[str, Any] = {"prompt": 0, "completion": 0, "total": 0, "calls": 0, "cache_hits": 0, "failures": 0,
           "estimated": all(t["estimated"] for t in ledgers), "per_role": {}}
    for t in ledgers:
        for k in ("prompt", "completion", "total", "calls", "cache_hits", "failures"):
            out[k] += t[k]
        for role, row in t["per_role"].items():
            acc = out["per_role"].setdefault(role, {"prompt": 0, "completion": 0, "per_round": {}})
            acc["prompt"] += row["prompt"]
            acc["completion"] += row["completion"]
            for r, v in row["per_round"].items():
                pr = acc["per_round"].setdefault(r, {"prompt": 0, "completion": 0})
                pr["prompt"] += v["prompt"]
                pr["completion"] += v["completion"]
    return out
