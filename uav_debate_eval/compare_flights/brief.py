"""The anonymised evidence the comparison panel sees: "Flight 1" / "Flight 2", metric deltas and findings.

Prompts never carry file names, dates, mission names or vehicle ids: vehicles become V1, V2, ... per flight and
the flights are numbered in an order drawn from the seed. Everything citable has an id: `DELTA[category.metric]`
for a metric delta and `FIND[p.Fk]` for finding Fk of Flight p. `swap_text` relabels a text for the audit run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from uav_debate_eval.compare_flights.deltas import CATEGORIES, metric_deltas
from uav_debate_eval.compare_flights.flights import Flight, flight_findings

FLIGHTS = ("Flight 1", "Flight 2")
#: Which judge category a finding kind weighs on (anything else: safety).
KIND_CATEGORY = {"formation_breach": "coordination", "sharp_turn": "flight_control", "altitude_rate": "flight_control",
                 "link_loss": "coordination", "oscillation": "flight_control"}
#: What a prompt shows (and so what may be cited): per flight findings; deltas (4 category scores first).
MAX_FINDINGS, MAX_FINDINGS_COMPACT = 6, 3
MAX_DELTAS, MAX_DELTAS_COMPACT = 14, 8


@dataclass
class Brief:
    """Evidence for one ordering of two flights; `order` holds their keys as Flight 1, Flight 2."""

    order: tuple[str, str]
    deltas: dict[str, dict]  # metric -> row with winner "Flight 1" | "Flight 2" | "tie" | None
    findings: list[list[dict]]  # per position: findings with `cite` ids and anonymised sentences
    scores: list[dict[str, float | None]]
    labels: list[str]
    vetoed: list[bool]
    shown_deltas: list[str] = field(default_factory=list)

    @property
    def delta_ids(self) -> list[str]:
        return [f"DELTA[{m}]" for m in self.shown_deltas]

    @property
    def finding_ids(self) -> list[str]:
        return [f["cite"] for fs in self.findings for f in fs]

    @property
    def valid_ids(self) -> list[str]:
        return self.delta_ids + self.finding_ids

    def resolve(self, cite: str) -> dict | None:
        """What an id refers to, in flight keys (for the report); None when it does not exist."""
        m = re.fullmatch(r"DELTA\[(.+)\]", cite)
        if m and m.group(1) in self.deltas:
            return {"id": cite, "kind": "metric_delta", "metric": m.group(1)}
        m = re.fullmatch(r"FIND\[([12])\.(.+)\]", cite)
        if m:
            pos = int(m.group(1)) - 1
            for f in self.findings[pos]:
                if f["id"] == m.group(2):
                    return {"id": cite, "kind": "finding", "flight": self.order[pos], "finding": f["id"]}
        return None

    def text(self) -> str:
        """The evidence block every prompt carries: exactly the citable ids."""
        lines = []
        for p in range(2):
            sc = ", ".join(f"{c} {_f(self.scores[p].get(c))}" for c in (*CATEGORIES, "overall"))
            lines.append(f"{FLIGHTS[p]}: safety label {self.labels[p]}, "
                         f"{'HAS' if self.vetoed[p] else 'no'} hard-constraint violation; scores (0-1) {sc}")
        lines.append("METRIC DELTAS (score 0-1, higher is better):")
        for m in self.shown_deltas:
            d = self.deltas[m]
            lines.append(f"DELTA[{m}] Flight 1 {_f(d['a'])} {d['unit']} (score {_f(d['score_a'])}), Flight 2 "
                         f"{_f(d['b'])} (score {_f(d['score_b'])}); better: {d['winner'] or 'n/a'}")
        lines.append("FINDINGS:")
        for p in range(2):
            for f in self.findings[p]:
                who = f" (vehicles {', '.join(f['vehicles'])})" if f["vehicles"] else ""
                lines.append(f"{f['cite']} {FLIGHTS[p]} {f['severity']}: {f['sentence']}{who}")
        return "\n".join(lines)


def build_brief(first: Flight, second: Flight, seed: int = 0, compact: bool = False) -> Brief:
    """Evidence for `first` as Flight 1 and `second` as Flight 2 (compact: fewer items, for small models)."""
    deltas = metric_deltas(first.reports, second.reports, keys=FLIGHTS, seed=seed)
    most = MAX_FINDINGS_COMPACT if compact else MAX_FINDINGS
    findings = [_anonymised(flight_findings(fl), fl, p)[:most] for p, fl in enumerate((first, second))]
    shown = _ranked_deltas(deltas)[: MAX_DELTAS_COMPACT if compact else MAX_DELTAS]
    from uav_debate_eval.compare_flights.deltas import category_scores

    return Brief((first.key, second.key), deltas, findings,
                 [category_scores(first.reports), category_scores(second.reports)], [first.label, second.label],
                 [first.vetoed, second.vetoed], shown)


def _ranked_deltas(deltas: dict[str, dict]) -> list[str]:
    """Category scores first, then metrics by score gap (largest first); metrics without a score on both sides
    except the violation count are left out (nothing to compare)."""
    cats = [m for m in deltas if m.startswith("scores.")]
    rest = [m for m in deltas if not m.startswith("scores.") and deltas[m]["winner"] is not None]

    def gap(m: str) -> float:
        d = deltas[m]
        if d["score_a"] is None or d["score_b"] is None:
            return abs(d["delta"] or 0.0)
        return abs(d["score_b"] - d["score_a"])

    return cats + sorted(rest, key=lambda m: (-gap(m), m))


def _anonymised(findings: list[dict], flight: Flight, pos: int) -> list[dict]:
    uavs = sorted({u for ev in flight.runs for u in ev.traj.uav_ids}, key=lambda u: (-len(u), u))
    alias = {u: f"V{i + 1}" for i, u in enumerate(sorted(uavs))}
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(u) for u in uavs) + r")(?![A-Za-z0-9_])") \
        if uavs else None
    out = []
    for f in findings:
        sentence = str(f.get("sentence", ""))
        if pattern is not None:
            sentence = pattern.sub(lambda m: alias[m.group(1)], sentence)
        sentence = re.sub(r"[\[\]]", "", sentence)
        out.append({**f, "sentence": sentence, "vehicles": [alias.get(u, "V?") for u in f.get("uavs", [])],
                    "cite": f"FIND[{pos + 1}.{f['id']}]"})
    return out


_SWAP_RE = re.compile(r"Flight ([12])|FIND\[([12])\.")


def swap_text(text: str) -> str:
    """Exchange "Flight 1" and "Flight 2" (and their finding ids) in a text, for the position-swap audit."""
    def repl(m: re.Match) -> str:
        if m.group(1):
            return f"Flight {3 - int(m.group(1))}"
        return f"FIND[{3 - int(m.group(2))}."
    return _SWAP_RE.sub(repl, text)


def _f(v) -> str:
    return "n/a" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)
