"""opi.llm.client: the chat client against tests/helpers/fake_openai.py -- retries, rate limits, the call cache,
usage and cost, and every endpoint fault as one LLMError naming the endpoint (credentials redacted)."""
import logging
import re
import sys
import threading
import time

import pytest

from opi.llm.cache import CallCache
from opi.llm.client import (ChatClient, Endpoint, EndpointUsage, LLMError, LLMInterrupted, TokenWindow, Usage, api_key,
                            json_reply_format, object_schema)
from opi.schemas import LLMConfig
from tests.helpers.fake_openai import FakeOpenAI

HI = [{"role": "user", "content": "hi"}]
QUESTIONS = [[{"role": "user", "content": f"Question number {i}: what happened in year {1800 + i}?"}]
             for i in range(40)]


def settings(base_url: str, **overrides) -> LLMConfig:
    values = dict(name="fake", reader=None, model="fake-model", base_url=base_url, api_key_env=None, timeout=2,
                  max_retries=2, deadline=20, concurrency=4)
    values.update(overrides)
    return LLMConfig(**values)


def batch(messages):
    return [(m, None) for m in messages]


# --- answers, cache, usage -------------------------------------------------------------------------------------

def test_faults_are_retried_and_results_equal_a_fault_free_run(tmp_path):
    with FakeOpenAI() as clean:
        expected = ChatClient(settings(clean.base_url, concurrency=8)).complete_many(batch(QUESTIONS))
    with FakeOpenAI(faults={2: "429", 5: "500", 8: "stall"}, stall_seconds=3.0) as faulty:  # 30 % of arrivals
        client = ChatClient(settings(faulty.base_url, requests_per_minute=1200, timeout=1.5, max_retries=6,
                                     deadline=300, concurrency=8), CallCache(tmp_path / "calls.sqlite"))
        answers = client.complete_many(batch(QUESTIONS))
        arrivals = sorted(faulty.arrivals)
        injected = sum(faulty.injected.values())
    assert answers == expected and all(answers)  # in request order, nothing skipped
    assert injected >= 12  # about 30 % of the ~55 arrivals failed
    # every arrival beyond one per row is a retry the client counted (a slow machine may add timeouts of its own)
    assert client.usage.http_requests == len(arrivals)
    assert client.usage.retries == len(arrivals) - len(QUESTIONS) >= injected
    # rate limit 1200/min = 20 per second, retries included: no 1 s window holds more (one of jitter allowed)
    busiest = max(sum(1 for t in arrivals if start <= t < start + 1.0) for start in arrivals)
    assert busiest <= 21


def test_the_cache_makes_the_second_run_free(tmp_path):
    with FakeOpenAI() as server:
        first = ChatClient(settings(server.base_url), CallCache(tmp_path / "calls.sqlite"))
        answers = first.complete_many(batch(QUESTIONS[:5]))
        second = ChatClient(settings(server.base_url), CallCache(tmp_path / "calls.sqlite"))
        again = second.complete_many(batch(QUESTIONS[:5]))
        arrivals = len(server.arrivals)
    assert again == answers and arrivals == 5
    assert second.usage.http_requests == 0 and second.usage.cache_hits == 5 and second.usage.calls == 5


def test_the_same_request_asked_at_once_by_two_clients_is_sent_once(tmp_path):
    # configurations side by side (a race's round) share requests, such as the gold answers' relations
    with FakeOpenAI(latency=0.3) as server:
        clients = [ChatClient(settings(server.base_url), CallCache(tmp_path / "calls.sqlite")) for _ in range(2)]
        answers: list = [None, None]

        def ask(number):
            answers[number] = clients[number].complete_many(batch(QUESTIONS[:4]))

        asks = [threading.Thread(target=ask, args=(number,)) for number in range(2)]
        for thread in asks:
            thread.start()
        for thread in asks:
            thread.join()
    assert answers[0] == answers[1] and len(server.arrivals) == 4
    assert sum(c.usage.http_requests for c in clients) == 4 and sum(c.usage.cache_hits for c in clients) == 4


