"""opi-train-classifier: the local backend trains, registers and evaluates; the OpenAI path runs against a local
server that implements the files and fine-tuning endpoints."""
import json
from pathlib import Path

import mlflow
import mlflow.sklearn
import pandas as pd
import pytest

from opi.llm import local_server
from opi.relations import load_relation_set
from tests.helpers.cli import run_cli
from tests.helpers.fake_openai import FakeOpenAI


def train(tmp_path: Path, *overrides: str, env: dict | None = None) -> str:
    return run_cli("flows.cli.train_classifier", tmp_path, "train.per_relation=10", *overrides, env=env)


def runs(tmp_path: Path) -> pd.DataFrame:
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    return mlflow.search_runs(experiment_names=["opi-classifier"], order_by=["start_time ASC"])


@pytest.mark.slow
def test_local_backend_trains_registers_and_evaluates(tmp_path):
    log = train(tmp_path)
    run = runs(tmp_path).iloc[-1]
    assert run["metrics.n_train"] == 104 and run["metrics.n_test"] == 26
    assert {"metrics.cv_accuracy.logreg", "metrics.cv_accuracy.linear_svc"} <= set(run.index)
    folder = Path(mlflow.artifacts.download_artifacts(run_id=run["run_id"], dst_path=str(tmp_path / "dl")))
    assert (folder / "confusion_matrix.png").stat().st_size > 10_000
    predictions = pd.read_csv(folder / "test_predictions.csv")
    assert len(predictions) == 26
    accuracy = (predictions["relation"] == predictions["predicted"]).mean()
    assert run["metrics.accuracy"] == pytest.approx(accuracy)
    assert 0 <= run["metrics.macro_f1"] <= 1
    assert run["metrics.chance_accuracy"] == pytest.approx(1 / 13)
    assert run["metrics.paper_finetuned_gpt4o_accuracy"] == pytest.approx(0.7577)
    client = mlflow.MlflowClient()
    version = client.get_model_version_by_alias("opi-relation-classifier", "candidate")
    assert version.run_id == run["run_id"]
    # the registered model loads and labels the same test examples the same way
    from opi.classify import LocalRelationClassifier, Triple
    from opi.data import balanced_split, load_examples
    from opi.schemas import DatasetConfig

    _, test = balanced_split(load_examples(DatasetConfig(name="deeplogic-130"))[0], 10, 0.2, 0)
    model = LocalRelationClassifier(pipeline=mlflow.sklearn.load_model("models:/opi-relation-classifier@candidate"))
    assert model.predict([Triple(e.context, e.question, e.answer) for e in test]) == list(predictions["predicted"])
    assert "test accuracy" in log


@pytest.mark.slow
def test_openai_fine_tuning_end_to_end_and_resumable(tmp_path):
    with FakeOpenAI() as server:
        overrides = ["train=openai", "llm=openai-compatible", f"llm.base_url={server.base_url}",
                     "llm.model=gpt-4o-2024-08-06", "train.first_poll_seconds=0.01", "train.max_poll_seconds=0.05"]
        first = train(tmp_path, *overrides, env={"OPENAI_API_KEY": "sk-test"})
        assert len(server.jobs) == 1 and len(server.files) == 1
        (uploaded,) = server.files.values()
        second = train(tmp_path, *overrides, env={"OPENAI_API_KEY": "sk-test"})
        assert len(server.jobs) == 1 and len(server.files) == 1, "a re-run created a second job"
        (job,) = server.jobs.values()
    assert "created fine-tuning job ftjob-1" in first
    assert "found fine-tuning job ftjob-1 (succeeded)" in second
    assert "classifier=finetuned classifier.model=ft:gpt-4o-2024-08-06:opi-test::ftjob-1" in first
    assert job["metadata"]["opi_base_model"] == "gpt-4o-2024-08-06" and job["model"] == "gpt-4o-2024-08-06"
    # the JSONL the server received, line by line
    labels = set(load_relation_set().labels)
    lines = uploaded.decode("utf-8").splitlines()
    assert len(lines) == 104
    seen = set()
    for line in lines:
        messages = json.loads(line)["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant"]
        assert "Question:" in messages[1]["content"] and "Answer:" in messages[1]["content"]
        assert messages[2]["content"] in labels
        seen.add(messages[2]["content"])
    assert seen == labels
    recorded = runs(tmp_path)
    assert set(recorded["tags.opi.fine_tuned_model"]) == {"ft:gpt-4o-2024-08-06:opi-test::ftjob-1"}
    assert list(recorded["tags.opi.finetune_created"]) == ["True", "False"]
    assert (recorded["metrics.n_test"] == 26).all() and recorded["metrics.accuracy"].between(0, 1).all()


@pytest.mark.slow
@pytest.mark.alone  # SmolLM2 takes every core: 5x slower beside another test
@pytest.mark.skipif(not local_server.available(), reason="llm-local extra not installed: " + local_server.INSTALL_HINT)
def test_llm_classifier_with_local_smollm2_on_the_test_split(tmp_path):
    # one test example per relation (5 x 0.2): SmolLM2 labels each in ~4 s on 2 cores
    run_cli("flows.cli.train_classifier", tmp_path, "train.per_relation=5", "train=none", "llm=local",
            "classifier=llm")
    run = runs(tmp_path).iloc[-1]
    folder = Path(mlflow.artifacts.download_artifacts(run_id=run["run_id"], dst_path=str(tmp_path / "dl")))
    predictions = pd.read_csv(folder / "test_predictions.csv")
    assert len(predictions) == 13
    assert run["metrics.accuracy"] == pytest.approx((predictions["relation"] == predictions["predicted"]).mean())
    assert run["metrics.llm_classify_prompt_tokens"] > 0
    assert set(predictions["predicted"]) <= set(load_relation_set().labels)  # enum-constrained output
