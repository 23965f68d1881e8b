import mlflow
import pytest

from tests.helpers.cli import run_cli


@pytest.fixture(scope="session")
def finished_sweep(tmp_path_factory):
    """A finished smoke sweep (kNN and BM25 on 3 bundled examples) in its own MLflow store, shared read-mostly by
    the tests that start from a sweep's results: (folder, tracking uri, parent run id, experiment id)."""
    folder = tmp_path_factory.mktemp("sweep")
    run_cli("flows.cli.evaluate", folder, "experiment=smoke", "dataset.limit=3")
    uri = f"sqlite:///{folder}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("opi")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'sweep'")
    return folder, uri, parent.info.run_id, experiment.experiment_id
