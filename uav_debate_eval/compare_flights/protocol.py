"""The D3 comparison debate of two flights: MORE or SAMRE, optional jury, position-swap audit, verifier override.

MORE: k advocates per flight argue in parallel in one round; their claims are pooled per side and the judge scores.
SAMRE: one advocate per flight over rounds, each answering the judge's feedback and the opponent's last argument;
it stops at the token budget, the round budget, or when the judge's score gap has been stable within eps for two
rounds, and records which. The audit reruns the judge (and jury) with the flights' positions swapped; if the winner
changes the result is a tie with the reason. Last, the verifier rules: a flight with a hard-constraint violation
never beats one without (`overridden` when the panel said otherwise).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter, defaultdict
from dataclasses import replace
from typing import Any

from uav_debate_eval.compare_flights import roles
from uav_debate_eval.compare_flights.brief import FLIGHTS, Brief, build_brief, swap_text
from uav_debate_eval.compare_flights.flights import Flight
from uav_debate_eval.compare_flights.options import PROTOCOLS, ProtocolConfig  # noqa: F401 (re-exported)
from uav_debate_eval.debate.llm.base import ChatRequest, ChatResult
from uav_debate_eval.dsl.tokens import count_tokens


class Ledger:
    """Tokens per role and round (rules: estimated with the DSL token counter on the same prompts)."""

    def __init__(self, estimated: bool):
        self.estimated = estimated
        self.rows: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
        self.calls = self.cache_hits = self.failures = 0

    def add(self, role: str, rnd: int, prompt: int, completion: int, cached: bool = False, failed: bool = False):
        self.rows[role][rnd][0] += prompt
        self.rows[role][rnd][1] += completion
        self.calls += 1
        self.cache_hits += int(cached)
        self.failures += int(failed)

    @property
    def total(self) -> int:
        return sum(p + c for per in self.rows.values() for p, c in per.values())

    def to_dict(self) -> dict:
        prompt = sum(p for per in self.rows.values() for p, _ in per.values())
        completion = sum(c for per in self.rows.values() for _, c in per.values())
        return {"prompt": prompt, "completion": completion, "total": prompt + completion,
                "estimated": self.estimated, "calls": self.calls, "cache_hits": self.cache_hits,
                "failures": self.failures,
                "per_role": {r: {"prompt": sum(p for p, _ in per.values()),
                                 "completion": sum(c for _, c in per.values()),
                                 "per_round": {str(k): {"prompt": p, "completion": c}
                                               for k, (p, c) in sorted(per.items())}}
                             for r, per in sorted(self.rows.items())}}


class Panel:
    """Runs roles on the backend (None: rules), accounting tokens and falling back to rules on any failure."""

    def __init__(self, backend: Any, cfg: ProtocolConfig):
        self.backend, self.cfg = backend, cfg
        self.ledger = Ledger(estimated=backend is None)
        self.transcript: list[dict] = []
        self.failures: list[dict] = []

    async def _call(self, role: str, rnd: int, messages: list[dict], schema: dict, ids: list[str],
                    rules_answer: Any) -> ChatResult | None:
        """One call; for rules, only the token estimate of the same prompt and the rules answer."""
        if self.backend is None:
            prompt = sum(count_tokens(m["content"]) for m in messages)
            self.ledger.add(role, rnd, prompt, count_tokens(json.dumps(rules_answer, default=str)))
            self.transcript.append({"role": role, "round": rnd, "messages": messages, "response": rules_answer,
                                    "by": "rules"})
            return None
        request = ChatRequest(messages=messages, agent=role, round=rnd, json_schema=schema, valid_ids=ids,
                              temperature=self.cfg.temperature, max_tokens=self.cfg.max_tokens, seed=self.cfg.seed)
        start = time.perf_counter()
        try:
            result = await asyncio.wait_for(self.backend.chat(request), timeout=self.cfg.call_timeout_s)
        except Exception as exc:  # noqa: BLE001 - a failed call falls back to the rules answer, recorded
            result = ChatResult(text="", error=f"{type(exc).__name__}: {exc}")
        self.ledger.add(role, rnd, result.prompt_tokens, result.completion_tokens, result.cached,
                        result.error is not None)
        self.transcript.append({"role": role, "round": rnd, "messages": messages, "response_text": result.text,
                                "response": result.data, "error": result.error, "cached": result.cached,
                                "latency_s": round(time.perf_counter() - start, 3), "model": result.model})
        return result

    def _failed(self, role: str, rnd: int, why: str) -> None:
        self.failures.append({"role": role, "round": rnd, "error": why})

    async def argue(self, brief: Brief, pos: int, persona: str, rnd: int, cited: set[str],
                    feedback: str | None = None, opponent: roles.Argument | None = None) -> roles.Argument:
        fallback = roles.rules_argument(brief, pos, persona, rnd, cited, feedback)
        role = f"advocate_{pos + 1}_{persona}"
        messages = roles.advocate_messages(brief, pos, persona, feedback, opponent)
        result = await self._call(role, rnd, messages, roles.advocate_schema(brief.valid_ids), brief.valid_ids,
                                  fallback.to_dict())
        if result is None:
            return fallback
        arg = roles.argument_from(result.data, brief, pos, persona, rnd) if result.error is None else None
        if arg is None:
            self._failed(role, rnd, result.error or "no claim cites an existing delta or finding")
            fallback.error = "llm failed; rules argument used"
            return fallback
        return arg

    async def judge(self, brief: Brief, arguments: list[roles.Argument], rnd: int, role: str = "judge"
                    ) -> roles.Judgement:
        fallback = roles.rules_judgement(brief, arguments)
        messages = roles.judge_messages(brief, arguments)
        result = await self._call(role, rnd, messages, roles.judge_schema(brief.valid_ids), brief.valid_ids,
                                  fallback.to_dict())
        if result is None:
            return fallback
        judgement, why = roles.judgement_from(result.data, brief) if result.error is None else (None, result.error)
        if judgement is None:
            self._failed(role, rnd, why)
            fallback.error = f"llm judge failed ({why}); rules judgement used"
            return fallback
        return judgement

    async def jury(self, brief: Brief, judgement: roles.Judgement, rnd: int, role: str = "jury") -> list[dict]:
        votes = []
        for juror in roles.JURORS:  # one at a time: a local model serves one call at once anyway
            fallback = roles.rules_vote(judgement, juror)
            messages = roles.juror_messages(brief, judgement, juror)
            result = await self._call(f"{role}_{juror}", rnd, messages, roles.juror_schema(brief.valid_ids),
                                      brief.valid_ids, fallback)
            vote = None if result is None or result.error else roles.vote_from(result.data, brief, juror)
            if result is not None and vote is None:
                self._failed(f"{role}_{juror}", rnd, result.error or "invalid vote")
            votes.append(vote or fallback)
        return votes


def jury_decision(votes: list[dict], judgement: roles.Judgement) -> tuple[str, str]:
    """Majority of the three votes; without one, the judge's cumulative score breaks the tie."""
    count = Counter(v["vote"] for v in votes)
    vote, n = count.most_common(1)[0]
    if n >= 2:
        return vote, f"jury majority {n}/3"
    return judgement.winner, "no jury majority: the judge's cumulative score decides"