def test_a_cache_id_replaces_the_address_in_the_cache_key(tmp_path):
    """A local server's port changes at every start; its model does not: its answers stay cached."""
    cache = CallCache(tmp_path / "calls.sqlite")
    with FakeOpenAI() as server:
        answer = ChatClient(settings(server.base_url), cache, cache_id="smollm2").complete(HI)
    moved = ChatClient(settings("http://127.0.0.1:9/v1"), cache, cache_id="smollm2")  # nothing listens there
    assert moved.complete(HI) == answer and moved.usage.cache_hits == 1
    with pytest.raises(LLMError, match="cannot reach"):
        ChatClient(settings("http://127.0.0.1:9/v1", max_retries=0), cache).complete(HI)  # no id: the address counts


def test_other_decoding_settings_are_other_calls(tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    with FakeOpenAI() as server:
        ChatClient(settings(server.base_url), cache).complete(HI)
        ChatClient(settings(server.base_url, temperature=0.7), cache).complete(HI)
        ChatClient(settings(server.base_url, max_tokens=64), cache).complete(HI)
        arrivals = len(server.arrivals)
    assert arrivals == 3 and len(cache) == 3


def test_usage_tokens_and_cost():
    with FakeOpenAI() as server:
        client = ChatClient(settings(server.base_url, price_input_per_million=2.5, price_output_per_million=10.0))
        client.complete_many(batch(QUESTIONS[:3]))
    usage = client.usage
    assert usage.calls == 3 and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.cost == pytest.approx((usage.prompt_tokens * 2.5 + usage.completion_tokens * 10.0) / 1e6)


def test_usage_by_hand():
    usage = Usage(calls=3, cache_hits=1, http_requests=4, prompt_tokens=1000, completion_tokens=100,
                  price_input_per_million=2.5, price_output_per_million=10.0)
    # 2 calls went out, 4 requests: 2 retries; cost (1000 * 2.5 + 100 * 10) / 1e6
    assert usage.retries == 2 and usage.cost == pytest.approx(0.0035)
    assert usage.as_metrics("reader") == {"reader_calls": 3.0, "reader_cache_hits": 1.0, "reader_http_requests": 4.0,
                                          "reader_retries": 2.0, "reader_prompt_tokens": 1000.0,
                                          "reader_completion_tokens": 100.0, "reader_empty_replies": 0.0,
                                          "reader_refusals": 0.0, "reader_cost_usd": pytest.approx(0.0035)}
    assert Usage(calls=2, cache_hits=2).retries == 0


def test_structured_output_is_asked_only_where_the_endpoint_supports_it():
    reply_format = json_reply_format("score", object_schema(score={"type": "integer"}))
    assert reply_format == {"type": "json_schema", "json_schema": {"name": "score", "strict": True, "schema": {
        "type": "object", "additionalProperties": False, "required": ["score"],
        "properties": {"score": {"type": "integer"}}}}}
    assert ChatClient(settings("http://h/v1")).request(HI, reply_format)["response_format"] == reply_format
    plain = ChatClient(settings("http://h/v1", structured_output=False)).request(HI, reply_format)
    assert plain == {"model": "fake-model", "messages": HI, "temperature": 0.0, "max_tokens": 256}


def test_the_openai_client_is_made_once():
    client = ChatClient(settings("http://127.0.0.1:9/v1"))
    assert client.openai() is client.openai()


def test_ask_json_asks_again_with_the_reply_and_a_reminder_and_counts_what_never_parsed():
    class Scripted:
        ask_json = ChatClient.ask_json  # the client's own logic over scripted replies

        def __init__(self):
            self.asked = []
            self.replies = {"a": ["nonsense", '{"n": 1}'], "b": ["no", "still no"]}

        def complete_many(self, requests, progress=None):
            self.asked.append([list(m) for m, _ in requests])
            return [self.replies[m[0]["content"]].pop(0) for m, _ in requests]

    llm = Scripted()
    parse = lambda reply: reply if reply.startswith("{") else None  # noqa: E731
    results, failures = llm.ask_json([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]],
                                     None, parse, retries=1, reminder="JSON only.")
    assert results == ['{"n": 1}', None] and failures == 1
    assert llm.asked[1][0] == [{"role": "user", "content": "a"}, {"role": "assistant", "content": "nonsense"},
                               {"role": "user", "content": "JSON only."}]
    assert len(llm.asked) == 2  # retries=1: asked twice, then given up


