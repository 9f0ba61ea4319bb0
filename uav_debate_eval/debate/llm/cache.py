"""Disk cache of chat results, so re-evaluating the same mission with the same model costs 0 tokens.

Key: SHA-256 of (backend, model, messages, schema, valid ids, sampling parameters). One JSON file per key, written to
a temporary file and renamed into place, so concurrent writers (threads or processes) never leave a torn entry.
Only successful results are stored: a failure must be retried next time, not replayed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from .base import ChatRequest, ChatResult, LLMBackend

DEFAULT_CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "uav_debate_eval"


def cache_key(backend: str, model: str | None, request: ChatRequest) -> str:
    """Stable hex key; `agent` and `round` are labels, not inputs, so they are not part of it."""
    payload = {
        "backend": backend,
        "model": model,
        "messages": request.messages,
        "schema": request.json_schema,
        "valid_ids": request.valid_ids,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "seed": request.seed,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class DiskCache:
    """`get`/`put` ChatResults by key under `root` (created on first write)."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else DEFAULT_CACHE_DIR

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> ChatResult | None:
        """The stored result, or None when absent or unreadable (a corrupt entry is a miss, not a crash)."""
        try:
            row = json.loads(self._path(key).read_text(encoding="utf-8"))
            return ChatResult(**row)
        except (OSError, ValueError, TypeError):
            return None

    def put(self, key: str, result: ChatResult) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(dataclasses.asdict(result), fh, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class CachedBackend:
    """Wraps any backend: a hit returns the stored result with cached=True, 0 new tokens, original counts kept aside."""

    def __init__(self, inner: LLMBackend, cache: DiskCache, *, enabled: bool = True):
        self.inner = inner
        self.cache = cache
        self.enabled = enabled
        self.name = inner.name
        self.model = inner.model
        self.max_concurrency = getattr(inner, "max_concurrency", None)

    def __repr__(self) -> str:
        return f"CachedBackend({self.inner!r}, root={str(self.cache.root)!r}, enabled={self.enabled})"

    async def chat(self, request: ChatRequest) -> ChatResult:
        if not self.enabled:
            return await self.inner.chat(request)
        ensure_model = getattr(self.inner, "ensure_model", None)
        if ensure_model is not None:  # the key needs the real model name, which a server may only tell on request
            self.model = await ensure_model()
        key = cache_key(self.inner.name, self.inner.model, request)
        start = time.perf_counter()
        hit = self.cache.get(key)
        if hit is not None:
            return dataclasses.replace(
                hit,
                cached=True,
                cached_prompt_tokens=hit.prompt_tokens,
                cached_completion_tokens=hit.completion_tokens,
                prompt_tokens=0,
                completion_tokens=0,
                attempts=0,
                latency_s=time.perf_counter() - start,
            )
        result = await self.inner.chat(request)
        self.model = self.inner.model
        if result.ok:
            self.cache.put(key, result)
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()
