"""Disk cache, backend factory, concurrent calls and token accounting."""

import asyncio
import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from llm_fault_server import FaultServer

from uav_debate_eval.debate.llm.base import ChatRequest, ChatResult
from uav_debate_eval.debate.llm.cache import CachedBackend, DiskCache, cache_key
from uav_debate_eval.debate.llm.factory import LLMConfig, TokenLedger, make_backend, request_defaults, run_concurrently
from uav_debate_eval.debate.llm.openai_backend import OpenAIBackend
from uav_debate_eval.debate.llm.resilience import BackendUnavailable

GOOD = json.dumps(
    {
        "claim": "Nominal flight.",
        "evidence": [{"id": "SEG[0]", "note": "min separation 6 m"}, "max speed 4 m/s", "no events"],
        "counter": "Short mission.",
        "summary": "Safe. Recommend longer tests.",
        "confidence": 0.9,
        "label": "safe",
    }
)


def _req(**kw) -> ChatRequest:
    base = {"messages": [{"role": "user", "content": "Assess SEG[0]."}], "valid_ids": ["SEG[0]"], "agent": "fc"}
    return ChatRequest(**{**base, **kw})


def test_second_identical_call_is_a_cache_hit(tmp_path):
    async def run(url):
        backend = CachedBackend(OpenAIBackend(base_url=url, api_key="k", model="m"), DiskCache(tmp_path))
        try:
            return [await backend.chat(_req(round=r)) for r in (1, 2)] + [await backend.chat(_req(temperature=0.7))]
        finally:
            await backend.aclose()

    with FaultServer([{"content": GOOD}]) as srv:
        first, second, other = asyncio.run(run(srv.url))
        n_sent = len(srv.chat_requests)
    assert n_sent == 2  # the hit never reached the server; another temperature is another key
    assert (first.cached, first.prompt_tokens, first.completion_tokens) == (False, 11, 7)
    assert (second.cached, second.prompt_tokens, second.completion_tokens) == (True, 0, 0)
    assert (second.cached_prompt_tokens, second.cached_completion_tokens, second.attempts) == (11, 7, 0)
    assert second.data == first.data and second.text == first.text
    assert other.cached is False


def test_failures_are_not_cached_and_flag_bypasses(tmp_path):
    async def run(url, enabled):
        backend = CachedBackend(
            OpenAIBackend(base_url=url, api_key="k", model="m"), DiskCache(tmp_path), enabled=enabled
        )
        try:
            return [await backend.chat(_req()) for _ in range(2)]
        finally:
            await backend.aclose()

    with FaultServer([{"status": 401}]) as srv:
        results = asyncio.run(run(srv.url, True))
        assert len(srv.chat_requests) == 2 and not any(r.cached for r in results)
    with FaultServer([{"content": GOOD}]) as srv:
        results = asyncio.run(run(srv.url, False))
        assert len(srv.chat_requests) == 2 and not any(r.cached for r in results)
    assert not list(tmp_path.rglob("*.json"))


def test_cache_key_covers_inputs_not_labels():
    base = cache_key("openai", "m", _req())
    assert cache_key("openai", "m", _req(agent="safety", round=3)) == base
    assert len({base, cache_key("local", "m", _req()), cache_key("openai", "m2", _req()),
                cache_key("openai", "m", _req(seed=1)), cache_key("openai", "m", _req(valid_ids=["SEG[1]"])),
                cache_key("openai", "m", _req(json_schema={"type": "object"}))}) == 6  # fmt: skip


def test_corrupt_entry_is_a_miss(tmp_path):
    cache = DiskCache(tmp_path)
    cache.put("ab" * 32, ChatResult(text="t", data={"a": 1}))
    assert cache.get("ab" * 32).data == {"a": 1}
    (tmp_path / "ab" / f"{'ab' * 32}.json").write_text("{trunc")
    assert cache.get("ab" * 32) is None
    assert cache.get("cd" * 32) is None


