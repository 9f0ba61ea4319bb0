"""How a segment spends the mission's budget: the agenda (findings up to a priority tier, the unspoken aspects, how
many agents) chosen as the richest whose first round fits, and what each call is reserved before it is made.

Costs are counted on the messages a call would send (the backend's tokenizer where it has one, else the project's
counter) plus the completion cap the call is then held to, so a call that is made can never overrun the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uav_debate_eval.debate import agenda, prompts
from uav_debate_eval.debate.agents import rules_answer
from uav_debate_eval.debate.aspects import Aspect, for_persona
from uav_debate_eval.dsl.tokens import count_tokens

#: Per-message allowance for a chat template's role markers (a backend counts them, the messages do not).
TEMPLATE_TOKENS = 8
#: Richest first: (highest tier on the agenda, aspects asked, the whole panel or one agent).
PLANS = ((3, True, False), (2, True, False), (1, True, False), (1, False, False), (0, False, False),
         (3, True, True), (2, True, True), (1, True, True), (1, False, True), (0, False, True))


@dataclass
class Plan:
    """A segment's agenda: the findings debated (by priority), its aspects, how many agents answer."""

    findings: list = field(default_factory=list)
    aspects: list[Aspect] = field(default_factory=list)
    agents: int = 0
    cost: int = 0  # estimated cost of its first round


def counter(backend: Any) -> Callable[[str], int]:
    """The backend's own tokenizer when it has one, else the project's counter."""
    own = getattr(backend, "count_tokens", None)
    return own if callable(own) else count_tokens


def call_cost(turn: prompts.Turn, count: Callable[[str], int], cap: int, exact: bool,
              previous: Any = None) -> int:
    """Tokens a call may cost: its messages (with the template allowance when the backend adds one) and the
    completion cap."""
    msgs = prompts.messages(turn, previous)
    sent = sum(count(m["content"]) for m in msgs)
    if exact:  # the rules agents: the answer is known before anything is spent
        return sent + count(rules_answer(turn)[1])
    return sent + cap + TEMPLATE_TOKENS * (len(msgs) + 1)


def agendas(findings: list, tiers: dict[str, int], personas: list[Any], k: int,
            items: list[Aspect]) -> list[Plan]:
    """The candidate plans of a segment, richest first (duplicates dropped)."""
    out: list[Plan] = []
    seen = set()
    for top, with_aspects, single in PLANS:
        chosen = [f for f in findings if tiers.get(f.id, 3) <= top]
        n = 1 if single else k
        key = (len(chosen), with_aspects and bool(items), n)
        if key in seen or (not chosen and findings):
            continue
        seen.add(key)
        out.append(Plan(chosen, list(items) if with_aspects else [], n))
    return out


def turns_for(plan: Plan, assigned: list[Any], make: Callable[..., prompts.Turn]) -> list[prompts.Turn]:
    """One turn per answering agent: its persona's findings (grouped) and aspects."""
    personas = assigned[:plan.agents]
    per = agenda.assign(plan.findings, personas)
    groups = agenda.group(plan.findings)
    out = []
    for i, persona in enumerate(personas):
        mine = per[i]
        ids_mine = {f.id for f in mine}
        own = {lead: [x for x in ids if x in ids_mine] for lead, ids in groups.items() if lead in ids_mine}
        covered = {x for ids in own.values() for x in ids}
        own.update({f.id: [f.id] for f in mine if f.id not in covered})
        out.append(make(i, persona, mine, own, for_persona(plan.aspects, persona.category, plan.agents == 1)))
    return out


def excerpt(ctx: Any, findings: list, most: int = 2) -> list[str]:
    """The DSL's risk lines the hazards under debate rest on (at most `most`; each group's first)."""
    index = getattr(ctx.dsl, "index", {}) or {}
    leads = [f for f in findings if f.severity == "hazard" and f.id in agenda.group(findings)]
    refs = [next((r for r in f.refs if r.startswith("RISK[") and r in index), "") for f in leads]
    refs = [r for r in refs if r]
    return [str(index[r].text) for r in list(dict.fromkeys(refs))[:most] if getattr(index[r], "text", "")]


def settle(segs: list, covered: dict[str, str], ledger: agenda.Ledger) -> None:
    """A finding left out in one segment but debated in a later one (its key) counts as debated there."""
    for seg in segs:
        for f in seg.findings:
            if f.id in seg.not_debated and f.key in covered:
                del seg.not_debated[f.id]
                seg.debated_in[f.id] = covered[f.key]
    by_seg = {s.segment_id: s for s in segs}
    ledger.left_out = [x for x in ledger.left_out if x.id in by_seg[x.segment].not_debated]


def renumber(rounds: list, rows: list[dict]) -> None:
    """Rounds ran by priority; the report numbers them in time order (the transcript's and failures' rows follow)."""
    new = {rd.index: n for n, rd in enumerate(rounds)}
    for rd in rounds:
        rd.index = new[rd.index]
    for row in rows:
        if isinstance(row.get("round"), int) and row["round"] in new and row.get("kind", "agent") != "verdict":
            row["round"] = new[row["round"]]
