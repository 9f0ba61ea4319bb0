"""Advocates, judge and jurors of the flight comparison (D3), as deterministic rules and as LLM prompts + schemas.

The rules roles argue and decide from the brief's deltas and findings only, so `--llm rules` runs the same
protocol offline and reproducibly. The LLM roles answer under JSON schemas whose ids are enums of the ids that
exist (a grammar-constrained 135M model can only make real choices); `check_claims` drops any claim that still
cites nothing real, so every claim that reaches a report cites a metric delta or a finding.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uav_debate_eval.compare_flights.brief import FLIGHTS, KIND_CATEGORY, Brief
from uav_debate_eval.compare_flights.deltas import CATEGORIES
from uav_debate_eval.debate.llm.structured import plain_string

ADVOCATE_PERSONAS = ("flight_control", "coordination", "safety")
#: Jurors and how much each weighs the judge's categories.
JURORS = {
    "safety_officer": {"safety": 0.6, "flight_control": 0.2, "coordination": 0.2},
    "mission_lead": {"coordination": 0.5, "flight_control": 0.3, "safety": 0.2},
    "test_pilot": {"flight_control": 0.5, "safety": 0.3, "coordination": 0.2},
}
TIE_MARGIN = 0.5  # judge: total score gap (3 categories, 1-10 each) below which the flights are level
JUROR_TIE = 0.25
VETO_SAFETY_CAP = 3.0
PENALTY = {"hazard": 1.0, "warning": 0.5, "data_quality": 0.25, "info": 0.0}
CLAIM_MAX = 100
NOTE_MAX = 80


@dataclass
class Argument:
    pos: int  # 0: Flight 1, 1: Flight 2
    persona: str
    round: int
    claims: list[dict]
    by: str = "rules"
    error: str | None = None

    @property
    def cites(self) -> list[str]:
        return list(dict.fromkeys(c for cl in self.claims for c in cl["cites"]))

    def to_dict(self) -> dict:
        return {"flight": FLIGHTS[self.pos], "persona": self.persona, "round": self.round, "claims": self.claims,
                "by": self.by, "error": self.error}


@dataclass
class Judgement:
    scores: list[dict[str, float]]
    rationale: dict[str, str]
    claims: list[dict]
    recommendations: list[str] = field(default_factory=list)
    by: str = "rules"
    dropped_claims: int = 0
    error: str | None = None

    @property
    def totals(self) -> list[float]:
        return [round(sum(s.values()), 2) for s in self.scores]

    @property
    def gap(self) -> float:
        return round(self.totals[0] - self.totals[1], 2)

    @property
    def winner(self) -> str:
        return "tie" if abs(self.gap) < TIE_MARGIN else FLIGHTS[0] if self.gap > 0 else FLIGHTS[1]

    def feedback(self, pos: int) -> str:
        """The category where flight `pos` trails most (what its advocate should answer next round)."""
        return min(CATEGORIES, key=lambda c: (self.scores[pos][c] - self.scores[1 - pos][c], c))

    def to_dict(self) -> dict:
        return {"scores": {FLIGHTS[p]: dict(self.scores[p]) for p in range(2)},
                "totals": {FLIGHTS[p]: self.totals[p] for p in range(2)}, "winner": self.winner,
                "rationale": dict(self.rationale), "claims": self.claims, "recommendations": self.recommendations,
                "by": self.by, "dropped_claims": self.dropped_claims, "error": self.error}


# ---- rules roles -------------------------------------------------------------------------------------------


def rules_argument(brief: Brief, pos: int, persona: str, rnd: int, cited_before: set[str],
                   feedback: str | None = None, per_round: int = 2) -> Argument:
    """The strongest evidence for flight `pos` not yet cited: deltas it wins, then the opponent's findings."""
    me, other = FLIGHTS[pos], FLIGHTS[1 - pos]
    cats = [persona] if persona in CATEGORIES else list(CATEGORIES)
    if feedback in cats:
        cats = [feedback] + [c for c in cats if c != feedback]
    candidates: list[dict] = []
    for cat in cats:  # the opponent's hazards first: a hard-constraint violation outweighs any metric
        for f in brief.findings[1 - pos]:
            if finding_category(f) == cat and f["severity"] == "hazard":
                candidates.append({"text": f"{other} has a hazard finding: {f['kind']}", "cites": [f["cite"]]})
        for m in brief.shown_deltas:
            d = brief.deltas[m]
            if d["category"] == cat and d["winner"] == me and not m.startswith("scores."):
                mine, theirs = (d["a"], d["b"]) if pos == 0 else (d["b"], d["a"])
                candidates.append({"text": f"{me} is better on {m}: {_g(mine)} against {_g(theirs)} {d['unit']}",
                                   "cites": [f"DELTA[{m}]"]})
        for f in brief.findings[1 - pos]:
            if finding_category(f) == cat and f["severity"] == "warning":
                candidates.append({"text": f"{other} has a warning finding: {f['kind']}", "cites": [f["cite"]]})
    fresh = [c for c in candidates if c["cites"][0] not in cited_before][:per_round]
    if not fresh:
        cat = cats[0]
        fresh = [{"text": f"{me} has no further advantage on {cat}", "cites": [f"DELTA[scores.{cat}]"]}]
    return Argument(pos, persona, rnd, fresh)


