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


def test_a_race_s_tracked_run_is_put_together_from_its_rounds_without_a_flow_run(tmp_path, monkeypatch):
    # nothing to orchestrate: its rounds' results are kept (a race's 48 tracked runs each opened a flow run)
    import pytest

    from flows.orchestration.kept import read_kept
    from flows.orchestration.results import Scores
    from flows.run import configuration

    config = typed(compose_config(["dataset=deeplogic-130", "dataset.rounds=4", "dataset.rounds_to=2",
                                   "race.record=true", f"paths.cache_dir={tmp_path}"]))
    rounds = ["round 1's result", "round 2's result"]
    monkeypatch.setattr(configuration, "kept_rounds", lambda config, data: rounds)
    monkeypatch.setattr(configuration, "assembled", lambda config, found, relations, order: Scores(
        {"bertsim": 0.5, "n_examples": float(len(order))}, f"rows of {len(found)} rounds", None, {}, 3))
    monkeypatch.setattr(configuration, "start_temporary_server", lambda: pytest.fail("a Prefect server was started"))
    monkeypatch.setattr(configuration, "run_flow", lambda *args, **kwargs: pytest.fail("a flow run was opened"))
    result = configuration.evaluate(config)
    examples = len(load_data(config).examples)
    assert result["predictions"] == "rows of 2 rounds" and examples < 130
    assert result["metrics"]["bertsim"] == 0.5 and result["metrics"]["n_examples"] == examples
    assert result["metrics"]["cache_hits"] == 3 and result["metrics"]["cache_misses"] == 0
    assert read_kept(str(tmp_path), result["key"]).predictions == "rows of 2 rounds"  # kept whole for a re-run


def test_a_configuration_read_whole_from_the_cache_logs_no_llm_spending(tmp_path, monkeypatch):
    # its replies were paid for by the run that computed it; a race's budget and a nightly's cost read these
    import pytest

    from flows.orchestration.results import Scores
    from flows.run import configuration

    config = typed(compose_config(["dataset=deeplogic-130", "dataset.limit=3", f"paths.cache_dir={tmp_path}"]))
    paid = {"bertsim": 0.5, "llm_answer_calls": 3.0, "llm_answer_cache_hits": 1.0, "llm_answer_http_requests": 2.0,
            "llm_answer_cost_usd": 0.25, "llm_cost_usd": 0.25}
    monkeypatch.setattr(configuration, "read_kept", lambda cache_dir, key: Scores(paid, "rows", None, [], 7))
    monkeypatch.setattr(configuration, "run_flow", lambda *args, **kwargs: pytest.fail("a flow run was opened"))
    metrics = configuration.evaluate(config)["metrics"]
    assert metrics["bertsim"] == 0.5 and metrics["cache_hits"] == 7
    assert (metrics["llm_answer_calls"], metrics["llm_answer_cache_hits"], metrics["llm_answer_http_requests"],
            metrics["llm_answer_cost_usd"], metrics["llm_cost_usd"]) == (3.0, 3.0, 0.0, 0.0, 0.0)
