"""Backend construction from a small config, concurrent agent calls, and token accounting.

`make_backend` returns None for "rules" (the protocol runs rule agents) and raises BackendUnavailable when an LLM
backend cannot start, which callers turn into a rules fallback that the report states.
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from .base import ChatRequest, ChatResult, LLMBackend
from .cache import CachedBackend, DiskCache
from .resilience import BackendUnavailable, RetryPolicy

BACKENDS = ("rules", "local", "openai")
OPENAI_TIMEOUT_S = 60.0
# A 135M model on two busy cores needs ~1-2 min for a 3k-token prompt plus a constrained answer.
LOCAL_TIMEOUT_S = 300.0


@dataclass
class LLMConfig:
    """`model`: a model name (openai) or GGUF path (local); None means $UAV_DEBATE_EVAL_MODEL / the default model.

    `structured` ("auto", "json_schema", "json_object", "text") only matters for the openai backend.
    """

    backend: str = "rules"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float | None = None  # per call; None: 60 s for openai, 300 s for local (CPU prompt processing)
    max_retries: int = 2
    cache_dir: str | Path | None = None
    use_cache: bool = True
    temperature: float = 0.2
    max_tokens: int = 512
    n_ctx: int = 4096
    n_threads: int | None = None
    seed: int = 0
    structured: str = "auto"


def make_backend(config: LLMConfig) -> LLMBackend | None:
    """The configured backend, wrapped in the disk cache unless `use_cache` is off; None for "rules"."""
    if config.backend not in BACKENDS:
        raise ValueError(f"unknown LLM backend {config.backend!r}; expected one of {', '.join(BACKENDS)}")
    if config.backend == "rules":
        return None
    backend: LLMBackend
    if config.backend == "local":
        from .local_backend import LocalBackend  # llama_cpp is imported only when asked for

        backend = LocalBackend(
            config.model or os.environ.get("UAV_DEBATE_EVAL_MODEL"),
            n_ctx=config.n_ctx,
            n_threads=config.n_threads,
            seed=config.seed,
            timeout_s=config.timeout_s or LOCAL_TIMEOUT_S,
        )
    else:
        from .openai_backend import OpenAIBackend

        backend = OpenAIBackend(
            model=config.model,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            policy=RetryPolicy(timeout_s=config.timeout_s or OPENAI_TIMEOUT_S, max_retries=config.max_retries),
            structured=config.structured,
        )
    if not config.use_cache:
        return backend
    return CachedBackend(backend, DiskCache(config.cache_dir))


def request_defaults(config: LLMConfig, **fields) -> ChatRequest:
    """A ChatRequest carrying the config's sampling parameters; `fields` (messages, agent, round, ...) fill the rest."""
    fields.setdefault("temperature", config.temperature)
    fields.setdefault("max_tokens", config.max_tokens)
    fields.setdefault("seed", config.seed)
    return ChatRequest(**fields)


async def run_concurrently(backend: LLMBackend, requests: list[ChatRequest], max_parallel: int = 4) -> list[ChatResult]:
    """All requests at once, at most `max_parallel` in flight; results in request order; never raises per call."""
    gate = asyncio.Semaphore(max(1, max_parallel))

    async def one(request: ChatRequest) -> ChatResult:
        async with gate:
            try:
                return await backend.chat(request)
            except Exception as exc:  # a backend bug must not take the other agents down with it
                return ChatResult(text="", error=f"{backend.name}: {type(exc).__name__}: {exc}")

    return list(await asyncio.gather(*(one(r) for r in requests)))


class TokenLedger:
    """Prompt/completion tokens per agent, per round and per mission; cache hits are counted apart (they cost 0)."""

    def __init__(self) -> None:
        self._agent: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self._round: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        self.prompt = 0
        self.completion = 0
        self.cached_prompt = 0
        self.cached_completion = 0
        self.calls = 0
        self.cache_hits = 0
        self.failures = 0

    def add(self, request: ChatRequest, result: ChatResult) -> None:
        self.calls += 1
        self.cache_hits += int(result.cached)
        self.failures += int(result.error is not None)
        for bucket in (self._agent[request.agent], self._round[request.round]):
            bucket[0] += result.prompt_tokens
            bucket[1] += result.completion_tokens
        self.prompt += result.prompt_tokens
        self.completion += result.completion_tokens
        self.cached_prompt += result.cached_prompt_tokens
        self.cached_completion += result.cached_completion_tokens

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def to_dict(self) -> dict:
        """{"prompt", "completion"} as the report's `debate.tokens` wants, plus the breakdowns."""
        return {
            "prompt": self.prompt,
            "completion": self.completion,
            "cached_prompt": self.cached_prompt,
            "cached_completion": self.cached_completion,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "failures": self.failures,
            "per_agent": {a: {"prompt": p, "completion": c} for a, (p, c) in sorted(self._agent.items())},
            "per_round": {str(r): {"prompt": p, "completion": c} for r, (p, c) in sorted(self._round.items())},
        }


__all__ = [
    "BACKENDS",
    "BackendUnavailable",
    "LLMConfig",
    "TokenLedger",
    "make_backend",
    "request_defaults",
    "run_concurrently",
]
