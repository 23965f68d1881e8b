"""A small OpenAI-shaped chat-completions server for tests and benchmarks (127.0.0.1 only).

Replies are a deterministic function of the last user message, so a run with injected faults must produce
exactly what a fault-free run produces. ``faults`` maps request-arrival index (mod ``period``) to a fault:
``"429"`` (with Retry-After), ``"500"``, ``"400"`` (a request the server refuses), ``"stall"`` (no answer for
``stall_seconds``), an HTTP 200 that is not a chat completion: ``"badjson"`` (``{not json``), ``"html"`` (a
text/html page) or ``"nochoices"`` (JSON without ``choices``), or a chat completion that is no answer: ``"empty"``
(content ``""``) or ``"refusal"`` (content ``null`` and a ``refusal``). ``mode`` applies one fault to every request (an
endpoint that is always wrong, e.g. ``mode="429"``: rate limited forever). ``content_as`` makes a reply's content as
sent from its text (e.g. a list of text parts, as some servers send); ``strict_paths``: a POST anywhere but
``/v1/chat/completions`` or ``/v1/embeddings`` is answered 404 with a plain-text ``404 page not found``, as Ollama does.

``POST /v1/embeddings`` answers with deterministic vectors (``hash_vectors``: 8 numbers a text, or the request's
``dimensions``), or those ``vectors`` gives (a list of texts -> a list of vectors, e.g. a local model's), listed in
reverse order with their ``index`` (a client must put them back in order itself); the same faults apply, and
``embedding_bodies`` records its requests.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence


FAULTS = ("429", "500", "400", "stall", "badjson", "html", "nochoices", "empty", "refusal")
HASH_DIMENSIONS = 8


def hash_vectors(texts: list[str], dimensions: int | None = None) -> list[list[float]]:
    """A vector a text, numbers in [-1, 1] from its hash."""
    size = dimensions or HASH_DIMENSIONS
    return [[byte / 127.5 - 1 for byte in hashlib.shake_256(text.encode()).digest(size)] for text in texts]


def embeddings_reply(body: dict, vectors: list) -> dict:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    tokens = sum(1 + len(text) // 4 for text in texts)
    data = [{"object": "embedding", "index": index, "embedding": vector.tolist() if hasattr(vector, "tolist")
             else list(vector)} for index, vector in enumerate(vectors)]
    return {"object": "list", "data": data[::-1], "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class FakeOpenAI:
    def __init__(self, latency: float = 0.0, faults: dict[int, str] | None = None, period: int = 10,
                 stall_seconds: float = 2.0, retry_after: str = "0.2", known_models: set[str] | None = None,
                 api_key: str | None = None, mode: str | None = None, empty_when: str | None = None,
                 refuse_when: str | None = None, vectors: Callable[[list[str]], Sequence] | None = None,
                 content_as: Callable[[str], Any] | None = None, strict_paths: bool = False,
                 served_model: str | None = None):
        self.vectors, self.served_model = vectors, served_model
        self.content_as, self.strict_paths = content_as, strict_paths
        self.embedding_bodies: list[dict] = []
        self.latency, self.faults, self.period, self.mode = latency, faults or {}, period, mode
        # replies that are no answer for the requests whose last message holds this text (asked again: the same)
        self.empty_when, self.refuse_when = empty_when, refuse_when
        self.stall_seconds, self.retry_after = stall_seconds, retry_after
        self.known_models, self.api_key = known_models, api_key
        self.arrivals: list[float] = []
        self.active = self.most_at_once = 0  # requests in their latency now; the most at one time
        self.injected: dict[str, int] = dict.fromkeys(FAULTS, 0)
        self.bodies: list[dict] = []
        self.files: dict[str, bytes] = {}  # the fine-tuning API's uploads
        self.jobs: dict[str, dict] = {}
        self.job_polls: dict[str, int] = {}
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
            properties = body["response_format"]["json_schema"]["schema"]["properties"]
            if {"relation", "score", "relevance"} & set(properties):  # one of the enum: the same for the same text
                key = next(name for name in ("relation", "score", "relevance") if name in properties)
                choices = properties[key]["enum"]
                return json.dumps({key: choices[int(digest, 16) % len(choices)]})
            if "statements" in properties:  # one statement per sentence of the text
                text = last.rsplit("Text: ", 1)[1].strip()
                return json.dumps({"statements": [s for s in text.replace("! ", ". ").split(". ") if s]})
            if "TP" in properties:  # the first answer statement supported, the rest not, nothing missing
                answer = json.loads(last.rsplit("Answer statements: ", 1)[1].split("\n", 1)[0])
                return json.dumps({"TP": answer[:1], "FP": answer[1:], "FN": []})
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        if "Reply with exactly one label" in system:  # a "fine-tuned" classifier answers with a bare label
            labels = [line[2:].split(":")[0] for line in system.splitlines() if line.startswith("- ")]
            return labels[int(digest, 16) % len(labels)]
        return f"Answer {digest}: the article says so."

    def vectors_for(self, body: dict) -> Sequence:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return hash_vectors(texts, body.get("dimensions")) if self.vectors is None else self.vectors(texts)

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, payload: dict | bytes, headers: dict | None = None,
                      content_type: str = "application/json"):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                fake.fine_tuning_get(self)

            def do_POST(self):
                if self.path.startswith("/v1/files") or self.path.startswith("/v1/fine_tuning"):
                    return fake.fine_tuning_post(self)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    index = len(fake.arrivals)
                    fake.arrivals.append(time.monotonic())
                    fault = fake.mode or fake.faults.get(index % fake.period)
                    last = [m["content"] for m in body.get("messages", []) if m["role"] == "user"][-1:] or [""]
                    if fake.empty_when and fake.empty_when in last[0]:
                        fault = "empty"
                    if fake.refuse_when and fake.refuse_when in last[0]:
                        fault = "refusal"
                    if fault:
                        fake.injected[fault] += 1
                    fake.bodies.append(body)
                    if self.path.endswith("/embeddings"):
                        fake.embedding_bodies.append(body)
                try:
                    if fake.strict_paths and self.path not in ("/v1/chat/completions", "/v1/embeddings"):
                        return self._send(404, b"404 page not found", content_type="text/plain")
                    if fake.api_key and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                        return self._send(401, {"error": {"message": "Incorrect API key provided"}})
                    if fake.known_models is not None and body["model"] not in fake.known_models:
                        return self._send(404, {"error": {"message": f"model {body['model']} not found"}})
                    if fault == "429":
                        return self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": fake.retry_after})
                    if fault == "500":
                        return self._send(500, {"error": {"message": "internal error"}})
                    if fault == "400":
                        return self._send(400, {"error": {"message": "response_format json_schema is not supported",
                                                          "type": "invalid_request_error"}})
                    if fault == "stall":
                        time.sleep(fake.stall_seconds)
                        return
                    if fault == "badjson":
                        return self._send(200, b"{not json")
                    if fault == "html":
                        return self._send(200, b"<html><body><h1>Welcome to nginx!</h1></body></html>",
                                          content_type="text/html")
                    if fault == "nochoices":
                        return self._send(200, {"id": "x", "object": "chat.completion"})
                    with fake.lock:
                        fake.active += 1
                        fake.most_at_once = max(fake.most_at_once, fake.active)
                    time.sleep(fake.latency)
                    with fake.lock:  # before the reply: its client may send the next request once it has it
                        fake.active -= 1
                    if self.path.endswith("/embeddings"):
                        return self._send(200, embeddings_reply(body, fake.vectors_for(body)))
                    content = "" if fault == "empty" else None if fault == "refusal" else fake.reply_for(body)
                    sent = content if fake.content_as is None or content is None else fake.content_as(content)
                    message = {"role": "assistant", "content": sent,
                               **({"refusal": "I can't help with that."} if fault == "refusal" else {})}
                    self._send(200, {
                        "id": f"chatcmpl-{index}", "object": "chat.completion", "created": 0,
                        "model": fake.served_model or body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                        "usage": {"prompt_tokens": 10 + len(str(body["messages"])) // 4,
                                  "completion_tokens": len(content or "") // 4,
                                  "total_tokens": 10 + len(str(body["messages"])) // 4 + len(content or "") // 4}})
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a stalled request
                except Exception as err:  # a bug in the fake: say so instead of dropping the connection
                    import traceback

                    traceback.print_exc()
                    self._send(599, {"error": {"message": f"fake server bug: {err!r}"}})

        return Handler

    # --- the files and fine-tuning endpoints the openai client calls -------------------------------------------
    def fine_tuning_post(self, handler) -> None:
        from email.parser import BytesParser

        raw = handler.rfile.read(int(handler.headers["Content-Length"]))
        with self.lock:
            if handler.path.startswith("/v1/files"):
                message = BytesParser().parsebytes(
                    f"Content-Type: {handler.headers['Content-Type']}\r\n\r\n".encode() + raw)
                parts = {part.get_param("name", header="content-disposition"): part for part in message.get_payload()}
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = parts["file"].get_payload(decode=True)
                return handler._send(200, {"id": file_id, "object": "file", "bytes": len(self.files[file_id]),
                                           "created_at": 0, "filename": "train.jsonl", "purpose": "fine-tune",
                                           "status": "processed"})
            body = json.loads(raw)
            job_id = f"ftjob-{len(self.jobs) + 1}"
            self.jobs[job_id] = {
                "id": job_id, "object": "fine_tuning.job", "created_at": 0, "error": None, "fine_tuned_model": None,
                "finished_at": None, "hyperparameters": {"n_epochs": "auto"}, "model": body["model"],
                "organization_id": "org-test", "result_files": [], "seed": body.get("seed", 0),
                "status": "validating_files", "trained_tokens": None, "training_file": body["training_file"],
                "validation_file": None, "metadata": body.get("metadata"), "suffix": body.get("suffix"),
                "events": [{"id": f"{job_id}-ev1", "object": "fine_tuning.job.event", "created_at": 0,
                            "level": "info", "message": "Validating training file"}]}
            self.job_polls[job_id] = 0
            return handler._send(200, self._public(self.jobs[job_id]))

    @staticmethod
    def _public(job: dict) -> dict:
        return {k: v for k, v in job.items() if k != "events"}

    def fine_tuning_get(self, handler) -> None:
        from urllib.parse import parse_qs, urlparse

        url = urlparse(handler.path)
        parts = url.path.strip("/").split("/")  # v1 fine_tuning jobs [id [events]]
        with self.lock:
            if parts[:3] != ["v1", "fine_tuning", "jobs"]:
                return handler._send(404, {"error": {"message": f"no route {url.path}"}})
            if len(parts) == 3:
                query = parse_qs(url.query)
                wanted = {k[len("metadata["):-1]: v[0] for k, v in query.items() if k.startswith("metadata[")}
                jobs = [self._public(j) for j in self.jobs.values()
                        if all((j["metadata"] or {}).get(k) == v for k, v in wanted.items())]
                return handler._send(200, {"object": "list", "data": jobs[::-1], "has_more": False})
            job = self.jobs.get(parts[3])
            if job is None:
                return handler._send(404, {"error": {"message": "no such job"}})
            if len(parts) == 5 and parts[4] == "events":
                return handler._send(200, {"object": "list", "data": job["events"][::-1], "has_more": False})
            self.job_polls[job["id"]] += 1
            polls = self.job_polls[job["id"]]
            status = "running" if polls < 3 else "succeeded"
            if status != job["status"]:
                job["status"] = status
                job["events"].append({"id": f"{job['id']}-ev{len(job['events']) + 1}", "object": "fine_tuning.job.event",
                                      "created_at": polls, "level": "info", "message": f"Job {status}"})
            if status == "succeeded":
                job["fine_tuned_model"] = f"ft:{job['model']}:opi-test::{job['id']}"
                job["finished_at"] = polls
            return handler._send(200, self._public(job))

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
