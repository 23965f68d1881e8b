"""A configuration's run: its settings as params and config.yaml (never a secret), metrics and tables, nested under
the sweep's parent run when there is one."""
import mlflow
import pandas as pd

from flows.tracking import runs
from opi.schemas import TrackingConfig


def test_flatten_drops_secret_settings_and_redacts_credentials_in_values():
    flat = runs.flatten({"llm": {"api_key": "sk-1", "base_url": "http://me:sk-2@host/v1?key=sk-3", "max_tokens": 9,
                                 "tokens_per_minute": 100}, "seed": 0})
    assert flat == {"llm.base_url": "http://***@host/v1?key=***", "llm.max_tokens": 9, "llm.tokens_per_minute": 100,
                    "seed": 0}


def test_a_run_is_logged_whole_under_its_parent(tmp_path, monkeypatch):
    tracking = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_location=str(tmp_path / "a"),
                              label="nightly-1")
    monkeypatch.setenv(runs.PARENT_ENV, "parent-id")
    settings = {"retriever": {"k": 4, "token": "sk-secret"}, "seed": 0}
    run_id = runs.log_run(tracking, "kNN | extractive | local-clf", settings, {"bertsim": 0.5},
                          {"per_relation.csv": pd.DataFrame({"relation": ["fuzzy"], "n": [3]})}, {"opi.setup": "kNN"})
    run = mlflow.MlflowClient(tracking.tracking_uri).get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "kNN | extractive | local-clf"
    assert run.data.params == {"retriever.k": "4", "seed": "0"} and run.data.metrics == {"bertsim": 0.5}
    assert run.data.tags["mlflow.parentRunId"] == "parent-id" and run.data.tags["opi.label"] == "nightly-1"
    folder = mlflow.MlflowClient(tracking.tracking_uri).download_artifacts(run_id, "", str(tmp_path / "out"))
    config = (tmp_path / "out" / "config.yaml").read_text()
    assert "sk-secret" not in config and "k: 4" in config and (tmp_path / "out" / "per_relation.csv").exists()
    assert folder
