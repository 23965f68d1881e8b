"""Finding a sweep in the store, and saying why its report covers fewer configurations than it planned."""
from types import SimpleNamespace

import mlflow
import pytest

from flows.run.errors import CommandError
from flows.tracking.sweeps import configuration_names, find_sweep, sweep_incomplete


def parent(status: str, planned: str | None):
    tags = {"opi.planned_configurations": planned} if planned else {}
    return SimpleNamespace(info=SimpleNamespace(status=status), data=SimpleNamespace(tags=tags))


def test_why_a_sweep_is_incomplete():
    assert sweep_incomplete(parent("FINISHED", "13"), 13) is None
    assert sweep_incomplete(parent("FINISHED", "13"), 11) == ("only 11 of 13 configurations have results; this "
                                                              "report covers only those")
    assert sweep_incomplete(parent("KILLED", "13"), 4).startswith("it ended KILLED before it finished; 4 of 13")
    assert sweep_incomplete(parent("FINISHED", None), 4) is None


def test_a_store_without_the_experiment_or_a_sweep_is_one_line(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    with pytest.raises(CommandError, match="no MLflow experiment 'opi' in this store: run a sweep first"):
        find_sweep(client, "opi", None)
    client.create_experiment("opi", artifact_location=str(tmp_path / "a"))
    with pytest.raises(CommandError, match="experiment 'opi' has no finished sweep with child runs"):
        find_sweep(client, "opi", None)


def fake_run(run_id: str, name: str, **params: str):
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id, run_name=name), data=SimpleNamespace(params=params))


def test_configurations_that_share_a_name_are_told_apart_by_the_settings_they_differ_in():
    runs = [fake_run("a1", "kNN | x", **{"retriever.k": "2", "seed": "0"}),
            fake_run("a2", "kNN | x", **{"retriever.k": "8", "seed": "0"}),
            fake_run("b1", "BM25 | x", **{"retriever.k": "4"}),
            fake_run("c1", "DPS | x"), fake_run("c2", "DPS | x")]
    assert configuration_names(runs) == {"a1": "kNN | x [retriever.k=2]", "a2": "kNN | x [retriever.k=8]",
                                         "b1": "BM25 | x", "c1": "DPS | x [run c1]", "c2": "DPS | x [run c2]"}
