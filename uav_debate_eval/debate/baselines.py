"""Baseline evaluators with the debate's report structure (one response per segment, no debate):

- single_metric: one number, the flight-control tracking metric (a metric whose name contains "track",
  else the first flight-control metric); label safe >= 0.9 > borderline >= 0.7 > risky on its score;
- fixed_weight: the mission's fixed category weights (0.35 / 0.40 / 0.25) over the three category scores,
  same thresholds;
- single_agent: one agent (the generalist persona, rules or LLM) answering once per segment.
All three go through the same verdict rules (the verifier's veto and borderline rule decide the label).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from uav_debate_eval.debate.cite import metric_evidence
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.engine import assemble, run_debate
from uav_debate_eval.debate.evidence import EvidenceVerifier, q_evidence
from uav_debate_eval.debate.personas import generalist_persona
from uav_debate_eval.debate.records import DebateResult, ResponseRecord, RoundRecord, SegmentContext, SegmentDebate
from uav_debate_eval.debate.response import AgentResponse
from uav_debate_eval.debate.router import Route

METHODS = ("single_metric", "fixed_weight", "single_agent")


def _label(score: float | None) -> str:
    if score is None:
        return "borderline"
    return "safe" if score >= 0.9 else "borderline" if score >= 0.7 else "risky"


def _tracking_metric(metrics: Any) -> tuple[str, dict] | None:
    rows = (getattr(metrics, "details", {}) or {}).get("flight_control") or {}
    named = [n for n in rows if "track" in n] or list(rows)
    return (named[0], rows[named[0]]) if named else None


def _single_metric(ctx: SegmentContext) -> AgentResponse:
    m = _tracking_metric(ctx.metrics)
    if m is None:
        return AgentResponse(claim=f"No flight-control metric for {ctx.segment_id}.", confidence=0.5,
                             assessment="borderline")
    name, d = m
    ev = metric_evidence("flight_control", name, d)
    return AgentResponse(claim=f"{ctx.segment_id} scored on {name} alone.", evidence=[ev],
                         summary=f"Single metric {name}.", confidence=1.0, assessment=_label(d.get("score")),
                         score=d.get("score"))


def _fixed_weight(ctx: SegmentContext, weights: dict[str, float]) -> AgentResponse:
    scores = getattr(ctx.metrics, "scores", {}) or {}
    used = {c: s for c in ("flight_control", "coordination", "safety")
            if isinstance(s := scores.get(c), (int, float))}
    total = sum(weights.get(c, 0.0) for c in used)
    value = sum(weights.get(c, 0.0) * s for c, s in used.items()) / total if total else None
    ev = [f"{c}.score = {s:.4g}" for c, s in used.items()]
    return AgentResponse(claim=f"{ctx.segment_id} weighted score {value if value is None else round(value, 3)}.",
                         evidence=ev, summary="Fixed weights " + ", ".join(f"{c} {weights.get(c, 0):g}" for c in used),
                         confidence=1.0, assessment=_label(value), score=value)


def _one_shot(method: str, contexts: list[SegmentContext], mission: Any, config: DebateConfig) -> DebateResult:
    start = time.perf_counter()
    weights = dict(getattr(mission, "weights", {}) or {"flight_control": 0.35, "coordination": 0.40, "safety": 0.25})
    segs = []
    for i, ctx in enumerate(contexts):
        resp = _single_metric(ctx) if method == "single_metric" else _fixed_weight(ctx, weights)
        checks = EvidenceVerifier(ctx.dsl, ctx.metrics).check_all(resp.evidence)
        rec = RoundRecord(i, ctx.segment_id, 0, 1, [], method, [])
        rec.responses = [ResponseRecord(method, method, "blue", True, resp,
                                        q_evidence(checks, " ".join(resp.evidence)), sum(c.valid for c in checks), [])]
        seg = SegmentDebate(ctx.segment_id, float(ctx.t_start), float(ctx.t_end), Route(1, 0.0, {}), [rec],
                            stop_reason="single_pass", panel_label=resp.assessment, decided_by=method)
        segs.append(seg)
    return assemble(segs, contexts, config, f"baseline:{method}", None, False, [], [], time.perf_counter() - start)


def evaluate_baseline(method: str, contexts: list[SegmentContext], mission: Any,
                      config: DebateConfig | None = None, backend: Any = None) -> DebateResult:
    """Run one baseline; `config`/`backend` choose the single agent's backend (rules by default)."""
    config = config or DebateConfig()
    if method == "single_agent":
        one = replace(config, mode="collaborative", max_rounds={1: 1, 2: 1, 3: 1}, min_rounds={1: 1, 2: 1, 3: 1},
                      jury_in_l3=False, judge="vote")  # one agent, no debate: nothing to judge
        return run_debate(contexts, mission, one, backend=backend, personas=[generalist_persona()])
    if method in ("single_metric", "fixed_weight"):
        return _one_shot(method, contexts, mission, config)
    raise ValueError(f"unknown baseline {method!r}; known: {', '.join(METHODS)}")
