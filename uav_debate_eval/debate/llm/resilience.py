"""Per-call timeout and retries with exponential backoff and jitter, so one flaky agent never stalls a round.

Retried: HTTP 429 and 5xx, timeouts, connection errors. Everything else (400, 401, 404, a bad schema) fails at once:
retrying cannot fix it. Sleep and randomness are injectable so tests are fast and deterministic.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import openai

T = TypeVar("T")
log = logging.getLogger(__name__)


class BackendUnavailable(RuntimeError):
    """The backend cannot run at all (library or model missing, no endpoint); callers fall back to rules agents."""


class MalformedResponse(RuntimeError):
    """HTTP 200 whose body is not a usable completion: the server's fault, so it is retried like a 5xx."""


class RetryError(RuntimeError):
    """The call still failed after the last attempt; `attempts` counts every try, `last` is the final error."""

    def __init__(self, last: BaseException, attempts: int):
        super().__init__(f"{describe_error(last)} after {attempts} attempt(s)")
        self.last = last
        self.attempts = attempts


@dataclass
class RetryPolicy:
    """`max_retries` extra tries after the first; delay before retry k (1-based) is base*2^(k-1), capped, jittered."""

    timeout_s: float = 60.0
    max_retries: int = 2
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    jitter: float = 0.5

    def delay(self, retry: int, rng: random.Random, retry_after_s: float | None = None) -> float:
        """Backoff before retry number `retry`; a server's Retry-After wins when it asks for longer (still capped)."""
        base = min(self.max_delay_s, self.base_delay_s * 2 ** (retry - 1))
        wait = base * (1.0 - self.jitter * rng.random())
        if retry_after_s is not None:
            wait = max(wait, retry_after_s)
        return min(self.max_delay_s, wait)


def is_retryable(exc: BaseException) -> bool:
    """True for rate limits, server errors, timeouts and connection failures."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, MalformedResponse):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def describe_error(exc: BaseException) -> str:
    """One line naming the failure, never the request (whose headers carry the API key)."""
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code} ({type(exc).__name__})"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, openai.APITimeoutError)):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection error"
    if isinstance(exc, MalformedResponse):
        return f"malformed response ({exc})"
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    on_attempt: Callable[[int], None] | None = None,
) -> T:
    """Await `fn()` under `policy.timeout_s`, retrying retryable failures; raise RetryError after the last attempt.

    `on_attempt(n)` is called before every try (n = 1, 2, ...) so callers can count HTTP requests.
    """
    rng = rng or random.Random()
    attempt = 0
    while True:
        attempt += 1
        if on_attempt is not None:
            on_attempt(attempt)
        try:
            return await asyncio.wait_for(fn(), policy.timeout_s)
        except Exception as exc:  # classified below; non-retryable ones end the loop at once
            if not is_retryable(exc) or attempt > policy.max_retries:
                raise RetryError(exc, attempt) from exc
            wait = policy.delay(attempt, rng, _retry_after(exc))
            log.info(
                "LLM call failed (%s), retry %d/%d in %.2f s", describe_error(exc), attempt, policy.max_retries, wait
            )
            await sleep(wait)
