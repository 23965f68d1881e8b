"""A small OpenAI-shaped chat-completions server for tests and benchmarks (127.0.0.1 only).

Replies are a deterministic function of the last user message, so a run with injected faults must produce
exactly what a fault-free run produces. ``faults`` maps request-arrival index (mod ``period``) to a fault:
``"429"`` (with Retry-After), ``"500"``, or ``"stall"`` (no answer for ``stall_seconds``).
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self, latency: float = 0.0, faults: dict[int, str] | None = None, period: int = 10,
                 stall_seconds: float = 2.0, retry_after: str = "0.2", known_models: set[str] | None = None,
                 api_key: str | None = None):
        self.latency, self.faults, self.period = latency, faults or {}, period
        self.stall_seconds, self.retry_after = stall_seconds, retry_after
        self.known_models, self.api_key = known_models, api_key
        self.arrivals: list[float] = []
        self.injected: dict[str, int] = {"429": 0, "500": 0, "stall": 0}
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @staticmethod
    def reply_for(body: dict) -> str:
        last = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
        digest = hashlib.sha256(last.encode()).hexdigest()[:8]
        if body.get("response_format"):
            labels = body["response_format"]["json_schema"]["schema"]["properties"]["relation"]["enum"]
            return json.dumps({"relation": labels[int(digest, 16) % len(labels)]})
        return f"Answer {digest}: the article says so."

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, payload: dict, headers: dict | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    index = len(fake.arrivals)
                    fake.arrivals.append(time.monotonic())
                    fault = fake.faults.get(index % fake.period)
                    if fault:
                        fake.injected[fault] += 1
                    fake.bodies.append(body)
                try:
                    if fake.api_key and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                        return self._send(401, {"error": {"message": "Incorrect API key provided"}})
                    if fake.known_models is not None and body["model"] not in fake.known_models:
                        return self._send(404, {"error": {"message": f"model {body['model']} not found"}})
                    if fault == "429":
                        return self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": fake.retry_after})
                    if fault == "500":
                        return self._send(500, {"error": {"message": "internal error"}})
                    if fault == "stall":
                        time.sleep(fake.stall_seconds)
                        return
                    time.sleep(fake.latency)
                    content = fake.reply_for(body)
                    self._send(200, {
                        "id": f"chatcmpl-{index}", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": 10 + len(str(body["messages"])) // 4,
                                  "completion_tokens": len(content) // 4,
                                  "total_tokens": 10 + len(str(body["messages"])) // 4 + len(content) // 4}})
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a stalled request

        return Handler

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