def test_a_token_window_lets_a_request_larger_than_the_limit_through_alone():
    window = TokenWindow(per_minute=100)
    started = time.monotonic()
    window.acquire(500)  # clipped to the limit, so it can ever be sent
    assert time.monotonic() - started < 1 and [t for _, t in window.sent] == [100]


# --- faults ----------------------------------------------------------------------------------------------------

NOT_A_COMPLETION = ("answered with something that is not a chat completion ({}, HTTP 200 {}: '{}'): check "
                    "llm.base_url points at an OpenAI-compatible /v1 endpoint")
# fault -> what the message says after the endpoint's address, and whether the client retried it
FAULTS = {
    "429": (r"kept answering 429 Too Many Requests after 2 retries over \d+\.\d s: lower "
            r"llm\.requests_per_minute/llm\.concurrency or try later", True),
    "500": (r"answered 500 Internal Server Error after 2 retries over \d+\.\d s \(internal error\): the server is "
            r"failing; check its logs or try later", True),
    "badjson": (re.escape(NOT_A_COMPLETION.format("invalid JSON", "application/json", "{not json")), False),
    "html": (re.escape(NOT_A_COMPLETION.format("an HTML page", "text/html",
                                               "<html><body><h1>Welcome to nginx!</h1></body></html>")), False),
    "nochoices": (re.escape(NOT_A_COMPLETION.format("JSON without 'choices'", "application/json",
                                                    '{"id": "x", "object": "chat.completion"}')), False),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_is_one_clear_error_naming_the_endpoint(fault, caplog):
    expected, retried = FAULTS[fault]
    with FakeOpenAI(mode=fault, retry_after="0.1") as server:
        client = ChatClient(settings(server.base_url.replace("http://", "http://user:secret@")))
        redacted = server.base_url.replace("http://", "http://***@")
        with caplog.at_level(logging.INFO, logger="opi"), pytest.raises(LLMError) as raised:
            client.complete(HI)
        arrivals = len(server.arrivals)
    message = str(raised.value)
    assert re.fullmatch(re.escape(redacted) + " " + expected, message), message
    assert "secret" not in message and "\n" not in message
    retries = [r.getMessage() for r in caplog.records if r.name == "opi" and "retry" in r.getMessage()]
    assert arrivals == client.usage.http_requests == (3 if retried else 1)
    assert client.usage.retries == arrivals - 1
    if retried:  # one visible line per retry, the endpoint redacted there too
        reason = "429 Too Many Requests" if fault == "429" else "500 Internal Server Error"
        assert len(retries) == 2, retries
        for number, line in enumerate(retries, 1):
            assert re.fullmatch(rf"LLM request to {re.escape(redacted)} failed \({reason}\); retry {number} of 2 "
                                rf"in \d+\.\d s", line), line
        assert all(r.levelno == logging.WARNING for r in caplog.records if r.getMessage() in retries)
    else:
        assert retries == []


def test_clear_errors_for_key_model_and_address(monkeypatch):
    monkeypatch.setenv("OPI_TEST_KEY", "wrong")
    with FakeOpenAI(api_key="right", known_models={"real-model"}) as server:
        with pytest.raises(LLMError, match=r"refused the API key \(401\): check OPI_TEST_KEY"):
            ChatClient(settings(server.base_url, api_key_env="OPI_TEST_KEY")).complete(HI)
        monkeypatch.setenv("OPI_TEST_KEY", "right")
        with pytest.raises(LLMError, match=r"does not know model 'fake-model' \(404\): check llm.model") as raised:
            ChatClient(settings(server.base_url, api_key_env="OPI_TEST_KEY")).complete(HI)
        assert str(raised.value).endswith("; it said: model fake-model not found")
    with pytest.raises(LLMError, match=r"cannot reach http://127.0.0.1:9/v1 after 1 retries"):
        ChatClient(settings("http://127.0.0.1:9/v1", max_retries=1, timeout=1)).complete(HI)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError, match="llm.api_key_env names OPENAI_API_KEY, which is not set in this environment"):
        ChatClient(LLMConfig(name="x", reader=None, model="gpt-4o")).complete(HI)
    with pytest.raises(LLMError, match="llm.api_key_env names MY_UNSET_VAR, which is not set"):  # also a gateway's
        ChatClient(settings("http://127.0.0.1:9/v1", api_key_env="MY_UNSET_VAR")).complete(HI)
    assert api_key(settings("http://127.0.0.1:9/v1", api_key_env="")) == "not-needed"  # as null


