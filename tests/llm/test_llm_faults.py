"""LLM-endpoint faults (issue #20): each ends in one LLMError naming the endpoint (credentials redacted) and what to do,
retries are logged one line each, no request outlives llm.deadline, and a stalled request does not keep a process
told to stop alive. The unit tests talk to tests/fake_openai.py; the CLI tests run `opi-eval` as a user does."""
import logging
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import mlflow
import pytest

from opi.llm.client import ChatClient, LLMError, LLMInterrupted, redact_url
from opi.llm.reader import ExtractiveReader
from opi.schemas import LLMConfig
from tests.cli import processes_with_env, run_cli
from tests.fake_openai import FakeOpenAI
from tests.flows.test_reliability import start_cli, wait_for

HI = [{"role": "user", "content": "hi"}]
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


def settings(base_url: str, **overrides) -> LLMConfig:
    values = dict(name="fake", reader=ExtractiveReader(), model="fake-model", base_url=base_url, api_key_env=None,
                  timeout=2, max_retries=2, deadline=20, concurrency=4)
    values.update(overrides)
    return LLMConfig(**values)


def with_credentials(base_url: str) -> str:
    return base_url.replace("http://", "http://user:secret@")


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_is_one_clear_error_naming_the_endpoint(fault, caplog):
    expected, retried = FAULTS[fault]
    with FakeOpenAI(mode=fault, retry_after="0.1") as server:
        client = ChatClient(settings(with_credentials(server.base_url)))
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


def test_a_retry_after_beyond_the_deadline_ends_the_request_at_once():
    with FakeOpenAI(mode="429", retry_after="20") as server:
        client = ChatClient(settings(server.base_url, deadline=5))
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"no answer within llm\.deadline=5 s \(1 attempt; last: 429 Too Many "
                                           r"Requests\)"):
            client.complete(HI)
        assert time.monotonic() - started < 4 and len(server.arrivals) == 1


def test_a_batch_stops_at_the_first_fault():
    with FakeOpenAI(mode="html") as server:
        client = ChatClient(settings(server.base_url, concurrency=2))
        with pytest.raises(LLMError, match="an HTML page"):
            client.complete_many([([{"role": "user", "content": f"question {i}"}], None) for i in range(20)])
        time.sleep(0.2)
        assert len(server.arrivals) <= 3  # the workers took no new request after the first error


def test_a_batch_waiting_on_a_stalled_server_lets_an_exiting_main_thread_go():
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
                wait_for(lambda: len(server.arrivals) >= 4, 10, "the requests")
                sys.exit(143)
        assert time.monotonic() - started < 10 and not worker.is_alive()
    assert isinstance(outcome["error"], LLMInterrupted)


def test_redact_url():
    assert redact_url("http://user:secret@host/v1") == "http://***@host/v1"
    assert redact_url("https://sk-abc123@gateway.example.com:8443/openai/v1") == \
        "https://***@gateway.example.com:8443/openai/v1"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redact_url("https://host/v1?api-key=s3cr3t&deployment=gpt") == "https://host/v1?api-key=***&deployment=gpt"
    assert redact_url(None) == "api.openai.com"
    assert "p@ss" not in redact_url("http://me:p@ss@host/v1")


@pytest.mark.parametrize("deadline, valid", [(300, True), (None, True), (0.5, True), (0, False), (-1, False)])
def test_deadline_is_checked(deadline, valid):
    if valid:
        assert settings("http://127.0.0.1:1/v1", deadline=deadline).deadline == deadline
    else:
        with pytest.raises(ValueError, match="llm.deadline must be > 0 seconds or null"):
            settings("http://127.0.0.1:1/v1", deadline=deadline)


def opi_eval_faulty(tmp_path: Path, server: FakeOpenAI, *overrides: str, expect: int | None = 2) -> str:
    return run_cli("flows.evaluate", tmp_path, "llm=openai-compatible", f"llm.base_url={server.base_url}",
                   "llm.model=fake", "llm.max_retries=1", "dataset.limit=2", "setup=knn", *overrides,
                   env={"OPENAI_API_KEY": "k"}, expect=expect)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_opi_eval_ends_an_endpoint_fault_with_one_line_and_exit_2(tmp_path, fault):
    with FakeOpenAI(mode=fault, retry_after="0.1") as server:
        output = opi_eval_faulty(tmp_path, server)
    problems = [line for line in output.splitlines() if "LLM endpoint problem" in line]
    assert len(problems) == 1, output[-3000:]
    assert server.base_url in problems[0]
    assert "Traceback" not in output, output[-3000:]


def test_sigterm_during_a_stalled_request_ends_opi_eval_within_10_s(tmp_path):
    with FakeOpenAI(mode="stall", stall_seconds=300) as server:
        process, log = start_cli(tmp_path, "-m", "llm=openai-compatible", f"llm.base_url={server.base_url}",
                                 "llm.model=fake", "dataset.limit=2", "setup=knn", env={"OPENAI_API_KEY": "k"})
        try:
            wait_for(lambda: server.arrivals or process.poll() is not None, 240, "the first LLM request")
            assert process.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
            os.kill(process.pid, signal.SIGTERM)
            started = time.monotonic()
            code = process.wait(timeout=30)
            took = time.monotonic() - started
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    output = log.read_text()
    assert took < 10, output[-3000:]
    assert code == 128 + signal.SIGTERM, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    wait_for(lambda: not processes_with_env("PREFECT_HOME", str(tmp_path / "prefect")), 10, "its children to end")
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (parent,) = client.search_runs([client.get_experiment_by_name("opi").experiment_id])  # no child: none finished
    assert parent.data.tags["opi.role"] == "sweep" and parent.info.status == "KILLED"
