"""A retriever of the user's own, given by ``_target_`` on the command line: alone, and inside A- and S-
combinations, with no change to OPI."""
import json
import os

import mlflow
import pandas as pd
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.paths import ROOT as REPOSITORY

LEAD = "tests.helpers.components.LeadRetriever"
ROOT = str(REPOSITORY)


def children(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("opi")
    runs = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'")
    return client, {run.data.tags["opi.setup"]: run for run in runs}


def predictions(client, run, tmp_path):
    return pd.read_parquet(client.download_artifacts(run.info.run_id, "predictions.parquet", str(tmp_path)))


@pytest.mark.slow
def test_a_custom_retriever_runs_alone_and_in_a_and_s_combinations(tmp_path):
    env = {"PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    common = ["dataset.limit=6", "classifier.folds=2", "report.enabled=false"]
    run_cli("flows.cli.evaluate", tmp_path, "retriever=custom", f"retriever._target_={LEAD}", "retriever.k=5",
            "+retriever.skip=1", *common, env=env)
    run_cli("flows.cli.evaluate", tmp_path, "-m", "combination=a_two,s_two", "combination.members=[knn,lead]",
            "+retriever@retrievers.lead=custom", f"retrievers.lead._target_={LEAD}", *common, env=env)
    client, runs = children(tmp_path)
    assert set(runs) == {"Lead", "A-Two", "S-Two"}
    lead = runs["Lead"]
    assert lead.data.tags["opi.kind"] == "single" and lead.data.params["retriever._target_"] == LEAD
    assert lead.data.params["retriever.k"] == "5" and lead.data.params["retriever.skip"] == "1"
    assert all(list(ids) == [1, 2, 3, 4, 5] for ids in predictions(client, lead, tmp_path)["chunk_ids"])
    for setup, kind in [("A-Two", "A-"), ("S-Two", "S-")]:
        run = runs[setup]
        assert run.data.tags["opi.kind"] == kind and run.data.tags["opi.members"] == "kNN,Lead"
        assert run.data.params["retrievers.lead._target_"] == LEAD and "retriever._target_" not in run.data.params
        chunk_ids = predictions(client, run, tmp_path)["chunk_ids"]
        assert any(0 in list(ids) for ids in chunk_ids)  # the Lead member's first chunk made it in
    s_two = predictions(client, runs["S-Two"], tmp_path)
    assert all(set(range(4)) <= set(ids) for ids in s_two["chunk_ids"])  # S-: the union keeps all of Lead's chunks
    assert json.loads(json.dumps(list(runs)))  # names are plain strings
