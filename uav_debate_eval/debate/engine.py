"""The debate engine: routes each mission segment, runs red/blue (or collaborative) rounds, verifies evidence,
monitors quality, stops on budget/convergence, and hands the verdict to the deterministic veto override.

`run_debate` is the one entry point (sync wrapper over `run_debate_async`). Agents of a round run
concurrently; an agent that raises, times out or returns nothing usable is dropped for that round and
recorded in `failures`. Stopping, checked after every round in this order: `all_agents_failed`,
`early_stop` (Sim(S_r, S_r-1) > early_stop_similarity), `convergence` (|mean score_r - mean score_r-1| <
score_gap_eps; an agent without a score counts its label's score), `low_novelty` (only with
stop_on_low_novelty), `budget` (tokens used, or used + last round's cost, exceed token_budget), `max_rounds`
(the layer's limit). The first three wait for the layer's `min_rounds` (L3 is "deep": at least 3 rounds).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from uav_debate_eval.debate import gate as quality
from uav_debate_eval.debate import judge as judging
from uav_debate_eval.debate import prompts, synthesis, wording
from uav_debate_eval.debate.agents import LLMAgent, Reply, RulesAgent
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.consensus import consensus, round_text, similarity
from uav_debate_eval.debate.evidence import Check, EvidenceVerifier, q_evidence
from uav_debate_eval.debate.monitor import Intervention, Quality, assess
from uav_debate_eval.debate.personas import Persona, load_personas
from uav_debate_eval.debate.prompts import Turn
from uav_debate_eval.debate.response import AgentResponse
from uav_debate_eval.debate.router import Route, notable, route, segment_violations, sparse_route
from uav_debate_eval.debate.teams import red_indices, roles, rotation_shift
from uav_debate_eval.debate.topology import POLICY_FILE, Controller, Plan, Policy, observe
from uav_debate_eval.debate.uncertainty import uncertainty
from uav_debate_eval.findings import build_findings

__all__ = ["DebateConfig", "DebateResult", "SegmentContext", "run_debate", "run_debate_async"]


@dataclass
class SegmentContext:
    """One mission segment as the panel sees it. `traj` (optional) lets the router use raw speeds/headings."""

    segment_id: str
    t_start: float
    t_end: float
    dsl: Any  # dsl.builder.DslDocument
    metrics: Any  # metrics.compute.MetricsResult
    safety: Any  # safety.checker.SafetyResult
    traj: Any = None  # core.SwarmTrajectory of (at least) the segment
    findings: list | None = None  # verified findings of the segment (None: built from dsl, metrics, safety)


@dataclass
class ResponseRecord:
    agent: str
    role: str
    team: str
    lead: bool
    response: AgentResponse
    q_ev: float
    valid_evidence: int
    struck: list[str]
    shown: dict = field(default_factory=dict)  # claim/summary/counter/recommendation after the quality gate
    reused: bool = False  # the agent sat the round out (topology) and keeps its previous answer

    def to_dict(self) -> dict:
        r = self.response
        text = {k: self.shown.get(k, getattr(r, k)) for k in ("claim", "summary", "counter", "recommendation")}
        extra = {"findings": [dict(c) for c in r.choices], "recommendations": list(r.picked),
                 "note": self.shown.get("note", "")} if r.choices else {}
        return {"agent": self.agent, "role": self.role, "team": self.team, "claim": text["claim"],
                "evidence": list(r.evidence), "counter": text["counter"], "summary": text["summary"],
                "confidence": float(r.confidence), "recommendation": text["recommendation"], **extra,
                "assessment": r.assessment, "score": r.score, "lead": self.lead, "q_ev": self.q_ev,
                "valid_evidence": self.valid_evidence, "completeness": r.completeness(),
                "struck_evidence": self.struck, "reused": self.reused}


@dataclass
class RoundRecord:
    index: int
    segment: str
    segment_round: int
    layer: int
    red: list[int]
    lead: str
    interventions: list[Intervention]
    responses: list[ResponseRecord] = field(default_factory=list)
    consensus: dict[str, float] = field(default_factory=dict)
    quality: Quality | None = None
    similarity: float | None = None
    score_gap: float | None = None
    tokens: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "completion": 0})
    parts: dict[str, int] = field(default_factory=dict)  # estimated prompt tokens by part, summed over calls
    plan: Plan | None = None  # the round's topology after the dual threshold

    def to_dict(self) -> dict:
        return {"index": self.index, "segment": self.segment, "segment_round": self.segment_round,
                "layer": self.layer, "red": self.red, "lead": self.lead,
                "interventions": [i.to_dict() for i in self.interventions],
                "responses": [r.to_dict() for r in self.responses], "consensus": self.consensus,
                "quality": self.quality.to_dict() if self.quality else None, "similarity": self.similarity,
                "score_gap": self.score_gap, "tokens": dict(self.tokens), "token_parts": dict(self.parts),
                "topology": self.plan.to_dict() if self.plan else None}


@dataclass
class SegmentDebate:
    segment_id: str
    t_start: float
    t_end: float
    route: Route
    rounds: list[RoundRecord] = field(default_factory=list)
    stop_reason: str = ""
    panel_label: str | None = None
    decided_by: str = "none"
    uncertainty: dict[str, Any] = field(default_factory=dict)
    invalid: dict[str, int] = field(default_factory=lambda: {"first_pass": 0, "repaired": 0, "struck": 0})
    tokens: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "completion": 0})
    recommendations: list[str] = field(default_factory=list)
    judge: synthesis.Synthesis | None = None
    findings: list = field(default_factory=list)
    struck: list[tuple[str, str]] = field(default_factory=list)  # (sentence, reason) the gate struck
    judge_skipped: str | None = None  # no judge call (sparse router): decided (one label left open) | veto

    def to_dict(self) -> dict:
        return {"id": self.segment_id, "t_start": self.t_start, "t_end": self.t_end, "layer": self.route.layer,
                "complexity": self.route.score, "complexity_terms": self.route.terms, "rounds": len(self.rounds),
                "route_reason": self.route.reason, "route_agents": self.route.agents,
                "stop_reason": self.stop_reason, "panel_label": self.panel_label, "decided_by": self.decided_by,
                "consensus": self.rounds[-1].consensus if self.rounds else {}, "uncertainty": self.uncertainty,
                "invalid_citations": dict(self.invalid), "tokens": dict(self.tokens),
                "judge": self.judge.to_dict() if self.judge else None,
                **({"judge_skipped": self.judge_skipped} if self.judge_skipped else {}),
                "findings": [f.to_dict() for f in self.findings], "struck": quality.count(self.struck)}


@dataclass
class DebateResult:
    backend: str
    model: str | None
    mode: str
    rotation: str
    segments: list[SegmentDebate]
    verdict: judging.Verdict
    transcript: list[dict]
    failures: list[dict]
    estimated_tokens: bool
    elapsed_s: float = 0.0
    fallback: str | None = None  # why an LLM backend was replaced by the rules agents

    @property
    def rounds(self) -> list[RoundRecord]:
        return [r for s in self.segments for r in s.rounds]

    @property
    def layer(self) -> int:
        return max((s.route.layer for s in self.segments), default=1)

    def tokens(self) -> dict[str, int]:
        return {k: int(sum(s.tokens[k] for s in self.segments)) for k in ("prompt", "completion")}

    def token_parts(self) -> dict[str, int]:
        """Estimated prompt tokens by part over the mission (`shared`: the per-round prefix a cache can reuse)."""
        out: dict[str, int] = {}
        for rd in self.rounds:
            for k, v in rd.parts.items():
                out[k] = out.get(k, 0) + v
        return out

    def invalid_citations(self) -> dict[str, int]:
        return {k: int(sum(s.invalid[k] for s in self.segments)) for k in ("first_pass", "repaired", "struck")}

    def uncertainty(self) -> dict[str, float]:
        keys = ("flip_rate", "belief_revision", "u_intra", "u_inter", "entropy", "final_disagreement",
                "loo_instability", "u_sys")
        us = [s.uncertainty for s in self.segments if s.uncertainty]
        return {k: float(np.mean([u[k] for u in us])) if us else 0.0 for k in keys}

    def consensus(self) -> dict[str, float]:
        finals = [s.rounds[-1].consensus for s in self.segments if s.rounds and s.rounds[-1].consensus]
        keys = ("score", "semantic", "priority", "concern", "findings", "overall")
        return {k: float(np.mean([c[k] for c in finals])) if finals else 0.0 for k in keys}

    def to_report(self) -> dict:
        """The schema's `debate` object plus per-segment routing, quality, stopping and uncertainty."""
        tokens = self.tokens()
        return {
            "backend": self.backend,
            "model": self.model,
            "mode": self.mode,
            "rotation": self.rotation,
            "layer": self.layer,
            "rounds": [r.to_dict() for r in self.rounds],
            "consensus": self.consensus(),
            "tokens": {**tokens, "estimated": self.estimated_tokens, "by_part": self.token_parts()},
            "recommendations": list(self.verdict.recommendations),
            "segments": [s.to_dict() for s in self.segments],
            "uncertainty": {**self.uncertainty(), "low_confidence": self.verdict.low_confidence},
            "invalid_citations": self.invalid_citations(),
            "struck": quality.count([x for s in self.segments for x in s.struck]),
            "label": self.verdict.label,
            "panel_label": self.verdict.panel_label,
            "verifier_label": self.verdict.verifier_label,
            "overridden": self.verdict.overridden,
            "failures": list(self.failures),
            "fallback": self.fallback,
            "elapsed_s": self.elapsed_s,
        }