def finding_category(f: dict) -> str:
    kind = str(f.get("kind", ""))
    return KIND_CATEGORY.get(kind.split(":")[0], "safety")


def base_scores(brief: Brief, pos: int) -> dict[str, float]:
    """1 + 9 x the category score; a category not measured for the flight (None) is neutral, 5.5."""
    out = {}
    for c in CATEGORIES:
        score = brief.scores[pos].get(c)
        out[c] = 5.5 if score is None else 1.0 + 9.0 * score
    return out


def _excess(brief: Brief, pos: int) -> dict[tuple[str, str], int]:
    """Per (kind, severity): how many more findings flight `pos` has than its opponent (what a judge can hold
    against it; a finding both flights share says nothing about which is better)."""
    own = Counter((f["kind"], f["severity"]) for f in brief.findings[pos])
    other = Counter((f["kind"], f["severity"]) for f in brief.findings[1 - pos])
    return {k: max(0, n - other.get(k, 0)) for k, n in own.items()}


def rules_judgement(brief: Brief, arguments: list[Argument]) -> Judgement:
    """Scores 1-10 per category: the category score, less a penalty per finding the opponent cited that the
    opponent does not share (same kind and severity); a hard-constraint violation caps safety at 3."""
    cited: list[set[str]] = [set(), set()]
    for a in arguments:
        cited[a.pos].update(a.cites)
    scores = [base_scores(brief, p) for p in range(2)]
    hits: list[dict[str, list[str]]] = [{c: [] for c in CATEGORIES} for _ in range(2)]
    for p in range(2):
        excess = _excess(brief, p)
        for f in brief.findings[p]:
            key = (f["kind"], f["severity"])
            if f["cite"] in cited[1 - p] and excess.get(key, 0) > 0:
                excess[key] -= 1
                cat = finding_category(f)
                scores[p][cat] -= PENALTY.get(f["severity"], 0.0)
                hits[p][cat].append(f["cite"])
        if brief.vetoed[p]:
            scores[p]["safety"] = min(scores[p]["safety"], VETO_SAFETY_CAP)
        scores[p] = {c: round(min(10.0, max(1.0, v)), 1) for c, v in scores[p].items()}
    rationale, claims = {}, []
    for cat in CATEGORIES:
        s1, s2 = scores[0][cat], scores[1][cat]
        lead = 0 if s1 > s2 else 1
        support = [c for c in cited[lead] if c.startswith("DELTA[") and _cat_of(brief, c) == cat][:2]
        cites = [f"DELTA[scores.{cat}]", *support, *hits[1 - lead][cat][:2]]
        rationale[cat] = (f"Flight 1 {s1:g}, Flight 2 {s2:g}: category scores with "
                          f"{len(hits[0][cat]) + len(hits[1][cat])} cited finding(s) weighed")
        if abs(s1 - s2) >= TIE_MARGIN / 2:
            claims.append({"text": f"{FLIGHTS[lead]} leads on {cat} ({max(s1, s2):g} against {min(s1, s2):g})",
                           "cites": [c for c in cites if brief.resolve(c)]})
    if not claims:
        claims.append({"text": "The flights are level on every category", "cites": ["DELTA[scores.overall]"]})
    j = Judgement(scores, rationale, claims)
    if j.winner != "tie":
        loser = 1 if j.winner == FLIGHTS[0] else 0
        worst = j.feedback(loser)
        j.recommendations = [f"Recommend improving {worst} of {FLIGHTS[loser]} before accepting it"]
    return j