def test_a_wrong_path_s_404_says_the_server_s_words_and_where_base_url_should_end():
    with FakeOpenAI(strict_paths=True) as server:  # Ollama's plain-text 404
        root = server.base_url.removesuffix("/v1")
        with pytest.raises(LLMError) as raised:
            ChatClient(settings(root)).complete(HI)
        assert len(server.arrivals) == 1  # not retried
    assert str(raised.value) == (f"{root} does not know model 'fake-model' (404): check llm.model, and that "
                                 f"llm.base_url ends in the endpoint's API root (usually .../v1); it said: 404 page "
                                 f"not found")


@pytest.mark.parametrize("group", ["llm", "metrics.similarity"])
def test_a_keyless_config_against_an_endpoint_that_wants_a_key_says_to_name_the_key_variable(group):
    with FakeOpenAI(api_key="right") as server:
        endpoint = Endpoint(settings(server.base_url), EndpointUsage(), group)
        with pytest.raises(LLMError) as raised:
            endpoint.call(lambda client, timeout: client.chat.completions.with_raw_response.create(
                model="fake-model", messages=HI, timeout=timeout), lambda raw: raw)
    assert str(raised.value) == (f"{server.base_url} asks for an API key (401): set {group}.api_key_env to the "
                                 f"variable holding it")


def test_a_refused_request_is_not_retried_and_says_why():
    with FakeOpenAI(mode="400") as server:
        client = ChatClient(settings(server.base_url))
        with pytest.raises(LLMError, match=re.escape(
                f"{server.base_url} refused the request: 400 Bad Request (response_format json_schema is not "
                f"supported): check llm.model, llm.max_tokens and llm.structured_output")):
            client.complete(HI)
        assert len(server.arrivals) == 1


def test_retry_after_is_honoured_and_a_passing_fault_costs_nothing_but_a_retry(caplog):
    with FakeOpenAI(faults={0: "429", 1: "500"}, period=1000, retry_after="0.7") as server:
        client = ChatClient(settings(server.base_url))
        with caplog.at_level(logging.INFO, logger="opi"):
            answer = client.complete(HI)
    assert answer.startswith("Answer ")
    lines = [r.getMessage() for r in caplog.records if r.name == "opi"]
    assert lines[0].endswith("failed (429 Too Many Requests); retry 1 of 2 in 0.7 s"), lines
    assert "failed (500 Internal Server Error); retry 2 of 2 in" in lines[1], lines
    assert client.usage.http_requests == 3 and client.usage.retries == 2


def test_no_request_outlives_the_deadline(caplog):
    with FakeOpenAI(mode="stall", stall_seconds=30) as server:
        client = ChatClient(settings(server.base_url, timeout=1, max_retries=6, deadline=3))
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="opi"), pytest.raises(LLMError) as raised:
            client.complete(HI)
        took = time.monotonic() - started
    assert re.fullmatch(re.escape(server.base_url) + r" gave no answer within llm\.deadline=3 s \(\d attempts; last: "
                        r"no answer within 1 s\): raise llm\.deadline or llm\.timeout, or check the server",
                        str(raised.value)), raised.value
    assert took < 15  # a guard only: the client stops before the deadline, about 2.5 s here
    assert any("failed (no answer within 1 s); retry 1 of 6" in r.getMessage() for r in caplog.records)


def test_a_retry_after_beyond_the_deadline_ends_the_request_at_once_saying_the_wait():
    with FakeOpenAI(mode="429", retry_after="20") as server:
        client = ChatClient(settings(server.base_url, deadline=5))
        started = time.monotonic()
        with pytest.raises(LLMError) as raised:
            client.complete(HI)
        assert time.monotonic() - started < 4 and len(server.arrivals) == 1
    assert str(raised.value) == (f"{server.base_url} gave no answer within llm.deadline=5 s (1 attempt; last: 429 Too "
                                 f"Many Requests): the server asked to wait 20 s, beyond what is left of "
                                 f"llm.deadline; raise llm.deadline or try later")


