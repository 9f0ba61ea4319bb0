"""A small in-process model serves every agent in turn: its agents queue, and its prompts are compact."""

from __future__ import annotations

import asyncio
import time

from debate_fakes import ScriptedBackend, answer, make_context

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.debate.engine import DebateConfig, run_debate
from uav_debate_eval.debate.prompts import metrics_text

T = (0.25, 0.55)


def CX(**kw) -> DebateConfig:
    """The complexity router (every agent in every round) on the hand-made segments."""
    return DebateConfig(router="complexity", router_thresholds=T, **kw)


class SlowLocal(ScriptedBackend):
    """Like the llama.cpp backend: one model behind a lock, each call takes `delay_s`."""

    name = "local"
    max_concurrency = 1

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock = asyncio.Lock()

    async def chat(self, request):
        async with self.lock:
            return await super().chat(request)


def test_local_agents_queue_and_the_timeout_counts_only_their_own_call():
    backend = SlowLocal(lambda req: answer(), delay_s=0.3)
    # Three agents at 0.3 s each: run together under a 0.5 s timeout, the third would time out in the queue.
    cfg = CX(agent_timeout_s=0.5, backend="local")
    start = time.perf_counter()
    result = run_debate([make_context()], Mission(), cfg, backend=backend)
    elapsed = time.perf_counter() - start
    assert result.failures == []
    assert len(result.rounds[0].responses) == 3
    assert elapsed >= 0.9  # serial: 3 x 0.3 s


def test_remote_agents_of_a_round_run_concurrently():
    backend = ScriptedBackend(lambda req: answer(), delay_s=0.3)
    cfg = CX(agent_timeout_s=0.5)
    start = time.perf_counter()
    result = run_debate([make_context()], Mission(), cfg, backend=backend)
    assert result.failures == [] and len(result.rounds[0].responses) == 3
    assert time.perf_counter() - start < 0.85


def test_compact_prompts_for_the_local_backend():
    assert DebateConfig(backend="local").compact and DebateConfig(backend="local").segment_dsl_budget == 400
    assert not DebateConfig(backend="openai").compact and DebateConfig().segment_dsl_budget == 1500
    assert DebateConfig(backend="openai", prompt_style="compact").compact
    assert DebateConfig(backend="local", dsl_budget_tokens=900).segment_dsl_budget == 900

    class M:
        scores = {"flight_control": 0.9, "coordination": None, "safety": 0.5, "overall": 0.7}
        details = {"safety": {f"m{i}": {"score": i / 10, "value": i, "unit": "m"} for i in range(9)},
                   "flight_control": {"smooth": {"score": None, "value": None, "unit": ""}}}

    full, compact = metrics_text(M).splitlines(), metrics_text(M, compact=True).splitlines()
    assert len(full) == 4 + 10
    assert compact[:4] == full[:4]
    assert [line.split(" =")[0] for line in compact[4:]] == [f"safety.m{i}" for i in range(5)]


def test_compact_prompts_share_one_prefix_across_the_agents_of_a_round():
    backend = ScriptedBackend(lambda req: answer())
    run_debate([make_context()], Mission(), CX(prompt_style="compact"),
               backend=backend)
    first_round = [r for r in backend.requests if r.round == 0]
    systems = {r.messages[0]["content"] for r in first_round}
    assert len(first_round) == 3 and len(systems) == 1  # identical prefix: a local model's KV cache is reused
    system = systems.pop()
    scores = system.split("SCORES: ", 1)[1].split("\n", 1)[0].split(", ")  # the findings state the weak metrics
    assert 1 <= len(scores) <= 4 and "METRICS:" not in system
    roles = [r.messages[1]["content"] for r in first_round]
    assert len(set(roles)) == 3 and all(x.startswith("You are the ") for x in roles)
    assert all("SCORES:" not in x for x in roles)  # each agent's own message: its role and its agenda (issue 36)
