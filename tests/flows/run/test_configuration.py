"""A configuration's whole result is keyed by what it depends on: its effective settings, the data, the registered
classifier's version and the code it runs; not by where runs are logged or how tasks are scheduled."""
from flows.orchestration.tasks import RegisteredModel
from flows.run.config import compose_config, typed
from flows.run.configuration import configuration_key
from flows.run.data import load_data


def config_key(*overrides, registered=None):
    config = typed(compose_config(["dataset=deeplogic-130", "dataset.limit=3", *overrides]))
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
    assert config_key(registered=RegisteredModel("models:/relations/2", "file:///m")) != base


def test_the_model_loaded_while_the_server_boots_is_the_one_its_stages_use(tmp_path):
    from opi.embeddings import embedder_for, use_store
    from flows.run.configuration import load_model

    config = typed(compose_config(["dataset=deeplogic-130", f"paths.embedding_store={tmp_path / 'vectors.sqlite'}"]))
    load_model(config)
    with use_store(config.paths.embedding_store):
        used = embedder_for(config.metrics.similarity)  # as the answer-similarity stage asks for it
    assert used._model is not None
    assert embedder_for(config.embedding, config.paths.embedding_store) is used  # the retrievers' too, by default


def test_the_model_is_loaded_ahead_only_where_the_stages_run_in_this_process():
    from flows.run.configuration import model_loading

    assert model_loading(typed(compose_config(["dataset=deeplogic-130"]))) is not None
    assert model_loading(typed(compose_config(["dataset=deeplogic-130", "orchestration=dask"]))) is None
