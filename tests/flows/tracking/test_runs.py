"""A configuration's run: its settings as params and config.yaml (never a secret), its headline metrics (every one
with tracking.detail=full) and all of them in metrics.json, its tables, nested under the sweep's parent run when
there is one."""
import json

import mlflow
import pandas as pd
import pytest

from flows.tracking import runs
from opi.metrics.configuration import configuration_metrics
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


def computed_metrics() -> dict[str, float]:
    """A configuration's metrics as opi.metrics computes them: per relation, and the retrieval metrics at 1, 2, 4, 8."""
    rows = pd.DataFrame({"id": ["e1", "e2", "e3", "e4"], "relation": ["deductive", "deductive", "fuzzy", "fuzzy"],
                         "predicted_relation": ["deductive", "fuzzy", "fuzzy", "unknown"],
                         "similarity": [0.9, 0.5, 0.6, 0.2], "mrr": [1.0, 0.5, 0.0, 1.0],
                         **{f"{m}_at_{k}": [min(1.0, k / 4), 0.5, 0.0, 1.0] for m in ("recall", "ndcg")
                            for k in (1, 2, 4, 8)}})
    return configuration_metrics(rows, ["deductive", "fuzzy"], [0.5, 1.0, 2.0], 1.0, resamples=200)[0]


def logged(tmp_path, detail: str, metrics: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """(the run's MLflow metrics, its metrics.json) when logged with ``tracking.detail=detail``."""
    tracking = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_location=str(tmp_path / "a"),
                              detail=detail)
    run_id = runs.log_run(tracking, "kNN", {"seed": 0}, metrics, {}, {})
    client = mlflow.MlflowClient(tracking.tracking_uri)
    path = client.download_artifacts(run_id, runs.METRICS_FILE, str(tmp_path / detail))
    return client.get_run(run_id).data.metrics, json.loads(open(path).read())


def test_headline_detail_logs_no_per_relation_or_per_k_series_and_keeps_everything_in_metrics_json(tmp_path):
    metrics = computed_metrics()
    assert {"bertsim.deductive", "n.fuzzy", "opi_1.fuzzy", "ndcg_at_2", "recall_at_8_ci_low"} <= set(metrics)
    shown, kept = logged(tmp_path, "headline", metrics)
    assert kept == pytest.approx(metrics)  # everything, by name
    assert not [name for name in shown if "." in name]  # no <metric>.<relation>
    assert {name for name in shown if "_at_" in name} == {f"{m}_at_4{s}" for m in ("recall", "ndcg")
                                                            for s in ("", "_ci_low", "_ci_high")}
    for name in ("bertsim", "lrcr", "opi_1", "mrr"):  # the headline, with its intervals
        assert {name, f"{name}_ci_low", f"{name}_ci_high"} <= set(shown)
    assert {"opi", "opi_0_5", "opi_2", "opi_1_mean", "n_examples", "unknown_relations"} <= set(shown)
    assert all(shown[name] == pytest.approx(metrics[name]) for name in shown)
    assert len(shown) < len(metrics) - 20


def test_full_detail_logs_every_metric(tmp_path):
    metrics = computed_metrics()
    shown, _ = logged(tmp_path, "full", metrics)
    assert shown == pytest.approx(metrics)


def test_the_headline_cut_off_is_4_or_the_nearest_logged():
    assert runs.logged_metrics({"ndcg_at_3": 0.1, "ndcg_at_5": 0.2, "recall_at_5_ci_low": 0.3, "mrr": 0.4},
                               "headline") == {"ndcg_at_3": 0.1, "mrr": 0.4}
    assert runs.cut_off("ndcg_at_10_ci_high") == 10 and runs.cut_off("ndcg_at_k") is None


def test_a_bad_detail_is_one_line_at_compose_time(tmp_path):
    from tests.helpers.cli import run_cli

    output = run_cli("flows.cli.evaluate", tmp_path, "tracking.detail=some", expect=2)
    errors = [line for line in output.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "tracking.detail: headline or full, got 'some'" in errors[0]
    assert "Traceback" not in output