def rules_vote(judgement: Judgement, juror: str) -> dict:
    """A juror's vote: the judge's category scores weighed by the juror's priorities."""
    w = JURORS[juror]
    totals = [sum(w[c] * judgement.scores[p][c] for c in CATEGORIES) for p in range(2)]
    diff = totals[0] - totals[1]
    vote = "tie" if abs(diff) < JUROR_TIE else FLIGHTS[0] if diff > 0 else FLIGHTS[1]
    top = max(w, key=lambda c: w[c])
    return {"juror": juror, "vote": vote, "by": "rules", "cites": [f"DELTA[scores.{top}]"],
            "rationale": f"weighted scores {totals[0]:.2f} against {totals[1]:.2f}, {top} weighs most"}


def _cat_of(brief: Brief, cite: str) -> str | None:
    ref = brief.resolve(cite)
    return brief.deltas[ref["metric"]]["category"] if ref and ref["kind"] == "metric_delta" else None


def _g(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)


# ---- LLM roles: messages and schemas -------------------------------------------------------------------------

ADVOCATE = ("You are an ADVOCATE in an A/B comparison of two anonymised UAV swarm flights. Argue that {me} is the "
            "better flight, with a focus on {persona}. Use only the evidence given; cite its ids; never invent "
            "ids or numbers.")
JUDGE = ("You are the JUDGE of an A/B comparison of two anonymised UAV swarm flights. Read the advocates' arguments "
         "and the evidence, then score each flight 1-10 on flight_control, coordination and safety (10 best). A "
         "hard-constraint violation is a serious safety failure. Each claim must cite ids from VALID IDS.")
JUROR = ("You are a JUROR ({persona}) in an A/B comparison of two anonymised UAV swarm flights. Read the evidence "
         "and the judge's scores and vote for the better flight, or tie. Cite ids from VALID IDS.")


def _cites(ids: list[str], most: int) -> dict:
    return {"type": "array", "items": {"type": "string", "enum": list(dict.fromkeys(ids))}, "minItems": 1,
            "maxItems": most}


def advocate_schema(ids: list[str]) -> dict:
    claim = {"type": "object", "properties": {"text": plain_string(10, CLAIM_MAX), "cites": _cites(ids, 2)},
             "required": ["text", "cites"], "additionalProperties": False}
    return {"type": "object", "properties": {"claims": {"type": "array", "items": claim, "minItems": 1,
                                                        "maxItems": 2}},
            "required": ["claims"], "additionalProperties": False}


def judge_schema(ids: list[str]) -> dict:
    score = {"type": "integer", "enum": list(range(1, 11))}
    per_flight = {"type": "object", "properties": dict.fromkeys(CATEGORIES, score), "required": list(CATEGORIES),
                  "additionalProperties": False}
    claim = advocate_schema(ids)["properties"]["claims"]["items"]
    return {"type": "object", "properties": {
        "flight_1": per_flight, "flight_2": per_flight,
        "rationale": {"type": "object", "properties": dict.fromkeys(CATEGORIES, plain_string(5, NOTE_MAX)),
                      "required": list(CATEGORIES), "additionalProperties": False},
        "claims": {"type": "array", "items": claim, "minItems": 1, "maxItems": 3},
        "recommendations": {"type": "array", "items": plain_string(10, NOTE_MAX), "maxItems": 2}},
        "required": ["flight_1", "flight_2", "rationale", "claims", "recommendations"],
        "additionalProperties": False}


def juror_schema(ids: list[str]) -> dict:
    return {"type": "object", "properties": {"vote": {"type": "string", "enum": [*FLIGHTS, "tie"]},
                                             "rationale": plain_string(10, CLAIM_MAX), "cites": _cites(ids, 2)},
            "required": ["vote", "rationale", "cites"], "additionalProperties": False}


