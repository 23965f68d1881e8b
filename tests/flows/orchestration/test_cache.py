"""The stage cache's keys: big inputs keyed by a content hash taken once, components by their
settings (not their resources, not the settings their result does not depend on)."""
import pytest

from flows.orchestration import cache, hashing, tasks
from flows.orchestration.cache import ContentInputs
from flows.orchestration.hashing import HashedDict, HashedList, hashed, key_of
from opi.data import Example
from opi.retrievers import BM25Retriever, KNNRetriever


def key(**inputs):
    return ContentInputs().compute_key(None, inputs, {})


def examples(*answers):
    return [Example(f"e{i}", "An article.", "A question?", answer, "direct_matching") for i, answer in enumerate(answers)]


def test_the_stage_tasks_use_it(tmp_path):
    # Prefect's compound policies swap any Inputs subclass for a plain Inputs: it must survive in cached()
    assert any(isinstance(p, ContentInputs) for p in cache.cached(tasks.rank.task, str(tmp_path)).cache_policy.policies)


def test_a_hashed_input_is_keyed_by_its_content():
    first = hashed(examples("yes", "no"))
    assert key(examples=first, k=4) == key(examples=hashed(examples("yes", "no")), k=4)
    assert key(examples=first, k=4) != key(examples=hashed(examples("yes", "maybe")), k=4)
    assert key(examples=first, k=4) != key(examples=first, k=5)
    assert key(articles=hashed({"a": 1})) != key(articles=hashed({"a": 2}))


def test_the_hash_is_taken_once_not_at_every_call(monkeypatch):
    marked = hashed(examples("yes"))
    monkeypatch.setattr(hashing, "plain_hash", lambda value: pytest.fail("hashed again"))
    before = key(examples=marked)
    marked.extend(examples("no"))  # never done by a run: shows that the key comes from the stored hash
    assert key(examples=marked) == before


def test_a_copy_that_lost_its_hash_gets_the_same_key():
    # Dask's runner rebuilds collections on the way to a worker: same type, no content_hash attribute
    marked, articles = hashed(examples("yes", "no")), hashed({"a": (1, 2)})
    assert key(examples=HashedList(marked), articles=HashedDict(articles)) == key(examples=marked, articles=articles)


def test_where_the_embedding_store_is_is_no_part_of_a_key():
    # a stage task is given the run's store (flows.orchestration.work.measured): the vectors are the same in any
    assert key(k=4, embedding_store="/a/embeddings.sqlite") == key(k=4, embedding_store=None) == key(k=4)


def test_a_component_is_keyed_by_its_settings_not_its_resources():
    assert key(retriever=BM25Retriever(k=4)) == key(retriever=BM25Retriever(k=4, embedder=object()))
    assert key(retriever=BM25Retriever(k=4)) != key(retriever=BM25Retriever(k=4, b=0.5))


def test_a_retrievers_k_and_name_are_not_part_of_its_ranking_key():
    # k is applied after ranking (Ranking.top): one ranking serves retriever.k=2,4,8
    assert key_of(KNNRetriever(k=2)) == key_of(KNNRetriever(k=8)) == key_of(KNNRetriever(name="mine"))
    # the index (exact or faiss) changes the ranking: it is part of the key
    assert key_of(KNNRetriever()) == {"_target_": "opi.retrievers.dense.KNNRetriever", "index": "exact"}
    assert key_of(BM25Retriever(k=2))["k1"] == 1.5 and "k" not in key_of(BM25Retriever(k=2))
