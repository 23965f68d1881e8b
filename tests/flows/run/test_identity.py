"""What a configuration is (its name and tags) and the settings that apply to it."""
from flows.run.config import compose_config, typed
from flows.run.identity import describe, effective_settings


def config(*overrides):
    return typed(compose_config(["dataset=deeplogic-130", *overrides]))


def test_a_run_without_gold_relations_is_not_named_after_a_classifier():
    assert describe(config()).name == "kNN | extractive | local-clf"
    assert describe(config("relations.gold=none")).name == "kNN | extractive"
    assert describe(config("setup=a_four")).tags() == {"opi.setup": "A-Four", "opi.kind": "A-",
                                                       "opi.members": "kNN,DPS,TF-IDF,MMR"}


def test_only_the_settings_that_apply_are_logged():
    settings = effective_settings(config())
    assert "split_per_relation" not in settings["dataset"] and "hub_repo" not in settings["dataset"]
    assert settings["llm"] == {"name": "extractive", "reader": {"_target_": "opi.llm.reader.ExtractiveReader",
                                                                "n_sentences": 2}}  # no endpoint: none of its settings
    assert "correctness_weights" not in settings["metrics"] and "dask_workers" not in settings["orchestration"]
    llm = effective_settings(config("llm=gpt-4o", "metrics=full", "orchestration=dask"))
    assert llm["llm"]["model"] == "gpt-4o" and llm["metrics"]["correctness_weights"] == [0.75, 0.25]
    assert llm["orchestration"]["dask_workers"] == 2 and "max_workers" not in llm["orchestration"]
    split = effective_settings(config("dataset.split=test"))
    assert split["dataset"]["split_per_relation"] == 10
