"""The debate engine: routes each mission segment, runs red/blue (or collaborative) rounds, verifies evidence, monitors
quality, stops on budget/convergence, and hands the verdict to the deterministic veto override.

`run_debate` is the one entry point (sync wrapper over `run_debate_async`). Agents of a round run concurrently; an
agent that raises, times out or returns nothing usable is dropped for that round and recorded in `failures`.
Stopping, checked after every round in this order: `all_agents_failed`, `agreement` (sparse router: one label, mean
confidence >= agree_confidence), `early_stop` (Sim(S_r, S_r-1) > early_stop_similarity), `convergence` (|mean
score_r - mean score_r-1| < score_gap_eps; an agent without a score counts its label's score), `low_novelty` (only
with stop_on_low_novelty), `budget` (tokens used, or used + last round's cost, exceed token_budget), `max_rounds`
(the layer's limit, or the route's own: a vetoed segment's `veto_rounds`). early_stop, convergence and low_novelty
wait for the layer's `min_rounds` (L3 is "deep": at least 3 rounds).

Here: the agents, the mission verdict and the entry points; debate.panel runs the rounds, debate.records holds what
they produce.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from uav_debate_eval.debate import judge as judging
from uav_debate_eval.debate.agents import LLMAgent, RulesAgent
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.panel import Panel
from uav_debate_eval.debate.personas import Persona, load_personas
from uav_debate_eval.debate.records import DebateResult, SegmentContext, SegmentDebate

__all__ = ["DebateConfig", "DebateResult", "SegmentContext", "run_debate", "run_debate_async"]


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
    model: str | None
    if isinstance(agents[0], RulesAgent):
        backend_name, model, estimated = "rules", "rules", True
    else:
        backend_name, model, estimated = agents[0].backend.name, agents[0].backend.model or config.model, False
    _, vetoed = judging.verifier_label([c.safety for c in contexts])
    constraints = getattr(mission, "constraints", None)
    panel = Panel(agents, personas, config, vetoed, getattr(constraints, "max_speed_mps", None), progress,
                   len(contexts), mission, decide)
    try:
        segs = await panel.debate_all(contexts)
    finally:
        if owned is not None:
            await owned.aclose()
    result = assemble(segs, contexts, config, backend_name, model, estimated, panel.transcript, panel.failures,
                      time.perf_counter() - start, fallback)
    result.budget = panel.ledger.to_dict()
    return result


def run_debate(contexts: list[SegmentContext], mission: Any, config: DebateConfig | None = None,
               backend: Any = None, personas: list[Persona] | None = None,
               progress: Callable[[int, int], None] | None = None,
               decide: Callable[[np.ndarray], np.ndarray] | None = None) -> DebateResult:
    """Sync entry point for the pipeline and the nodes (must not be called from a running event loop)."""
    return asyncio.run(run_debate_async(contexts, mission, config, backend, personas, progress, decide))
