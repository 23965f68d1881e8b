"""The MLflow store: the experiment created once with its kind tag (no process-wide MLflow state), and runs a dead
process left RUNNING marked FAILED."""
import subprocess
import sys

import mlflow
import pytest

from flows.base.errors import CommandError
from flows.tracking import store
from flows.tracking.runs import run_tags
from opi.schemas import TrackingConfig


def tracking(tmp_path) -> TrackingConfig:
    return TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_location=str(tmp_path / "a"))


def test_the_experiment_is_created_once_with_its_kind_and_no_global_state(tmp_path):
    before = mlflow.get_tracking_uri()
    client, first = store.open_experiment(tracking(tmp_path))
    _, again = store.open_experiment(tracking(tmp_path))
    assert first == again
    assert client.get_experiment(first).tags[store.KIND_TAG] == "genai_development"
    assert mlflow.get_tracking_uri() == before


def test_a_new_experiments_artifacts_go_beside_a_local_store_and_to_a_tracking_servers_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert store.artifact_uri(TrackingConfig()) == (tmp_path / "mlruns" / "artifacts").as_uri()
    assert (tmp_path / "mlruns" / "artifacts").is_dir()
    for server in ("http://10.0.0.5:5000", "https://mlflow.example.org"):  # its --artifacts-destination, served
        assert store.artifact_uri(TrackingConfig(tracking_uri=server)) is None
        assert store.artifact_uri(TrackingConfig(tracking_uri=server, artifact_location="s3://team/opi")) == \
            "s3://team/opi"
    assert store.artifact_uri(TrackingConfig(tracking_uri="http://10.0.0.5:5000", artifact_location="kept")) == \
        (tmp_path / "kept").as_uri()
    assert store.artifact_uri(TrackingConfig(tracking_uri="postgresql://db/mlflow")) == \
        (tmp_path / "mlruns" / "artifacts").as_uri()


def test_an_experiment_opi_made_before_traces_is_relabelled_a_user_s_own_kind_is_not(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    old = client.create_experiment("opi", tags={store.KIND_TAG: "custom_model_development"})
    mine = client.create_experiment("mine", tags={store.KIND_TAG: "finetuning"})
    store.open_experiment(tracking(tmp_path))
    store.open_experiment(tracking(tmp_path), "mine")
    assert client.get_experiment(old).tags[store.KIND_TAG] == "genai_development"
    assert client.get_experiment(mine).tags[store.KIND_TAG] == "finetuning"


def test_a_run_left_running_by_a_dead_process_is_marked_failed(tmp_path):
    client, experiment = store.open_experiment(tracking(tmp_path), "other")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    mine = client.create_run(experiment, tags=run_tags(tracking(tmp_path))).info.run_id  # this process: alive
    host = run_tags(tracking(tmp_path))["opi.host"]
    orphan = client.create_run(experiment, tags={"opi.host": host, "opi.pid": dead}).info.run_id
    foreign = client.create_run(experiment, tags={"opi.host": "elsewhere", "opi.pid": dead}).info.run_id
    store.fail_orphans(client, experiment)
    assert client.get_run(orphan).info.status == "FAILED" and "opi.orphaned" in client.get_run(orphan).data.tags
    assert client.get_run(mine).info.status == "RUNNING" and client.get_run(foreign).info.status == "RUNNING"


def test_a_read_only_command_creates_no_folder_store(tmp_path):
    for uri in (str(tmp_path / "nope"), f"file:{tmp_path / 'nope'}"):
        with pytest.raises(CommandError, match="no MLflow store at"):
            store.existing_store(uri)
    assert not (tmp_path / "nope").exists()


def test_a_sqlite_store_named_as_a_path_is_told_its_uri(tmp_path):
    (tmp_path / "mlflow.db").write_bytes(b"")
    with pytest.raises(CommandError, match=rf"is a file, and a path names a folder store: name a SQLite store as "
                                           rf"--tracking-uri sqlite:///{tmp_path}/mlflow.db$"):
        store.existing_store(str(tmp_path / "mlflow.db"))  # was "no MLflow store at ...: run a sweep first"
