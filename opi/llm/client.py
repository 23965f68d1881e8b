"""One chat client for any OpenAI-compatible endpoint (OpenAI, Azure-style gateways, vLLM, Ollama, llama.cpp).

What it adds to the ``openai`` package, which already retries 429/5xx/timeouts with exponential backoff and
honours ``Retry-After``:
- a persistent call cache (``CallCache``) keyed by (base_url, model, messages, decoding parameters): a repeated or
  resumed run pays for nothing twice;
- request and token rate limits applied to *every* HTTP attempt, retries included (an httpx request hook);
- a thread pool for concurrency inside a batch;
- counts: calls, cache hits, HTTP requests, retries, tokens, and cost from a price table;
- clear errors for a wrong key (401), an unknown model (404) and an unreachable endpoint, before a batch goes on.
The API key is read from the environment variable the config names and is never stored or logged.
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from opi.llm.cache import CallCache, call_key
from opi.schemas import LLMConfig

Parsed = TypeVar("Parsed")
Messages = list[dict[str, str]]


class LLMError(RuntimeError):
    """An LLM endpoint problem a user can fix (key, model name, address)."""


@dataclass
class Usage:
    calls: int = 0
    cache_hits: int = 0
    http_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    price_input_per_million: float = 0.0
    price_output_per_million: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def retries(self) -> int:
        return max(self.http_requests - (self.calls - self.cache_hits), 0)

    @property
    def cost(self) -> float:
        return (self.prompt_tokens * self.price_input_per_million
                + self.completion_tokens * self.price_output_per_million) / 1e6

    def as_metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}_{name}": float(value) for name, value in [
            ("calls", self.calls), ("cache_hits", self.cache_hits), ("http_requests", self.http_requests),
            ("retries", self.retries), ("prompt_tokens", self.prompt_tokens),
            ("completion_tokens", self.completion_tokens), ("cost_usd", self.cost)]}


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


class ChatClient:
    """``settings``: the run's ``llm`` config. ``base_url``/``cache_id`` replace its address and its identity in
    cache keys (a local server's port changes at every start; its model file does not)."""

    def __init__(self, settings: LLMConfig, cache: CallCache | None = None, base_url: str | None = None,
                 cache_id: str | None = None):
        if base_url is not None:
            settings = dataclasses.replace(settings, base_url=base_url)
        self.settings = settings
        self.cache_id = cache_id
        self.cache = cache
        self.usage = Usage(price_input_per_million=settings.price_input_per_million,
                           price_output_per_million=settings.price_output_per_million)
        self._client = None
        self._request_limiter = None
        if settings.requests_per_minute:
            from langchain_core.rate_limiters import InMemoryRateLimiter

            self._request_limiter = InMemoryRateLimiter(requests_per_second=settings.requests_per_minute / 60,
                                                        check_every_n_seconds=0.005, max_bucket_size=1)
        self._token_window = TokenWindow(settings.tokens_per_minute) if settings.tokens_per_minute else None

    def _api_key(self) -> str:
        name = self.settings.api_key_env
        value = os.environ.get(name) if name else None
        if value:
            return value
        if self.settings.base_url is None:
            raise LLMError(f"no API key: set the environment variable {name or 'OPENAI_API_KEY'} "
                           f"(the config names the variable, never the key)")
        return "not-needed"  # local servers ignore the key

    def _before_request(self, request) -> None:
        if self._request_limiter is not None:
            self._request_limiter.acquire(blocking=True)
        if self._token_window is not None:
            self._token_window.acquire(len(request.content) / 4 + self.settings.max_tokens)
        with self.usage.lock:
            self.usage.http_requests += 1

    def _openai(self):
        if self._client is None:
            import httpx
            from openai import OpenAI

            self._client = OpenAI(
                api_key=self._api_key(), base_url=self.settings.base_url, timeout=self.settings.timeout,
                max_retries=self.settings.max_retries,
                http_client=httpx.Client(event_hooks={"request": [self._before_request]},
                                         timeout=self.settings.timeout))
        return self._client

    def request(self, messages: list[dict[str, str]], response_format: dict | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.settings.model, "messages": messages,
                                "temperature": self.settings.temperature, "max_tokens": self.settings.max_tokens}
        if response_format is not None and self.settings.structured_output:
            body["response_format"] = response_format
        return body

    def complete(self, messages: list[dict[str, str]], response_format: dict | None = None) -> str:
        body = self.request(messages, response_format)
        key = call_key({"endpoint": self.cache_id or self.settings.base_url or "openai", **body})
        with self.usage.lock:
            self.usage.calls += 1
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                with self.usage.lock:
                    self.usage.cache_hits += 1
                return cached["content"]
        response = self._call(body)
        content = response.choices[0].message.content or ""
        usage = response.usage
        with self.usage.lock:
            self.usage.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
            self.usage.completion_tokens += getattr(usage, "completion_tokens", 0) or 0
        if self.cache is not None:
            self.cache.put(key, {"content": content, "usage": usage.model_dump() if usage else None})
        return content

    def _call(self, body: dict[str, Any]):
        import openai

        where = self.settings.base_url or "api.openai.com"
        try:
            return self._openai().chat.completions.create(**body)
        except openai.AuthenticationError as err:
            raise LLMError(f"{where} refused the API key (401): check {self.settings.api_key_env}") from err
        except openai.NotFoundError as err:
            raise LLMError(f"{where} does not know model {self.settings.model!r} (404): check llm.model") from err
        except openai.APIConnectionError as err:
            raise LLMError(f"cannot reach {where} after {self.settings.max_retries} retries "
                           f"({type(err).__name__}): check llm.base_url and that the server is running") from err

    def complete_many(self, requests: Sequence[tuple[list[dict[str, str]], dict | None]],
                      progress: Callable[[int], None] | None = None) -> list[str]:
        """Answers in request order; any failure after retries raises: no row is silently skipped."""
        def one(request):
            content = self.complete(*request)
            if progress is not None:
                progress(1)
            return content

        with ThreadPoolExecutor(max_workers=max(self.settings.concurrency, 1)) as pool:
            return list(pool.map(one, requests))

    def ask_json(self, conversations: Sequence[Messages], response_format: dict[str, Any] | None,
                 parse: Callable[[str], Parsed | None], retries: int, reminder: str,
                 progress: Callable[[int], None] | None = None) -> tuple[list[Parsed | None], int]:
        """Structured answers: each conversation asked (with ``response_format``), its reply parsed; a reply
        ``parse`` rejects (None) is asked again ``retries`` times with the reply and ``reminder`` appended.
        Returns the parsed values in order (None where every attempt failed) and how many failed."""
        conversations = [list(c) for c in conversations]
        results: list[Parsed | None] = [None] * len(conversations)
        for attempt in range(retries + 1):
            todo = [i for i, r in enumerate(results) if r is None]
            if not todo:
                break
            replies = self.complete_many([(conversations[i], response_format) for i in todo],
                                         progress if attempt == 0 else None)
            for i, reply in zip(todo, replies):
                results[i] = parse(reply)
                if results[i] is None:
                    conversations[i] += [{"role": "assistant", "content": reply}, {"role": "user", "content": reminder}]
        return results, sum(r is None for r in results)
