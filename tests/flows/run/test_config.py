"""Every config group option and experiment composes and passes the schema checks; invalid values fail early."""
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf

from flows.run.config import CONF_DIR, refuse_secrets, register_configs, typed
from flows.run.identity import describe, effective_settings
from tests.helpers.cli import run_cli

register_configs()
CONF = Path(CONF_DIR)
GROUPS = ["dataset", "relations", "chunking", "embedding", "retriever", "combination", "llm", "classifier",
          "metrics", "beta", "tracking", "report", "orchestration", "setup", "experiment"]
# options that need a value a user must give
REQUIRED = {
    ("retriever", "oracle"): [],
    ("retriever", "custom"): ["retriever._target_=opi.retrievers.lexical.TFIDFRetriever"],
    ("retriever", "langchain"): ["retriever.factory=langchain_community.retrievers.BM25Retriever.from_documents"],
    ("retriever", "vectorstore"): ["retriever.url=http://127.0.0.1:8000", "retriever.collection=docs"],
    ("classifier", "custom"): ["classifier._target_=opi.classify.LocalRelationClassifier"],
    ("llm", "custom"): ["llm.reader._target_=opi.llm.reader.ExtractiveReader"],
    ("dataset", "table"): ["dataset.path=some/file.jsonl"],
    ("dataset", "squad"): ["dataset.path=some/file.json"],
    ("llm", "openai-compatible"): ["llm.base_url=http://127.0.0.1:8000/v1", "llm.model=some-model"],
    ("classifier", "llm"): ["llm=gpt-4o"],
    ("metrics", "full"): ["llm=gpt-4o"],
    ("classifier", "finetuned"): ["llm=gpt-4o", "classifier.model=ft:gpt-4o:org::abc"],
}


def compose_config(overrides=()):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def compose_typed(overrides=()):
    return typed(compose_config(overrides), list(overrides))


def check_config(cfg):
    return typed(cfg)


def options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group, option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_option_composes_and_checks(group, option):
    overrides = [f"{group}={option}", *REQUIRED.get((group, option), [])]
    checked = check_config(compose_config(overrides))
    assert checked.metrics.beta > 0


def test_the_paper_grid_is_thirteen_distinct_configurations():
    grid = OmegaConf.load(CONF / "experiment" / "paper_grid.yaml").hydra.sweeper.params.setup.split(",")
    identities = [describe(compose_typed([f"setup={setup}"])) for setup in grid]
    assert {i.setup for i in identities} == {"DPS", "kNN", "BM25", "SVM", "TF-IDF", "MMR", "EDI",
                                             "A-Seven", "A-Four", "A-Two", "S-Seven", "S-Four", "S-Two"}
    assert {i.setup: i.kind for i in identities}["S-Four"] == "S-" and {i.setup: len(i.members) for i in identities}[
        "A-Seven"] == 7
    table2 = OmegaConf.load(CONF / "experiment" / "paper_table2.yaml").hydra.sweeper.params.setup.split(",")
    table4 = OmegaConf.load(CONF / "experiment" / "paper_table4.yaml").hydra.sweeper.params.setup.split(",")
    assert sorted(table2 + table4) == sorted(grid)


def test_a_four_members_and_beta_group():
    config = compose_typed(["setup=a_four", "beta=opi-2"])
    assert [r.name for r in config.members().values()] == ["kNN", "DPS", "TF-IDF", "MMR"]
    assert config.combination.k == 4 and config.metrics.beta == 2


def test_params_of_a_combination_are_its_members_real_settings():
    settings = effective_settings(compose_typed(["setup=a_four", "retrievers.mmr.lambda_mult=0.3"]))
    assert "retriever" not in settings and sorted(settings["retrievers"]) == ["dps", "knn", "mmr", "tfidf"]
    assert settings["retrievers"]["mmr"]["lambda_mult"] == 0.3
    assert settings["combination"] == {"_target_": "opi.combine.RankFusion", "name": "A-Four",
                                       "members": ["knn", "dps", "tfidf", "mmr"], "weights": None, "c": 60.0, "k": 4}
    single = effective_settings(compose_typed(["setup=bm25"]))
    assert "retrievers" not in single and single["retriever"]["_target_"] == "opi.retrievers.lexical.BM25Retriever"
    assert single["retriever"]["k1"] == 1.5  # the class's default, written once


def test_llm_classifier_needs_an_llm_endpoint():
    with pytest.raises(ValueError, match="the classifier llm-clf send requests through the configured LLM endpoint"):
        check_config(compose_config(["classifier=llm"]))
    with pytest.raises(ValueError, match="fine-tuned classifier needs model="):
        check_config(compose_config(["llm=gpt-4o", "classifier=finetuned", "classifier.model=null"]))


