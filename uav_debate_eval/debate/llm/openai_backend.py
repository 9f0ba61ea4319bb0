"""Backend for any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp servers) via the official SDK.

Structured output, best first: `json_schema` (OpenAI, vLLM, Ollama, llama-server), `json_object` + `schema`
(llama-cpp-python's server), then the tagged text protocol. In "auto" mode a 400/422 on the response format steps
down one level, and the level that worked is kept for later calls. An answer that still does not parse gets ONE
repair re-prompt. The API key lives only inside the SDK client: never logged, never in repr, results or errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Awaitable, Callable

import openai

from .base import ChatRequest, ChatResult
from .resilience import (
    BackendUnavailable,
    MalformedResponse,
    RetryError,
    RetryPolicy,
    call_with_retries,
    describe_error,
)
from .structured import (
    format_instructions,
    is_panel_schema,
    max_answer_chars,
    parse_for_schema,
    repair_prompt,
    response_schema,
)

MODES = ("json_schema", "json_object", "text")


class OpenAIBackend:
    """`chat` never raises: failures come back as ChatResult(error=..., data=None) after the retry policy ran out."""

    name = "openai"

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        policy: RetryPolicy | None = None,
        structured: str = "auto",
        strict: bool = True,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        if structured != "auto" and structured not in MODES:
            raise ValueError(f"structured must be 'auto' or one of {MODES}, got {structured!r}")
        key = api_key or os.environ.get(api_key_env)
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not key and not base_url:
            raise BackendUnavailable(f"openai backend: no API key (${api_key_env}) and no base_url for a local server")
        self.policy = policy or RetryPolicy()
        # Local servers accept any key; the SDK insists on one. SDK retries are off: ours count and back off.
        self._client = openai.AsyncOpenAI(
            api_key=key or "not-needed", base_url=base_url, max_retries=0, timeout=self.policy.timeout_s
        )
        self.base_url = str(self._client.base_url)
        self.model = model or os.environ.get("UAV_DEBATE_EVAL_MODEL")
        self.strict = strict
        self._auto = structured == "auto"
        self._mode = "json_schema" if self._auto else structured
        self._rng = rng or random.Random()
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r}, mode={self._mode!r})"

    @property
    def mode(self) -> str:
        """The structured-output level in use (may step down in "auto" mode)."""
        return self._mode

    async def ensure_model(self) -> str | None:
        """Model name from config/env, else the server's first listed model (local servers serve one)."""
        if self.model is None:
            try:
                page = await asyncio.wait_for(self._client.models.list(), self.policy.timeout_s)
                self.model = page.data[0].id if page.data else None
            except Exception:  # an unreachable server shows up as the chat call's error, with retries
                return None
        return self.model

    async def aclose(self) -> None:
        await self._client.close()

    async def chat(self, request: ChatRequest) -> ChatResult:
        start = time.perf_counter()
        state = {"attempts": 0, "prompt": 0, "completion": 0}
        schema = request.json_schema or response_schema(request.valid_ids)
        messages = list(request.messages)
        text, error = "", "no answer"
        repaired: str | None = None
        try:
            if await self.ensure_model() is None:
                raise BackendUnavailable("openai backend: no model configured and the server lists none")
            for turn in range(2):
                text, mode = await self._complete(messages, schema, request, state)
                data, error = parse_for_schema(text, schema, request.valid_ids)
                if data is not None:
                    return self._result(request, state, start, text=text, data=data, repaired=repaired)
                if turn == 0:  # one repair re-prompt, then give up
                    fix = repair_prompt(error, json_mode=mode != "text", valid_ids=request.valid_ids, schema=schema)
                    messages = [*messages, {"role": "assistant", "content": text}, fix]
                    repaired = error
        except RetryError as exc:
            error = str(exc)
        except BackendUnavailable as exc:
            error = str(exc)
        except Exception as exc:  # never let one agent's failure escape into the round
            error = describe_error(exc)
        return self._result(request, state, start, text=text, error=f"{self.name}: {error}", repaired=repaired)

    def _result(self, request: ChatRequest, state: dict, start: float, **kw) -> ChatResult:
        return ChatResult(
            prompt_tokens=state["prompt"],
            completion_tokens=state["completion"],
            model=self.model,
            latency_s=time.perf_counter() - start,
            attempts=state["attempts"],
            **kw,
        )

    async def _complete(self, messages: list[dict], schema: dict, request: ChatRequest, state: dict) -> tuple[str, str]:
        """One completion (with retries); in auto mode, step down the structured-output level on 400/422."""
        while True:
            mode = self._mode
            kwargs = _format_kwargs(mode, schema, request, self.strict)
            sent = _with_instructions(messages, schema, request.valid_ids) if mode == "text" else messages

            async def call(kwargs=kwargs, sent=sent, mode=mode):
                try:
                    response = await self._client.chat.completions.create(
                        model=self.model,
                        messages=sent,
                        temperature=request.temperature,
                        max_tokens=_budget(mode, schema, request.max_tokens),
                        seed=request.seed,
                        **kwargs,
                    )
                except (json.JSONDecodeError, openai.APIResponseValidationError) as exc:
                    raise MalformedResponse("body is not JSON") from exc
                except openai.APIStatusError as exc:
                    if mode != "text" and _rejects_format(exc):
                        raise FormatRejected(mode) from exc
                    raise
                if not isinstance(getattr(response, "choices", None), list) or not response.choices:
                    raise MalformedResponse("no choices")
                return response

            def count(_n: int) -> None:
                state["attempts"] += 1

            try:
                response = await call_with_retries(
                    call, self.policy, rng=self._rng, sleep=self._sleep, on_attempt=count
                )
            except RetryError as exc:
                if self._auto and isinstance(exc.last, FormatRejected):
                    self._mode = MODES[MODES.index(mode) + 1]
                    continue
                raise
            usage = getattr(response, "usage", None)
            if usage is not None:
                state["prompt"] += usage.prompt_tokens or 0
                state["completion"] += usage.completion_tokens or 0
            return response.choices[0].message.content or "", mode


