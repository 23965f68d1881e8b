"""The stage sequence of a configuration: one ranking serves every k (the one cut is Ranking.top, applied per
configuration), so a sweep over k ranks once."""
import pytest
import mlflow

from tests.helpers.cli import run_cli


@pytest.mark.slow
def test_a_sweep_over_k_computes_the_ranking_once(tmp_path):
    run_cli("flows.cli.evaluate", tmp_path, "-m", "retriever.k=2,4,8", "setup=knn", "dataset.limit=4",
            "report.enabled=false")
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("opi").experiment_id],
                              "tags.`opi.role` = 'configuration'")
    assert sorted(run.data.params["retriever.k"] for run in runs) == ["2", "4", "8"]
    assert sum(run.data.metrics.get("computed_retrieval", 0) for run in runs) == 1  # kNN ranked once, for all three
    chunks = {run.data.params["retriever.k"]: run.data.metrics["retrieved_sentences_mean"] for run in runs}
    assert chunks["2"] < chunks["4"] < chunks["8"]  # each cut to its own k