async def _more(panel: Panel, brief: Brief) -> tuple[list[roles.Argument], roles.Judgement, list[dict], str]:
    personas = roles.ADVOCATE_PERSONAS[: max(1, panel.cfg.advocates)]
    gate = asyncio.Semaphore(max(1, int(getattr(panel.backend, "max_concurrency", 4) or 4)))

    async def one(pos: int, persona: str) -> roles.Argument:
        async with gate:
            return await panel.argue(brief, pos, persona, 1, set())

    arguments = list(await asyncio.gather(*(one(p, s) for p in range(2) for s in personas)))
    judgement = await panel.judge(brief, arguments, 1)
    return arguments, judgement, [{"round": 1, "gap": judgement.gap, "totals": judgement.totals}], "single_round"


async def _samre(panel: Panel, brief: Brief) -> tuple[list[roles.Argument], roles.Judgement, list[dict], str]:
    cfg = panel.cfg
    arguments: list[roles.Argument] = []
    history: list[dict] = []
    judgement: roles.Judgement | None = None
    last: list[roles.Argument | None] = [None, None]
    stop = "round_budget"
    for rnd in range(1, cfg.max_rounds + 1):
        new: list[roles.Argument] = []
        for pos in range(2):
            cited = {c for a in arguments if a.pos == pos for c in a.cites}
            feedback = judgement.feedback(pos) if judgement is not None else None
            new.append(await panel.argue(brief, pos, "overall", rnd, cited, feedback, last[1 - pos]))
        last = list(new)
        arguments += new
        judgement = await panel.judge(brief, arguments, rnd)
        history.append({"round": rnd, "gap": judgement.gap, "totals": judgement.totals})
        gaps = [h["gap"] for h in history]
        if len(gaps) >= 3 and abs(gaps[-1] - gaps[-2]) <= cfg.eps and abs(gaps[-2] - gaps[-3]) <= cfg.eps:
            stop = "converged"
            break
        if panel.ledger.total >= cfg.token_budget:
            stop = "token_budget"
            break
    assert judgement is not None
    return arguments, judgement, history, stop


