"""OpenAI backend end to end over real HTTP: llama-cpp-python's OpenAI-compatible server serving SmolLM2."""

import asyncio
import contextlib
import ctypes
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from uav_debate_eval.debate.llm.base import ChatRequest
from uav_debate_eval.debate.llm.cache import CachedBackend, DiskCache
from uav_debate_eval.debate.llm.openai_backend import OpenAIBackend
from uav_debate_eval.debate.llm.resilience import BackendUnavailable, RetryPolicy
from uav_debate_eval.debate.llm.structured import response_schema
from uav_debate_eval.live.workers import stop_process

pytestmark = [pytest.mark.llm, pytest.mark.slow]

IDS = ["SEG[0]", "SEG[1]", "EVENT[0]", "EVENT[1]", "RISK[0]"]
DSL = (
    "SEG[0] t=0-30s takeoff, min separation 6.1 m\n"
    "SEG[1] t=30-60s formation, min separation 2.4 m (limit 3.0 m)\n"
    "EVENT[0] t=41s proximity uav1-uav2 2.4 m\n"
    "EVENT[1] t=50s sharp_turn uav3 45 deg\n"
    "RISK[0] separation below limit 41-43 s"
)
MESSAGES = [
    {"role": "system", "content": "You are the Safety Assessment Expert of a UAV swarm panel. Cite ids."},
    {"role": "user", "content": f"DSL:\n{DSL}\nAssess the safety of this flight."},
]


# Short caps keep the weak model's worst case (it tends to fill strings to the cap) fast on a loaded machine.
SCHEMA = response_schema(IDS, text_max=60, note_max=30)


def _model_path() -> str:
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llama_cpp.server") is None:
        pytest.skip("llama-cpp-python[server] is not installed")
    from uav_debate_eval.debate.llm.local_backend import default_model_path

    try:
        return str(default_model_path())
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


def _die_with_parent() -> None:
    """Linux: SIGKILL the server if pytest itself is killed (a timeout), so no orphan keeps a core busy."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    model = _model_path()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1", "--port", str(port)]
    # one thread: on a shared, loaded machine more threads than free cores make llama.cpp crawl
    cmd += ["--n_ctx", "2048", "--n_threads", "1"]
    with open(log_path, "w") as log:  # a pipe would fill up with llama's load log and block the server
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        try:
            yield _wait_ready(proc, f"http://127.0.0.1:{port}/v1", log_path)
        finally:
            stop_process(proc)


def _wait_ready(proc: subprocess.Popen, url: str, log_path) -> str:
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/models", timeout=1) as resp:
            if json.load(resp)["data"]:
                return url
        if time.monotonic() > deadline:
            pytest.fail("llama_cpp.server did not answer /v1/models within 60 s")
        time.sleep(0.2)


def test_structured_answer_over_http_then_cache_hit(server_url, tmp_path):
    async def run():
        inner = OpenAIBackend(base_url=server_url, api_key="sk-local-unused", policy=RetryPolicy(timeout_s=120))
        backend = CachedBackend(inner, DiskCache(tmp_path))
        try:
            request = ChatRequest(
                messages=MESSAGES, agent="safety", round=1, valid_ids=IDS, json_schema=SCHEMA, max_tokens=300
            )
            first = await backend.chat(request)
            second = await backend.chat(request)
            return inner, first, second
        finally:
            await backend.aclose()

    inner, first, second = asyncio.run(run())
    assert first.error is None and first.ok, first.error
    # llama-cpp-python's server refuses OpenAI's json_schema format; the backend steps down to json_object + schema
    assert inner.mode == "json_object"
    data = first.data
    assert 3 <= len(data["evidence"]) <= 5
    assert data["cited_ids"] and set(data["cited_ids"]) <= set(IDS) and data["invalid_ids"] == []
    assert 0.0 <= data["confidence"] <= 1.0 and data["label"] in ("safe", "borderline", "risky")
    assert first.prompt_tokens > 50 and first.completion_tokens > 10
    assert first.model and first.model.endswith(".gguf") and not first.cached
    assert second.cached and (second.prompt_tokens, second.completion_tokens) == (0, 0)
    assert (second.cached_prompt_tokens, second.cached_completion_tokens) == (
        first.prompt_tokens,
        first.completion_tokens,
    )
    assert second.data == first.data and second.latency_s < 0.1


def test_generic_schema_over_http(server_url):
    schema = {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["safe", "borderline", "risky"]},
            "recommendation": {"type": "string", "maxLength": 60},
        },
        "required": ["label", "recommendation"],
        "additionalProperties": False,
    }

    async def run():
        backend = OpenAIBackend(base_url=server_url, api_key="x", structured="json_object")
        try:
            return await backend.chat(ChatRequest(messages=MESSAGES, json_schema=schema, max_tokens=100))
        finally:
            await backend.aclose()

    result = asyncio.run(run())
    assert result.ok, result.error
    assert (
        set(result.data) == {"label", "recommendation"}
        and result.data["label"] in schema["properties"]["label"]["enum"]
    )
