"""Data without relation labels (SQuAD, RAG-Dataset-12000, most users' files) runs: without gold relations
(BERTSim and diagnostics, no LRCR/OPI), or with the classifier's labels of the gold answers, as the paper does. A
file with a single relation cannot train the local classifier: one line, exit 2, before any run is opened."""
import json
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "squad_like.jsonl"
FAST = ["report.resamples=200", "report.permutations=99", "dataset=table", f"dataset.path={DATA}"]


def sweep(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("opi")
    parents = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'sweep'")
    children = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'")
    return client, parents, children


@pytest.mark.slow
def test_the_paper_grid_runs_without_gold_relations(tmp_path):
    log = run_cli("flows.cli.evaluate", tmp_path, "experiment=paper_grid", "relations.gold=none", *FAST)
    client, (parent,), children = sweep(tmp_path)
    assert len(children) == 13
    for child in children:
        assert child.data.tags["gold_relation_source"] == "none" and child.data.params["relations.gold"] == "none"
        assert "bertsim" in child.data.metrics and "bertsim_ci_low" in child.data.metrics
        assert not {"lrcr", "opi", "opi_1", "lrcr_ci_low"} & set(child.data.metrics)  # absent: not 0, not NaN
        assert "evidence_recall" in child.data.metrics  # the string evidence rows count
    report = client.download_artifacts(parent.info.run_id, "report/report.md", str(tmp_path))
    text = Path(report).read_text()
    assert "Gold relations: none (relations.gold=none): LRCR and OPI are not computed" in text
    assert "Best by BERTSim" in text and "per relation" not in text
    assert "no gold relations: no LRCR or OPI" in log


@pytest.mark.slow
def test_the_classifier_labels_the_gold_answers_when_the_data_has_no_labels(tmp_path):
    with FakeOpenAI() as server:
        log = run_cli("flows.cli.evaluate", tmp_path, "-m", "setup=knn,a_two", "llm=openai-compatible",
                      f"llm.base_url={server.base_url}", "llm.model=fake", "llm.api_key_env=null", "classifier=llm",
                      *FAST)
        gold_requests = [b for b in server.bodies if b.get("response_format") and "Brisk Valley" in json.dumps(b)]
    assert "has no relation labels: the classifier llm-clf labels each gold" in log  # the one-line notice
    assert log.count("has no relation labels") == 1  # once, not once per job
    client, _, children = sweep(tmp_path)
    for child in children:
        assert child.data.tags["gold_relation_source"] == "classifier"
        rows = pd.read_parquet(client.download_artifacts(child.info.run_id, "predictions.parquet", str(tmp_path)))
        silver = {r: FakeOpenAI.reply_for for r in rows["relation"]}  # labels the classifier gave the gold triples
        assert rows["relation"].notna().all() and len(silver) >= 2
        assert child.data.metrics["lrcr"] == pytest.approx((rows["relation"] == rows["predicted_relation"]).mean())
        logged = json.loads(open(client.download_artifacts(child.info.run_id, "metrics.json", str(tmp_path))).read())
        per_relation = {k.split(".", 1)[1]: v for k, v in logged.items() if k.startswith("n.")}
        assert per_relation == rows["relation"].value_counts().to_dict()
    assert gold_requests  # the gold triples (the article, not retrieved sentences) went to the classifier


def test_a_one_label_file_is_one_line_before_any_run(tmp_path):
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    path = tmp_path / "one_label.jsonl"
    path.write_text("".join(json.dumps({**r, "relation": "direct_matching"}) + "\n" for r in rows))
    log = run_cli("flows.cli.evaluate", tmp_path, "experiment=paper_grid", "dataset=table", f"dataset.path={path}",
                  expect=2)
    errors = [line for line in log.splitlines() if "problem" in line or "ERROR" in line]
    assert len(errors) == 1 and "dataset problem:" in errors[0], log[-2000:]
    assert "has only one ('direct_matching'): label examples of at least two relations" in errors[0]
    assert "Traceback" not in log and "Starting temporary server" not in log
    if (tmp_path / "mlflow.db").exists():  # no parent run, no child run
        client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
        experiment = client.get_experiment_by_name("opi")
        assert experiment is None or not client.search_runs([experiment.experiment_id])


@pytest.mark.slow
def test_corpus_wide_retrieval_reaches_other_articles(tmp_path):
    log = run_cli("flows.cli.evaluate", tmp_path, "setup=knn", "retrieval.scope=corpus", "relations.gold=none",
                  "chunking.size=20", "chunking.overlap=4", *FAST)
    client, _, (child,) = sweep(tmp_path)
    assert child.data.params["retrieval.scope"] == "corpus"
    rows = pd.read_parquet(client.download_artifacts(child.info.run_id, "predictions.parquet", str(tmp_path)))
    assert (rows["right_article"] < 1).any() and (rows["right_article"] > 0).all()
    assert child.data.metrics["right_article"] == pytest.approx(rows["right_article"].mean())
    # one index for every question: chunk ids run across the whole corpus, not one article
    assert rows["chunk_ids"].map(max).max() >= 10
    assert child.data.metrics["embedder_texts_embedded_total"] == child.data.metrics["embedder_unique_texts"]
    assert "BERTSim" in log