def advocate_messages(brief: Brief, pos: int, persona: str, feedback: str | None = None,
                      opponent: Argument | None = None) -> list[dict[str, str]]:
    extra = ""
    if feedback:
        extra += f"\nJUDGE FEEDBACK: {FLIGHTS[pos]} trails most on {feedback}; answer that."
    if opponent is not None:
        extra += "\nOPPONENT'S LAST ARGUMENT:\n" + _argument_text(opponent)
    return [{"role": "system", "content": ADVOCATE.format(me=FLIGHTS[pos], persona=persona.replace("_", " "))},
            {"role": "user", "content": f"{brief.text()}{extra}\nVALID IDS: {', '.join(brief.valid_ids)}\n"
                                        f"Answer with JSON: claims (1-2), each with text and cites."}]


def judge_messages(brief: Brief, arguments: list[Argument]) -> list[dict[str, str]]:
    args = "\n".join(f"- for {FLIGHTS[a.pos]} ({a.persona}, round {a.round}): {_argument_text(a)}" for a in arguments)
    return [{"role": "system", "content": JUDGE},
            {"role": "user", "content": f"{brief.text()}\nARGUMENTS:\n{args}\n"
                                        f"VALID IDS: {', '.join(brief.valid_ids)}\nAnswer with JSON: flight_1 and "
                                        f"flight_2 scores, rationale per category, claims with cites, "
                                        f"recommendations."}]


def juror_messages(brief: Brief, judgement: Judgement, juror: str) -> list[dict[str, str]]:
    scores = "; ".join(f"{FLIGHTS[p]} {judgement.scores[p]}" for p in range(2))
    return [{"role": "system", "content": JUROR.format(persona=juror.replace("_", " "))},
            {"role": "user", "content": f"{brief.text()}\nJUDGE'S SCORES: {scores}\n"
                                        f"VALID IDS: {', '.join(brief.valid_ids)}\nAnswer with JSON: vote, "
                                        f"rationale, cites."}]


def _argument_text(a: Argument) -> str:
    return " ".join(f"{c['text']} ({', '.join(c['cites'])})." for c in a.claims)


def check_claims(claims: Any, brief: Brief) -> tuple[list[dict], int]:
    """Keep claims whose cites all exist (unknown cites removed; a claim left without one is dropped)."""
    kept, dropped = [], 0
    for c in claims if isinstance(claims, list) else []:
        if not isinstance(c, dict):
            dropped += 1
            continue
        cites = [x for x in c.get("cites") or [] if isinstance(x, str) and brief.resolve(x)]
        text = " ".join(str(c.get("text") or "").split())
        if cites and text:
            kept.append({"text": text[:CLAIM_MAX], "cites": list(dict.fromkeys(cites))})
        else:
            dropped += 1
    return kept, dropped


def argument_from(data: dict | None, brief: Brief, pos: int, persona: str, rnd: int) -> Argument | None:
    claims, _ = check_claims((data or {}).get("claims"), brief)
    return Argument(pos, persona, rnd, claims, by="llm") if claims else None


def judgement_from(data: dict | None, brief: Brief) -> tuple[Judgement | None, str]:
    if not isinstance(data, dict):
        return None, "unparseable judge answer"
    try:
        scores = [{c: float(min(10, max(1, int(data[k][c])))) for c in CATEGORIES} for k in ("flight_1", "flight_2")]
    except (KeyError, TypeError, ValueError):
        return None, "judge answer lacks a score per flight and category"
    claims, dropped = check_claims(data.get("claims"), brief)
    if not claims:
        return None, "no judge claim cites an existing delta or finding"
    for p in range(2):  # the verifier's cap holds whoever scores
        if brief.vetoed[p]:
            scores[p]["safety"] = min(scores[p]["safety"], VETO_SAFETY_CAP)
    rationale = {c: " ".join(str((data.get("rationale") or {}).get(c, "")).split())[:NOTE_MAX] for c in CATEGORIES}
    recs = [" ".join(str(r).split())[:NOTE_MAX] for r in data.get("recommendations") or [] if str(r).strip()][:2]
    return Judgement(scores, rationale, claims, recs, by="llm", dropped_claims=dropped), ""


def vote_from(data: dict | None, brief: Brief, juror: str) -> dict | None:
    if not isinstance(data, dict) or data.get("vote") not in (*FLIGHTS, "tie"):
        return None
    cites = [c for c in data.get("cites") or [] if isinstance(c, str) and brief.resolve(c)]
    if not cites:
        return None
    return {"juror": juror, "vote": data["vote"], "by": "llm", "cites": cites,
            "rationale": " ".join(str(data.get("rationale", "")).split())[:CLAIM_MAX]}