def test_rerank_none_that_would_run_another_class_is_refused():
    # -m rerank=none,custom rerank._target_=...: the override reaches the none arm too, which ran the custom class
    overrides = ["rerank=none", "rerank._target_=opi.rerankers.CrossEncoderReranker"]
    with pytest.raises(ValueError, match=r"^rerank=none runs opi\.rerankers\.CrossEncoderReranker: a rerank\.\* "
                                         r"override applies to every job of a sweep, the none arm too"):
        typed(compose_config(overrides), overrides, {"rerank": "none"})
    assert typed(compose_config(["rerank=none"]), [], {"rerank": "none"}).rerank.__class__.__name__ == "NoReranker"


def test_llm_scored_metrics_need_an_llm_endpoint():
    with pytest.raises(ValueError, match="metrics.correctness and metrics.judge send requests through the config"):
        check_config(compose_config(["metrics=full"]))


def test_a_typo_in_an_llm_setting_fails_at_compose_time():
    with pytest.raises(ConfigCompositionException, match="temprature"):
        compose_config(["llm=gpt-4o", "llm.temprature=0.2"])
    with pytest.raises(ConfigCompositionException, match="n_sentence"):
        compose_config(["llm.reader.n_sentence=3"])


def test_unknown_retriever_fails_at_compose_time():
    with pytest.raises((MissingConfigException, ConfigCompositionException), match="retriever/bm26"):
        compose_config(["retriever=bm26"])


def test_misspelt_parameter_fails_at_compose_time():
    with pytest.raises(ConfigCompositionException, match="fetch_k"):
        compose_config(["retriever=bm25", "retriever.fetch_k=3"])


@pytest.mark.parametrize("override, message", [
    ("retriever.k=0", "retriever: KNNRetriever: k must be >= 1, got 0"),
    ("chunking.overlap=100", "chunking.overlap must be >= 0 and smaller than chunking.size"),
    ("metrics.beta=0", "metrics.beta must be a finite number > 0"),
    ("report.alpha=1.5", "report.alpha must be a finite number in (0, 1), got 1.5"),
    ("metrics.beta=-1", "metrics.beta must be a finite number > 0"),
    ("retrievers.mmr.fetch_k=2", "retrievers.mmr: MMRRetriever: fetch_k (2) must be >= k (4)"),
    ("classifier.folds=1", "classifier: LocalRelationClassifier: folds must be >= 2, got 1"),
    ("llm.reader.n_sentences=0", "llm.reader: ExtractiveReader: n_sentences must be >= 1, got 0"),
])
def test_invalid_values_fail_with_a_clear_message(override, message):
    with pytest.raises(ValueError) as error:
        check_config(compose_config([override]))
    assert message in str(error.value)


def test_cli_rejects_invalid_config_before_loading_anything(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "retriever.k=0", expect=2)
    assert "invalid configuration: retriever: KNNRetriever: k must be >= 1, got 0" in output
    assert "Traceback" not in output
    assert "Loading SentenceTransformer" not in output


def test_globbing_a_group_sweeps_its_real_options_only():
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        assert loader.get_group_options("retriever") == ["bm25", "custom", "dps", "edi", "knn", "langchain", "mmr",
                                                          "oracle", "random", "svm", "tfidf", "vectorstore"]
        assert loader.get_group_options("chunking") == ["large", "paper", "small"]


def test_retriever_settings_in_a_combination_are_refused_in_one_line(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "setup=a_four", "retriever.k=8", expect=2)
    errors = [line for line in output.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "'retriever.k=8' changes nothing in A-Four" in errors[0]
    assert "retrievers.<member>.<setting>" in errors[0] and "Traceback" not in output


@pytest.mark.parametrize("hydra, says", [
    ({"job": {"env_set": {"AZURE_OPENAI_API_KEY": "3f9c" + "a1b2" * 8}}},
     "hydra.job.env_set.AZURE_OPENAI_API_KEY would write a secret"),
    ({"sweeper": {"params": {"llm.base_url": "https://gw/v1?api-key=zz,https://h/v1"}}},
     "hydra.sweeper.params.llm.base_url holds credentials in its URL"),
    ({"sweeper": {"grids": [{"setup": "knn"}, {"llm.base_url": "https://gw/v1?api-key=zz"}]}},
     "hydra.sweeper.grids.llm.base_url holds credentials in its URL"),
])
def test_a_secret_in_hydras_own_settings_that_hydra_saves_is_refused(hydra, says):
    with pytest.raises(ValueError, match=says) as refused:
        refuse_secrets(OmegaConf.create({"hydra": hydra, "seed": 0}))
    assert "a1b2a1b2" not in str(refused.value) and "zz" not in str(refused.value)
    refuse_secrets(OmegaConf.create({"hydra": {"job": {"env_set": {"HF_HUB_OFFLINE": "1"}},
                                               "sweeper": {"params": {"setup": "knn,bm25"}}}}))
