"""Runs through real LLM plumbing: the local SmolLM2 server, and an OpenAI-compatible endpoint holding a key."""
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from opi.llm import local_server
from opi.relations import load_relation_set
from tests.helpers.cli import run_cli
from tests.helpers.fake_openai import FakeOpenAI


def opi_eval(tmp_path: Path, *overrides: str, cache: str = "cache", env: dict | None = None) -> str:
    return run_cli("flows.cli.evaluate", tmp_path, *overrides, cache=cache, env=env)


def child_runs(tmp_path: Path) -> pd.DataFrame:
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    runs = mlflow.search_runs(experiment_names=["opi"], order_by=["start_time ASC"])
    return runs[runs["tags.opi.role"] == "configuration"]


@pytest.mark.slow
@pytest.mark.alone  # SmolLM2 takes every core: 5x slower beside another test
@pytest.mark.skipif(not local_server.available(), reason="llm-local extra not installed: " + local_server.INSTALL_HINT)
def test_local_smollm2_answers_classifies_scores_then_the_cache_answers_again(tmp_path):
    sweep = ["-m", "setup=knn,bm25", "llm=local", "classifier=llm", "metrics=full", "dataset.limit=3"]
    opi_eval(tmp_path, *sweep)
    first = child_runs(tmp_path)
    assert len(first) == 2
    labels = set(load_relation_set().labels)
    for _, run in first.iterrows():
        assert run["metrics.llm_answer_prompt_tokens"] > 0 and run["metrics.llm_answer_completion_tokens"] > 0
        assert run["metrics.llm_classify_prompt_tokens"] > 0
        folder = mlflow.artifacts.download_artifacts(run_id=run["run_id"], dst_path=str(tmp_path / run["run_id"]))
        predictions = pd.read_parquet(Path(folder) / "predictions.parquet")
        assert len(predictions) == 3
        assert all(answer.strip() for answer in predictions["generated_answer"])
        assert set(predictions["predicted_relation"]) <= labels  # the JSON schema's enum is enforced
        # answer correctness and the 0-3-7 judge through the same model, their failures counted
        assert run["metrics.llm_metrics_calls"] > 0
        scored, judged = predictions["correctness"].dropna(), predictions["judge_score"].dropna()
        assert len(scored) + run["metrics.correctness_failures"] == 3 and scored.between(0, 1).all()
        assert set(judged) <= {0, 3, 7} and len(judged) + run["metrics.judge_failures"] == 3
        if len(scored):
            assert run["metrics.correctness"] == pytest.approx(scored.mean())
    # a new Prefect cache, the same LLM call cache: every reply comes from the cache, no HTTP request is made
    opi_eval(tmp_path, *sweep, cache="cache-2")
    second = child_runs(tmp_path).iloc[2:]
    assert len(second) == 2
    assert (second["metrics.llm_answer_http_requests"] == 0).all()
    assert (second["metrics.llm_classify_http_requests"] == 0).all()
    assert (second["metrics.llm_answer_cache_hits"] == 3).all()
    assert list(second["metrics.bertsim"]) == list(first["metrics.bertsim"])


@pytest.mark.slow
def test_the_api_key_never_reaches_mlflow_caches_outputs_or_logs(tmp_path):
    marker = "sk-opi-secret-marker-4711"
    with FakeOpenAI(api_key=marker) as server:
        log = opi_eval(tmp_path, "llm=openai-compatible", f"llm.base_url={server.base_url}", "llm.model=fake",
                       "classifier=llm", "dataset.limit=2", "setup=knn",
                       env={"OPENAI_API_KEY": marker})
        assert server.arrivals, "the run did not call the endpoint"
    assert marker not in log
    leaks = [str(path) for path in tmp_path.rglob("*") if path.is_file() and marker.encode() in path.read_bytes()]
    assert leaks == []
    params = child_runs(tmp_path).filter(like="params.").columns
    assert not [p for p in params if "api_key" in p and p != "params.llm.api_key_env"]


@pytest.mark.slow
def test_answer_correctness_and_judge_are_logged_with_their_failure_counts(tmp_path):
    with FakeOpenAI() as server:
        opi_eval(tmp_path, "llm=openai-compatible", f"llm.base_url={server.base_url}", "llm.model=fake",
                 "llm.api_key_env=null", "metrics=full", "dataset.limit=3", "setup=knn")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    run = mlflow.search_runs(experiment_names=["opi"]).iloc[0]
    folder = mlflow.artifacts.download_artifacts(run_id=run["run_id"], dst_path=str(tmp_path / "dl"))
    rows = pd.read_parquet(Path(folder) / "predictions.parquet")
    # the fake answers one statement per sentence and supports only the first: F1 = 1 / (1 + 0.5 (n - 1))
    for _, row in rows.iterrows():
        n = len([s for s in row["generated_answer"].replace("! ", ". ").split(". ") if s])
        f1 = 1 / (1 + 0.5 * (n - 1))
        assert row["correctness_f1"] == pytest.approx(f1)
        assert row["correctness"] == pytest.approx(0.75 * f1 + 0.25 * row["similarity"])
    assert run["metrics.correctness"] == pytest.approx(rows["correctness"].mean())
    assert run["metrics.judge_mean"] == pytest.approx(rows["judge_score"].mean())
    assert set(rows["judge_score"]) <= {0, 3, 7}
    assert run["metrics.correctness_failures"] == 0 and run["metrics.judge_failures"] == 0
