"""LLM access benchmark: tokens/s and latency per call for the local backend and for llama.cpp's server over HTTP,
and cache hit latency. Prints each figure next to its target. Run: python benchmarks/bench_llm.py [--n 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uav_debate_eval.debate.llm.base import ChatRequest  # noqa: E402
from uav_debate_eval.debate.llm.cache import CachedBackend, DiskCache  # noqa: E402
from uav_debate_eval.debate.llm.local_backend import LocalBackend, default_model_path  # noqa: E402
from uav_debate_eval.debate.llm.openai_backend import OpenAIBackend  # noqa: E402
from uav_debate_eval.debate.llm.resilience import RetryPolicy  # noqa: E402
from uav_debate_eval.live.workers import stop_process  # noqa: E402

IDS = ["SEG[0]", "SEG[1]", "EVENT[0]", "EVENT[1]", "RISK[0]"]
DSL = (
    "SEG[0] t=0-30s takeoff, min separation 6.1 m\nSEG[1] t=30-60s formation, min separation 2.4 m (limit 3.0 m)\n"
    "EVENT[0] t=41s proximity uav1-uav2 2.4 m\nEVENT[1] t=50s sharp_turn uav3 45 deg\nRISK[0] below limit 41-43 s"
)
TARGETS = {"tok_s": 30.0, "latency_s": 15.0, "hit_ms": 5.0}


def _requests(n: int) -> list[ChatRequest]:
    msgs = [
        {"role": "system", "content": "You are the Safety Assessment Expert of a UAV swarm panel."},
        {"role": "user", "content": f"DSL:\n{DSL}\nAssess safety."},
    ]
    return [ChatRequest(messages=msgs, valid_ids=IDS, seed=i, agent="safety") for i in range(n)]


def _line(name: str, value: float, unit: str, target: float, higher_better: bool) -> None:
    ok = value >= target if higher_better else value <= target
    sign = ">=" if higher_better else "<="
    print(f"  {name:<34} {value:10.2f} {unit:<6} target {sign} {target:g} {unit}  {'OK' if ok else 'MISS'}")


async def _measure(backend, requests: list[ChatRequest]) -> list:
    out = []
    for req in requests:
        out.append(await backend.chat(req))
    return out


def _report(title: str, results: list) -> None:
    good = [r for r in results if r.ok]
    print(f"{title}: {len(good)}/{len(results)} parsed, all ids valid: {all(not r.data['invalid_ids'] for r in good)}")
    if not good:
        print("  errors:", [r.error for r in results])
        return
    lat = [r.latency_s for r in good]
    tok_s = sum(r.completion_tokens for r in good) / sum(lat)
    print(f"  prompt tokens/call {statistics.mean(r.prompt_tokens for r in good):.0f}, "
          f"completion tokens/call {statistics.mean(r.completion_tokens for r in good):.0f}")  # fmt: skip
    _line("completion tokens/s", tok_s, "tok/s", TARGETS["tok_s"], True)
    _line("latency per call (median)", statistics.median(lat), "s", TARGETS["latency_s"], False)
    _line("latency per call (max)", max(lat), "s", 2 * TARGETS["latency_s"], False)


@contextlib.contextmanager
def _llama_server(model: str, threads: int):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--n_ctx", "2048", "--n_threads", str(threads)]
    url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/models", timeout=1) as resp:
                    if json.load(resp)["data"]:
                        break
                time.sleep(0.2)
            yield url
        finally:
            stop_process(proc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3, help="calls per backend")
    parser.add_argument("--threads", type=int, default=None, help="llama threads (default: half the cores)")
    parser.add_argument("--skip-server", action="store_true")
    args = parser.parse_args()
    requests = _requests(args.n)
    model = str(default_model_path())

    local = LocalBackend(model, n_ctx=2048, n_threads=args.threads)
    _report(f"local backend ({local.model}, in process)", asyncio.run(_measure(local, requests)))

    with tempfile.TemporaryDirectory() as tmp:
        cached = CachedBackend(local, DiskCache(tmp))
        asyncio.run(cached.chat(requests[0]))
        hits = asyncio.run(_measure(cached, [requests[0]] * 200))
        assert all(h.cached for h in hits)
        print("disk cache:")
        _line("cache hit latency (mean of 200)", 1000 * statistics.mean(h.latency_s for h in hits), "ms",
              TARGETS["hit_ms"], False)  # fmt: skip

    if not args.skip_server:
        with _llama_server(model, args.threads or 1) as url:

            async def over_http():
                backend = OpenAIBackend(base_url=url, api_key="unused", policy=RetryPolicy(timeout_s=300))
                try:
                    await backend.chat(requests[0])  # settles the structured-output mode (json_schema refused)
                    return backend.mode, await _measure(backend, requests)
                finally:
                    await backend.aclose()

            mode, results = asyncio.run(over_http())
            _report(f"openai backend -> llama_cpp.server over HTTP (mode {mode})", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
