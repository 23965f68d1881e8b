"""The smoke sweep end to end: Hydra multirun -> Prefect flows (cached tasks) -> MLflow parent + child runs."""
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
    assert set(children["tags.mlflow.runName"]) == {"kNN | extractive | local-clf", "BM25 | extractive | local-clf"}
    labels = load_relation_set().labels
    for _, child in children.iterrows():
        folder = mlflow.artifacts.download_artifacts(run_id=child["run_id"], dst_path=str(tmp_path / child["run_id"]))
        predictions = pd.read_parquet(os.path.join(folder, "predictions.parquet"))
        assert len(predictions) == 2
        expected, table = summary(predictions, labels)
        for name in ["bertsim", "lrcr", "opi_1", "opi_2", "opi_0_5", "opi_1_mean"]:
            assert child[f"metrics.{name}"] == pytest.approx(expected[name]), name
        for record in table.to_dict("records"):
            assert child[f"metrics.opi_1.{record['relation']}"] == pytest.approx(record["opi_1"])
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
def test_dask_runner_gives_the_metrics_of_the_default_runner(tmp_path):
    pytest.importorskip("prefect_dask")
    # a combination: its two member rankings are submitted together, so on Dask they run on two workers at once
    job = ["setup=a_two", "dataset.limit=2", "classifier.folds=2"]
    for runner in ("threads", "dask"):
        (tmp_path / runner).mkdir()
        log = run_cli("flows.cli.evaluate", tmp_path / runner, *job, f"orchestration={runner}")
        assert "0 of 8 stage results reused" in log  # cold: every stage ran on this runner
    threads, dask = child_metrics(tmp_path / "threads"), child_metrics(tmp_path / "dask")
    assert set(dask) == set(threads) == {"A-Two | extractive | local-clf"}
    for name in ("bertsim", "lrcr", "opi_1", "opi_1_mean", "support_recall", "classifier_cv_accuracy"):
        assert dask["A-Two | extractive | local-clf"][name] == pytest.approx(
            threads["A-Two | extractive | local-clf"][name]), name
