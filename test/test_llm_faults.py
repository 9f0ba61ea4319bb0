"""OpenAI backend against a scripted HTTP server: retries, timeouts, malformed bodies, repair, bad ids, key secrecy."""

import asyncio
import dataclasses
import json
import logging
import random
import time

import pytest
from llm_fault_server import FaultServer

from uav_debate_eval.debate.llm.base import ChatRequest
from uav_debate_eval.debate.llm.openai_backend import OpenAIBackend
from uav_debate_eval.debate.llm.resilience import BackendUnavailable, RetryPolicy

KEY = "sk-test-SECRET-4242"
IDS = ["SEG[0]", "SEG[1]", "EVENT[2]"]
GOOD = json.dumps(
    {
        "claim": "Separation dropped below the limit.",
        "evidence": [
            {"id": "SEG[1]", "note": "min separation 2.4 m"},
            {"id": "EVENT[2]", "note": "proximity at 41 s"},
            {"id": "SEG[0]", "note": "takeoff nominal"},
        ],
        "counter": "Short breach.",
        "summary": "Risky. Recommend 4 m spacing.",
        "confidence": 0.8,
        "label": "risky",
    }
)
MESSAGES = [{"role": "system", "content": "You are the safety expert."}, {"role": "user", "content": "Assess SEG[1]."}]


def _request() -> ChatRequest:
    return ChatRequest(messages=MESSAGES, agent="safety", round=1, valid_ids=IDS)


def _backend(url: str, *, sleeps: list | None = None, structured: str = "json_schema", **policy) -> OpenAIBackend:
    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return OpenAIBackend(
        base_url=url,
        api_key=KEY,
        model="scripted",
        structured=structured,
        policy=RetryPolicy(**{"timeout_s": 5.0, "max_retries": 2, **policy}),
        rng=random.Random(7),
        sleep=fake_sleep if sleeps is not None else asyncio.sleep,
    )


async def _chat(backend: OpenAIBackend, request: ChatRequest | None = None):
    try:
        return await backend.chat(request or _request())
    finally:
        await backend.aclose()


def test_429_then_success_retries_once_with_backoff():
    sleeps: list[float] = []
    with FaultServer([{"status": 429}, {"content": GOOD}]) as srv:
        result = asyncio.run(_chat(_backend(srv.url, sleeps=sleeps)))
        sent = srv.chat_requests
    assert result.ok and result.error is None
    assert result.attempts == 2 and len(sent) == 2
    expected = 0.5 * (1 - 0.5 * random.Random(7).random())  # base 0.5 s, jitter 0.5, seeded
    assert sleeps == [pytest.approx(expected)]
    assert (result.prompt_tokens, result.completion_tokens) == (11, 7)
    fmt = sent[1]["body"]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"]["evidence"]["items"]["properties"]["id"]["enum"] == IDS


def test_retry_after_header_and_5xx_backoff_doubles():
    sleeps: list[float] = []
    script = [{"status": 429, "headers": {"Retry-After": "3"}}, {"status": 503}, {"content": GOOD}]
    with FaultServer(script) as srv:
        result = asyncio.run(_chat(_backend(srv.url, sleeps=sleeps)))
    assert result.ok and result.attempts == 3
    rng = random.Random(7)
    first, second = 0.5 * (1 - 0.5 * rng.random()), 1.0 * (1 - 0.5 * rng.random())
    assert first < 3.0
    assert sleeps == [3.0, pytest.approx(second)]  # Retry-After wins when longer; then base doubles


def test_retries_exhausted_gives_clean_error():
    sleeps: list[float] = []
    with FaultServer([{"status": 500}]) as srv:
        result = asyncio.run(_chat(_backend(srv.url, sleeps=sleeps, max_retries=3)))
    assert not result.ok and result.data is None
    assert result.attempts == 4 and len(sleeps) == 3
    assert result.error == "openai: HTTP 500 (InternalServerError) after 4 attempt(s)"


def test_non_retryable_status_fails_at_once():
    with FaultServer([{"status": 401}]) as srv:
        result = asyncio.run(_chat(_backend(srv.url, sleeps=[])))
    assert result.attempts == 1 and result.error == "openai: HTTP 401 (AuthenticationError) after 1 attempt(s)"


def test_timeouts_end_in_error_within_bounded_time():
    with FaultServer([{"delay": 10.0, "content": GOOD}]) as srv:
        t0 = time.perf_counter()
        result = asyncio.run(_chat(_backend(srv.url, timeout_s=0.3, max_retries=2, base_delay_s=0.01)))
        elapsed = time.perf_counter() - t0
        n_sent = len(srv.chat_requests)
    assert result.data is None and result.attempts == 3 and n_sent == 3
    assert result.error == "openai: timeout after 3 attempt(s)"
    assert 0.9 <= elapsed < 2.5  # 3 x 0.3 s timeouts + two short backoffs


def test_malformed_body_is_retried():
    with FaultServer([{"raw": "{this is not json"}, {"content": GOOD}]) as srv:
        result = asyncio.run(_chat(_backend(srv.url, sleeps=[])))
    assert result.ok and result.attempts == 2
    assert result.data["evidence"][0] == "SEG[1]: min separation 2.4 m"