def _issues(responses: list[ResponseRecord], quality: Quality) -> str:
    """What the next round's lead should address: every concern (a claim labelled borderline or risky), the red
    team's counter-arguments, and the aspects nobody covered."""
    parts = [r.response.claim for r in responses if r.response.assessment != "safe"]
    parts += [r.response.counter for r in responses if r.team == "red"]
    if quality.missing:
        parts.append("missing aspects: " + ", ".join(quality.missing))
    return " ".join(parts).strip()


class _Panel:
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
        self.policy = Policy.load(config.topology_policy or POLICY_FILE) \
            if config.topology == "learned" and decide is None and len(agents) > 1 else None

    async def _call(self, agent: Any, turn: Turn, previous: AgentResponse | None) -> Reply:
        async with self.slots:
            start = time.perf_counter()
            reply = await self._respond(agent, turn, previous)
            if not reply.latency_s:
                reply.latency_s = time.perf_counter() - start
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
        spent = [reply]
        checks: list[Check] = []
        if reply.response is not None:
            checks = verifier.check_all(reply.response.evidence)
            invalid = [c for c in checks if c.cites and not c.valid]
            seg.invalid["first_pass"] += len(invalid)
            if invalid:
                turn.repair = invalid
                second = await self._call(agent, turn, reply.response)
                spent.append(second)
                if second.response is not None:
                    reply = second
                    checks = verifier.check_all(second.response.evidence)
                still = sum(c.cites and not c.valid for c in checks)
                seg.invalid["repaired"] += len(invalid) - min(len(invalid), still)
        for r in spent:
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

    async def segment(self, ctx: SegmentContext) -> SegmentDebate:
        cfg, personas = self.cfg, self.personas
        r_info = route(ctx, cfg.router_weights, cfg.router_thresholds, cfg.router_event_rate_ref, cfg.router_bins,
                       self.max_speed)
        findings = ctx.findings if ctx.findings is not None else build_findings(
            ctx.safety, ctx.dsl, ctx.metrics, self.mission, (float(ctx.t_start), float(ctx.t_end)))
        seg_vetoed = bool(segment_violations(ctx.safety, ctx.t_start, ctx.t_end))
        if cfg.router == "sparse":
            r_info = sparse_route(r_info, findings, seg_vetoed, max(1, cfg.settled_agents), cfg.veto_rounds)
        seg = SegmentDebate(ctx.segment_id, float(ctx.t_start), float(ctx.t_end), r_info)
        seg.findings = findings
        verifier = EvidenceVerifier(ctx.dsl, ctx.metrics, cfg.quote_rel_tol, cfg.quote_abs_tol)
        valid_ids, metric_refs = verifier.valid_ids, verifier.metric_refs()
        quotes = verifier.quotes() if cfg.quotes_evidence and not cfg.choices else None
        k = min(r_info.agents or len(self.agents), len(self.agents))
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
            turns = {i: Turn(ctx=ctx, persona=assigned[i], agent=agents[i].name,
                             team="red" if i in red else "blue", lead=i == 0, round=r, layer=r_info.layer,
                             mode=cfg.mode, vetoed=self.vetoed, valid_ids=valid_ids, metric_refs=metric_refs,
                             issues=issues if i == 0 else "",
                             previous=[(x.role, x.team, x.response) for j, x in enumerate(last)
                                       if x is not None and (j == i or j in plan.visible[i])],
                             own_previous=by_role.get(assigned[i].id), interventions=interventions,
                             min_evidence=cfg.min_evidence, max_evidence=cfg.max_evidence,
                             compact=cfg.compact, quotes=quotes, findings=seg.findings if cfg.choices else [],
                             lean=cfg.lean_prompts, notable=notable(seg.findings))
                     for i in range(k) if active[i]}
            results = dict(zip(turns, await asyncio.gather(*(self._turn(agents[i], t, verifier, seg, rec)
                                                                for i, t in turns.items())), strict=True))
            if "shared" in rec.parts:  # the prefix every call of the round sends: processed once, then cached
                shared = rec.parts.pop("shared")
                rec.parts["cache_reusable"] = max(0, shared - prompts.part_tokens(next(iter(turns.values())))["shared"])
            before = [x.response if x is not None else None for x in last]
            for i in range(k):
                if i in results:
                    last[i] = results[i] if results[i] is not None else last[i]
                elif last[i] is not None:
                    last[i] = replace(last[i], reused=True)
            rec.responses = [results[i] if i in results else last[i] for i in range(k)
                             if (results.get(i) if i in results else last[i]) is not None]
            for key in ("prompt", "completion"):
                seg.tokens[key] += rec.tokens[key]
            seg.rounds.append(rec)
            self.round_index += 1
            if self.progress is not None:  # rounds done, and the most there can be (this and later segments)
                self.progress(self.round_index, self.round_index + max_r - r - 1
                              + (self.segments_left - 1) * max(cfg.max_rounds.values()))
            resp = [x.response for x in rec.responses]
            if not resp:
                seg.stop_reason = "all_agents_failed"
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
            elif used >= cfg.token_budget or (not last_round and used + cost > cfg.token_budget):
                seg.stop_reason = "budget"
            elif last_round:
                seg.stop_reason = "max_rounds"
            if seg.stop_reason:
                break
            current = [x.response if x is not None else None for x in last]
            obs = None if None in current else observe(current, before, used, cfg.token_budget, r + 1, max_r,
                                                       r_info.layer)
            prev, prev_text, prev_score = rec.responses, text, mean_score
            interventions = rec.quality.interventions
            issues = _issues(rec.responses, rec.quality)
            r += 1
        await self._decide(seg, stance, ctx, valid_ids + metric_refs)
        self.segments_left -= 1
        return seg

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
                                          cfg.temperature, cfg.max_tokens, cfg.seed, findings, cfg.lean_prompts)
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



