"""One mission's panel at work: routes each segment, runs its rounds (agents of a round concurrently), verifies and
repairs citations, applies the topology, stops on agreement/convergence/budget, and decides the segment's label (vote,
L3 jury, the LLM judge where labels stay open, or the rules verdict for a settled segment)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from uav_debate_eval.debate import agenda, aspects, prompts, spend, synthesis, wording
from uav_debate_eval.debate import judge as judging
from uav_debate_eval.debate.agenda import Ledger, LeftOut
from uav_debate_eval.debate.agents import LLMAgent, Reply, RulesAgent
from uav_debate_eval.debate.aspects import TOPICS
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.consensus import consensus, round_text, similarity
from uav_debate_eval.debate.evidence import Check, EvidenceVerifier, q_evidence
from uav_debate_eval.debate.monitor import Intervention, Quality, assess
from uav_debate_eval.debate.personas import Persona
from uav_debate_eval.debate.prompts import Turn
from uav_debate_eval.debate.records import ResponseRecord, RoundRecord, SegmentContext, SegmentDebate
from uav_debate_eval.debate.response import AgentResponse
from uav_debate_eval.debate.router import notable, route, segment_violations, sparse_route
from uav_debate_eval.debate.teams import red_indices, roles, rotation_shift
from uav_debate_eval.debate.topology import POLICY_FILE, Controller, Policy, observe
from uav_debate_eval.debate.uncertainty import uncertainty
from uav_debate_eval.findings import build_findings
from uav_debate_eval.findings.admissible import admissible

#: A call the mission's token budget cannot pay for (not made, not a failure).
OVER_BUDGET = "token budget"


def _issues(responses: list[ResponseRecord], quality: Quality) -> str:
    """What the next round's lead should address: every concern (a claim labelled borderline or risky), the red
    team's counter-arguments, and the aspects nobody covered."""
    parts = [r.response.claim for r in responses if r.response.assessment != "safe"]
    parts += [r.response.counter for r in responses if r.team == "red"]
    if quality.missing:
        parts.append("missing aspects: " + ", ".join(quality.missing))
    return " ".join(parts).strip()