def test_a_retry_after_beyond_a_minute_is_not_waited_for_but_said():
    # OPI waits 60 s at most: its own backoff (0.5 s, 1 s) instead, and the final message says what the server asked
    with FakeOpenAI(mode="429", retry_after="120") as server:
        client = ChatClient(settings(server.base_url))
        with pytest.raises(LLMError) as raised:
            client.complete(HI)
        assert len(server.arrivals) == 3
    assert re.fullmatch(re.escape(server.base_url) + r" kept answering 429 Too Many Requests after 2 retries over "
                        r"\d\.\d s and asked to wait 120 s, beyond the 60 s OPI waits at most: try later",
                        str(raised.value)), raised.value
    with FakeOpenAI(mode="429", retry_after="120") as server:  # the deadline ends the backoff first
        with pytest.raises(LLMError) as raised:
            ChatClient(settings(server.base_url, deadline=1)).complete(HI)
    assert re.fullmatch(re.escape(server.base_url) + r" gave no answer within llm\.deadline=1 s \(\d attempts?; last: "
                        r"429 Too Many Requests\): the server asked to wait 120 s, beyond the 60 s OPI waits at most; "
                        r"try later", str(raised.value)), raised.value


def test_clients_side_by_side_keep_to_the_endpoints_concurrency():
    # a race evaluates configurations side by side, each asking `concurrency` at once: the endpoint sees no more
    with FakeOpenAI(latency=0.2) as server:
        clients = [ChatClient(settings(server.base_url, concurrency=3)) for _ in range(3)]
        asks = [threading.Thread(target=c.complete_many, args=(batch(QUESTIONS[:12]),)) for c in clients]
        for ask in asks:
            ask.start()
        for ask in asks:
            ask.join()
        assert len(server.arrivals) == 36 and server.most_at_once == 3
        alone = ChatClient(settings(server.base_url, concurrency=6))  # another setting: a limit of its own
        alone.complete_many(batch(QUESTIONS[12:30]))
        assert server.most_at_once == 6


def test_a_batch_stops_at_the_first_fault():
    with FakeOpenAI(mode="html") as server:
        client = ChatClient(settings(server.base_url, concurrency=2))
        with pytest.raises(LLMError, match="an HTML page"):
            client.complete_many([([{"role": "user", "content": f"question {i}"}], None) for i in range(20)])
        time.sleep(0.2)
        assert len(server.arrivals) <= 3  # the workers took no new request after the first error


def test_a_request_is_not_sent_when_the_process_is_exiting(process_stop):
    with FakeOpenAI() as server:
        process_stop.set()
        with pytest.raises(LLMInterrupted, match="the process is exiting"):
            ChatClient(settings(server.base_url)).complete(HI)
        assert server.arrivals == []


def test_a_batch_waiting_on_a_stalled_server_lets_an_exiting_main_thread_go(process_stop):
    """What SIGTERM does to `opi-eval`: the main thread unwinds SystemExit (or Prefect's TerminationSignal) and
    joins the worker thread that waits in complete_many; the wait must end, not last the HTTP read."""
    with FakeOpenAI(mode="stall", stall_seconds=60) as server:
        client = ChatClient(settings(server.base_url, timeout=60, deadline=None))
        outcome: dict[str, BaseException] = {}

        def task():
            try:
                client.complete_many([([{"role": "user", "content": f"q{i}"}], None) for i in range(4)])
            except BaseException as err:
                outcome["error"] = err

        worker = threading.Thread(target=task)

        class JoinedOnExit:  # like a task runner's __exit__
            def __enter__(self):
                worker.start()

            def __exit__(self, *exc):
                worker.join(timeout=30)

        started = time.monotonic()
        with pytest.raises(SystemExit):
            with JoinedOnExit():
                deadline = time.monotonic() + 10
                while len(server.arrivals) < 4 and time.monotonic() < deadline:  # the four requests are in flight
                    time.sleep(0.05)
                sys.exit(143)
        assert time.monotonic() - started < 10 and not worker.is_alive()
    assert isinstance(outcome["error"], LLMInterrupted)


