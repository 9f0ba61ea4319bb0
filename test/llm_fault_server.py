"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for fault-injection tests.

Each POST /v1/chat/completions consumes the next step of the script (the last step repeats):
  {"content": "..."}                    200 with a chat completion whose message is that text
  {"status": 429, "headers": {...}}     that status with an OpenAI-style error body ("message" optional)
  {"delay": 5.0, ...}                   sleep first (the client times out), then do the rest of the step
  {"raw": "not json"}                   200 with this body verbatim as application/json
GET /v1/models lists one model. Every request (path, lower-cased headers, JSON body) is recorded in `requests`.
"""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(content: str, prompt_tokens: int = 11, completion_tokens: int = 7, model: str = "scripted") -> dict:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class FaultServer:
    """Context manager: `with FaultServer(script) as srv: OpenAIBackend(base_url=srv.url, ...)`."""

    def __init__(self, script: list[dict], model: str = "scripted"):
        self.script = list(script)
        self.model = model
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()  # wakes delayed handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def record(self, handler: BaseHTTPRequestHandler, body: dict | None) -> None:
        headers = {k.lower(): v for k, v in handler.headers.items()}
        with self._lock:
            self.requests.append({"path": handler.path, "headers": headers, "body": body})

    def _next_step(self) -> dict:
        with self._lock:
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, str(value))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    self.wfile.write(body)

            def do_GET(self) -> None:
                server.record(self, None)
                body = {"object": "list", "data": [{"id": server.model, "object": "model", "owned_by": "test"}]}
                self._send(200, json.dumps(body).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                server.record(self, json.loads(raw))
                step = server._next_step()
                if step.get("delay") and server._stop.wait(step["delay"]):
                    return
                if "raw" in step:
                    self._send(200, step["raw"].encode())
                elif step.get("status", 200) != 200:
                    message = step.get("message", f"scripted {step['status']}")
                    err = {"error": {"message": message, "type": "scripted", "code": None}}
                    self._send(step["status"], json.dumps(err).encode(), step.get("headers"))
                else:
                    self._send(200, json.dumps(completion(step.get("content", ""), model=server.model)).encode())

        return Handler
