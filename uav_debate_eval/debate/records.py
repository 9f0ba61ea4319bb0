"""What a debate produces: the per-agent response, per-round and per-segment records, and the mission's result (with
its report form). Plain data; the panel (debate.panel) fills them, the engine (debate.engine) assembles the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uav_debate_eval.debate import gate as quality
from uav_debate_eval.debate import judge as judging
from uav_debate_eval.debate import synthesis
from uav_debate_eval.debate.monitor import Intervention, Quality
from uav_debate_eval.debate.response import AgentResponse
from uav_debate_eval.debate.router import Route
from uav_debate_eval.debate.topology import Plan
from uav_debate_eval.findings.admissible import Admissible


@dataclass
class SegmentContext:
    """One mission segment as the panel sees it. `traj` (optional) lets the router use raw speeds/headings."""

    segment_id: str
    t_start: float
    t_end: float
    dsl: Any  # dsl.builder.DslDocument
    metrics: Any  # metrics.compute.MetricsResult
    safety: Any  # safety.result.SafetyResult
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
        if r.aspects:
            extra["aspects"] = [dict(a) for a in r.aspects]
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
    admissible: Admissible | None = None  # the choices the segment's facts admit
    # choices the facts rule out: answers that had one, answers a repair made admissible, choices dropped
    inadmissible: dict[str, int] = field(default_factory=lambda: {"answers": 0, "repaired": 0, "dropped": 0})
    vetoed: bool = False  # a violation overlaps the segment
    excerpt: list[str] = field(default_factory=list)  # the DSL lines sent around the findings under debate
    debated: set[str] = field(default_factory=set)  # finding ids an answered call was asked about
    not_debated: dict[str, str] = field(default_factory=dict)  # finding id -> why the budget left it out
    debated_in: dict[str, str] = field(default_factory=dict)  # finding id -> the segment that debated it (its key)
    budget_skips: int = 0  # calls the mission's budget could not pay for

    def findings_dicts(self) -> list[dict]:
        """The segment's findings, each marked debated or not (with the reason)."""
        return [{**f.to_dict(), "debated": f.id not in self.not_debated,
                 **({"not_debated": self.not_debated[f.id]} if f.id in self.not_debated else {}),
                 **({"debated_in": self.debated_in[f.id]} if f.id in self.debated_in else {})}
                for f in self.findings]

    def to_dict(self) -> dict:
        return {"id": self.segment_id, "t_start": self.t_start, "t_end": self.t_end, "layer": self.route.layer,
                "complexity": self.route.score, "complexity_terms": self.route.terms, "rounds": len(self.rounds),
                "route_reason": self.route.reason, "route_agents": self.route.agents,
                "stop_reason": self.stop_reason, "panel_label": self.panel_label, "decided_by": self.decided_by,
                "consensus": self.rounds[-1].consensus if self.rounds else {}, "uncertainty": self.uncertainty,
                "invalid_citations": dict(self.invalid), "tokens": dict(self.tokens),
                "judge": self.judge.to_dict() if self.judge else None,
                **({"judge_skipped": self.judge_skipped} if self.judge_skipped else {}),
                "findings": self.findings_dicts(), "struck": quality.count(self.struck),
                "inadmissible": dict(self.inadmissible),
                **({"admissible": self.admissible.to_dict()} if self.admissible is not None else {})}


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
    budget: dict = field(default_factory=dict)  # agenda.Ledger.to_dict: budget, spent, left, left_out

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
            "tokens": {**tokens, "estimated": self.estimated_tokens, "by_part": self.token_parts(), **self.budget},
            "recommendations": list(self.verdict.recommendations),
            "segments": [s.to_dict() for s in self.segments],
            "uncertainty": {**self.uncertainty(), "low_confidence": self.verdict.low_confidence},
            "invalid_citations": self.invalid_citations(),
            "struck": quality.count([x for s in self.segments for x in s.struck]),
            "inadmissible": {k: int(sum(s.inadmissible[k] for s in self.segments))
                             for k in ("answers", "repaired", "dropped")},
            "label": self.verdict.label,
            "panel_label": self.verdict.panel_label,
            "verifier_label": self.verdict.verifier_label,
            "overridden": self.verdict.overridden,
            "failures": list(self.failures),
            "fallback": self.fallback,
            "elapsed_s": self.elapsed_s,
        }
