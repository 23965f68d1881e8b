import pytest

from opi.classify import LLMRelationClassifier, Triple, parse_relation
from opi.llm.cache import CallCache
from opi.llm.client import ChatClient, LLMError
from opi.llm.prompts import load_prompt
from opi.llm.reader import ExtractiveReader, LLMReader
from opi.relations import load_relation_set
from opi.schemas import LLMConfig
from tests.fake_openai import FakeOpenAI

QUESTIONS = [f"Question number {i}: what happened in year {1800 + i}?" for i in range(40)]
SENTENCES = [[f"In {1800 + i} the mill on the river was rebuilt.", "It later closed."] for i in range(40)]


def settings(server, **overrides):
    values = dict(name="fake", reader=ExtractiveReader(), model="fake-model", base_url=server.base_url,
                  api_key_env=None, timeout=0.5, max_retries=6, concurrency=8)
    values.update(overrides)
    return LLMConfig(**values)


def test_faults_are_retried_and_results_equal_a_fault_free_run(tmp_path):
    with FakeOpenAI() as clean:
        expected = LLMReader(client=ChatClient(settings(clean))).answer(QUESTIONS, SENTENCES)
    faults = {2: "429", 5: "500", 8: "stall"}  # 30 % of arrivals
    with FakeOpenAI(faults=faults, stall_seconds=3.0) as faulty:
        client = ChatClient(settings(faulty, requests_per_minute=1200, timeout=1.5),
                            CallCache(tmp_path / "calls.sqlite"))
        answers = LLMReader(client=client).answer(QUESTIONS, SENTENCES)
        arrivals = sorted(faulty.arrivals)
        injected = sum(faulty.injected.values())
    assert answers == expected and all(answers)
    assert injected >= 12  # about 30 % of the ~55 arrivals failed
    # every arrival beyond one per row is a retry the client counted (a slow machine may add timeouts of its own)
    assert client.usage.http_requests == len(arrivals)
    assert client.usage.retries == len(arrivals) - len(QUESTIONS) >= injected
    # rate limit 1200/min = 20 per second, retries included: no 1 s window holds more (one of jitter allowed)
    busiest = max(sum(1 for t in arrivals if start <= t < start + 1.0) for start in arrivals)
    assert busiest <= 21


def test_cache_makes_the_second_run_free(tmp_path):
    with FakeOpenAI() as server:
        first = ChatClient(settings(server), CallCache(tmp_path / "calls.sqlite"))
        answers = LLMReader(client=first).answer(QUESTIONS[:5], SENTENCES[:5])
        second = ChatClient(settings(server), CallCache(tmp_path / "calls.sqlite"))
        again = LLMReader(client=second).answer(QUESTIONS[:5], SENTENCES[:5])
        arrivals = len(server.arrivals)
    assert again == answers
    assert arrivals == 5
    assert second.usage.http_requests == 0 and second.usage.cache_hits == 5


def test_usage_tokens_and_cost(tmp_path):
    with FakeOpenAI() as server:
        client = ChatClient(settings(server, price_input_per_million=2.5, price_output_per_million=10.0))
        LLMReader(client=client).answer(QUESTIONS[:3], SENTENCES[:3])
    usage = client.usage
    assert usage.calls == 3 and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.cost == pytest.approx((usage.prompt_tokens * 2.5 + usage.completion_tokens * 10.0) / 1e6)


def test_clear_errors_for_key_model_and_address(monkeypatch):
    monkeypatch.setenv("OPI_TEST_KEY", "wrong")
    with FakeOpenAI(api_key="right", known_models={"real-model"}) as server:
        with pytest.raises(LLMError, match=r"refused the API key \(401\): check OPI_TEST_KEY"):
            ChatClient(settings(server, api_key_env="OPI_TEST_KEY")).complete([{"role": "user", "content": "hi"}])
        monkeypatch.setenv("OPI_TEST_KEY", "right")
        with pytest.raises(LLMError, match=r"does not know model 'fake-model' \(404\)"):
            ChatClient(settings(server, api_key_env="OPI_TEST_KEY")).complete([{"role": "user", "content": "hi"}])
    with pytest.raises(LLMError, match="cannot reach"):
        ChatClient(LLMConfig(name="x", reader=ExtractiveReader(), model="m", base_url="http://127.0.0.1:9/v1", api_key_env=None, max_retries=1,
                               timeout=1)).complete([{"role": "user", "content": "hi"}])
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError, match="set the environment variable OPENAI_API_KEY"):
        ChatClient(LLMConfig(name="x", reader=ExtractiveReader(), model="gpt-4o")).complete(
            [{"role": "user", "content": "hi"}])


def test_relation_classifier_structured_output_and_parse_failures(tmp_path):
    relations = load_relation_set()
    triples = [Triple("In 1850 the mill opened.", f"When did mill {i} open?", "In 1850.") for i in range(6)]
    with FakeOpenAI() as server:
        classifier = LLMRelationClassifier(client=ChatClient(settings(server)), relation_set=relations)
        labels = classifier.predict(triples)
        schema = server.bodies[0]["response_format"]["json_schema"]["schema"]
    assert all(label in relations for label in labels) and classifier.parse_failures == 0
    assert schema["properties"]["relation"]["enum"] == relations.labels

    class Garbage:
        usage = None
        ask_json = ChatClient.ask_json  # the real retry-and-count logic over a client that only talks nonsense

        def complete_many(self, requests, progress=None):
            return ["I think it is deep reasoning"] * len(requests)

    stubborn = LLMRelationClassifier(client=Garbage(), relation_set=relations, parse_retries=2)
    assert stubborn.predict(triples[:2]) == ["unknown", "unknown"]
    assert stubborn.parse_failures == 2


def test_parse_relation_is_strict():
    labels = ["causal", "temporal"]
    assert parse_relation('{"relation": "causal"}', labels) == "causal"
    assert parse_relation('Sure! {"relation": "temporal"} is my answer', labels) == "temporal"
    assert parse_relation("Temporal.", labels) == "temporal"
    assert parse_relation('{"relation": "spatial"}', labels) is None
    assert parse_relation("causal or temporal", labels) is None


def test_prompt_version_changes_with_text():
    prompt = load_prompt("answer")
    assert len(prompt.version) == 12
    assert "{question}" in prompt.template
    from opi.llm.prompts import Prompt

    assert Prompt("answer", prompt.template + " ").version != prompt.version