def _swapped(arguments: list[roles.Argument]) -> list[roles.Argument]:
    return [replace(a, pos=1 - a.pos, claims=[{"text": swap_text(c["text"]),
                                               "cites": [swap_text(x) for x in c["cites"]]} for c in a.claims])
            for a in arguments]


def _key(brief: Brief, winner: str) -> str:
    return "tie" if winner == "tie" else brief.order[FLIGHTS.index(winner)]


async def compare_pair(a: Flight, b: Flight, cfg: ProtocolConfig, backend: Any = None) -> dict:
    """The full debate of two flights; returns the pair's result (winner by flight key, audit, tokens, ...)."""
    if cfg.protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {cfg.protocol!r}")
    first, second = (a, b) if random.Random(cfg.seed).random() < 0.5 else (b, a)
    brief = build_brief(first, second, seed=cfg.seed, compact=cfg.compact)
    panel = Panel(backend, cfg)
    run = _more if cfg.protocol == "more" else _samre
    arguments, judgement, history, stop = await run(panel, brief)
    final_round = history[-1]["round"]
    votes, decided = [], "judge's cumulative score"
    winner = judgement.winner
    if cfg.jury:
        votes = await panel.jury(brief, judgement, final_round)
        winner, decided = jury_decision(votes, judgement)
    # position-swap audit: same arguments, flights' positions exchanged
    swapped = build_brief(second, first, seed=cfg.seed, compact=cfg.compact)
    audit_judgement = await panel.judge(swapped, _swapped(arguments), final_round, role="audit_judge")
    audit_winner = audit_judgement.winner
    audit_votes = []
    if cfg.jury:
        audit_votes = await panel.jury(swapped, audit_judgement, final_round, role="audit_jury")
        audit_winner, _ = jury_decision(audit_votes, audit_judgement)
    panel_key, audit_key = _key(brief, winner), _key(swapped, audit_winner)
    consistent = panel_key == audit_key
    result_key = panel_key if consistent else "tie"
    reason = decided if consistent else (f"position bias: {panel_key} won in one order and {audit_key} with the "
                                          f"order swapped, so the result is a tie")
    overridden = False
    vetoed = {fl.key: fl.vetoed for fl in (a, b)}
    if vetoed[a.key] != vetoed[b.key]:
        clean = a.key if not vetoed[a.key] else b.key
        if result_key != clean:
            overridden = True
            reason += (f"; overridden by the safety verifier: {result_key} was the panel's result but only {clean} "
                       f"has no hard-constraint violation")
        result_key = clean
    return {
        "flights": [a.key, b.key], "winner": result_key, "panel_winner": panel_key, "reason": reason,
        "overridden": overridden, "protocol": cfg.protocol, "stop_reason": stop, "rounds": len(history),
        "anonymisation": {FLIGHTS[0]: first.key, FLIGHTS[1]: second.key},
        "score_history": history, "arguments": [x.to_dict() for x in arguments],
        "judge": {**judgement.to_dict(), "citations": _citations(brief, judgement.claims)},
        "jury": {"enabled": cfg.jury, "votes": votes, "decided_by": decided if cfg.jury else None},
        "bias_audit": {"swapped_winner": audit_key, "consistent": consistent,
                       "judge": audit_judgement.to_dict(), "jury_votes": audit_votes},
        "tokens": panel.ledger.to_dict(), "failures": panel.failures, "transcript": panel.transcript,
        "valid_ids": brief.valid_ids,
    }


def _citations(brief: Brief, claims: list[dict]) -> list[dict]:
    return [ref for c in claims for ref in (brief.resolve(x) for x in c["cites"]) if ref is not None]