def _agents(config: DebateConfig, personas: list[Persona], backend: Any) -> tuple[list[Any], Any, str | None]:
    """(agents, backend this call created and must close or None, why it fell back to rules or None)."""
    names = [f"agent{i + 1}" for i in range(len(personas))]
    if backend is None and config.backend == "rules":
        return [RulesAgent(n) for n in names], None, None
    owned = None
    if backend is None:
        from uav_debate_eval.debate.llm.factory import make_backend
        from uav_debate_eval.debate.llm.resilience import BackendUnavailable

        try:
            backend = owned = make_backend(config.llm if config.llm is not None else _llm_config(config))
        except BackendUnavailable as exc:
            return [RulesAgent(n) for n in names], None, f"{config.backend} unavailable: {exc}"
    return [LLMAgent(n, backend, config.temperature, config.max_tokens, config.seed) for n in names], owned, None


def _llm_config(config: DebateConfig) -> Any:
    from uav_debate_eval.debate.llm.factory import LLMConfig

    return LLMConfig(backend=config.backend, model=config.model)


def _summary(verdict_label: str, panel: str | None, vetoed: bool, overridden: bool, segs: list[SegmentDebate],
             safeties: list[Any]) -> str:
    n_rounds = sum(len(s.rounds) for s in segs)
    text = (f"Verdict {verdict_label}: {len(segs)} segments debated in {n_rounds} rounds; "
            f"panel label {panel or 'none'}.")
    if vetoed:
        names = sorted({v.constraint for s in safeties for v in (getattr(s, "violations", []) or [])})
        text += f" Safety veto: hard-constraint violation ({', '.join(names) or 'veto'}) makes the mission risky."
        if overridden:
            text += f" The panel's '{panel}' was overridden by the veto."
    elif panel is not None and panel != verdict_label:
        text += f" The panel said '{panel}'; the verifier's envelope rule decides the label."
    for s in segs:
        if s.judge is not None and s.judge.by == "llm":
            text += f" Judge on {s.segment_id} ({s.judge.label}): {s.judge.summary}"
    return text


