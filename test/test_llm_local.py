"""Local backend in process (llama-cpp-python + SmolLM2): every answer parses and cites only existing ids."""

import asyncio
import importlib.util

import pytest

from uav_debate_eval.debate.llm.base import ChatRequest
from uav_debate_eval.debate.llm.resilience import BackendUnavailable
from uav_debate_eval.debate.llm.structured import response_schema

pytestmark = [pytest.mark.llm, pytest.mark.slow]

PROMPTS = [
    (
        "You are the Safety Assessment Expert. Zero trust.",
        "SEG[0] takeoff, min separation 6.1 m\nSEG[1] formation, min separation 2.4 m (limit 3 m)\n"
        "EVENT[0] proximity uav1-uav2 2.4 m at 41 s\nRISK[0] separation below limit 41-43 s\nAssess safety.",
        ["SEG[0]", "SEG[1]", "EVENT[0]", "RISK[0]"],
    ),
    (
        "You are the Flight Control Specialist. Penalise deviations above 5 %.",
        "SEG[2] cruise, RMS path error 0.8 m\nEVENT[3] sharp_turn uav2 48 deg at 12 s\nEVENT[4] altitude_rate 3.4 m/s\n"
        "Assess flight control.",
        ["SEG[2]", "EVENT[3]", "EVENT[4]"],
    ),
    (
        "You are the Swarm Coordination Expert. Look at group statistics.",
        "SEG[5] formation hold, spacing std 0.3 m\nSEG[6] split, cohesion 0.71\nAssess coordination.",
        ["SEG[5]", "SEG[6]"],
    ),
]


@pytest.fixture(scope="module")
def backend():
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    from uav_debate_eval.debate.llm.local_backend import LocalBackend

    try:
        yield LocalBackend(n_ctx=1024, seed=0)
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


def _request(system: str, user: str, ids: list[str], **kw) -> ChatRequest:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    schema = response_schema(ids, text_max=60, note_max=30)  # short caps: the 135M model fills strings to the cap
    return ChatRequest(messages=messages, valid_ids=ids, json_schema=schema, **kw)


@pytest.mark.parametrize("index", range(len(PROMPTS)))
def test_constrained_answer_parses_with_valid_ids(backend, index):
    system, user, ids = PROMPTS[index]
    result = asyncio.run(backend.chat(_request(system, user, ids, max_tokens=64)))  # raised to the schema's bound
    assert result.ok, result.error
    data = result.data
    assert 3 <= len(data["evidence"]) <= 5
    assert all(item.split(":")[0] in ids for item in data["evidence"])  # "ID: note", id from the enum
    assert data["cited_ids"] and set(data["cited_ids"]) <= set(ids) and data["invalid_ids"] == []
    assert data["confidence"] in [round(0.05 * i, 2) for i in range(21)]
    assert data["label"] in ("safe", "borderline", "risky")
    assert result.prompt_tokens > 20 and result.completion_tokens > 10
    assert result.model == "SmolLM2-135M-Instruct.Q4_1" and not result.cached


def test_calls_are_serialised_and_the_event_loop_stays_free(backend):
    system, user, ids = PROMPTS[2]

    async def run():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        tick_task = asyncio.create_task(ticker())
        results = await asyncio.gather(*(backend.chat(_request(system, user, ids, seed=s)) for s in (1, 2)))
        done.set()
        await tick_task
        return results, ticks

    results, ticks = asyncio.run(run())
    assert all(r.ok for r in results), [r.error for r in results]
    assert ticks > 20  # the loop kept running while llama worked in a thread


def test_timeout_and_context_overflow_are_clean_errors(backend):
    system, user, ids = PROMPTS[0]
    backend.timeout_s, saved = 0.0, backend.timeout_s
    try:
        result = asyncio.run(backend.chat(_request(system, user, ids)))
    finally:
        backend.timeout_s = saved
    assert result.data is None and result.error == "local: TimeoutError: local generation exceeded 0 s"
    huge = _request(system, user + " SEG[0]" * 2000, ids)
    result = asyncio.run(backend.chat(huge))
    assert result.data is None and result.error.startswith("local: ValueError: Requested tokens")


