"""The clients of OpenAI-compatible endpoints (OpenAI, Azure-style gateways, vLLM, Ollama, llama.cpp): chat
(``ChatClient``) and embeddings (``opi.embeddings.endpoint``), both through one ``Endpoint``.

What an ``Endpoint`` adds to the ``openai`` package:
- its own retries (429, 408/409, 5xx, timeouts, connection errors; exponential backoff with jitter, ``Retry-After``
  honoured), one log line per retry, all inside the group's ``deadline``: no request, waits included, runs past it;
- request and token rate limits applied to *every* HTTP attempt, retries included (an httpx request hook);
- daemon worker threads for concurrency inside a batch (``in_parallel``): a process told to stop (SIGTERM, Ctrl-C)
  is not kept alive by a request waiting on a stalled server;
- counts: calls, HTTP requests, retries, tokens, and cost from a price table (``EndpointUsage``);
- every endpoint fault as one ``LLMError`` naming the endpoint (credentials redacted), the config group it comes
  from and what to do: a wrong key (401), an unknown model (404), an unreachable endpoint, 429/5xx after the
  retries, a refused request (4xx), a reply that is not what was asked (an HTML page, invalid JSON, JSON without
  ``choices`` or ``data``), the deadline.
The chat client adds a persistent call cache (``CallCache``) keyed by (base_url, model, messages, decoding
parameters): a repeated or resumed run pays for nothing twice. The API key is read from the environment variable
the config names and is never stored or logged.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import queue
import threading
import time
from collections import deque
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping, Sequence, TypeVar

from opi.llm.cache import CallCache, call_key
from opi.interrupt import exiting
from opi.llm.faults import (MAX_RETRY_AFTER, LLMError, LLMInterrupted, backoff, count_retries, duration, honoured,
                            pause, retriable, server_message, server_wait, status_reason)
from opi.secrets import keep_out, redact_url
from opi.schemas import EndpointConfig, LLMConfig

Parsed = TypeVar("Parsed")
Reply = TypeVar("Reply")
Messages = list[dict[str, str]]
log = logging.getLogger("opi")


@dataclass
class EndpointUsage:
    """What a client asked of its endpoint: ``calls`` (answers wanted), ``http_requests`` (attempts, retries
    included), ``prompt_tokens`` (as the endpoint counts them)."""
    calls: int = 0
    cache_hits: int = 0
    http_requests: int = 0
    prompt_tokens: int = 0
    price_input_per_million: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def retries(self) -> int:
        return max(self.http_requests - (self.calls - self.cache_hits), 0)

    @property
    def cost(self) -> float:
        return self.prompt_tokens * self.price_input_per_million / 1e6

    def counts(self) -> dict[str, int]:
        return {"calls": self.calls, "cache_hits": self.cache_hits, "http_requests": self.http_requests,
                "retries": self.retries, "prompt_tokens": self.prompt_tokens}

    def as_metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}_{name}": float(value) for name, value in {**self.counts(), "cost_usd": self.cost}.items()}


@dataclass
class Usage(EndpointUsage):
    """A chat client's: its cache hits, reply tokens, and the requests that got no answer."""
    completion_tokens: int = 0
    empty_replies: int = 0  # requests whose every attempt came back empty: no answer, never cached
    refusals: int = 0  # ... or as a refusal
    overlong_replies: int = 0  # replies far longer than max_tokens allows: cut (``ChatClient.bounded``)
    price_output_per_million: float = 0.0

    @property
    def cost(self) -> float:
        return super().cost + self.completion_tokens * self.price_output_per_million / 1e6

    def counts(self) -> dict[str, int]:
        return {**super().counts(), "completion_tokens": self.completion_tokens, "empty_replies": self.empty_replies,
                "refusals": self.refusals, **({"overlong_replies": self.overlong_replies} if self.overlong_replies
                                              else {})}


@dataclass
class EmbeddingUsage(EndpointUsage):
    """An embeddings client's: ``calls`` are batches, ``texts`` the texts sent in them (no cache: the embedding
    store's hits are the embedder's ``store_hits``)."""
    texts: int = 0

    def counts(self) -> dict[str, int]:
        counts = {**super().counts(), "texts": self.texts}
        del counts["cache_hits"]
        return counts