def assemble(segs: list[SegmentDebate], contexts: list[SegmentContext], config: DebateConfig, backend: str,
             model: str | None, estimated: bool, transcript: list[dict], failures: list[dict], elapsed_s: float,
             fallback: str | None = None) -> DebateResult:
    """Mission verdict (panel label, veto override, recommendations, low-confidence flag) and the result."""
    safeties = [c.safety for c in contexts]
    verifier_label, vetoed = judging.verifier_label(safeties)
    panel_label = judging.mission_panel_label([s.panel_label for s in segs])
    label, overridden = judging.final_label(verifier_label, vetoed, panel_label, config.panel_may_raise)
    recs = list(dict.fromkeys(r for s in segs for r in s.recommendations))
    u = [s.uncertainty["u_sys"] for s in segs if s.uncertainty]
    verdict = judging.Verdict(label=label, summary=_summary(label, panel_label, vetoed, overridden, segs, safeties),
                              recommendations=recs, overridden=overridden, panel_label=panel_label, vetoed=vetoed,
                              verifier_label=verifier_label,
                              low_confidence=bool(u) and float(np.mean(u)) > config.low_confidence_u_sys)
    transcript.append({"kind": "verdict", **verdict.to_dict()})
    return DebateResult(backend, model, config.mode, config.rotation, segs, verdict, transcript, failures, estimated,
                        elapsed_s, fallback)