def test_concurrent_writers_leave_whole_entries(tmp_path):
    cache = DiskCache(tmp_path)
    key = "ef" * 32
    results = [ChatResult(text=str(i) * 1000, data={"i": i}, prompt_tokens=i) for i in range(40)]
    barrier = threading.Barrier(8)

    def write(chunk):
        barrier.wait()
        for r in chunk:
            cache.put(key, r)
            assert cache.get(key) is not None  # never a torn read

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, [results[i::8] for i in range(8)]))
    got = cache.get(key)
    assert got.text == str(got.data["i"]) * 1000 and got.prompt_tokens == got.data["i"]
    assert [p.name for p in tmp_path.rglob("*")] == ["ef", f"{key}.json"]  # no temp files left


class _Slow:
    """Fake backend recording how many calls are in flight at once."""

    name, model = "fake", "fake-1"

    def __init__(self):
        self.now = self.peak = 0

    async def chat(self, request: ChatRequest) -> ChatResult:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.01)
        self.now -= 1
        if request.agent == "boom":
            raise RuntimeError("bug in backend")
        return ChatResult(
            text=request.agent, data={}, prompt_tokens=10 * request.round, completion_tokens=request.round
        )

    async def aclose(self):
        pass


def test_run_concurrently_bounds_parallelism_and_keeps_order():
    backend = _Slow()
    reqs = [_req(agent=a, round=1) for a in ("a", "b", "boom", "d", "e")]
    results = asyncio.run(run_concurrently(backend, reqs, max_parallel=2))
    assert backend.peak == 2
    assert [r.text for r in results] == ["a", "b", "", "d", "e"]
    assert results[2].error == "fake: RuntimeError: bug in backend"
    backend = _Slow()
    asyncio.run(run_concurrently(backend, reqs, max_parallel=10))
    assert backend.peak == 5


def test_token_ledger_per_agent_round_mission():
    ledger = TokenLedger()
    ledger.add(_req(agent="fc", round=1), ChatResult(text="", data={}, prompt_tokens=100, completion_tokens=20))
    ledger.add(_req(agent="safety", round=1), ChatResult(text="", data={}, prompt_tokens=120, completion_tokens=30))
    ledger.add(_req(agent="fc", round=2), ChatResult(text="", error="x", prompt_tokens=50, completion_tokens=0))
    hit = ChatResult(text="", data={}, cached=True, cached_prompt_tokens=90, cached_completion_tokens=9)
    ledger.add(_req(agent="safety", round=2), hit)
    assert ledger.total == 320
    assert ledger.to_dict() == {
        "prompt": 270,
        "completion": 50,
        "cached_prompt": 90,
        "cached_completion": 9,
        "calls": 4,
        "cache_hits": 1,
        "failures": 1,
        "per_agent": {"fc": {"prompt": 150, "completion": 20}, "safety": {"prompt": 120, "completion": 30}},
        "per_round": {"1": {"prompt": 220, "completion": 50}, "2": {"prompt": 50, "completion": 0}},
    }


def test_make_backend(tmp_path, monkeypatch):
    assert make_backend(LLMConfig(backend="rules")) is None
    with pytest.raises(ValueError, match="unknown LLM backend 'gpt'"):
        make_backend(LLMConfig(backend="gpt"))
    with pytest.raises(BackendUnavailable, match="not found"):
        make_backend(LLMConfig(backend="local", model=str(tmp_path / "missing.gguf")))
    monkeypatch.setenv("MY_KEY", "secret-k")
    backend = make_backend(LLMConfig(backend="openai", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY",
                                     model="m", cache_dir=tmp_path, max_retries=5, timeout_s=3))  # fmt: skip
    assert isinstance(backend, CachedBackend) and backend.cache.root == tmp_path
    assert (backend.name, backend.model, backend.inner.policy.max_retries, backend.inner.policy.timeout_s) == (
        "openai", "m", 5, 3)  # fmt: skip
    plain = make_backend(LLMConfig(backend="openai", base_url="http://127.0.0.1:9/v1", use_cache=False))
    assert isinstance(plain, OpenAIBackend)
    req = request_defaults(LLMConfig(temperature=0.0, max_tokens=300, seed=4), messages=[], agent="x")
    assert dataclasses.astuple(req)[1:] == ("x", 0, None, [], 0.0, 300, 4)
