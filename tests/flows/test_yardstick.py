"""The yardstick is its own setting: BERTSim is measured with ``metrics.similarity`` whatever the retrievers embed
with, every run says which model it was, and runs measured with different ones are not ranked together."""
import os

import mlflow
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.paths import ROOT
from tests.helpers.tiny_models import tiny_sentence_transformer

ECHO = "tests.helpers.toy_components.QuestionEchoReader"  # answers that do not depend on what was retrieved
COMMON = ["dataset.limit=4", "relations.gold=none", "report.enabled=false", "llm=custom",
          f"llm.reader._target_={ECHO}"]
ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return tiny_sentence_transformer(tmp_path_factory.mktemp("models") / "tiny-st")


def configuration_runs(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("opi").experiment_id
    return client, client.search_runs([experiment], "tags.`opi.role` = 'configuration'",
                                      order_by=["attributes.start_time ASC"])


@pytest.mark.slow
def test_a_retrievers_embedding_model_leaves_the_yardstick_alone(tmp_path, tiny_model):
    run_cli("flows.cli.evaluate", tmp_path, "retriever=knn", *COMMON, env=ENV)
    run_cli("flows.cli.evaluate", tmp_path, "retriever=knn", f"retriever.embedding.model={tiny_model}", *COMMON,
            env=ENV)
    client, (packaged, tiny) = configuration_runs(tmp_path)
    assert packaged.data.tags["opi.embedding.retriever"] == "packaged:all-MiniLM-L6-v2"
    assert tiny.data.tags["opi.embedding.retriever"] == str(tiny_model)
    assert packaged.data.params["metrics.similarity.model"] == tiny.data.params["metrics.similarity.model"]
    assert packaged.data.tags["opi.yardstick"] == tiny.data.tags["opi.yardstick"]
    assert packaged.data.tags["opi.yardstick_model"] == "packaged:all-MiniLM-L6-v2"
    predictions = [client.download_artifacts(run.info.run_id, "predictions.parquet", str(tmp_path / name))
                   for run, name in ((packaged, "a"), (tiny, "b"))]
    import pandas as pd

    chunks = [pd.read_parquet(path)["chunk_ids"].map(list).tolist() for path in predictions]
    assert chunks[0] != chunks[1]  # the retriever's model did change what was retrieved
    assert packaged.data.metrics["bertsim"] == tiny.data.metrics["bertsim"]  # and not the yardstick


@pytest.mark.slow
def test_opi_report_refuses_runs_measured_with_different_yardsticks_in_one_line(tmp_path, tiny_model):
    run_cli("flows.cli.evaluate", tmp_path, "-m", f"metrics.similarity.model=packaged:all-MiniLM-L6-v2,{tiny_model}",
            "retriever=knn", *COMMON, env=ENV)
    client, runs = configuration_runs(tmp_path)
    assert {run.data.tags["opi.yardstick_model"] for run in runs} == {"packaged:all-MiniLM-L6-v2", str(tiny_model)}
    assert runs[0].data.metrics["bertsim"] != runs[1].data.metrics["bertsim"]
    output = run_cli("flows.cli.report", tmp_path, "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", expect=2)
    errors = [line for line in output.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "measure BERTSim with different yardsticks (metrics.similarity)" in errors[0]
    assert "packaged:all-MiniLM-L6-v2" in errors[0] and "tiny-st" in errors[0]
    assert "Traceback" not in output and not (tmp_path / "report").exists()
