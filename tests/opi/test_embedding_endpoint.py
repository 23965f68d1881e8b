"""opi.embeddings.endpoint: embeddings from an OpenAI-compatible endpoint (tests/helpers/fake_openai.py) -- the
vectors served, in input order; rankings equal to the local model's when it serves that model's vectors; the store
makes a second run free; faults end as the chat client's do; usage; no secret in keys, names or messages."""
import logging
import re
import threading
import time

import numpy as np
import pytest

from opi.embeddings import EmbeddingStore
from opi.embeddings.endpoint import EndpointEmbedder
from opi.llm.client import ChatClient, LLMError, check_keys
from opi.retrievers import DPSRetriever, KNNRetriever
from opi.schemas import EmbeddingConfig, LLMConfig
from tests.helpers.fake_openai import FakeOpenAI, hash_vectors

TEXTS = [f"Text number {i} about the harbour in year {1800 + i}." for i in range(20)]
QUESTIONS = ["When did the lighthouse keeper light the lamp?", "Who worked at the copper mine?",
             "Where was the zirconium sand stored?"]


def config(base_url: str, **overrides) -> EmbeddingConfig:
    values = dict(provider="openai-compatible", model="fake-embed", base_url=base_url, api_key_env=None, timeout=2,
                  max_retries=2, deadline=20, concurrency=4, batch_size=3)
    values.update(overrides)
    return EmbeddingConfig(**values)


def chat_settings(base_url: str, **overrides) -> LLMConfig:
    values = dict(name="fake", reader=None, model="fake-model", base_url=base_url, api_key_env=None, timeout=2,
                  max_retries=2, deadline=20, concurrency=4)
    values.update(overrides)
    return LLMConfig(**values)


# --- vectors ---------------------------------------------------------------------------------------------------

def test_the_vectors_served_come_back_in_input_order_across_parallel_batches():
    in_flight, peak, lock = [0], [0], threading.Lock()

    def slow_early_batches(texts):  # the first batches answer last
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.3 if TEXTS.index(texts[0]) < 9 else 0.05)
        with lock:
            in_flight[0] -= 1
        return hash_vectors(texts)

    with FakeOpenAI(vectors=slow_early_batches) as server:
        embedder = EndpointEmbedder(config(server.base_url), normalize=False)
        vectors = embedder.raw(TEXTS)
        bodies = list(server.embedding_bodies)
    np.testing.assert_array_equal(vectors, np.asarray(hash_vectors(TEXTS), dtype=np.float32))
    assert [len(b["input"]) for b in bodies] == [3] * 6 + [2]  # embedding.batch_size texts a request
    assert 1 < peak[0] <= 4  # in parallel, up to embedding.concurrency
    assert all(b["model"] == "fake-embed" and b["encoding_format"] == "float" and "dimensions" not in b
               for b in bodies)


def test_dimensions_are_asked_for_only_when_set():
    with FakeOpenAI() as server:
        embedder = EndpointEmbedder(config(server.base_url, dimensions=5))
        assert embedder.raw(TEXTS[:4]).shape == (4, 5) and embedder.dimension == 5
        assert {b["dimensions"] for b in server.embedding_bodies} == {5}


def test_the_knn_retriever_ranks_as_with_the_local_model_when_the_endpoint_serves_its_vectors(embedder, tiny_chunks):
    with FakeOpenAI(vectors=embedder.raw) as server:
        remote = EndpointEmbedder(config(server.base_url, batch_size=4))
        for retriever in (KNNRetriever, DPSRetriever):
            local_rankings = retriever(embedder=embedder).rank(QUESTIONS, tiny_chunks, 8)
            remote_rankings = retriever(embedder=remote).rank(QUESTIONS, tiny_chunks, 8)
            for local, served in zip(local_rankings, remote_rankings):
                assert served.chunk_ids == local.chunk_ids
                assert served.scores == pytest.approx(local.scores, abs=1e-6)
    np.testing.assert_array_equal(remote.raw(QUESTIONS), embedder.raw(QUESTIONS))  # float32 through JSON: exact


def test_a_second_embedder_over_the_same_store_sends_no_request(tmp_path):
    with FakeOpenAI() as server:
        first = EndpointEmbedder(config(server.base_url), store=EmbeddingStore(tmp_path / "embeddings.sqlite"))
        vectors = first.raw(TEXTS)
        sent = len(server.embedding_bodies)
        second = EndpointEmbedder(config(server.base_url), store=EmbeddingStore(tmp_path / "embeddings.sqlite"))
        again = second.raw(TEXTS)
        assert len(server.embedding_bodies) == sent == 7
    np.testing.assert_array_equal(again, vectors)
    assert second.usage.http_requests == 0 and second.store_hits == len(TEXTS) and second.texts_embedded == 0
    other = EndpointEmbedder(config(server.base_url, dimensions=4))  # other vectors: another key in the store
    assert other.key != first.key