async def run_debate_async(contexts: list[SegmentContext], mission: Any, config: DebateConfig | None = None,
                           backend: Any = None, personas: list[Persona] | None = None,
                           progress: Callable[[int, int], None] | None = None,
                           decide: Callable[[np.ndarray], np.ndarray] | None = None) -> DebateResult:
    """Debate every segment (in order; agents within a round concurrently) and produce the verdict.

    `personas` replaces the configured panel (the single-agent baseline passes one generalist).
    `progress(rounds_done, most_rounds)` is called after every round.
    `decide(observation) -> weights` replaces the learned topology's policy (training drives it).
    """
    config = config or DebateConfig()
    start = time.perf_counter()
    personas = personas or load_personas(config.personas_file, config.personas)
    agents, owned, fallback = _agents(config, personas, backend)
    if isinstance(agents[0], RulesAgent):
        backend_name, model, estimated = "rules", "rules", True
    else:
        backend_name, model, estimated = agents[0].backend.name, agents[0].backend.model or config.model, False
    _, vetoed = judging.verifier_label([c.safety for c in contexts])
    constraints = getattr(mission, "constraints", None)
    panel = _Panel(agents, personas, config, vetoed, getattr(constraints, "max_speed_mps", None), progress,
                   len(contexts), mission, decide)
    try:
        segs = [await panel.segment(ctx) for ctx in contexts]
    finally:
        if owned is not None:
            await owned.aclose()
    return assemble(segs, contexts, config, backend_name, model, estimated, panel.transcript, panel.failures,
                    time.perf_counter() - start, fallback)


def run_debate(contexts: list[SegmentContext], mission: Any, config: DebateConfig | None = None,
               backend: Any = None, personas: list[Persona] | None = None,
               progress: Callable[[int, int], None] | None = None,
               decide: Callable[[np.ndarray], np.ndarray] | None = None) -> DebateResult:
    """Sync entry point for the pipeline and the nodes (must not be called from a running event loop)."""
    return asyncio.run(run_debate_async(contexts, mission, config, backend, personas, progress, decide))
