"""Where a configuration's results go (``flows.run.outputs``): its files in Hydra's output folder written whole or
not at all, under their final names; the tags saying which prompts and embedding models produced them; what its
traces are told about the classifier, the gold relation and the judge."""
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from flows.run import outputs
from flows.run.config import compose_config, typed
from flows.run.outputs import embedding_tags, prompt_tags, record, scrub_hydra_outputs, trace_writer
from opi.llm.prompts import load_prompt

PACKAGED = "packaged:all-MiniLM-L6-v2"


def config(*overrides):
    return typed(compose_config(["dataset=deeplogic-130", *overrides]))


def result(n: int = 4, per_relation: bool = True, metrics: dict | None = None) -> dict:
    relations = ["deductive", "fuzzy"] * (n // 2)
    return {"predictions": pd.DataFrame({"id": [f"e{i}" for i in range(n)], "relation": relations,
                                         "similarity": np.linspace(0.2, 0.8, n)}),
            "per_relation": pd.DataFrame({"relation": ["deductive", "fuzzy"], "lrcr": [0.5, 0.25]})
            if per_relation else pd.DataFrame(),
            "metrics": {"opi_1": 0.25, "bertsim": 0.5} if metrics is None else metrics,
            "traces": {}}


@pytest.fixture
def output(tmp_path, monkeypatch):
    """Hydra's output folder of the job, as ``record`` asks for it."""
    folder = tmp_path / "job"
    folder.mkdir()
    hydra = SimpleNamespace(runtime=SimpleNamespace(output_dir=str(folder)))
    monkeypatch.setattr(outputs.HydraConfig, "get", staticmethod(lambda: hydra))
    return folder


# record


def test_record_writes_predictions_metrics_and_the_per_relation_table(output):
    done = result(metrics={"opi_1": 0.25, "bertsim": 0.5, "lrcr": float("nan"), "cache_hits": 3})
    record(config("tracking=none"), done)
    assert sorted(p.name for p in output.iterdir()) == ["metrics.json", "per_relation.csv", "predictions.parquet"]
    pd.testing.assert_frame_equal(pd.read_parquet(output / "predictions.parquet"), done["predictions"])
    pd.testing.assert_frame_equal(pd.read_csv(output / "per_relation.csv"), done["per_relation"])
    assert json.loads((output / "metrics.json").read_text()) == {"bertsim": 0.5, "cache_hits": 3.0, "lrcr": None,
                                                                "opi_1": 0.25}  # NaN: null


def test_without_gold_relations_there_is_no_per_relation_file(output):
    record(config("tracking=none"), result(per_relation=False))
    assert sorted(p.name for p in output.iterdir()) == ["metrics.json", "predictions.parquet"]


def test_with_tracking_the_run_is_named_by_its_retrieval_and_described_by_its_tags(output, monkeypatch):
    logged = []
    monkeypatch.setattr(outputs, "log_run", lambda tracking, name, settings, metrics, tables, tags, traces:
                        logged.append((name, settings, metrics, tables, tags, traces)) or "run-1")
    done = result()
    record(config("setup=bm25", "relations.gold=labels", "tracking.traces=none"), done)
    ((name, settings, metrics, tables, tags, traces),) = logged
    assert name == "BM25" and metrics == {"opi_1": 0.25, "bertsim": 0.5} and traces is None
    assert sorted(tables) == ["per_relation.csv", "predictions.parquet"]
    assert tags["opi.role"] == "configuration" and tags["gold_relation_source"] == "labels"
    assert tags["opi.setup"] == "BM25" and tags["opi.kind"] == "single"
    assert tags["opi.yardstick_model"] == PACKAGED and "opi.embedding.retriever" not in tags  # BM25 does not embed
    assert settings["retriever"]["_target_"] == "opi.retrievers.lexical.BM25Retriever"  # the effective settings
    assert settings["retriever"]["k"] == 4 and settings["retriever"]["k1"] == 1.5


# scrub_hydra_outputs


def test_outside_hydra_there_is_nothing_to_scrub(monkeypatch):
    monkeypatch.setattr(outputs.HydraConfig, "initialized", staticmethod(lambda: False))
    monkeypatch.setattr(outputs.HydraConfig, "get", staticmethod(lambda: pytest.fail("no Hydra config to read")))
    scrub_hydra_outputs()


def test_hydras_saved_config_and_the_sweeps_multirun_file_lose_their_credentials(tmp_path, monkeypatch):
    job, sweep = tmp_path / "multirun" / "0", tmp_path / "multirun"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- llm.base_url=http://user:pw@host/v1\n- retriever.k=2\n")
    (job / ".hydra" / "config.yaml").write_text("retriever:\n  k: 2\n")
    (sweep / "multirun.yaml").write_text("key: sk-Abcdefghijklmnopqrstu12345\n")
    (job / "notes.yaml").write_text("url: http://user:pw@host/v1\n")  # not Hydra's: left alone
    hydra = SimpleNamespace(runtime=SimpleNamespace(output_dir=str(job)), sweep=SimpleNamespace(dir=str(sweep)))
    monkeypatch.setattr(outputs.HydraConfig, "initialized", staticmethod(lambda: True))
    monkeypatch.setattr(outputs.HydraConfig, "get", staticmethod(lambda: hydra))
    scrub_hydra_outputs()
    assert (job / ".hydra" / "overrides.yaml").read_text() == "- llm.base_url=http://***@host/v1\n- retriever.k=2\n"
    assert (job / ".hydra" / "config.yaml").read_text() == "retriever:\n  k: 2\n"
    assert (sweep / "multirun.yaml").read_text() == "key: ***\n"
    assert (job / "notes.yaml").read_text() == "url: http://user:pw@host/v1\n"
    assert sorted(p.name for p in (job / ".hydra").iterdir()) == ["config.yaml", "overrides.yaml"]  # no partials


# prompt_tags and embedding_tags


def test_an_offline_run_asks_no_prompt():
    assert prompt_tags(config()) == {}  # extractive reader, local classifier


def test_the_answer_and_relation_prompts_are_tagged_by_their_content():
    tags = prompt_tags(config("llm=gpt-4o", "classifier=llm"))
    assert tags == {"opi.prompt.answer": load_prompt("answer").version,
                    "opi.prompt.relation": load_prompt("relation").version}
    assert all(len(v) == 12 and int(v, 16) >= 0 for v in tags.values()) and len(set(tags.values())) == 2
    assert prompt_tags(config("llm=gpt-4o")) == {"opi.prompt.answer": load_prompt("answer").version}  # local clf


def test_a_fine_tuned_classifier_is_tagged_with_the_prompt_it_is_asked_with():
    tags = prompt_tags(config("llm=gpt-4o", "classifier=finetuned", "classifier.model=ft:abc"))
    assert tags["opi.prompt.relation"] == load_prompt("finetune_system").version


def test_each_component_that_embeds_is_tagged_with_its_model_and_the_yardstick_too():
    tags = embedding_tags(config())
    assert {k: v for k, v in tags.items() if k.startswith("opi.embedding.")} == {
        "opi.embedding.retriever": PACKAGED, "opi.embedding.llm.reader": PACKAGED,
        "opi.embedding.classifier": PACKAGED}
    assert tags["opi.yardstick_model"] == PACKAGED and tags["opi.yardstick"].startswith("sentence-transformers:")
    members = embedding_tags(config("setup=a_two", "llm=gpt-4o", "classifier=llm"))
    assert sorted(k for k in members if k.startswith("opi.embedding.")) == ["opi.embedding.retrievers.dps",
                                                                          "opi.embedding.retrievers.knn"]


# trace_writer


def traced_context(monkeypatch, cfg, done) -> tuple:
    """What ``trace_writer``'s writer passes on to ``write_traces``: (uri, context, rows, traces, ids)."""
    return passed(monkeypatch, cfg, done)[:5]


def passed(monkeypatch, cfg, done) -> tuple:
    calls = []
    monkeypatch.setattr(outputs, "write_traces", lambda *args: calls.append(args) or "count")
    write = trace_writer(cfg, done)
    assert write("7", "run-1") == "count"
    (call,) = calls
    return call


def test_traces_are_matched_on_the_result_s_key_except_a_vector_store_s(monkeypatch):
    done = {**result(n=2), "key": "configuration-abc"}
    assert passed(monkeypatch, config(), done)[5] == "configuration-abc"
    assert passed(monkeypatch, config("retriever=vectorstore", "retriever.path=/tmp/x", "retriever.collection=c"),
                  done)[5] is None  # a store's content can change between runs: its traces are always written


def test_no_trace_writer_without_traces_or_without_rows():
    assert trace_writer(config("tracking.traces=none"), result()) is None
    assert trace_writer(config(), result(n=0)) is None


def test_a_local_classifier_is_code_and_dataset_labels_are_human(monkeypatch):
    done = result(n=6, metrics={"opi_1": 0.25, "cache_misses": 0.0})
    uri, context, rows, traces, ids = traced_context(monkeypatch, config("relations.gold=labels",
                                                                         "tracking.traces=all"), done)
    assert (context.experiment_id, context.run_id, context.configuration) == ("7", "run-1",
                                                                               "kNN | extractive | local-clf")
    assert context.classifier == "local-clf" and context.classifier_source == ("CODE", "local-clf")
    assert context.gold_source == ("HUMAN", "dataset labels")
    assert context.judge_source == ("LLM_JUDGE", "extractive")  # no LLM model: the reader's name
    assert context.k == 4 and context.yardstick == PACKAGED and context.result_from_cache is True
    assert rows is done["predictions"] and ids == [f"e{i}" for i in range(6)]  # all


def test_an_llm_classifier_is_a_judge_and_labels_the_gold_relation_too(monkeypatch):
    done = result(n=8, metrics={"cache_misses": 3.0})
    cfg = config("llm=gpt-4o", "classifier=llm", "relations.gold=classifier", "tracking.traces=2")
    _, context, _, _, ids = traced_context(monkeypatch, cfg, done)
    assert context.classifier_source == ("LLM_JUDGE", "gpt-4o") == context.gold_source  # the LLM's model
    assert context.judge_source == ("LLM_JUDGE", "gpt-4o") and context.result_from_cache is False
    assert len(ids) == 2 and {done["predictions"].set_index("id").loc[i, "relation"] for i in ids} == {
        "deductive", "fuzzy"}  # one per relation
    _, finetuned, _, _, _ = traced_context(monkeypatch, config("llm=gpt-4o", "classifier=finetuned",
                                                               "classifier.model=ft:abc"), done)
    assert finetuned.classifier_source == ("LLM_JUDGE", "ft:abc")  # the classifier's own model


def test_without_gold_relations_there_is_no_classifier_and_a_combination_is_cut_at_its_k(monkeypatch):
    cfg = config("relations.gold=none", "setup=a_two")
    _, context, _, _, _ = traced_context(monkeypatch, cfg, result())
    assert context.classifier is None and context.classifier_source == ("CODE", "none")
    assert context.k == cfg.combination.k == 4 and context.retrieval == "A-Two"