def test_unparseable_content_gets_one_repair_prompt():
    with FaultServer([{"content": "I think it went fine."}, {"content": GOOD}]) as srv:
        result = asyncio.run(_chat(_backend(srv.url, sleeps=[])))
        sent = srv.chat_requests
    assert result.ok and result.attempts == 2
    assert (result.prompt_tokens, result.completion_tokens) == (22, 14)  # both calls counted
    repair = sent[1]["body"]["messages"]
    assert repair[:2] == MESSAGES
    assert repair[2] == {"role": "assistant", "content": "I think it went fine."}
    assert (
        repair[3]["role"] == "user"
        and "could not be used (missing claim, evidence or confidence)" in repair[3]["content"]
    )


def test_unparseable_twice_is_a_clean_error():
    with FaultServer([{"content": "no idea"}]) as srv:
        result = asyncio.run(_chat(_backend(srv.url, sleeps=[])))
        n_sent = len(srv.chat_requests)
    assert n_sent == 2 and result.attempts == 2
    assert result.data is None and result.text == "no idea"
    assert result.error == "openai: missing claim, evidence or confidence"


def test_an_answer_cut_in_its_trailing_note_keeps_its_choices_without_a_repair():
    """A server's max_tokens cut the answer inside its note (the schema's last, free-text property): the choices
    are whole, so they stand with an empty note and no repair call is spent."""
    schema = {"type": "object", "required": ["label", "note"], "additionalProperties": False,
              "properties": {"label": {"enum": ["safe", "risky"]}, "note": {"type": "string", "maxLength": 160}}}
    request = dataclasses.replace(_request(), json_schema=schema)
    with FaultServer([{"content": '{"label": "risky", "note": "uav2 came close to uav1 at the sec'}]) as srv:
        result = asyncio.run(_chat(_backend(srv.url, sleeps=[]), request))
        n_sent = len(srv.chat_requests)
    assert result.ok and n_sent == 1 and result.data == {"label": "risky", "note": ""}


def test_hallucinated_id_is_flagged():
    tagged = (
        "[CLAIM] Too close.\n[EVIDENCE]\n- SEG[1]: 2.4 m\n- EVENT[9]: invented\n- SEG[0]: fine\n"
        "[COUNTER] brief\n[SUMMARY] Recommend 4 m.\n[CONFIDENCE] 0.6\n[LABEL] risky"
    )
    with FaultServer([{"content": tagged}]) as srv:
        result = asyncio.run(_chat(_backend(srv.url, sleeps=[], structured="text")))
        body = srv.chat_requests[0]["body"]
    assert result.ok
    assert result.data["invalid_ids"] == ["EVENT[9]"]
    assert result.data["cited_ids"] == ["SEG[1]", "EVENT[9]", "SEG[0]"]
    assert "response_format" not in body
    assert "[CLAIM]" in body["messages"][0]["content"] and body["messages"][0]["content"].startswith("You are")


def test_auto_mode_steps_down_to_json_object_then_text():
    reject = {"status": 400, "message": "response_format type json_schema is not supported"}
    reject_obj = {"status": 422, "message": "unknown field response_format.schema"}
    tagged = "[CLAIM] ok\n[EVIDENCE]\n- SEG[0] fine\n[COUNTER] none\n[SUMMARY] keep\n[CONFIDENCE] 0.9\n[LABEL] safe"
    with FaultServer([reject, reject_obj, {"content": tagged}]) as srv:
        backend = _backend(srv.url, sleeps=[], structured="auto")
        result = asyncio.run(_chat(backend))
        kinds = [r["body"].get("response_format", {}).get("type") for r in srv.chat_requests]
    assert kinds == ["json_schema", "json_object", None]
    assert backend.mode == "text" and result.ok and result.attempts == 3
    assert result.data["label"] == "safe"


def test_model_is_taken_from_the_server_when_not_configured(monkeypatch):
    monkeypatch.delenv("UAV_DEBATE_EVAL_MODEL", raising=False)
    with FaultServer([{"content": GOOD}], model="served-model") as srv:
        backend = OpenAIBackend(base_url=srv.url, api_key=KEY)
        result = asyncio.run(_chat(backend))
        assert srv.chat_requests[0]["body"]["model"] == "served-model"
    assert result.model == "served-model" and backend.model == "served-model"


def test_no_key_and_no_base_url_is_unavailable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(BackendUnavailable, match="OPENAI_API_KEY"):
        OpenAIBackend()


def test_api_key_never_leaks(monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx", "httpcore", "httpx2", "httpcore2"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    results = []
    for script in ([{"status": 429}, {"content": GOOD}], [{"status": 401}], [{"raw": "<html>"}], [{"content": "x"}]):
        with FaultServer(script) as srv:
            backend = OpenAIBackend(base_url=srv.url, model="m", policy=RetryPolicy(max_retries=1, base_delay_s=0.01))
            results.append(asyncio.run(_chat(backend)))
            auth = srv.chat_requests[0]["headers"].get("authorization")
            texts = [repr(backend), str(vars(backend))]
    assert auth == f"Bearer {KEY}"  # the key was really used
    assert "LLM call failed (HTTP 429 (RateLimitError)), retry 1/1" in caplog.text  # logged, and clean
    texts += [caplog.text, *(repr(r) for r in results), *(json.dumps(dataclasses.asdict(r)) for r in results)]
    assert not [t for t in texts if KEY in t]
    assert [r.ok for r in results] == [True, False, False, False]
