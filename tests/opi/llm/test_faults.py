"""opi.llm.faults: the retry schedule, which statuses are worth a retry, the server's Retry-After, how a fault is
named in one line, and the pause that ends when the process is exiting."""
import email.utils
import time

import httpx
import pytest

from opi import interrupt
from opi.llm import faults
from opi.llm.faults import (LLMError, LLMInterrupted, backoff, count_retries, duration, honoured, pause, retriable,
                            server_message, server_wait, status_reason)


def test_interrupted_is_an_llm_error():
    assert issubclass(LLMInterrupted, LLMError)  # the runs' one handler for endpoint problems catches it too


@pytest.mark.parametrize("attempt, full", [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (9, 8.0), (60, 8.0)])
def test_backoff_doubles_from_half_a_second_up_to_8_s_minus_up_to_a_quarter(attempt, full, monkeypatch):
    monkeypatch.setattr(faults.random, "random", lambda: 0.0)
    assert backoff(attempt) == full
    monkeypatch.setattr(faults.random, "random", lambda: 1.0)
    assert backoff(attempt) == pytest.approx(0.75 * full)


def test_backoff_has_jitter():
    delays = {backoff(3) for _ in range(20)}
    assert len(delays) > 1 and all(1.5 <= d <= 2.0 for d in delays)


@pytest.mark.parametrize("status, headers, expected", [
    (429, {}, True), (408, {}, True), (409, {}, True), (500, {}, True), (503, {}, True),
    (400, {}, False), (401, {}, False), (404, {}, False), (422, {}, False),
    (400, {"x-should-retry": "true"}, True),  # the server's word wins
    (503, {"x-should-retry": "false"}, False),
    (503, {"x-should-retry": "maybe"}, True),
])
def test_retriable_is_openais_rule(status, headers, expected):
    assert retriable(httpx.Response(status, headers=headers)) is expected


@pytest.mark.parametrize("headers, expected", [
    ({"Retry-After": "2"}, 2.0),  # header names in any case
    ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),  # milliseconds first
    ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),  # an unusable one is skipped
    ({"retry-after": "60"}, 60.0),
    ({"retry-after": "61"}, None),  # longer than a minute: our own backoff instead
    ({"retry-after": "0"}, None),
    ({"retry-after": "-2"}, None),
    ({"retry-after": "nan"}, None),
    ({"retry-after": "whenever"}, None),
    ({}, None),
])
def test_the_retry_after_honoured(headers, expected):
    assert honoured(server_wait(httpx.Headers(headers))) == expected


@pytest.mark.parametrize("headers, expected", [
    ({"retry-after": "120"}, 120.0),  # however long: the final message says it
    ({"retry-after-ms": "90000"}, 90.0),
    ({"retry-after": "0"}, None),
    ({"retry-after": "inf"}, None),
    ({"retry-after": "whenever"}, None),
])
def test_server_wait_is_what_the_server_asked_for(headers, expected):
    assert server_wait(httpx.Headers(headers)) == expected


def test_only_a_wait_of_a_minute_at_most_is_honoured():
    assert (honoured(None), honoured(0.5), honoured(60.0), honoured(60.5)) == (None, 0.5, 60.0, None)


def test_server_retry_after_as_an_http_date():
    in_five_seconds = email.utils.formatdate(time.time() + 5, usegmt=True)  # whole seconds
    assert 3.5 < honoured(server_wait(httpx.Headers({"retry-after": in_five_seconds}))) <= 5.0
    a_minute_ago = email.utils.formatdate(time.time() - 60, usegmt=True)
    assert honoured(server_wait(httpx.Headers({"retry-after": a_minute_ago}))) is None


def test_status_reason():
    assert status_reason(httpx.Response(429)) == "Too Many Requests"
    assert status_reason(httpx.Response(200, extensions={"reason_phrase": b"Fine"})) == "Fine"  # the server's own
    assert status_reason(httpx.Response(599)) == "(unknown status)"


class Failure:
    def __init__(self, body=None, text=""):
        self.body, self.response = body, httpx.Response(500, text=text)


def test_server_message_is_one_short_line():
    assert server_message(Failure({"message": "rate\n  limited,  try later"})) == "rate limited, try later"
    assert server_message(Failure("a plain body")) == "a plain body"
    assert server_message(Failure(None, text="<h1>Bad Gateway</h1>")) == "<h1>Bad Gateway</h1>"
    assert server_message(Failure(None, text="")) == "no message"
    long = server_message(Failure({"message": "x" * 300}))
    assert len(long) == 200 and long == "x" * 197 + "..."


def test_counts_and_durations_read_as_words():
    assert (count_retries(0), count_retries(1), count_retries(2)) == ("0 retries", "1 retry", "2 retries")
    assert (duration(3.14159), duration(9.96), duration(42.4)) == ("3.1 s", "10.0 s", "42 s")


def test_pause_sleeps_its_time(process_stop):
    started = time.monotonic()
    pause(0.25)
    assert 0.25 <= time.monotonic() - started < 2


def test_pause_raises_interrupted_when_the_process_is_exiting(process_stop):
    interrupt.stop_requests()
    started = time.monotonic()
    with pytest.raises(LLMInterrupted, match="stopped: the process is exiting"):
        pause(30)
    assert time.monotonic() - started < 1
