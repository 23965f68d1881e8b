"""Cache keys of big task inputs: taken from a content hash computed once, equal to what a rebuilt copy gets."""
import pytest
from flows import tasks
from flows.evaluate import configuration_key, load_data
from flows.tasks import ContentInputs, HashedDict, HashedList, hashed
from opi.data import Example
from opi.retrievers import BM25Retriever
from tests.flows.test_config import compose_typed


def key(**inputs):
    return ContentInputs().compute_key(None, inputs, {})


def examples(*answers):
    return [Example(f"e{i}", "An article.", "A question?", answer, "direct_matching") for i, answer in enumerate(answers)]


def test_the_stage_tasks_use_it(tmp_path):
    # Prefect's compound policies swap any Inputs subclass for a plain Inputs: it must survive in cached()
    assert any(isinstance(p, ContentInputs) for p in tasks.cached(tasks.rank, str(tmp_path)).cache_policy.policies)


def test_a_hashed_input_is_keyed_by_its_content():
    first = hashed(examples("yes", "no"))
    assert key(examples=first, k=4) == key(examples=hashed(examples("yes", "no")), k=4)
    assert key(examples=first, k=4) != key(examples=hashed(examples("yes", "maybe")), k=4)
    assert key(examples=first, k=4) != key(examples=first, k=5)
    assert key(articles=hashed({"a": 1})) != key(articles=hashed({"a": 2}))


def test_the_hash_is_taken_once_not_at_every_call(monkeypatch):
    marked = hashed(examples("yes"))
    monkeypatch.setattr(tasks, "_plain_hash", lambda value: pytest.fail("hashed again"))
    before = key(examples=marked)
    marked.extend(examples("no"))  # never done in the pipeline: shows that the key comes from the stored hash
    assert key(examples=marked) == before


def test_a_copy_that_lost_its_hash_gets_the_same_key():
    # Dask's runner rebuilds collections on the way to a worker: same type, no content_hash attribute
    marked, articles = hashed(examples("yes", "no")), hashed({"a": (1, 2)})
    assert key(examples=HashedList(marked), articles=HashedDict(articles)) == key(examples=marked, articles=articles)


def test_a_component_is_keyed_by_its_settings_not_its_resources():
    assert key(retriever=BM25Retriever(k=4)) == key(retriever=BM25Retriever(k=4, embedder=object()))
    assert key(retriever=BM25Retriever(k=4)) != key(retriever=BM25Retriever(k=4, b=0.5))


def config_key(*overrides, registered=None):
    config = compose_typed(["dataset.limit=3", *overrides])
    return configuration_key(config, load_data(config), registered)


def test_a_configuration_is_keyed_by_what_its_result_depends_on():
    base = config_key()
    llm_cache = "paths.llm_cache=.opi_cache/llm_calls.sqlite"  # where the cache is moves nothing else
    for same in (["tracking.experiment=other"], ["orchestration=dask"], ["report.enabled=false"],
                 ["paths.cache_dir=/elsewhere", llm_cache]):
        assert config_key(*same) == base, same
    for other in (["retriever=bm25"], ["llm.reader.n_sentences=3"], ["report.resamples=500"], ["dataset.limit=4"],
                  ["seed=1"], ["chunking=small"], ["retriever.k=5"]):
        assert config_key(*other) != base, other
    # a member's settings count in a combination, not in a single retriever's configuration
    assert config_key("retrievers.mmr.fetch_k=30") == base
    assert config_key("setup=a_four", "retrievers.mmr.fetch_k=30") != config_key("setup=a_four")
    assert config_key(registered="models:/relations/2") != base


def test_a_kept_result_reads_back_and_an_unreadable_one_is_a_miss(tmp_path, caplog):
    cache = str(tmp_path / "cache")
    assert tasks.read_kept(cache, "configuration-x") is None
    tasks.keep(cache, "configuration-x", {"metrics": {"opi_1": 0.5}, "stages": 6})
    assert tasks.read_kept(cache, "configuration-x") == {"metrics": {"opi_1": 0.5}, "stages": 6}
    (tmp_path / "cache" / "results" / "configuration-x").write_text("{not a record")  # as if cut off mid-write
    assert tasks.read_kept(cache, "configuration-x") is None
    assert "configuration-x unreadable" in caplog.text
    tasks.keep(cache, "configuration-x", {"stages": 7})  # the next run's result replaces it
    assert tasks.read_kept(cache, "configuration-x") == {"stages": 7}


def test_training_data_is_hashed_once_per_dataset(monkeypatch):
    from flows import evaluate

    calls = []
    real_hashed = tasks.hashed
    monkeypatch.setattr(tasks, "hashed", lambda value, known=None: calls.append(len(value)) or real_hashed(value, known))
    pool = examples("yes", "no", "maybe")
    data = evaluate.Data(None, real_hashed(pool[:2]), pool, None, [], "all")  # filtered: 2 of the pool's 3
    first, again = data.pool_training, data.pool_training
    assert again is first and calls == [3]  # asked for twice (as every job does), built and hashed once
    assert first.ids == ["e0", "e1", "e2"] and first.labels == ["direct_matching"] * 3 and first.cross_fit
    assert first.triples.content_hash == real_hashed(list(first.triples)).content_hash
    other = evaluate.Data(None, real_hashed(pool[:2]), examples("yes", "no", "maybe"), None, [], "all").pool_training
    assert other is not first and other.triples.content_hash == first.triples.content_hash and calls == [3, 3]

    # unfiltered, the pool is the examples: the triples' hash comes from theirs, and follows their content
    whole = evaluate.Data(None, real_hashed(pool), pool, None, [], "all").pool_training
    changed = examples("yes", "no", "perhaps")
    assert whole.triples.content_hash == "triples-of-" + real_hashed(pool).content_hash
    assert evaluate.Data(None, real_hashed(changed), changed, None, [], "all").pool_training.triples.content_hash \
        != whole.triples.content_hash
