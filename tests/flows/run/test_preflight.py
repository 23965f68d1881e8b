"""Checks before any work: where gold relations come from, the key's variable, text written without spaces, and
secrets in any setting (refused before Hydra saves anything)."""
import logging

import pytest
from omegaconf import OmegaConf

from flows.run import preflight
from flows.run.config import compose_config, typed
from flows.run.data import load_data
from opi.llm.faults import LLMError
from opi.memory import MEMORY


def config(*overrides):
    return typed(compose_config(["dataset=deeplogic-130", *overrides]))


def test_the_local_classifier_labels_the_gold_triples_of_labelled_data_cross_fitted():
    resolved = preflight.resolve_gold(config("relations.gold=classifier"), load_data(config()))
    assert resolved.relations.gold == "classifier"  # the paper's way, on labelled data too


def test_a_key_variable_that_is_not_set_is_said_before_any_work(monkeypatch):
    monkeypatch.delenv("MY_UNSET_VAR", raising=False)
    with pytest.raises(LLMError, match="llm.api_key_env names MY_UNSET_VAR, which is not set in this environment"):
        preflight.check_key_variable(config("llm=gpt-4o", "llm.api_key_env=MY_UNSET_VAR"))
    preflight.check_key_variable(config("llm=gpt-4o", "llm.api_key_env=null"))  # a keyless endpoint
    preflight.check_key_variable(config("llm.api_key_env=MY_UNSET_VAR"))  # the extractive reader asks no endpoint


def test_a_language_without_rules_or_spaces_is_chunked_by_characters_and_said(monkeypatch, caplog):
    MEMORY.forget("said")
    with caplog.at_level(logging.WARNING, logger="opi"):
        thai = preflight.chunking_for_language(config("sentences.language=th"))
    assert thai.chunking.length == "characters" and thai.chunking.size == 100
    assert "pySBD has no sentence rules for it" in caplog.text and "measured in characters" in caplog.text
    assert preflight.chunking_for_language(config("sentences.language=zh")).chunking.length == "words"  # rules


def test_articles_with_far_fewer_words_than_characters_are_said_once(monkeypatch, caplog):
    from types import SimpleNamespace

    MEMORY.forget("said")
    unspaced = SimpleNamespace(contexts=["北京是中国的首都。" * 600, "A few words in English, as usual. " * 20])
    with caplog.at_level(logging.WARNING, logger="opi"):
        preflight.warn_unspaced(config(), unspaced)
        preflight.warn_unspaced(config(), unspaced)
    assert caplog.text.count("1 of 2 articles have far fewer words than characters (e.g. 1 word in 5,400") == 1
    assert "sentences.language (zh, ja, th ...) and chunking.length=characters" in caplog.text


def test_a_secret_in_a_config_file_is_refused_before_hydra_saves_it():
    composed = compose_config(["dataset=deeplogic-130"])
    with_secret = OmegaConf.merge(composed, {"llm": {"base_url": "http://me:pw@gateway/v1"}})
    with pytest.raises(SystemExit) as stopped:
        preflight.refuse_secrets_before_writing(with_secret)
    assert stopped.value.code == 2


def test_a_model_a_later_job_of_the_sweep_loads_is_checked_before_the_first_job(tmp_path):
    # a grid whose reranked half names a folder that is not there: its jobs failed only when their turn came
    plain = typed(compose_config(["setup=knn"]))
    reranked = typed(compose_config(["setup=knn", "rerank=cross-encoder", f"rerank.model={tmp_path / 'nope'}"]))
    assert preflight.models_problem([plain, plain]) is None
    assert preflight.models_problem([plain, reranked]) == (f"model problem: rerank.model={tmp_path / 'nope'}: no such "
                                                          "folder: give the folder holding the model's files (or a "
                                                          "Hugging Face hub name)")


def test_jobs_that_differ_only_in_the_headline_beta_are_said_to_be_one_configuration():
    jobs = [typed(compose_config(["setup=a_four", f"beta=opi-{b}"])) for b in ("0.5", "1", "2")]
    said = preflight.headline_only(jobs)
    assert said.startswith("A-Four runs at metrics.beta=0.5, 1, 2, which changes only which OPI is the headline")
    assert preflight.headline_only([*jobs[:1], typed(compose_config(["setup=knn", "beta=opi-2"]))]) is None
    assert preflight.headline_only([typed(compose_config([f"setup={s}"])) for s in ("knn", "bm25")]) is None
