"""Agents: one per panel slot. RulesAgent answers deterministically; LLMAgent asks an LLMBackend.

Both build the same prompt messages (for the transcript). Rules token counts are *estimates*: the
dsl.tokens counter applied to the prompt and to the JSON answer, so budgets and benchmarks mean the same
for every backend; the report marks them `estimated`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from uav_debate_eval.debate import prompts
from uav_debate_eval.debate.choices import choice_answer, choice_schema, is_choice_answer, response_from_choices
from uav_debate_eval.debate.llm.base import ChatRequest, LLMBackend
from uav_debate_eval.debate.llm.structured import parse_json_object, parse_response, response_schema
from uav_debate_eval.debate.prompts import Turn
from uav_debate_eval.debate.response import AgentResponse, from_data
from uav_debate_eval.debate.rules import rules_response
from uav_debate_eval.dsl.tokens import count_tokens


@dataclass
class Reply:
    """One attempt of one agent: what it was asked, what came back, what it cost."""

    response: AgentResponse | None
    messages: list[dict[str, str]]
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    model: str | None = None
    error: str | None = None
    extra: dict = field(default_factory=dict)
    parts: dict[str, int] = field(default_factory=dict)  # estimated prompt tokens by part (prompts.part_tokens)


class RulesAgent:
    estimated_tokens = True

    def __init__(self, name: str):
        self.name = name

    async def respond(self, turn: Turn, previous_answer: AgentResponse | None = None) -> Reply:
        start = time.perf_counter()
        msgs = prompts.messages(turn, previous_answer)
        response, text = rules_answer(turn)
        return Reply(response, msgs, text,
                     prompt_tokens=sum(count_tokens(m["content"]) for m in msgs),
                     completion_tokens=count_tokens(text),
                     latency_s=time.perf_counter() - start, model="rules",
                     parts=prompts.part_tokens(turn, previous_answer))


def rules_answer(turn: Turn) -> tuple[AgentResponse, str]:
    """The rules agent's response and the JSON it counts as its completion: with findings a model writes only its
    choices (the tool composes the text), so that is what is counted."""
    response = rules_response(turn)
    answer = choice_answer(response, turn.findings, turn.admissible) if response.choices else response.to_dict()
    return response, json.dumps(answer)


class LLMAgent:
    estimated_tokens = False

    def __init__(self, name: str, backend: LLMBackend, temperature: float = 0.2, max_tokens: int = 512,
                 seed: int = 0):
        self.name, self.backend = name, backend
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed

    async def respond(self, turn: Turn, previous_answer: AgentResponse | None = None) -> Reply:
        msgs = prompts.messages(turn, previous_answer)
        schema = choice_schema(turn.findings, turn.admissible, aspect_items=turn.aspects) if turn.findings else \
            response_schema(turn.valid_ids + turn.metric_refs, quotes=turn.quotes)
        request = ChatRequest(messages=msgs, agent=self.name, round=turn.round, json_schema=schema,
                              valid_ids=turn.valid_ids + turn.metric_refs, temperature=self.temperature,
                              max_tokens=min(self.max_tokens, turn.completion_cap or self.max_tokens), seed=self.seed)
        result = await self.backend.chat(request)
        data, error = result.data, result.error
        if data is None and result.text:
            obj = parse_json_object(result.text)
            if turn.findings and is_choice_answer(obj):  # still inadmissible after the repair: read, then dropped
                data, error = obj, None
            elif error is None:
                data = obj if is_choice_answer(obj) else parse_response(result.text)
        if error is None and data is None:
            error = "unparseable response"
        response: AgentResponse | None = None
        extra: dict = {"attempts": result.attempts}
        if data is not None and error is None and is_choice_answer(data):
            response, dropped = response_from_choices(data, turn.findings, turn.persona.name, turn.ctx,
                                                      turn.admissible, turn.groups, turn.aspects)
            extra["inadmissible"] = _inadmissible(result.repaired, dropped)
        elif data is not None and error is None:
            response = from_data(data)
        return Reply(response, msgs, result.text,
                     result.prompt_tokens, result.completion_tokens, result.latency_s, result.cached,
                     result.model or self.backend.model, error, extra, prompts.part_tokens(turn, previous_answer))


def _inadmissible(repaired: str | None, dropped: int) -> dict[str, int]:
    """An answer the schema (the admissible choices) rejected first is repaired once; what is still inadmissible
    after that is dropped, each choice counted."""
    first = bool(repaired and repaired.startswith("schema violation"))
    return {"answers": int(first or dropped > 0), "repaired": int(first and not dropped), "dropped": dropped}
