"""The smoke sweep end to end: Hydra multirun -> Prefect flows (cached tasks) -> MLflow parent + child runs."""
import json
import os

import mlflow
import pandas as pd
import pytest

from opi.metrics.opi import summary
from opi.relations import load_relation_set
from tests.helpers.cli import run_cli


def run_smoke(tmp_path):
    return run_cli("flows.cli.evaluate", tmp_path, "experiment=smoke", "dataset.limit=2")


@pytest.mark.slow
def test_smoke_sweep_logs_what_opi_metrics_computes(tmp_path):
    log = run_smoke(tmp_path)
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    runs = mlflow.search_runs(experiment_names=["opi"])
    parents = runs[runs["tags.opi.role"] == "sweep"]
    children = runs[runs["tags.opi.role"] == "configuration"]
    assert len(parents) == 1 and len(children) == 2
    assert set(children["tags.mlflow.parentRunId"]) == {parents["run_id"].iloc[0]}
    assert set(children["tags.mlflow.runName"]) == {"kNN", "BM25"}  # named by what varies in the sweep
    assert set(children["tags.opi.description"]) == {"kNN | extractive | local-clf", "BM25 | extractive | local-clf"}
    labels = load_relation_set().labels
    for _, child in children.iterrows():
        folder = mlflow.artifacts.download_artifacts(run_id=child["run_id"], dst_path=str(tmp_path / child["run_id"]))
        predictions = pd.read_parquet(os.path.join(folder, "predictions.parquet"))
        assert len(predictions) == 2
        expected, table = summary(predictions, labels)
        for name in ["bertsim", "lrcr", "opi_1", "opi_2", "opi_0_5", "opi_1_mean"]:
            assert child[f"metrics.{name}"] == pytest.approx(expected[name]), name
        logged = json.loads(open(os.path.join(folder, "metrics.json")).read())  # per relation: not MLflow metrics
        for record in table.to_dict("records"):
            assert logged[f"opi_1.{record['relation']}"] == pytest.approx(record["opi_1"])
            assert f"metrics.opi_1.{record['relation']}" not in children.columns  # tracking.detail=headline
        assert child["metrics.opi"] == pytest.approx(expected["opi_1"])  # headline OPI at metrics.beta = 1
        assert 0 <= child["metrics.classifier_cv_accuracy"] <= 1
        assert child["params.retriever._target_"] in {"opi.retrievers.dense.KNNRetriever",
                                                      "opi.retrievers.lexical.BM25Retriever"}
        assert child["tags.opi.kind"] == "single" and child["tags.opi.setup"] == child["params.retriever.name"]
        assert child["metrics.opi_1_ci_low"] <= child["metrics.opi_1"] <= child["metrics.opi_1_ci_high"]
        for diagnostic in ("support_recall", "answer_found", "evidence_recall", "evidence_hit"):
            assert child[f"metrics.{diagnostic}"] == pytest.approx(predictions[diagnostic].mean())
    report = {a.path for a in mlflow.MlflowClient().list_artifacts(parents["run_id"].iloc[0], "report")}
    assert {"report/report.html", "report/report.md", "report/heatmap.png", "report/bars.png",
            "report/overall.csv", "report/strengths.csv", "report/relation_opi_1.csv"} <= report
    assert "0 of" in log  # cold: nothing reused

    again = run_smoke(tmp_path)
    assert again.count("7 of 7 stage results reused from the cache (the configuration's whole result") == 2
    assert "sweep report: tables and tests of these predictions reused from the cache" in again
    assert "reused from the cache" not in log.split("sweep of 2 configurations")[-1]  # the first report was built
    runs = mlflow.search_runs(experiment_names=["opi"])
    assert (runs[runs["tags.opi.role"] == "configuration"]["metrics.cache_hits"] == 7).sum() == 2
    warm = runs[(runs["tags.opi.role"] == "configuration") & (runs["metrics.cache_hits"] == 7)]
    assert (warm["metrics.texts_embedded"] == 0).all() and (warm["metrics.cache_misses"] == 0).all()
    for name in ("bertsim", "lrcr", "opi_1", "opi_1_ci_low"):  # the kept result is the computed one
        assert sorted(warm[f"metrics.{name}"]) == sorted(children[f"metrics.{name}"]), name

    # a setting that changes the metrics, not the stages: the whole result is computed again from cached stages
    changed = run_cli("flows.cli.evaluate", tmp_path, "experiment=smoke", "dataset.limit=2", "report.resamples=500")
    assert changed.count("7 of 7 stage results reused from the cache") == 2
    assert "whole result" not in changed



def child_metrics(folder):
    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlflow.db")
    experiment = client.get_experiment_by_name("opi").experiment_id
    return {run.info.run_name: run.data.metrics
            for run in client.search_runs([experiment], "tags.`opi.role` = 'configuration'")}


@pytest.mark.slow
def test_dask_runner_gives_the_metrics_and_the_work_counts_of_the_default_runner(tmp_path):
    pytest.importorskip("prefect_dask")
    # kNN alone, cold: its stages run one after another, on either of two workers, which share what they computed
    # through the embedding store; then a combination: its two member rankings are submitted together, so on Dask
    # they run on two workers at once (kNN's read from the cache, DPS's over the chunk vectors kNN's run stored)
    job = ["-m", "setup=knn,a_two", "dataset.limit=2", "classifier.folds=2"]
    for runner in ("threads", "dask"):
        (tmp_path / runner).mkdir()
        log = run_cli("flows.cli.evaluate", tmp_path / runner, *job, f"orchestration={runner}")
        assert "kNN | extractive | local-clf: 0 of 7 stage results reused" in log  # cold: every stage ran here
    threads, dask = child_metrics(tmp_path / "threads"), child_metrics(tmp_path / "dask")
    knn, a_two = "kNN", "A-Two"
    assert set(dask) == set(threads) == {knn, a_two}
    for run in (knn, a_two):
        for name in ("bertsim", "lrcr", "opi_1", "opi_1_mean", "support_recall", "classifier_cv_accuracy",
                     "cache_hits", "cache_misses", "texts_embedded"):
            assert dask[run][name] == pytest.approx(threads[run][name]), (run, name)
    # counted in the tasks, wherever they ran: each text computed once, by whichever worker needed it first
    assert threads[knn]["texts_embedded"] > 0 and dask[knn]["embedder_texts_embedded_total"] > 0
    assert threads[knn]["texts_from_embedding_store"] == threads[a_two]["texts_from_embedding_store"] == 0
    # Dask's workers are new for each configuration: what kNN's run computed, A-Two's reads from the store (the
    # default runner's one process still holds it)
    assert dask[a_two]["texts_from_embedding_store"] > 0 and dask[a_two]["cache_hits"] > 0
