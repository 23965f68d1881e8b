"""What can go wrong talking to an LLM endpoint, and the waiting around it: the errors a user can fix, the retry
schedule (exponential backoff with jitter, the server's ``Retry-After``), which statuses are worth a retry, how a
fault is named in one line, URLs with credentials redacted for messages, and a process-wide stop that ends every
wait when the process is exiting (SIGTERM, Ctrl-C)."""
from __future__ import annotations

import asyncio
import email.utils
import http
import math
import random
import re
import sys
import threading
import time
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

INITIAL_BACKOFF, MAX_BACKOFF, MAX_RETRY_AFTER = 0.5, 8.0, 60.0  # seconds
_SECRET_QUERY = re.compile(r"key|token|secret|password|sig|auth|code", re.IGNORECASE)
_STOP = threading.Event()  # set by stop_requests(): every wait of every client ends


class LLMError(RuntimeError):
    """An LLM endpoint problem a user can fix (key, model name, address, rate, a server that is not one)."""


class LLMInterrupted(LLMError):
    """The process is exiting (SIGTERM, Ctrl-C): requests still waiting were abandoned."""


def redact_url(url: str | None) -> str:
    """``url`` fit for a log line: credentials in it (``user:password@``, ``?api-key=...``) replaced by ``***``."""
    if not url:
        return "api.openai.com"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable llm.base_url>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        query = urlencode([(k, "***" if _SECRET_QUERY.search(k) else v)
                           for k, v in parse_qsl(query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def stop_requests() -> None:
    """End every wait of every client in this process (backoff sleeps, ``complete_many``): for a signal handler
    or an exit hook. The clients raise ``LLMInterrupted``; requests in flight are abandoned to daemon threads."""
    _STOP.set()


def exiting() -> bool:
    """Is this process on its way out? ``stop_requests()`` was called or -- seen from another thread -- the main
    thread is unwinding a ``SystemExit``, ``KeyboardInterrupt`` or similar (SIGTERM turned into ``sys.exit``,
    Ctrl-C) while it waits for this one (e.g. a task runner joining its threads). A main thread that simply returned
    is not a reason: non-daemon threads may go on working after it."""
    if _STOP.is_set():
        return True
    main = threading.main_thread()
    if threading.current_thread() is main:
        return False  # the signal's exception is raised in this very thread
    current = getattr(sys, "_current_exceptions", None)
    if current is None:
        return False
    try:
        handled = current().get(main.ident)
    except Exception:  # a private CPython helper: never let it break a request
        return False
    if isinstance(handled, tuple):  # Python < 3.12: (type, value, traceback)
        handled = handled[1]
    # SystemExit, KeyboardInterrupt, an orchestrator's own signal exception (Prefect's TerminationSignal): the
    # BaseExceptions that end a program, not those that end a generator or an asyncio task
    return isinstance(handled, BaseException) and not isinstance(handled, (Exception, GeneratorExit,
                                                                            asyncio.CancelledError))


def pause(seconds: float) -> None:
    """Sleep ``seconds``, ending early (``LLMInterrupted``) when the process is exiting."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if exiting():
            raise LLMInterrupted("stopped: the process is exiting")
        _STOP.wait(min(left, 0.2))


def count_retries(count: int) -> str:
    return f"{count} retr{'y' if count == 1 else 'ies'}"


def duration(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def status_reason(response) -> str:
    try:
        return response.reason_phrase or http.HTTPStatus(response.status_code).phrase
    except ValueError:
        return "(unknown status)"


def server_message(err) -> str:
    """The server's own short explanation of an error status, on one line."""
    body = getattr(err, "body", None)
    message = body.get("message") if isinstance(body, dict) else body
    if not message:
        try:
            message = err.response.text
        except Exception:
            message = ""
    message = " ".join(str(message or "no message").split())
    return message if len(message) <= 200 else message[:197] + "..."


def retriable(response) -> bool:
    """openai's rule: the server's ``x-should-retry`` if it says, else 408, 409, 429 and 5xx."""
    should = response.headers.get("x-should-retry")
    if should in ("true", "false"):
        return should == "true"
    return response.status_code in (408, 409, 429) or response.status_code >= 500


def server_retry_after(headers) -> float | None:
    """The server's ``Retry-After`` (or ``retry-after-ms``) in seconds, if it gives a usable one (0-60 s)."""
    delay = None
    for name, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            delay = float(value) / divisor
        except ValueError:
            try:
                delay = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                continue
        break
    if delay is None or not math.isfinite(delay) or not 0 < delay <= MAX_RETRY_AFTER:
        return None
    return delay


def backoff(attempt: int) -> float:
    """Exponential backoff with jitter after the ``attempt``-th failure: 0.5 s, 1 s, 2 s ... up to 8 s, minus 0-25 %."""
    return min(INITIAL_BACKOFF * 2 ** min(attempt - 1, 30), MAX_BACKOFF) * (1 - 0.25 * random.random())
