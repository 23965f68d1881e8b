"""Every config group option and experiment composes and passes the schema checks; invalid values fail early."""
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf

from flows.evaluate import CONF_DIR, member_specs, run_name
from opi.schemas import check_config, register_configs
from tests.cli import run_cli

register_configs()
CONF = Path(CONF_DIR)
GROUPS = ["dataset", "relations", "chunking", "embedding", "retriever", "combination", "llm", "classifier",
          "metrics", "beta", "tracking", "report", "orchestration", "setup", "experiment"]
# options that need a value a user must give
REQUIRED = {
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


def options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group, option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_option_composes_and_checks(group, option):
    overrides = [f"{group}={option}", *REQUIRED.get((group, option), [])]
    checked = check_config(compose_config(overrides))
    assert checked.metrics.beta > 0


def test_the_paper_grid_is_thirteen_distinct_configurations():
    grid = OmegaConf.load(CONF / "experiment" / "paper_grid.yaml").hydra.sweeper.params.setup.split(",")
    names = set()
    for setup in grid:
        cfg = OmegaConf.to_container(compose_config([f"setup={setup}"]), resolve=True)
        check_config(compose_config([f"setup={setup}"]))
        names.add(run_name(cfg).split(" | ")[0])
        assert 1 <= len(member_specs(cfg)) <= 7
    assert names == {"DPS", "kNN", "BM25", "SVM", "TF-IDF", "MMR", "EDI",
                     "A-Seven", "A-Four", "A-Two", "S-Seven", "S-Four", "S-Two"}
    table2 = OmegaConf.load(CONF / "experiment" / "paper_table2.yaml").hydra.sweeper.params.setup.split(",")
    table4 = OmegaConf.load(CONF / "experiment" / "paper_table4.yaml").hydra.sweeper.params.setup.split(",")
    assert sorted(table2 + table4) == sorted(grid)


def test_a_four_members_and_beta_group():
    cfg = OmegaConf.to_container(compose_config(["setup=a_four", "beta=opi-2"]), resolve=True)
    assert [m["name"] for m in member_specs(cfg)] == ["knn", "dps", "tfidf", "mmr"]
    assert cfg["combination"]["k"] == 4 and cfg["metrics"]["beta"] == 2


def test_llm_classifier_needs_an_llm_endpoint():
    with pytest.raises(ValueError, match="classifier=llm sends requests through the configured LLM endpoint"):
        check_config(compose_config(["classifier=llm"]))
    with pytest.raises(ValueError, match="classifier.model"):
        check_config(compose_config(["llm=gpt-4o", "classifier=finetuned", "classifier.model=null"]))


def test_llm_scored_metrics_need_an_llm_endpoint():
    with pytest.raises(ValueError, match="metrics.correctness and metrics.judge ask the configured LLM endpoint"):
        check_config(compose_config(["metrics=full"]))


def test_unknown_retriever_fails_at_compose_time():
    with pytest.raises((MissingConfigException, ConfigCompositionException), match="retriever/bm26"):
        compose_config(["retriever=bm26"])


def test_misspelt_parameter_fails_at_compose_time():
    with pytest.raises(ConfigCompositionException, match="fetch_k"):
        compose_config(["retriever=bm25", "retriever.fetch_k=3"])


@pytest.mark.parametrize("override, message", [
    ("retriever.k=0", "retriever knn: k must be >= 1, got 0"),
    ("chunking.overlap=100", "chunking.overlap must be >= 0 and smaller than chunking.size"),
    ("metrics.beta=0", "metrics.beta must be > 0"),
    ("report.alpha=1.5", "report.alpha must be in (0, 1), got 1.5"),
    ("metrics.beta=-1", "metrics.beta must be > 0"),
    ("retrievers.mmr.fetch_k=2", "fetch_k (2) must be >= k (4)"),
])
def test_invalid_values_fail_with_a_clear_message(override, message):
    with pytest.raises(ValueError) as error:
        check_config(compose_config([override]))
    assert message in str(error.value)


def test_cli_rejects_invalid_config_before_loading_anything(tmp_path):
    output = run_cli("flows.evaluate", tmp_path, "retriever.k=0", expect=2)
    assert "invalid configuration: retriever knn: k must be >= 1, got 0" in output
    assert "Traceback" not in output
    assert "Loading SentenceTransformer" not in output


def test_globbing_a_group_sweeps_its_real_options_only():
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        assert loader.get_group_options("retriever") == ["bm25", "dps", "edi", "knn", "mmr", "svm", "tfidf"]
        assert loader.get_group_options("chunking") == ["large", "paper", "small"]