def test_missing_model_file_is_unavailable(tmp_path):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    from uav_debate_eval.debate.llm.local_backend import LocalBackend

    with pytest.raises(BackendUnavailable, match="missing.gguf not found"):
        LocalBackend(tmp_path / "missing.gguf")


def test_cancelled_call_stops_generating_and_frees_the_lock(backend, monkeypatch):
    system, user, ids = PROMPTS[1]
    request = _request(system, user, ids)
    request.json_schema = response_schema(ids)  # default caps: a full answer is well over 40 tokens
    produced = []
    create = backend._llm.create_chat_completion

    def counting(**kw):
        for chunk in create(**kw):
            produced.append(chunk["choices"][0]["delta"].get("content"))
            yield chunk

    monkeypatch.setattr(backend._llm, "create_chat_completion", counting)

    async def run():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(backend.chat(request), 0.05)  # cancelled while the prompt is still being read

    asyncio.run(run())  # returns only once the worker thread has ended
    assert len([p for p in produced if p]) <= 2
    assert backend._lock.acquire(timeout=0.1)
    backend._lock.release()


#: The demo's segment S2 under load (stop 43): the model's whole output, cut at max_tokens=128 inside its note.
CUT_IN_NOTE = ('{ "findings": [{"id":"F1","stance":"endorse", "reason" : "mission_impact"}, {"id":"F2","stance":'
               '"dispute", "reason" : "outside_mission_scope"}], "label":"safe", "confidence":0.95, '
               '"recommendations":[ "R1"],"note":"A3-7486 (MISS) - A2-FBZC/TKLADI / 2018-01-23_')
CHOICES = {"type": "object", "additionalProperties": False, "required": [
    "findings", "label", "confidence", "recommendations", "note"], "properties": {
    "findings": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "object", "properties": {
        "id": {"enum": ["F1", "F2"]}, "stance": {"enum": ["endorse", "dispute"]}, "reason": {"type": "string"}}}},
    "label": {"enum": ["safe", "borderline"]}, "confidence": {"type": "number"},
    "recommendations": {"type": "array", "items": {"enum": ["R1", "R2"]}},
    "note": {"type": "string", "maxLength": 160}}}


@pytest.mark.parametrize("cut, kept", [(len(CUT_IN_NOTE), True), (CUT_IN_NOTE.index('"label"'), False)])
def test_an_answer_cut_in_its_note_keeps_its_choices(backend, monkeypatch, cut, kept):
    """The model made every choice and ran on in its free-text note until the cap: its choices stand, the half
    sentence is dropped (before: the whole answer failed and the segment fell back to the rules agents). Cut
    before the choices are made, it stays an error."""
    text = CUT_IN_NOTE[:cut]

    def replay(**kw):
        pieces = [text[i:i + 3] for i in range(0, len(text), 3)]  # a chunk per token, as llama streams them
        for i, piece in enumerate(pieces):
            yield {"choices": [{"delta": {"content": piece},
                                "finish_reason": "length" if i == len(pieces) - 1 else None}]}

    monkeypatch.setattr(backend._llm, "create_chat_completion", replay)
    request = ChatRequest(messages=[{"role": "user", "content": "choose"}], valid_ids=["F1", "F2"],
                          json_schema=CHOICES, max_tokens=128)
    result = asyncio.run(backend.chat(request))
    assert result.text == text
    if kept:
        assert result.error is None and result.data == {
            "findings": [{"id": "F1", "stance": "endorse", "reason": "mission_impact"},
                         {"id": "F2", "stance": "dispute", "reason": "outside_mission_scope"}],
            "label": "safe", "confidence": 0.95, "recommendations": ["R1"], "note": ""}
    else:
        assert result.data is None and result.error.startswith("local: output cut at max_tokens=128")
