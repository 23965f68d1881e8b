"""opi.llm.finetune: the chat format of a fine-tuned relation classifier, the training file's checks, and the
fine-tuning job found again or created, then waited for (against tests/helpers/fake_openai.py)."""
import hashlib
import json

import pytest

from opi.llm.client import ChatClient
from opi.llm.finetune import (MAX_TOKENS_PER_EXAMPLE, chat_messages, estimate_tokens, find_or_create_job,
                              training_lines, validate_training_file, wait_for_job)
from opi.llm.prompts import load_prompt
from opi.relations import RelationSet, Triple
from opi.schemas import LLMConfig
from tests.helpers.fake_openai import FakeOpenAI

RELATIONS = RelationSet("two", {"temporal": "ordering events in time", "causal": "cause and effect"})
TRIPLES = [Triple("The mill opened in 1850.", "When did the mill open?", "In 1850."),
           Triple("The river silted up, so the mill closed.", "Why did the mill close?", "The river silted up.")]


def test_estimate_tokens_is_a_quarter_of_the_characters_and_at_least_one():
    assert (estimate_tokens("a" * 400), estimate_tokens("abc"), estimate_tokens("")) == (100, 1, 1)


def test_chat_messages_hold_the_definitions_then_the_triple():
    system, user = chat_messages(TRIPLES[0], RELATIONS)
    assert system == {"role": "system", "content": load_prompt("finetune_system").render(
        definitions="- temporal: ordering events in time\n- causal: cause and effect")}
    assert user == {"role": "user", "content": "Context:\nThe mill opened in 1850.\n\nQuestion: When did the mill "
                                               "open?\n\nAnswer: In 1850."}


def test_training_lines_end_with_the_label_as_the_assistant_turn():
    first, second = (json.loads(line) for line in training_lines(TRIPLES, ["temporal", "causal"], RELATIONS))
    assert first["messages"][:2] == chat_messages(TRIPLES[0], RELATIONS)
    assert first["messages"][2] == {"role": "assistant", "content": "temporal"}
    assert second["messages"][2] == {"role": "assistant", "content": "causal"}


def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_valid_training_file_is_counted(tmp_path):
    lines = training_lines(TRIPLES + TRIPLES[:1], ["temporal", "causal", "temporal"], RELATIONS)
    path = write(tmp_path / "train.jsonl", lines)
    report = validate_training_file(path, RELATIONS)
    sizes = [sum(estimate_tokens(m["content"]) for m in json.loads(line)["messages"]) for line in lines]
    assert (report.examples, report.tokens, report.max_example_tokens) == (3, sum(sizes), max(sizes))
    assert report.label_counts == {"temporal": 2, "causal": 1}
    assert report.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()  # what a job is found again by


def line_with(messages):
    return json.dumps({"messages": messages})


GOOD = json.loads(training_lines(TRIPLES[:1], ["temporal"], RELATIONS)[0])["messages"]
CAUSAL = training_lines(TRIPLES[1:], ["causal"], RELATIONS)[0]


@pytest.mark.parametrize("bad, message", [
    ("not json", "line 1: not a JSON object with 'messages'"),
    (json.dumps({"prompt": "x"}), "line 1: not a JSON object with 'messages'"),
    (line_with(GOOD[1:]), r"line 1: expected system, user, assistant messages with text, got \['user', 'assistant'\]"),
    (line_with(GOOD[:2] + [{"role": "assistant", "content": 3}]), "line 1: expected system, user, assistant"),
    (line_with(GOOD[:2] + [{"role": "assistant", "content": "spatial"}]),
     "line 1: assistant label 'spatial' is not in the label set"),
    (line_with([GOOD[0], {"role": "user", "content": "x" * 4 * (MAX_TOKENS_PER_EXAMPLE + 1)}, GOOD[2]]),
     "line 1: about 65[0-9]{3} tokens, over the 65536 limit"),
])
def test_a_bad_line_is_named(tmp_path, bad, message):
    with pytest.raises(ValueError, match=message):
        validate_training_file(write(tmp_path / "train.jsonl", [bad, CAUSAL]), RELATIONS)


def test_every_label_needs_an_example(tmp_path):
    with pytest.raises(ValueError, match=r"no training example for \['causal'\]; every label needs examples"):
        validate_training_file(write(tmp_path / "train.jsonl", [line_with(GOOD)]), RELATIONS)


def openai_client(server):
    return ChatClient(LLMConfig(name="ft", reader=None, model="gpt-4o", base_url=server.base_url,
                                api_key_env=None)).openai()


def test_a_job_is_created_once_and_found_again_for_the_same_file(tmp_path):
    path = write(tmp_path / "train.jsonl", training_lines(TRIPLES, ["temporal", "causal"], RELATIONS))
    report = validate_training_file(path, RELATIONS)
    logged = []
    with FakeOpenAI() as server:
        client = openai_client(server)
        job, created = find_or_create_job(client, path, report, "gpt-4o-2024-08-06", "opi", seed=3, log=logged.append)
        again, created_again = find_or_create_job(client, path, report, "gpt-4o-2024-08-06", "opi", seed=3,
                                                  log=logged.append)
        other, created_other = find_or_create_job(client, path, report, "gpt-4o-mini", "opi", seed=3, log=logged.append)
        uploaded = dict(server.files)
        jobs = dict(server.jobs)
    assert created and not created_again and created_other  # another base model: another job
    assert again.id == job.id != other.id
    assert list(uploaded.values())[0] == path.read_bytes() and len(uploaded) == 2
    assert jobs[job.id]["metadata"] == {"opi_data_sha256": report.sha256[:32], "opi_base_model": "gpt-4o-2024-08-06"}
    assert jobs[job.id]["seed"] == 3 and jobs[job.id]["suffix"] == "opi"
    assert logged[1] == f"found fine-tuning job {job.id} (validating_files) for this training file: not creating another"


def test_waiting_for_a_job_backs_off_logs_each_event_once_and_times_out(tmp_path, monkeypatch):
    from opi.llm import finetune

    path = write(tmp_path / "train.jsonl", training_lines(TRIPLES, ["temporal", "causal"], RELATIONS))
    clock = [0.0]
    monkeypatch.setattr(finetune.time, "monotonic", lambda: clock[0])

    def sleep(seconds):
        slept.append(seconds)
        clock[0] += seconds

    with FakeOpenAI() as server:  # its jobs run for two polls, then succeed
        client = openai_client(server)
        job, _ = find_or_create_job(client, path, validate_training_file(path, RELATIONS), "gpt-4o", "opi", 0,
                                    log=lambda line: None)
        slept, logged = [], []
        done = wait_for_job(client, job.id, first_wait=30, max_wait=45, log=logged.append, sleep=sleep)
        assert done.status == "succeeded" and done.fine_tuned_model == f"ft:gpt-4o:opi-test::{job.id}"
        assert slept == [30, 45]  # doubled, capped at max_wait
        assert logged == [f"{job.id}: Validating training file", f"{job.id}: Job running", f"{job.id}: Job succeeded"]

        late, _ = find_or_create_job(client, path, validate_training_file(path, RELATIONS), "gpt-4o-mini", "opi", 0,
                                     log=lambda line: None)
        slept = []
        with pytest.raises(TimeoutError, match=f"fine-tuning job {late.id} still running after 20 s; re-run to resume"):
            wait_for_job(client, late.id, first_wait=30, timeout=20, log=lambda line: None, sleep=sleep)
        assert slept == [30]
