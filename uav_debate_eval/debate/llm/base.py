"""The one interface every LLM backend implements, so the debate protocol never knows which it talks to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class ChatRequest:
    """One agent turn. `json_schema` (when given) constrains the answer; `valid_ids` are the citable DSL ids."""

    messages: list[dict[str, str]]
    agent: str = ""
    round: int = 0
    json_schema: dict | None = None
    valid_ids: list[str] = field(default_factory=list)
    temperature: float = 0.2
    max_tokens: int = 512
    seed: int = 0


@dataclass
class ChatResult:
    """What came back. `data` is the parsed structured response (None if it never parsed); `error` says why."""

    text: str
    data: dict | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None
    cached: bool = False
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = None
    repaired: str | None = None  # why the first answer was re-prompted once (a backend's one repair), if it was
    # Added for the disk cache: on a hit the two counts above are 0 (nothing spent) and these hold the original ones.
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None and self.data is not None


class LLMBackend(Protocol):
    """`name` is "openai", "local" or a test double's name; `model` is what reports state. A backend may also set
    `max_concurrency` (an int) when it serves only that many calls at once; the panel then queues its agents."""

    name: str

    @property
    def model(self) -> str | None: ...  # read-only here: a backend may hold a plain str

    async def chat(self, request: ChatRequest) -> ChatResult: ...

    async def aclose(self) -> None: ...
