"""What can go wrong talking to an LLM endpoint, and the waiting around it: the errors a user can fix, the retry
schedule (exponential backoff with jitter, the server's ``Retry-After``), which statuses are worth a retry, how a
fault is named in one line, URLs with credentials redacted for messages, and waits that end when the process is exiting
(``opi.interrupt``)."""
from __future__ import annotations

import email.utils
import http
import math
import random
import time

from opi.interrupt import wait_or_stop
from opi.secrets import redact_text

INITIAL_BACKOFF, MAX_BACKOFF, MAX_RETRY_AFTER = 0.5, 8.0, 60.0  # seconds


class LLMError(RuntimeError):
    """An LLM endpoint problem a user can fix (key, model name, address, rate, a server that is not one). Its message
    quotes what the server said, so it is redacted (a server may echo the key back)."""

    def __init__(self, message: str = ""):
        super().__init__(redact_text(str(message)))


class LLMInterrupted(LLMError):
    """The process is exiting (SIGTERM, Ctrl-C): requests still waiting were abandoned."""


def pause(seconds: float) -> None:
    """Sleep ``seconds``, ending early (``LLMInterrupted``) when the process is exiting."""
    if not wait_or_stop(seconds):
        raise LLMInterrupted("stopped: the process is exiting")


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


def server_wait(headers) -> float | None:
    """The wait in seconds the server's ``Retry-After`` (or ``retry-after-ms``) asks for, if it gives one, however
    long: a wait beyond ``MAX_RETRY_AFTER`` is not honoured, but the final message says it."""
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
    return delay if delay is not None and math.isfinite(delay) and delay > 0 else None


def honoured(wait: float | None) -> float | None:
    """The server's wait if OPI waits that long (0-60 s), else None: its own backoff instead."""
    return wait if wait is not None and wait <= MAX_RETRY_AFTER else None



def backoff(attempt: int) -> float:
    """Exponential backoff with jitter after the ``attempt``-th failure: 0.5 s, 1 s, 2 s ... up to 8 s, minus 0-25 %."""
    return min(INITIAL_BACKOFF * 2 ** min(attempt - 1, 30), MAX_BACKOFF) * (1 - 0.25 * random.random())