class FormatRejected(RuntimeError):
    """The server refused the structured-output format itself (not retryable; "auto" mode steps down)."""

    def __init__(self, mode: str):
        super().__init__(f"server does not accept response_format {mode!r}")


def _rejects_format(exc: openai.APIStatusError) -> bool:
    """400/422 naming the response format, or llama-cpp-python's 500 for a request validation error."""
    if exc.status_code not in (400, 422, 500):
        return False
    text = f"{exc.message} {exc.body}".lower()
    return "response_format" in text or "json_schema" in text


def _budget(mode: str, schema: dict, max_tokens: int) -> int:
    """Under a constrained format the schema bounds the answer; never cut it mid-JSON with a smaller budget."""
    return max(max_tokens, max_answer_chars(schema)) if mode != "text" and is_panel_schema(schema) else max_tokens


def _format_kwargs(mode: str, schema: dict, request: ChatRequest, strict: bool) -> dict:
    if mode == "json_schema":
        name = "panel_response" if is_panel_schema(schema) else "response"
        spec = {"name": name, "schema": schema, "strict": strict}
        return {"response_format": {"type": "json_schema", "json_schema": spec}}
    if mode == "json_object":
        return {"response_format": {"type": "json_object", "schema": schema}}
    return {}


def _with_instructions(messages: list[dict], schema: dict, valid_ids: list[str]) -> list[dict]:
    """Append the format instructions to the system message (or add one) for servers that cannot constrain."""
    if is_panel_schema(schema):
        note = format_instructions(valid_ids)
    else:
        compact = json.dumps(schema, separators=(",", ":"))
        note = f"Reply with one JSON object only, matching this JSON schema: {compact}"
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0]['content']}\n{note}"
    else:
        out.insert(0, {"role": "system", "content": note})
    return out