class Panel:
    """Runs one mission's segments with one set of agents."""

    def __init__(self, agents: list[Any], personas: list[Persona], config: DebateConfig, vetoed: bool,
                 max_speed: float | None, progress: Callable[[int, int], None] | None = None, n_segments: int = 0,
                 mission: Any = None, decide: Callable[[np.ndarray], np.ndarray] | None = None):
        self.agents, self.personas, self.cfg, self.vetoed = agents, personas, config, vetoed
        self.mission = mission
        self.max_speed = max_speed
        self.progress, self.segments_left = progress, n_segments
        self.transcript: list[dict] = []
        self.failures: list[dict] = []
        self.round_index = 0
        # A backend that serves one call at a time (an in-process model) makes agents queue; the per-call
        # timeout starts once an agent holds a slot, so it never counts the queue.
        limits = [getattr(getattr(a, "backend", None), "max_concurrency", None) for a in agents]
        limit = min([x for x in limits if x] or [config.parallel_agents or max(1, len(agents))])
        self.slots = asyncio.Semaphore(limit)
        self.llm_judge = isinstance(agents[0], LLMAgent) and config.judge in ("auto", "llm")
        self.decide = decide  # replaces the learned policy (training drives the topology through it)
        self.ledger = Ledger(config.token_budget)  # the mission's budget, every call reserved before it is made
        self.exact = isinstance(agents[0], RulesAgent)  # rules: the cost of an answer is known before it is spent
        self.count = spend.counter(getattr(agents[0], "backend", None))
        self.unspoken = set(TOPICS)  # coverage: the aspects no answer of this mission has spoken to yet
        self.covered: dict[str, str] = {}  # finding key -> the segment whose panel debated it
        self._ids: dict[str, tuple[list[str], list[str]]] = {}  # segment -> its citable ids (cost estimates)
        self.policy = Policy.load(config.topology_policy or POLICY_FILE) \
            if config.topology == "learned" and decide is None and len(agents) > 1 else None

    async def _call(self, agent: Any, turn: Turn, previous: AgentResponse | None) -> Reply:
        turn.completion_cap = self.cfg.answer_tokens
        if not self.exact and not self.ledger.fits(spend.call_cost(turn, self.count, self.cfg.answer_tokens, False,
                                                                   previous)):
            return Reply(None, [], error=OVER_BUDGET)
        async with self.slots:
            start = time.perf_counter()
            reply = await self._respond(agent, turn, previous)
            if not reply.latency_s:
                reply.latency_s = time.perf_counter() - start
        if self.exact and not self.ledger.fits(reply.prompt_tokens + reply.completion_tokens):
            return Reply(None, [], error=OVER_BUDGET)  # an answer the budget cannot pay for is not given
        self.ledger.charge(reply.prompt_tokens + reply.completion_tokens)
        if reply.error is None and reply.response is None:
            reply.error = "no response"
        self.transcript.append({
            "kind": "agent", "segment": turn.ctx.segment_id, "layer": turn.layer, "round": self.round_index,
            "segment_round": turn.round, "agent": turn.agent, "role": turn.persona.id, "team": turn.team,
            "lead": turn.lead, "attempt": 1 if previous is not None else 0, "messages": reply.messages,
            "response_text": reply.text, "response": reply.response.to_dict() if reply.response else None,
            "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
            "latency_s": round(reply.latency_s, 6), "cached": reply.cached, "model": reply.model,
            "error": reply.error, "prompt_parts": dict(reply.parts)})
        return reply

    async def _respond(self, agent: Any, turn: Turn, previous: AgentResponse | None) -> Reply:
        try:
            return await asyncio.wait_for(agent.respond(turn, previous), timeout=self.cfg.agent_timeout_s)
        except TimeoutError:
            return Reply(None, [], error=f"timeout after {self.cfg.agent_timeout_s:g} s")
        except Exception as exc:  # an agent failure must not end the debate: record it, drop the agent
            return Reply(None, [], error=f"{type(exc).__name__}: {exc}")

    async def _turn(self, agent: Any, turn: Turn, verifier: EvidenceVerifier, seg: SegmentDebate,
                    rec: RoundRecord) -> ResponseRecord | None:
        """First attempt, one repair re-prompt for invalid citations, then strike what is still invalid."""
        reply = await self._call(agent, turn, None)
        if reply.error == OVER_BUDGET:
            seg.budget_skips += 1
            return None
        spent = [reply]
        checks: list[Check] = []
        if reply.response is not None:
            checks = verifier.check_all(reply.response.evidence)
            invalid = [c for c in checks if c.cites and not c.valid]
            seg.invalid["first_pass"] += len(invalid)
            if invalid:
                turn.repair = invalid
                second = await self._call(agent, turn, reply.response)
                if second.error != OVER_BUDGET:
                    spent.append(second)
                if second.response is not None:
                    reply = second
                    checks = verifier.check_all(second.response.evidence)
                still = sum(c.cites and not c.valid for c in checks)
                seg.invalid["repaired"] += len(invalid) - min(len(invalid), still)
        for r in spent:
            for k, n in r.extra.get("inadmissible", {}).items():
                seg.inadmissible[k] += n
            rec.tokens["prompt"] += r.prompt_tokens
            rec.tokens["completion"] += r.completion_tokens
            for k, v in r.parts.items():
                rec.parts[k] = rec.parts.get(k, 0) + v
        if reply.response is None:
            self.failures.append({"segment": turn.ctx.segment_id, "round": self.round_index,
                                  "segment_round": turn.round, "agent": turn.agent, "role": turn.persona.id,
                                  "error": reply.error})
            return None
        struck = [c.item for c in checks if c.cites and not c.valid]
        seg.invalid["struck"] += len(struck)
        resp = reply.response
        kept = list({c.item: c for c in checks if not (c.cites and not c.valid)}.values())  # each item once
        resp.evidence = [c.item for c in kept]
        q = q_evidence(kept, " ".join([resp.claim, *resp.evidence]))
        record = ResponseRecord(turn.agent, turn.persona.id, turn.team, turn.lead, resp, q,
                                sum(c.valid for c in kept), struck)
        if not isinstance(agent, RulesAgent):
            record.shown = wording.shown_text(resp, turn, verifier, seg)
        return record

    async def debate_all(self, contexts: list[SegmentContext]) -> list[SegmentDebate]:
        """Every segment, the most urgent first (its most urgent finding not yet debated elsewhere, then time), so
        the budget goes to hazards first; what the hazard segments still to come need at least is held back. A
        finding debated in one segment (by its key) is not paid for again in another. Returned in time order."""
        segs = [self.prepare(ctx) for ctx in contexts]
        tiers = agenda.tiers([s.findings for s in segs])
        remaining = list(range(len(segs)))
        while remaining:
            remaining.sort(key=lambda j: (self._urgency(segs[j], tiers[j]), segs[j].t_start))
            i = remaining.pop(0)
            self.ledger.reserved = self._floors([(contexts[j], segs[j], tiers[j]) for j in remaining])
            await self.segment(contexts[i], segs[i], tiers[i])
        self.ledger.reserved = 0
        spend.settle(segs, self.covered, self.ledger)
        spend.renumber([rd for s in segs for rd in s.rounds], [*self.transcript, *self.failures])
        return segs

    def _open(self, seg: SegmentDebate) -> list:
        """The segment's findings not yet debated in another segment."""
        return [f for f in seg.findings if f.key not in self.covered]

    def _urgency(self, seg: SegmentDebate, tiers: dict[str, int]) -> int:
        findings = self._open(seg)
        return min((tiers[f.id] for f in findings), default=3) if notable(findings) else 3

    def _floors(self, rest: list[tuple[SegmentContext, SegmentDebate, dict[str, int]]]) -> int:
        """What the hazard segments still to come need at least (a hazard shared by several counted once)."""
        total, keys = 0, set[str]()
        for ctx, seg, tiers in rest:
            new = {f.key for f in self._open(seg) if f.severity == "hazard"} - keys
            if new:
                total += self._least(ctx, seg, tiers)
                keys |= new
        return total

    def prepare(self, ctx: SegmentContext) -> SegmentDebate:
        """Route, findings and admissible choices of a segment (nothing spent yet)."""
        cfg = self.cfg
        r_info = route(ctx, cfg.router_weights, cfg.router_thresholds, cfg.router_event_rate_ref, cfg.router_bins,
                       self.max_speed)
        findings = ctx.findings if ctx.findings is not None else build_findings(
            ctx.safety, ctx.dsl, ctx.metrics, self.mission, (float(ctx.t_start), float(ctx.t_end)))
        seg_vetoed = bool(segment_violations(ctx.safety, ctx.t_start, ctx.t_end))
        if cfg.router == "sparse":
            r_info = sparse_route(r_info, findings, seg_vetoed, max(1, cfg.settled_agents), cfg.veto_rounds)
        seg = SegmentDebate(ctx.segment_id, float(ctx.t_start), float(ctx.t_end), r_info)
        seg.findings = findings
        traj = getattr(ctx, "traj", None)
        seg.admissible = admissible(findings, ctx.safety, self.mission, (float(ctx.t_start), float(ctx.t_end)),
                                    seg_vetoed, getattr(traj, "sample_period", None),
                                    len(getattr(traj, "tracks", {}) or {}))
        seg.vetoed = seg_vetoed
        return seg

    def _turn_maker(self, ctx: SegmentContext, seg: SegmentDebate, r: int, ids: tuple[list[str], list[str]],
                    quotes: Any, red: set[int], extras: list[dict] | None = None) -> Callable[..., Turn]:
        cfg = self.cfg

        def make(i: int, persona: Persona, mine: list, groups: dict, items: list) -> Turn:
            return Turn(ctx=ctx, persona=persona, agent=self.agents[i].name, team="red" if i in red else "blue",
                        lead=i == 0, round=r, layer=seg.route.layer, mode=cfg.mode, vetoed=self.vetoed,
                        valid_ids=ids[0], metric_refs=ids[1], min_evidence=cfg.min_evidence,
                        max_evidence=cfg.max_evidence, compact=cfg.compact, quotes=quotes,
                        findings=mine if cfg.choices else [], lean=cfg.lean_prompts, admissible=seg.admissible,
                        groups=groups, aspects=items if r == 0 else [], excerpt=seg.excerpt,
                        shared_findings=not (cfg.lean_prompts and cfg.choices), **(extras[i] if extras else {}))
        return make

    def _plans(self, ctx: SegmentContext, seg: SegmentDebate, tiers: dict[str, int]) -> list[spend.Plan]:
        k = min(seg.route.agents or len(self.agents), len(self.agents))
        unspoken = self.unspoken - aspects.spoken(" ".join(f.sentence for f in seg.findings))
        items = aspects.aspects(ctx, unspoken) if self.cfg.choices and self.cfg.lean_prompts else []
        return spend.agendas(self._open(seg), tiers, self.personas, k, items)

    def _cost(self, ctx: SegmentContext, seg: SegmentDebate, plan: spend.Plan) -> int:
        """Estimated cost of a plan's first round."""
        if seg.segment_id not in self._ids:
            verifier = EvidenceVerifier(ctx.dsl, ctx.metrics, self.cfg.quote_rel_tol, self.cfg.quote_abs_tol)
            self._ids[seg.segment_id] = (verifier.valid_ids, verifier.metric_refs())
        make = self._turn_maker(ctx, seg, 0, self._ids[seg.segment_id], None, set())
        return sum(spend.call_cost(t, self.count, self.cfg.answer_tokens, self.exact)
                   for t in spend.turns_for(plan, roles(self.personas, 0), make))

    def _least(self, ctx: SegmentContext, seg: SegmentDebate, tiers: dict[str, int]) -> int:
        """What a hazard segment needs at least: one agent on its hazards, one round."""
        seg.excerpt = spend.excerpt(ctx, seg.findings)
        return self._cost(ctx, seg, self._plans(ctx, seg, tiers)[-1])

    def _choose(self, ctx: SegmentContext, seg: SegmentDebate, tiers: dict[str, int]) -> spend.Plan | None:
        """The richest agenda whose first round fits what the budget leaves free (None: not even the least)."""
        for plan in self._plans(ctx, seg, tiers):
            seg.excerpt = spend.excerpt(ctx, plan.findings)
            plan.cost = self._cost(ctx, seg, plan)
            if self.ledger.fits(plan.cost):
                return plan
        return None

    async def segment(self, ctx: SegmentContext, seg: SegmentDebate, tiers: dict[str, int]) -> SegmentDebate:
        cfg, personas = self.cfg, self.personas
        r_info, seg_vetoed = seg.route, seg.vetoed
        budget_plan = self._choose(ctx, seg, tiers)
        if budget_plan is None or (seg.findings and not budget_plan.findings):
            # nothing of it fits, or all of it was debated elsewhere: the rules verdict, the rest left out
            self._left_out(seg, tiers, set(), "token budget spent before this segment")
            seg.stop_reason = "budget" if seg.not_debated else "debated_elsewhere"
            seg.panel_label, seg.decided_by = rules_verdict(seg.findings), "rules_verdict"
            seg.recommendations = wording.segment_recommendations([], seg.findings)
            self.segments_left -= 1
            return seg
        verifier = EvidenceVerifier(ctx.dsl, ctx.metrics, cfg.quote_rel_tol, cfg.quote_abs_tol)
        valid_ids, metric_refs = verifier.valid_ids, verifier.metric_refs()
        quotes = verifier.quotes() if cfg.quotes_evidence and not cfg.choices else None
        k = budget_plan.agents
        max_r = min(cfg.max_rounds[r_info.layer], r_info.rounds or cfg.max_rounds[r_info.layer])
        agents = self.agents[:k]
        controller = Controller(cfg.topology, k, cfg.theta_v, self.policy, self.decide)
        last: list[ResponseRecord | None] = [None] * k  # each agent's latest answer (kept when it sits out)
        before: list[AgentResponse | None] | None = None  # the answers of the round before
        obs: np.ndarray | None = None
        prev: list[ResponseRecord] = []
        prev_text: str | None = None
        prev_score: float | None = None
        interventions: list[Intervention] = []
        issues = ""
        stance: list[dict[str, tuple[str, float]]] = []
        r = 0
        while r < max_r:
            shift = r % len(personas) if cfg.rotation == "round_robin" else rotation_shift(r, personas, issues)
            assigned = roles(personas, shift)
            red = red_indices(k, r, cfg.red_fraction) if cfg.mode == "adversarial" and k > 1 else set()
            plan = controller.plan(obs)
            active = [plan.active[i] or last[i] is None for i in range(k)]
            if not any(active):
                seg.stop_reason = "all_pruned"  # nobody would answer: the round would change nothing
                break
            rec = RoundRecord(self.round_index, ctx.segment_id, r, r_info.layer, sorted(red), assigned[0].id,
                              interventions, plan=plan if obs is not None else None)
            by_role = {x.role: x.response for x in prev}
            extras = [{"issues": issues if i == 0 else "", "interventions": interventions,
                       "own_previous": by_role.get(assigned[i].id),
                       "previous": [(x.role, x.team, x.response) for j, x in enumerate(last)
                                    if x is not None and (j == i or j in plan.visible[i])]} for i in range(k)]
            make = self._turn_maker(ctx, seg, r, (valid_ids, metric_refs), quotes, red, extras)
            turns = {i: t for i, t in enumerate(spend.turns_for(budget_plan, assigned, make)) if active[i]}
            results = dict(zip(turns, await asyncio.gather(*(self._turn(agents[i], t, verifier, seg, rec)
                                                                for i, t in turns.items())), strict=True))
            if "shared" in rec.parts:  # the prefix every call of the round sends: processed once, then cached
                shared = rec.parts.pop("shared")
                rec.parts["cache_reusable"] = max(0, shared - prompts.part_tokens(next(iter(turns.values())))["shared"])
            before = [x.response if x is not None else None for x in last]
            responses: list[ResponseRecord] = []
            for i in range(k):
                kept = last[i]
                answer: ResponseRecord | None
                if i in results:
                    answer = results[i]
                    last[i] = answer if answer is not None else kept
                else:
                    answer = last[i] = replace(kept, reused=True) if kept is not None else None
                if answer is not None:
                    responses.append(answer)
            rec.responses = responses
            for key in ("prompt", "completion"):
                seg.tokens[key] += rec.tokens[key]
            seg.rounds.append(rec)
            self.round_index += 1
            if self.progress is not None:  # rounds done, and the most there can be (this and later segments)
                self.progress(self.round_index, self.round_index + max_r - r - 1
                              + (self.segments_left - 1) * max(cfg.max_rounds.values()))
            resp = [x.response for x in rec.responses]
            self._spoken(seg, rec, turns)
            if not resp:
                seg.stop_reason = "budget" if seg.budget_skips else "all_agents_failed"
                if seg.budget_skips:  # nobody could be paid for: no round took place
                    seg.rounds.pop()
                    self.round_index -= 1
                break
            if all(x.reused for x in rec.responses) and seg.budget_skips:
                seg.stop_reason = "budget"
                break
            rec.consensus = consensus(resp)
            keys = [x.role for x in rec.responses]
            text = round_text({(x.role if keys.count(x.role) == 1 else f"{x.role}/{x.agent}"): x.response
                               for x in rec.responses})
            rec.similarity = None if prev_text is None else similarity(text, prev_text)
            rec.quality = assess([x.q_ev for x in rec.responses], [x.claim for x in resp],
                                 [" ".join(x.evidence) for x in resp], [x.text() for x in resp], text, prev_text,
                                 cfg.tau_q, cfg.novelty_min)
            mean_score = float(np.mean([x.effective_score for x in resp]))
            if prev_score is not None:
                rec.score_gap = abs(mean_score - prev_score)
            stance.append({x.role: (x.response.assessment, x.response.confidence) for x in rec.responses})
            used = seg.tokens["prompt"] + seg.tokens["completion"]
            cost = rec.tokens["prompt"] + rec.tokens["completion"]
            labels = {x.assessment for x in resp}
            sparse = cfg.router == "sparse"
            if sparse and r + 1 >= max_r and r_info.layer == 2 and not seg_vetoed and len(labels) > 1:
                r_info.layer, r_info.reason = 3, "contested"  # the labels stay split: deepen to L3
                max_r = cfg.max_rounds[3]
            last_round = r + 1 >= max_r
            settled = r + 1 >= cfg.min_rounds[r_info.layer]
            if sparse and k > 1 and len(labels) == 1 and np.mean([x.confidence for x in resp]) >= cfg.agree_confidence:
                seg.stop_reason = "agreement"
            elif settled and rec.similarity is not None and rec.similarity > cfg.early_stop_similarity:
                seg.stop_reason = "early_stop"
            elif settled and rec.score_gap is not None and rec.score_gap < cfg.score_gap_eps:
                seg.stop_reason = "convergence"
            elif settled and cfg.stop_on_low_novelty and r > 0 and rec.quality.suggest_stop:
                seg.stop_reason = "low_novelty"
            elif not last_round and not self.ledger.fits(cost):  # the next round could not be paid for
                seg.stop_reason = "budget"
            elif last_round:
                seg.stop_reason = "max_rounds"
            if seg.stop_reason:
                break
            current = [x.response if x is not None else None for x in last]
            obs = None if None in current else observe(current, before, used, self.ledger.budget, r + 1, max_r,
                                                       r_info.layer)
            prev, prev_text, prev_score = rec.responses, text, mean_score
            interventions = rec.quality.interventions
            issues = _issues(rec.responses, rec.quality)
            r += 1
        self._left_out(seg, tiers, seg.debated, "token budget: " + {
            1: "only the hazards fit", 2: "only the hazards and the warnings near them fit"}.get(
            max((tiers.get(f.id, 3) for f in budget_plan.findings), default=3) + 1, "lower priority"))
        if not seg.rounds and seg.budget_skips:
            seg.panel_label, seg.decided_by = rules_verdict(seg.findings), "rules_verdict"
            seg.recommendations = wording.segment_recommendations([], seg.findings)
        else:
            await self._decide(seg, stance, ctx, valid_ids + metric_refs)
        self.segments_left -= 1
        return seg

    def _spoken(self, seg: SegmentDebate, rec: RoundRecord, turns: dict[int, Turn]) -> None:
        """What this round's answers spoke to: the findings debated, and the aspects no longer unspoken."""
        for f in (f for t in turns.values() for f in t.findings
                  if any(x.agent == t.agent and not x.reused for x in rec.responses)):
            seg.debated.add(f.id)
            self.covered.setdefault(f.key, seg.segment_id)
        for x in rec.responses:
            self.unspoken -= aspects.spoken(x.response.text())

    def _left_out(self, seg: SegmentDebate, tiers: dict[str, int], debated: set[str], reason: str) -> None:
        """Mark the findings no answered call was asked about as not debated, with the reason."""
        for f in seg.findings:
            if f.id not in debated and f.key in self.covered:
                seg.debated_in[f.id] = self.covered[f.key]
            elif f.id not in debated:
                seg.not_debated[f.id] = reason
                self.ledger.left_out.append(LeftOut(seg.segment_id, f.id, tiers.get(f.id, 3), reason))

    async def _decide(self, seg: SegmentDebate, stance: list[dict[str, tuple[str, float]]], ctx: SegmentContext,
                      ids: list[str]) -> None:
        """Vote (or L3 jury); with LLM agents the judge call then synthesises within the labels left open."""
        records = seg.rounds[-1].responses if seg.rounds else []
        final = [x.response for x in records]
        seg.uncertainty = uncertainty(stance, self.cfg.uncertainty_lambda) if stance else {}
        seg.recommendations = wording.segment_recommendations(records, seg.findings)
        if seg.route.reason == "settled":  # nothing near a limit: the rules verdict, stated as such
            seg.panel_label, seg.decided_by = rules_verdict(seg.findings), "rules_verdict"
            return
        if seg.route.layer == 3 and self.cfg.jury_in_l3:
            seg.panel_label, seg.decided_by = judging.jury(final)
            open_labels = judging.jury_candidates(final)
        else:
            seg.panel_label, seg.decided_by = judging.judge(final), "judge" if final else "none"
            open_labels = list(dict.fromkeys(r.assessment for r in final))
        skip = self.cfg.router == "sparse" and ("veto" if seg.route.reason == "veto" else
                                                "decided" if len(open_labels) == 1 else None)
        if final and self.llm_judge and skip:  # nothing left to decide: the vote (or the veto) fixes the label
            seg.judge_skipped = skip
        elif final and self.llm_judge and seg.stop_reason == "budget":
            seg.judge = synthesis.Synthesis(seg.panel_label, "vote", error="token budget spent: the vote stands")
        elif final and self.llm_judge:
            positions = [(x.role, x.response) for x in records]
            seg.judge = await self._judge(ctx, seg, positions, open_labels, ids)
            if seg.judge.by == "llm":
                wording.gate_judge(seg, ctx)
                seg.panel_label = seg.judge.label
                seg.decided_by = seg.decided_by.replace("judge", "judge_llm")
                seg.recommendations = list(dict.fromkeys([*seg.judge.recommendations, *seg.recommendations]))

    async def _judge(self, ctx: SegmentContext, seg: SegmentDebate, positions: list[tuple[str, AgentResponse]],
                     labels: list[str], ids: list[str]) -> synthesis.Synthesis:
        """One judge call on the first agent's backend; any failure leaves the vote standing and is recorded."""
        cfg, agent = self.cfg, self.agents[0]
        findings = seg.findings if cfg.choices else None
        request = synthesis.judge_request(ctx, seg.route.layer, positions, labels, ids, self.vetoed, cfg.compact,
                                          cfg.temperature, cfg.max_tokens, cfg.seed, findings, cfg.lean_prompts,
                                          seg.admissible)
        cost = sum(self.count(m["content"]) for m in request.messages) + request.max_tokens \
            + spend.TEMPLATE_TOKENS * (len(request.messages) + 1)
        if not self.ledger.fits(cost):
            return synthesis.Synthesis(seg.panel_label, "vote", error="token budget spent: the vote stands")
        start = time.perf_counter()
        async with self.slots:
            try:
                result = await asyncio.wait_for(agent.backend.chat(request), timeout=cfg.agent_timeout_s)
            except TimeoutError:
                result = None
                error = f"timeout after {cfg.agent_timeout_s:g} s"
            except Exception as exc:  # the vote stands; the judge's failure is recorded like an agent's
                result = None
                error = f"{type(exc).__name__}: {exc}"
        verdict: synthesis.Synthesis | None = None
        if result is not None:
            error = result.error or ""
            if not error:
                verdict, error = synthesis.from_answer(result.data, labels, ids, findings)
            seg.tokens["prompt"] += result.prompt_tokens
            seg.tokens["completion"] += result.completion_tokens
            self.ledger.charge(result.prompt_tokens + result.completion_tokens)
        self.transcript.append({
            "kind": "judge", "segment": ctx.segment_id, "layer": seg.route.layer, "agent": "judge",
            "messages": request.messages, "response_text": result.text if result else "",
            "response": verdict.to_dict() if verdict else None,
            "prompt_tokens": result.prompt_tokens if result else 0,
            "completion_tokens": result.completion_tokens if result else 0,
            "latency_s": round(time.perf_counter() - start, 6), "cached": bool(result and result.cached),
            "model": result.model if result else None, "error": error or None})
        if verdict is None:
            self.failures.append({"segment": ctx.segment_id, "round": self.round_index - 1, "agent": "judge",
                                  "role": "judge", "error": error})
            return synthesis.Synthesis(seg.panel_label, "vote", error=error)
        verdict.prompt_tokens = result.prompt_tokens
        verdict.completion_tokens = result.completion_tokens
        return verdict


def rules_verdict(findings: list) -> str:
    """The deterministic label of a segment from its verified findings: a hazard is risky, a warning or a data-quality
    finding borderline, else safe."""
    severities = {f.severity for f in findings}
    return "risky" if "hazard" in severities else "borderline" if severities - {"info"} else "safe"