# --- faults ----------------------------------------------------------------------------------------------------

def shape(message: str) -> str:
    """A message with what varies between two runs (durations) blanked, and the config group unnamed."""
    return re.sub(r"\d+(\.\d+)? s\b", "N s", message.replace("embedding.", "<group>.").replace("llm.", "<group>."))


@pytest.mark.parametrize("mode, overrides", [("429", {}), ("500", {}), ("429", {"deadline": 3}), ("html", {})])
def test_a_fault_ends_as_it_does_for_the_chat_client(mode, overrides, caplog):
    retry_after = "20" if "deadline" in overrides else "0.1"  # past the deadline: no retry
    with FakeOpenAI(mode=mode, retry_after=retry_after) as server:
        with pytest.raises(LLMError) as chat_error:
            ChatClient(chat_settings(server.base_url, **overrides)).complete([{"role": "user", "content": "hi"}])
        chat_arrivals = len(server.arrivals)
        embedder = EndpointEmbedder(config(server.base_url, **overrides))
        with caplog.at_level(logging.INFO, logger="opi"), pytest.raises(LLMError) as embedding_error:
            embedder.raw(TEXTS[:2])
        embedding_arrivals = len(server.arrivals) - chat_arrivals
    chat_message, message = str(chat_error.value), str(embedding_error.value)
    assert type(embedding_error.value) is type(chat_error.value) and "\n" not in message
    if mode == "html":  # what the endpoint sent instead of the reply asked for
        assert shape(message) == shape(chat_message).replace("a chat completion", "an embeddings reply")
    else:
        assert shape(message) == shape(chat_message), (message, chat_message)
    assert message.startswith(server.base_url) and "llm." not in message
    assert embedding_arrivals == chat_arrivals == embedder.usage.http_requests
    retries = [shape(r.getMessage()) for r in caplog.records if "retry" in r.getMessage()]  # the chat's, then ours
    chat_retries, embedding_retries = retries[:len(retries) // 2], retries[len(retries) // 2:]
    assert embedding_retries == [line.replace("LLM request", "embedding request") for line in chat_retries]
    assert len(embedding_retries) == embedding_arrivals - 1


def test_a_passing_fault_costs_a_retry_and_nothing_else():
    with FakeOpenAI(faults={0: "429", 2: "500"}, period=1000, retry_after="0.1") as server:
        embedder = EndpointEmbedder(config(server.base_url, concurrency=1))
        vectors = embedder.raw(TEXTS[:9])
    np.testing.assert_array_equal(vectors, np.asarray(hash_vectors(TEXTS[:9]), dtype=np.float32))
    assert embedder.usage.calls == 3 and embedder.usage.http_requests == 5 and embedder.usage.retries == 2


def wrong_vectors(texts):
    vectors = hash_vectors(texts)
    if TEXTS[4] in texts:
        vectors[texts.index(TEXTS[4])] = vectors[0][:5]
    if TEXTS[5] in texts:
        vectors[texts.index(TEXTS[5])] = ["x"] * 8
    return vectors


@pytest.mark.parametrize("texts, settings, problem", [
    (TEXTS[3:5], {}, "vector 1 has 5 numbers, not 8"),
    (TEXTS[5:6], {}, "vector 0 is not a list of finite numbers"),
    (TEXTS[:2], {"dimensions": 3}, "vector 0 has 8 numbers, not 3"),  # the server ignored embedding.dimensions
])
def test_a_vector_of_the_wrong_length_or_not_numbers_is_a_clear_error(texts, settings, problem):
    with FakeOpenAI(vectors=wrong_vectors) as server:
        embedder = EndpointEmbedder(config(server.base_url, batch_size=2, **settings))
        with pytest.raises(LLMError) as raised:
            embedder.raw(texts)
    assert str(raised.value) == (f"{server.base_url} sent embeddings of model 'fake-embed' that OPI cannot use "
                                 f"({problem}): check embedding.model and embedding.dimensions, and that "
                                 f"embedding.base_url serves OpenAI-compatible embeddings")


def zero_or_constant_vectors(texts):
    """TEXTS[6] gets all zeros; a request holding TEXTS[7] gets one vector for every text."""
    vectors = hash_vectors(texts)
    if TEXTS[6] in texts:
        vectors[texts.index(TEXTS[6])] = [0.0] * 8
    if TEXTS[7] in texts:
        vectors = [vectors[texts.index(TEXTS[7])]] * len(texts)
    return vectors


@pytest.mark.parametrize("texts, problem", [
    (TEXTS[5:7], "vector 1 is all zeros"),
    (TEXTS[6:7], "vector 0 is all zeros"),
    (TEXTS[7:10], "the same vector for all 3 texts of a request, 3 of them different"),
])
def test_a_vector_of_zeros_or_one_vector_for_different_texts_is_a_clear_error(texts, problem):
    with FakeOpenAI(vectors=zero_or_constant_vectors) as server:
        embedder = EndpointEmbedder(config(server.base_url, batch_size=3, max_retries=0))
        with pytest.raises(LLMError) as raised:
            embedder.raw(texts)
    assert str(raised.value) == (f"{server.base_url} sent embeddings of model 'fake-embed' that OPI cannot use "
                                 f"({problem}): check embedding.model and embedding.dimensions, and that "
                                 f"embedding.base_url serves OpenAI-compatible embeddings")


def test_one_vector_for_every_text_is_refused_across_requests_too():
    with FakeOpenAI(vectors=lambda texts: [[0.5] * 8 for _ in texts]) as server:  # one text a request
        with pytest.raises(LLMError, match=r"\(the same vector for all 3 texts, 3 of them different\)"):
            EndpointEmbedder(config(server.base_url, batch_size=1)).raw(TEXTS[:3])


def test_texts_that_differ_in_case_or_spacing_only_may_share_a_vector():
    texts = [TEXTS[7], TEXTS[7].upper(), f" {TEXTS[7]}  "]  # as an uncased model, or one that strips, embeds them
    with FakeOpenAI(vectors=zero_or_constant_vectors) as server:
        vectors = EndpointEmbedder(config(server.base_url, batch_size=3), normalize=False).raw(texts)
    assert vectors.shape == (3, 8) and (vectors == vectors[0]).all()


def test_json_without_data_is_not_an_embeddings_reply():
    with FakeOpenAI(mode="nochoices") as server:
        with pytest.raises(LLMError, match=r"is not an embeddings reply \(JSON without 'data', HTTP 200"):
            EndpointEmbedder(config(server.base_url)).raw(TEXTS[:1])


# --- usage -----------------------------------------------------------------------------------------------------

def test_usage_counts_requests_tokens_and_cost():
    with FakeOpenAI() as server:
        embedder = EndpointEmbedder(config(server.base_url, price_input_per_million=0.02))
        embedder.raw(TEXTS)
    tokens = sum(1 + len(text) // 4 for text in TEXTS)  # as the fake counts them
    assert embedder.usage.as_metrics("embedding") == {
        "embedding_calls": 7.0, "embedding_http_requests": 7.0, "embedding_retries": 0.0,
        "embedding_prompt_tokens": float(tokens), "embedding_texts": 20.0,
        "embedding_cost_usd": pytest.approx(tokens * 0.02 / 1e6)}


# --- secrets ---------------------------------------------------------------------------------------------------

SECRET = "sk-proj-Secret0123456789abcdefXYZ"


def test_no_credential_reaches_the_key_the_name_or_a_message(monkeypatch):
    with FakeOpenAI(mode="500", retry_after="0.1") as server:
        with_userinfo = server.base_url.replace("http://", f"http://user:{SECRET}@")
        embedder = EndpointEmbedder(config(with_userinfo, max_retries=0))
        with pytest.raises(LLMError) as raised:
            embedder.raw(TEXTS[:1])
    assert embedder.key == f"openai-compatible:{server.base_url}:fake-embed:None:raw"
    assert embedder.key == EndpointEmbedder(config(server.base_url + "/")).key  # the same endpoint
    assert embedder.name == f"fake-embed at {server.base_url.replace('http://', 'http://***@')}"
    assert SECRET not in str(raised.value) and "***@" in str(raised.value)
    monkeypatch.setenv("OPI_EMBED_KEY", SECRET)
    with FakeOpenAI(api_key="another key") as server:
        embedder = EndpointEmbedder(config(server.base_url, api_key_env="OPI_EMBED_KEY"))
        with pytest.raises(LLMError, match=r"refused the API key \(401\): check OPI_EMBED_KEY$") as raised:
            embedder.raw(TEXTS[:1])
    assert SECRET not in str(raised.value) + embedder.key + embedder.name


def test_an_unset_key_variable_is_said_by_config_path_before_any_request(monkeypatch):
    monkeypatch.delenv("OPI_UNSET_KEY", raising=False)
    unset = config("http://127.0.0.1:9/v1", api_key_env="OPI_UNSET_KEY")
    with pytest.raises(LLMError, match=r"^embedding\.api_key_env names OPI_UNSET_KEY, which is not set"):
        EndpointEmbedder(unset).raw(["a"])
    with pytest.raises(LLMError, match=r"^metrics\.similarity\.api_key_env names OPI_UNSET_KEY, which is not set"):
        check_keys({"embedding": config("http://127.0.0.1:9/v1"), "metrics.similarity": unset})
    check_keys({"embedding": EmbeddingConfig(api_key_env="OPI_UNSET_KEY")})  # sentence-transformers: no key