class TokenWindow:
    """At most ``per_minute`` (estimated) tokens in any sliding 60 s window."""

    def __init__(self, per_minute: float):
        self.per_minute = per_minute
        self.sent: deque[tuple[float, float]] = deque()
        self.lock = threading.Lock()

    def acquire(self, tokens: float) -> None:
        tokens = min(tokens, self.per_minute)
        while True:
            with self.lock:
                now = time.monotonic()
                while self.sent and now - self.sent[0][0] >= 60:
                    self.sent.popleft()
                if sum(t for _, t in self.sent) + tokens <= self.per_minute:
                    self.sent.append((now, tokens))
                    return
                wait = 60 - (now - self.sent[0][0])
            time.sleep(min(max(wait, 0.01), 1.0))


def json_reply_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` asking for JSON that follows ``schema`` (structured output, where supported)."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def object_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    """JSON schema of an object with exactly these required properties."""
    return {"type": "object", "additionalProperties": False, "required": list(properties), "properties": properties}


def api_key(settings: EndpointConfig, group: str = "llm") -> str:
    """The key in the variable ``<group>.api_key_env`` names; an unset one is said before any request (preflight
    calls this too). No variable (null): a keyless endpoint, to which the openai client still needs some string
    (``Endpoint.openai`` sends no Authorization header there)."""
    name = settings.api_key_env
    if not name:  # null, or '' (a component's own embedding, where null means "the run's")
        return "not-needed"
    value = os.environ.get(name)
    if not value:
        none = "''" if group.endswith(".embedding") else "null"
        raise LLMError(f"{group}.api_key_env names {name}, which is not set in this environment: export {name}=<your "
                       f"key>, or set {group}.api_key_env={none} for an endpoint that needs no key")
    keep_out(value)
    return value


def check_keys(endpoints: Mapping[str, EndpointConfig]) -> None:
    """Every endpoint's key variable is set, by config path (``{"llm": ..., "embedding": ...,
    "metrics.similarity": ...}``): an LLMError naming the first unset one. An embedding that is no endpoint
    (sentence-transformers) needs none."""
    for group, settings in endpoints.items():
        if getattr(settings, "provider", "openai-compatible") == "openai-compatible":
            api_key(settings, group)


def in_parallel(tasks: Sequence[Callable[[], Reply]], concurrency: int,
                progress: Callable[[int], None] | None = None, name: str = "opi-llm") -> list[Reply]:
    """The tasks' results in order, ``concurrency`` at a time; the first failure raises and no task starts after it:
    nothing is silently skipped. The workers are daemon threads and the wait for them ends when the process is
    exiting (``exiting()``): a request stalled in an HTTP read does not keep a process told to stop alive."""
    futures: list[Future] = [Future() for _ in tasks]
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(tasks)):
        todo.put(index)
    stop = threading.Event()

    def work():
        while not stop.is_set():
            try:
                index = todo.get_nowait()
            except queue.Empty:
                return
            try:
                futures[index].set_result(tasks[index]())
            except BaseException as err:  # handed to the waiting thread, which raises it
                stop.set()
                futures[index].set_exception(err)
                continue
            if progress is not None and not stop.is_set():
                progress(1)

    for number in range(min(max(concurrency, 1), len(tasks))):
        threading.Thread(target=work, name=f"{name}-{number}", daemon=True).start()
    pending = set(futures)
    try:
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
            failed = [f for f in futures if f in done and f.exception() is not None]
            if failed:
                raise failed[0].exception()
            if pending and exiting():
                raise LLMInterrupted("stopped: the process is exiting")
    finally:
        stop.set()  # no new task starts; those in flight end on their own
    return [f.result() for f in futures]


_ASKING: dict[str, list] = {}  # a request's call key -> [its lock, the threads holding or waiting for it]
_ASKING_LOCK = threading.Lock()


@contextlib.contextmanager
def one_asking(key: str):
    """One thread at a time asks a request (by call key); the same request from another thread waits, then finds the
    reply in the call cache: configurations evaluated side by side (a race's round) do not pay twice for what they
    share, such as the gold answers' relations."""
    with _ASKING_LOCK:
        entry = _ASKING.setdefault(key, [threading.Lock(), 0])
        entry[1] += 1
    try:
        with entry[0]:
            yield
    finally:
        with _ASKING_LOCK:
            entry[1] -= 1
            if entry[1] == 0:
                del _ASKING[key]


_IN_FLIGHT: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_IN_FLIGHT_LOCK = threading.Lock()


def in_flight(settings: EndpointConfig) -> threading.BoundedSemaphore:
    """A slot for one request to this endpoint: this process has at most its ``concurrency`` requests in flight to
    it, whoever asks (a race's configurations evaluated side by side each ask ``concurrency`` at once)."""
    key = (settings.base_url or "openai", settings.concurrency)
    with _IN_FLIGHT_LOCK:
        return _IN_FLIGHT.setdefault(key, threading.BoundedSemaphore(settings.concurrency))


def without_authorization(request) -> None:
    """An httpx request hook: no ``Authorization`` header (the openai client needs a key string, and would send
    ``Bearer <placeholder>`` to an endpoint that asked for none)."""
    request.headers.pop("Authorization", None)


def parsed_reply(raw) -> Any:
    """The openai package's reading of a raw reply; None when it is not JSON."""
    try:
        return raw.parse()
    except ValueError:
        return None


class Endpoint:
    """One OpenAI-compatible endpoint as a client of OPI reaches it. ``group``: the config path of ``settings``
    (``llm``, ``embedding``, ``metrics.similarity``), which every message names; ``kind`` names its requests in log
    lines; ``reply_tokens``: the tokens a reply may add to a request's, for ``tokens_per_minute``;
    ``request_settings``: the settings a refused request (4xx) points at."""

    def __init__(self, settings: EndpointConfig, usage: EndpointUsage, group: str = "llm", kind: str = "LLM",
                 reply_tokens: int = 0, request_settings: Sequence[str] = ("model",)):
        self.settings, self.usage, self.group, self.kind = settings, usage, group, kind
        self.reply_tokens = reply_tokens
        self.request_settings = request_settings
        self._client = None
        self._client_lock = threading.Lock()  # parallel workers share one client
        self._request_limiter = None
        if settings.requests_per_minute:
            from langchain_core.rate_limiters import InMemoryRateLimiter

            self._request_limiter = InMemoryRateLimiter(requests_per_second=settings.requests_per_minute / 60,
                                                        check_every_n_seconds=0.005, max_bucket_size=1)
        self._token_window = TokenWindow(settings.tokens_per_minute) if settings.tokens_per_minute else None

    @property
    def where(self) -> str:
        """The endpoint as error messages and log lines name it (credentials redacted)."""
        return redact_url(self.settings.base_url)

    def _before_request(self, request) -> None:
        if self._request_limiter is not None:
            self._request_limiter.acquire(blocking=True)
        if self._token_window is not None:
            self._token_window.acquire(len(request.content) / 4 + self.reply_tokens)
        with self.usage.lock:
            self.usage.http_requests += 1

    def openai(self):
        """The underlying ``openai`` client, made once."""
        with self._client_lock:
            if self._client is None:
                import httpx
                from openai import OpenAI

                hooks = [self._before_request]
                if not self.settings.api_key_env:  # keyless: the openai client's placeholder key is not sent
                    hooks.insert(0, without_authorization)
                self._client = OpenAI(
                    api_key=api_key(self.settings, self.group), base_url=self.settings.base_url,
                    timeout=self.settings.timeout, max_retries=0,  # the retries are ours (call): inside the deadline
                    http_client=httpx.Client(event_hooks={"request": hooks}, timeout=self.settings.timeout))
            return self._client

    def call(self, send: Callable[[Any, float], Any], accept: Callable[[Any], Reply]) -> Reply:
        """One request: ``send(client, timeout)`` (a ``with_raw_response`` call) attempted and retried with backoff,
        all within the deadline; ``accept`` makes the raw reply the answer or says what is wrong with it. Every
        failure left after the retries is an ``LLMError``."""
        import openai

        client = self.openai()
        started = time.monotonic()
        deadline = None if self.settings.deadline is None else started + self.settings.deadline
        attempts, failure, wait = 0, "", None
        while True:
            timeout = self._attempt_timeout(deadline, attempts, failure, wait)
            if exiting():
                raise LLMInterrupted("stopped: the process is exiting")
            attempts += 1
            try:
                with in_flight(self.settings):
                    raw = send(client, timeout)
            except (openai.APIStatusError, openai.APIConnectionError) as err:
                failure, wait = self._retriable(err, attempts, started, timeout)
            else:
                return accept(raw)
            delay = honoured(wait) or backoff(attempts)
            if deadline is not None and time.monotonic() + delay >= deadline - 0.05:
                raise self._late(attempts, failure, wait)
            log.warning("%s request to %s failed (%s); retry %d of %d in %.1f s", self.kind, self.where, failure,
                        attempts, self.settings.max_retries, delay)
            pause(delay)

    def _attempt_timeout(self, deadline: float | None, attempts: int, failure: str, wait: float | None) -> float:
        timeout = self.settings.timeout
        if deadline is not None:
            timeout = min(timeout, deadline - time.monotonic())
            if timeout <= 0.05:
                raise self._late(attempts, failure, wait)
        return timeout

    def _retriable(self, err, attempts: int, started: float, timeout: float) -> tuple[str, float | None]:
        """What failed and the wait the server asked for (``Retry-After``, however long), when ``err`` is worth
        another attempt; its LLMError when not, or when the retries are spent."""
        import openai

        settings, where, group = self.settings, self.where, self.group
        spent = attempts > settings.max_retries
        retries, elapsed = count_retries(settings.max_retries), duration(time.monotonic() - started)
        if isinstance(err, openai.AuthenticationError):
            raise LLMError(f"{where} refused the API key (401): check {settings.api_key_env}" if settings.api_key_env
                           else f"{where} asks for an API key (401): set {group}.api_key_env to the variable holding "
                           f"it") from err
        if isinstance(err, openai.NotFoundError):  # an unknown model, or a wrong path: Ollama's plain-text 404
            raise LLMError(f"{where} does not know model {settings.model!r} (404): check {group}.model, and that "
                           f"{group}.base_url ends in the endpoint's API root (usually .../v1); it said: "
                           f"{server_message(err)}") from err
        if isinstance(err, openai.APIStatusError):
            failure = f"{err.status_code} {status_reason(err.response)}"
            if not retriable(err.response):
                raise LLMError(f"{where} refused the request: {failure} ({server_message(err)}): check "
                               f"{self._settings_named()} against what it supports") from err
            wait = server_wait(err.response.headers)
            if spent and wait is not None and wait > MAX_RETRY_AFTER:
                raise LLMError(f"{where} kept answering {failure} after {retries} over {elapsed} and asked to wait "
                               f"{duration(wait)}, beyond the {MAX_RETRY_AFTER:g} s OPI waits at most: try "
                               f"later") from err
            if spent and err.status_code == 429:
                raise LLMError(f"{where} kept answering {failure} after {retries} over {elapsed}: lower "
                               f"{group}.requests_per_minute/{group}.concurrency or try later") from err
            if spent:
                raise LLMError(f"{where} answered {failure} after {retries} over {elapsed} ({server_message(err)}): "
                               f"the server is failing; check its logs or try later") from err
            return failure, wait
        if isinstance(err, openai.APITimeoutError):
            if spent:
                raise LLMError(f"{where} gave no answer within {group}.timeout={settings.timeout:g} s, {retries} "
                               f"over {elapsed}: raise {group}.timeout or check the server") from err
            return f"no answer within {timeout:.3g} s", None
        if spent:
            raise LLMError(f"cannot reach {where} after {settings.max_retries} retries ({type(err).__name__}): "
                           f"check {group}.base_url and that the server is running") from err
        return f"cannot connect: {type(err.__cause__ or err).__name__}", None

    def _settings_named(self) -> str:
        names = [f"{self.group}.{name}" for name in self.request_settings]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"

    def _late(self, attempts: int, failure: str, wait: float | None = None) -> LLMError:
        """The deadline is reached, or would be by the next wait; ``wait``: the one the server last asked for."""
        group = self.group
        advice = f"raise {group}.deadline or {group}.timeout, or check the server"
        if wait is not None and wait > MAX_RETRY_AFTER:
            advice = (f"the server asked to wait {duration(wait)}, beyond the {MAX_RETRY_AFTER:g} s OPI waits at most; "
                      f"try later")
        elif wait is not None:
            advice = (f"the server asked to wait {duration(wait)}, beyond what is left of {group}.deadline; raise "
                      f"{group}.deadline or try later")
        return LLMError(f"{self.where} gave no answer within {group}.deadline={self.settings.deadline:g} s "
                        f"({attempts} attempt{'s' if attempts != 1 else ''}"
                        f"{'; last: ' + failure if failure else ''}): {advice}")

    def wrong_reply(self, raw, parsed: Any, expected: str, member: str, what: str | None = None) -> LLMError:
        """What the endpoint sent instead of ``expected`` (a JSON object with ``member``), in one line; ``what``: what
        is wrong with it, when it is JSON with ``member``."""
        response = raw.http_response
        text = response.text
        kind = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
        if what is None:
            if "html" in kind or text.lstrip()[:1] == "<":
                what = "an HTML page"
            elif parsed is None or isinstance(parsed, (str, bytes)):
                what = "invalid JSON"
            else:
                what = f"JSON without {member!r}"
        snippet = " ".join(text.split())[:60]
        return LLMError(f"{self.where} answered with something that is not {expected} ({what}, HTTP "
                        f"{response.status_code} {kind}: {snippet!r}): check {self.group}.base_url points at an "
                        f"OpenAI-compatible /v1 endpoint")


CHARS_PER_TOKEN = 4  # about, in English: where a reply of max_tokens tokens ends
OVERLONG_CHARS_PER_TOKEN = 16  # a reply longer than this many characters a token allowed ignored max_tokens
OVERLONG_TOKENS = 2  # ... or one the endpoint itself counts at more than twice max_tokens (and is long)


@dataclass(frozen=True)
class CallRecord:
    """What one chat request got in this client's life: the reply (None: no answer), whether it came from the
    call cache, and its tokens (for a cached reply, those of the call that paid for it)."""

    content: str | None
    cached: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0


def text_of(content: Any) -> str | None:
    """A reply's content as text: a string, or its text parts' text (``[{"type": "text", "text": ...}]``, as some
    servers send); None when it is neither."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        texts = [part.get("text") for part in content if part.get("type") == "text"]
        if all(isinstance(text, str) for text in texts):
            return "".join(texts)
    return None


def _tokens(usage: Any) -> tuple[int, int]:
    if usage is None:
        return 0, 0
    get = usage.get if isinstance(usage, dict) else lambda name: getattr(usage, name, 0)
    return int(get("prompt_tokens") or 0), int(get("completion_tokens") or 0)


class ChatClient:
    """``settings``: the run's ``llm`` config. ``base_url``/``cache_id`` replace its address and its identity in
    cache keys (a local server's port changes at every start; its model file does not). ``record_of`` tells what
    a request got (reply, cached, tokens): per-example details for traces."""

    def __init__(self, settings: LLMConfig, cache: CallCache | None = None, base_url: str | None = None,
                 cache_id: str | None = None):
        if base_url is not None:
            settings = dataclasses.replace(settings, base_url=base_url)
        self.settings = settings
        self.cache_id = cache_id
        self.cache = cache
        self.usage = Usage(price_input_per_million=settings.price_input_per_million,
                           price_output_per_million=settings.price_output_per_million)
        self.endpoint = Endpoint(settings, self.usage, "llm", "LLM", reply_tokens=settings.max_tokens,
                                 request_settings=("model", "max_tokens", "structured_output"))
        self.records: dict[str, CallRecord] = {}
        self.served: set[str] = set()  # the other model names the endpoint answered as, each said once

    def openai(self):
        """The underlying ``openai`` client (for the fine-tuning API), made once."""
        return self.endpoint.openai()

    @property
    def where(self) -> str:
        """The endpoint as error messages and log lines name it (credentials redacted)."""
        return self.endpoint.where

    def request(self, messages: list[dict[str, str]], response_format: dict | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.settings.model, "messages": messages,
                                "temperature": self.settings.temperature, "max_tokens": self.settings.max_tokens}
        if response_format is not None and self.settings.structured_output:
            body["response_format"] = response_format
        return body

    def _key(self, body: dict[str, Any]) -> str:
        return call_key({"endpoint": self.cache_id or self.settings.base_url or "openai", **body})

    def record_of(self, messages: list[dict[str, str]], response_format: dict | None = None) -> CallRecord | None:
        """What this request got from this client (None: it was not asked here)."""
        return self.records.get(self._key(self.request(messages, response_format)))

    def complete(self, messages: list[dict[str, str]], response_format: dict | None = None) -> str | None:
        """The reply's text. An empty reply or a refusal is no answer: asked again ``llm.empty_retries`` times, then
        None (counted in ``empty_replies`` / ``refusals``), and never cached. A reply far longer than max_tokens
        allows is cut and counted (``bounded``)."""
        body = self.request(messages, response_format)
        key = self._key(body)
        with self.usage.lock:
            self.usage.calls += 1
        if self.cache is None:
            return self._asked(body, key, None)
        with one_asking(key):  # the same request asked at once elsewhere in this process: its reply, from the cache
            cached = self.cache.get(key)
            if cached is not None and cached["content"].strip():  # an empty reply cached by an older version: ask
                with self.usage.lock:
                    self.usage.cache_hits += 1
                tokens = _tokens(cached.get("usage"))
                content = self.bounded(cached["content"], tokens[1], cached.get("overlong", False))
                self.records[key] = CallRecord(content, True, *tokens)
                return content
            return self._asked(body, key, cached)

    def _asked(self, body: dict[str, Any], key: str, cached: dict | None) -> str | None:
        """The endpoint's reply to ``body`` (asked again while empty or refused), cached when it is an answer."""
        refused, spent = False, (0, 0)
        for _ in range(1 + self.settings.empty_retries):
            response = self._call(body)
            message, usage = response.choices[0].message, response.usage  # checked by _completion
            tokens = _tokens(usage)
            spent = (spent[0] + tokens[0], spent[1] + tokens[1])
            with self.usage.lock:
                self.usage.prompt_tokens += tokens[0]
                self.usage.completion_tokens += tokens[1]
            content, refused = message.content or "", bool(getattr(message, "refusal", None))
            if content.strip():
                whole = content
                content = self.bounded(whole, tokens[1])
                if self.cache is not None:  # cut, and marked so: a run answered from the cache counts it again
                    self.cache.put(key, {"content": content, "usage": usage.model_dump() if usage else None,
                                         **({"overlong": True} if content != whole else {})},
                                   replace=cached is not None)
                self.records[key] = CallRecord(content, False, *spent)
                return content
        with self.usage.lock:
            if refused:
                self.usage.refusals += 1
            else:
                self.usage.empty_replies += 1
        self.records[key] = CallRecord(None, False, *spent)
        return None

    def bounded(self, content: str, completion_tokens: int = 0, cut_before: bool = False) -> str:
        """A reply far longer than ``llm.max_tokens`` allows (more than ``OVERLONG_CHARS_PER_TOKEN`` characters a
        token, or counted by the endpoint at over ``OVERLONG_TOKENS`` times max_tokens): an endpoint that ignores
        max_tokens. It is cut where max_tokens would have ended it (``CHARS_PER_TOKEN`` characters a token) and
        counted in ``overlong_replies``, which the run warns of; any other reply is as it came. ``cut_before``: a
        cached reply that was cut when it came, counted again."""
        limit = self.settings.max_tokens
        if limit is None or not cut_before and (len(content) <= limit * CHARS_PER_TOKEN or (
                len(content) <= limit * OVERLONG_CHARS_PER_TOKEN and completion_tokens <= limit * OVERLONG_TOKENS)):
            return content
        with self.usage.lock:
            self.usage.overlong_replies += 1
        return content[:limit * CHARS_PER_TOKEN]

    def _call(self, body: dict[str, Any]):
        """One chat completion, retried as ``Endpoint.call`` does."""
        return self.endpoint.call(
            lambda client, timeout: client.chat.completions.with_raw_response.create(**body, timeout=timeout),
            self._completion)

    def _completion(self, raw):
        """The parsed reply, or an LLMError saying what the endpoint sent instead of a chat completion."""
        parsed = parsed_reply(raw)
        choices = getattr(parsed, "choices", None)
        if isinstance(choices, list) and choices and getattr(choices[0], "message", None) is not None:
            message = choices[0].message
            if getattr(message, "content", None) is None:  # no answer: a refusal, or nothing
                return parsed
            text = text_of(message.content)
            if text is None:
                raise self.endpoint.wrong_reply(raw, parsed, "a chat completion", "choices",
                                                "message content that is not text")
            message.content = text
            self._served_as(getattr(parsed, "model", None))
            return parsed
        raise self.endpoint.wrong_reply(raw, parsed, "a chat completion", "choices")

    def _served_as(self, served: Any) -> None:
        """Say once when the endpoint answers as another model than ``llm.model`` (a proxy's or a server's own
        default, a name it fell back from): the run is logged under the model asked for. Snapshots and paths of the
        same name (gpt-4o-2024-08-06, org/llama3, llama3:latest for llama3) are the same model; OPI's local server is
        not asked."""
        asked = self.settings.model
        if not (isinstance(served, str) and served and asked) or self.settings.local_server is not None:
            return
        names = [name.strip().lower().rsplit("/", 1)[-1] for name in (asked, served)]
        if names[0].startswith(names[1]) or names[1].startswith(names[0]):
            return
        with self.usage.lock:
            if served in self.served:
                return
            self.served.add(served)
        log.warning("the LLM endpoint %s answers as model %r, not llm.model=%r: the run is logged as %r; check "
                    "the model name the server knows", self.where, served[:80], asked, asked)

    def complete_many(self, requests: Sequence[tuple[list[dict[str, str]], dict | None]],
                      progress: Callable[[int], None] | None = None) -> list[str]:
        """Answers in request order (``in_parallel``, ``llm.concurrency`` at a time); any failure after retries
        raises: no row is silently skipped. Requests in flight when one fails end on their own (their answers are
        cached)."""
        tasks = [partial(self.complete, *request) for request in requests]
        return in_parallel(tasks, self.settings.concurrency, progress, "opi-llm")

    def ask_json(self, conversations: Sequence[Messages], response_format: dict[str, Any] | None,
                 parse: Callable[[str], Parsed | None], retries: int, reminder: str,
                 progress: Callable[[int], None] | None = None) -> tuple[list[Parsed | None], int]:
        """Structured answers: each conversation asked (with ``response_format``), its reply parsed; a reply
        ``parse`` rejects (None) is asked again ``retries`` times with the reply and ``reminder`` appended.
        Returns the parsed values in order (None where every attempt failed) and how many replies could not be
        parsed. A conversation that got no reply (empty or refused, already asked again by ``complete``) is not
        asked again here and is not a parse failure: ``usage`` counts it."""
        conversations = [list(c) for c in conversations]
        results: list[Parsed | None] = [None] * len(conversations)
        unanswered: set[int] = set()
        for attempt in range(retries + 1):
            todo = [i for i, r in enumerate(results) if r is None and i not in unanswered]
            if not todo:
                break
            replies = self.complete_many([(conversations[i], response_format) for i in todo],
                                         progress if attempt == 0 else None)
            for i, reply in zip(todo, replies):
                if reply is None:
                    unanswered.add(i)
                    continue
                results[i] = parse(reply)
                if results[i] is None:
                    conversations[i] += [{"role": "assistant", "content": reply}, {"role": "user", "content": reminder}]
        return results, sum(r is None for i, r in enumerate(results) if i not in unanswered)