# --- replies that are no answer ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, counted", [("empty", "empty_replies"), ("refusal", "refusals")])
def test_an_empty_or_refused_reply_is_asked_again_then_missing_counted_and_not_cached(tmp_path, kind, counted):
    cache = CallCache(tmp_path / "calls.sqlite")
    with FakeOpenAI(**{f"{'empty' if kind == 'empty' else 'refuse'}_when": "number 1:"}) as server:
        client = ChatClient(settings(server.base_url), cache)
        answers = client.complete_many(batch(QUESTIONS[:3]))
        arrivals = len(server.arrivals)
    assert answers[0] and answers[2] and answers[1] is None
    assert arrivals == 4  # question 1 asked twice (llm.empty_retries=1), the others once
    assert getattr(client.usage, counted) == 1 and client.usage.as_metrics("llm")[f"llm_{counted}"] == 1.0
    assert len(cache) == 2  # the missing answer is not kept: a re-run asks again


def test_an_empty_reply_an_older_version_cached_is_asked_again_and_replaced(tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    with FakeOpenAI() as server:
        client = ChatClient(settings(server.base_url), cache)
        body = client.request(HI)
        from opi.llm.cache import call_key
        key = call_key({"endpoint": server.base_url, **body})
        cache.put(key, {"content": "", "usage": None})
        answer = client.complete(HI)
        assert answer and cache.get(key)["content"] == answer and len(server.arrivals) == 1


def test_ask_json_does_not_ask_a_missing_reply_again_nor_count_it_as_unparsable():
    with FakeOpenAI(empty_when="Name the relation") as server:
        client = ChatClient(settings(server.base_url))
        parsed, failures = client.ask_json([[{"role": "user", "content": "Name the relation."}]], None,
                                           lambda reply: reply, retries=2, reminder="JSON only")
    # complete() asked once more (llm.empty_retries=1) and gave up; the parse retries do not ask a third time
    assert parsed == [None] and failures == 0 and len(server.bodies) == 2
    assert client.usage.empty_replies == 1
    assert all(len(body["messages"]) == 1 for body in server.bodies)  # never with a None reply


def test_each_request_s_record_says_its_reply_whether_it_was_cached_and_its_tokens(tmp_path):
    with FakeOpenAI() as server:
        first = ChatClient(settings(server.base_url), CallCache(tmp_path / "calls.sqlite"))
        answers = first.complete_many(batch(QUESTIONS[:3]))
        second = ChatClient(settings(server.base_url), CallCache(tmp_path / "calls.sqlite"))
        second.complete_many(batch(QUESTIONS[:3]))
    paid = [first.record_of(q) for q in QUESTIONS[:3]]
    assert [r.content for r in paid] == answers and not any(r.cached for r in paid)
    assert sum(r.prompt_tokens for r in paid) == first.usage.prompt_tokens > 0
    assert sum(r.completion_tokens for r in paid) == first.usage.completion_tokens > 0
    again = [second.record_of(q) for q in QUESTIONS[:3]]
    assert all(r.cached for r in again) and second.usage.prompt_tokens == 0
    assert [(r.content, r.prompt_tokens, r.completion_tokens) for r in again] == [
        (r.content, r.prompt_tokens, r.completion_tokens) for r in paid]  # the tokens of the call that paid
    assert first.record_of(QUESTIONS[5]) is None  # never asked here


def test_a_keyless_endpoint_gets_no_authorization_header_and_a_keyed_one_gets_its_key(monkeypatch):
    from opi.embeddings.endpoint import EndpointEmbedder
    from opi.schemas import EmbeddingConfig
    from tests.helpers.recording_openai import RecordingOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-this-endpoint")  # a keyless endpoint sends no key, not this
    monkeypatch.setenv("OPI_TEST_KEY", "the-key")
    with RecordingOpenAI() as server:
        ChatClient(settings(server.base_url, model="keyless", api_key_env=None)).complete(
            [{"role": "user", "content": "hi"}])
        EndpointEmbedder(EmbeddingConfig(provider="openai-compatible", model="keyless-embed", base_url=server.base_url,
                                         api_key_env=None)).raw(["one", "two"])
        ChatClient(settings(server.base_url, model="keyed", api_key_env="OPI_TEST_KEY")).complete(
            [{"role": "user", "content": "hi"}])
    assert server.authorizations() == {"keyless": {None}, "keyless-embed": {None}, "keyed": {"Bearer the-key"}}


class LongWinded(FakeOpenAI):
    """Replies as long as the question asks ("<n> characters"): an endpoint that ignores max_tokens."""

    @staticmethod
    def reply_for(body: dict) -> str:
        wanted = int(body["messages"][-1]["content"].split()[0])
        return ("All work and no play. " * (wanted // 22 + 1))[:wanted]


def test_a_reply_in_text_parts_is_their_text_joined(tmp_path):
    expected = FakeOpenAI.reply_for({"messages": HI})

    def parts(text):
        return [{"type": "text", "text": text[:6]}, {"type": "image_url", "image_url": {"url": "x"}},
                {"type": "text", "text": text[6:]}]

    with FakeOpenAI(content_as=parts) as server:
        cache = CallCache(tmp_path / "calls.sqlite")
        assert ChatClient(settings(server.base_url), cache).complete(HI) == expected
        assert ChatClient(settings(server.base_url), cache).complete(HI) == expected  # cached as text
        assert len(server.arrivals) == 1


@pytest.mark.parametrize("served, said", [("other-model", True), ("fake-model-2024-08-06", False),
                                          ("org/fake-model", False), ("fake-model:latest", False)])
def test_an_endpoint_answering_as_another_model_is_said_once(served, said, caplog):
    with FakeOpenAI(served_model=served) as server, caplog.at_level(logging.WARNING, logger="opi"):
        replies = ChatClient(settings(server.base_url)).complete_many(batch(QUESTIONS[:3]))
    assert len(replies) == 3 and all(replies)
    warned = [r.getMessage() for r in caplog.records if "answers as model" in r.getMessage()]
    assert warned == ([f"the LLM endpoint {server.base_url} answers as model {served!r}, not llm.model='fake-model': "
                       "the run is logged as 'fake-model'; check the model name the server knows"] if said else [])


@pytest.mark.parametrize("content", [{"text": "hi"}, 42, [{"type": "text", "text": 5}], ["hi"]])
def test_a_reply_whose_content_is_not_text_is_not_a_chat_completion(content):
    with FakeOpenAI(content_as=lambda text: content) as server:
        with pytest.raises(LLMError) as raised:
            ChatClient(settings(server.base_url)).complete(HI)
    assert str(raised.value).startswith(f"{server.base_url} answered with something that is not a chat completion "
                                        f"(message content that is not text, HTTP 200 application/json: ")
    assert str(raised.value).endswith("): check llm.base_url points at an OpenAI-compatible /v1 endpoint")


def test_a_reply_far_longer_than_max_tokens_allows_is_cut_and_counted_and_a_fair_one_is_not(tmp_path):
    asked = [[{"role": "user", "content": f"{n} characters please"}] for n in (30, 100, 1_000_000)]
    with LongWinded() as server:  # max_tokens=8: cut at 32 characters; overlong past 128, or 16 tokens as counted
        client = ChatClient(settings(server.base_url, max_tokens=8), CallCache(tmp_path / "calls.sqlite"))
        replies = client.complete_many(batch(asked))
        again = ChatClient(settings(server.base_url, max_tokens=8), CallCache(tmp_path / "calls.sqlite"))
        assert again.complete_many(batch(asked)) == replies and again.usage.cache_hits == 3
    assert [len(r) for r in replies] == [30, 32, 32]  # 100 characters: 25 tokens as the endpoint counts them, > 16
    assert replies[2] == "All work and no play. All work a"
    assert client.usage.overlong_replies == again.usage.overlong_replies == 2  # a cached reply is counted again
    cache = CallCache(tmp_path / "calls.sqlite")  # the cut reply is kept, not the megabyte
    assert sorted(len(cache.get(client._key(client.request(m)))["content"]) for m in asked) == [30, 32, 32]
    assert client.usage.as_metrics("llm_answer")["llm_answer_overlong_replies"] == 2
    plain = Usage()
    assert "overlong_replies" not in plain.counts()  # no new metric where nothing was cut
