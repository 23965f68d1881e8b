"""Reliability, round three: what a careless or unlucky user does, end to end (docs/reliability.md, "Round three").
Each mistake ends in one line and exit 2 before any work, or the run goes on and says what it did about it."""
import shutil
from pathlib import Path

import mlflow
import pytest

from opi.data import load_examples
from opi.schemas import DatasetConfig
from tests.helpers.cli import run_cli
from tests.helpers.fake_openai import FakeOpenAI

MARKER = "sk-proj-OpiMarker0123456789abcdefXYZ"
QUICK = ["dataset.limit=2", "setup=bm25", "report.enabled=false"]


def leaks(folder: Path, output: str) -> list[str]:
    """Every file under the run's folder (MLflow store, outputs, multirun, caches, Prefect home) holding the marker,
    and the console."""
    found = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and MARKER.encode() in p.read_bytes()]
    return found + (["console"] if MARKER in output else [])


def one_error(output: str, expected: str) -> None:
    errors = [line for line in output.splitlines() if "ERROR" in line or line.startswith("invalid configuration")]
    assert len(errors) == 1 and expected in errors[0], output[-3000:]
    assert "Traceback" not in output, output[-3000:]


@pytest.mark.parametrize("mistake, expected", [
    (["llm=openai-compatible", "llm.base_url=http://127.0.0.1:9/v1", "llm.model=m", f"llm.api_key_env={MARKER}"],
     "llm.api_key_env must be the name of an environment variable"),
    (["-m", "setup=knn,bm25", "llm=gpt-4o", f"llm.api_key_env={MARKER}"],
     "llm.api_key_env must be the name of an environment variable"),
    ([f"+llm.api_key={MARKER}"], "llm.api_key would write a secret into the run's settings"),
    (["llm=openai-compatible", f"llm.base_url=http://me:{MARKER}@127.0.0.1:9/v1", "llm.model=m"],
     "llm.base_url holds credentials in its URL"),
    ([f"tracking.label={MARKER}"], "tracking.label holds what looks like an API key"),
])
def test_a_key_typed_where_it_does_not_belong_is_refused_and_written_nowhere(tmp_path, mistake, expected):
    output = run_cli("flows.cli.evaluate", tmp_path, *mistake, *QUICK[:1], expect=2)
    one_error(output, expected)
    assert leaks(tmp_path, output) == []


def test_a_key_variable_that_is_not_set_is_said_before_any_work(tmp_path):
    with FakeOpenAI() as server:
        output = run_cli("flows.cli.evaluate", tmp_path, "llm=openai-compatible", f"llm.base_url={server.base_url}",
                         "llm.model=m", "llm.api_key_env=MY_UNSET_VAR", *QUICK, env={"MY_UNSET_VAR": ""}, expect=2)
        assert server.arrivals == []
    one_error(output, "llm.api_key_env names MY_UNSET_VAR, which is not set in this environment")
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.slow
def test_replies_that_are_no_answer_are_counted_said_and_not_kept(tmp_path):
    command = ["llm=openai-compatible", "llm.model=m", "llm.api_key_env=null", "setup=bm25", "dataset.limit=4",
               "report.enabled=false"]
    (first, second, *_), _ = load_examples(DatasetConfig(name="deeplogic-130", limit=4))
    empty, refused = f"Question: {first.question}", f"Question: {second.question}"
    with FakeOpenAI(empty_when=empty, refuse_when="Question:") as server:  # no answer to any question
        output = run_cli("flows.cli.evaluate", tmp_path / "none", *command, f"llm.base_url={server.base_url}",
                         expect=2)
    one_error(output, "gave no answer to any of the 4 questions")
    with FakeOpenAI(empty_when=empty, refuse_when=refused) as server:  # an empty reply to one, a refusal to another
        def asked():
            return [sum(q in b["messages"][-1]["content"] for b in server.bodies) for q in (empty, refused)]

        output = run_cli("flows.cli.evaluate", tmp_path, *command, f"llm.base_url={server.base_url}")
        first_run = asked()
        again = run_cli("flows.cli.evaluate", tmp_path, *command, f"llm.base_url={server.base_url}")
        both_runs = asked()
    assert first_run == [2, 2] and both_runs == [4, 4]  # asked again at once, and again by the next run: never cached
    assert "2 of 4 questions got no answer (the LLM's reply was empty or a refusal" in output
    assert "2 of 4 questions got no answer" in again
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    run = client.search_runs([client.get_experiment_by_name("opi").experiment_id])[0]
    assert run.data.metrics["answers_missing"] == 2 and run.data.metrics["n_examples"] == 2
    assert run.data.metrics["llm_answer_empty_replies"] == 1 and run.data.metrics["llm_answer_refusals"] == 1


@pytest.fixture
def finished(tmp_path):
    """A finished run's folder: its MLflow store, stage cache and LLM call cache."""
    run_cli("flows.cli.evaluate", tmp_path, *QUICK)
    return tmp_path


@pytest.mark.slow
def test_a_damaged_mlflow_store_is_one_line_before_any_work_also_for_opi_report(finished):
    database = finished / "mlflow.db"
    database.write_bytes(database.read_bytes()[: database.stat().st_size // 2])
    output = run_cli("flows.cli.evaluate", finished, *QUICK, expect=2)
    one_error(output, f"cannot write results: tracking.tracking_uri: {database} is")  # damaged, or not readable
    assert "move it away (a new store is made) or restore it from a backup" in output
    assert "bundled dataset" not in output  # before the data is read
    report = run_cli("flows.cli.report", finished, "--tracking-uri", f"sqlite:///{database}", expect=2)
    one_error(report, f"--tracking-uri: {database} is")


def test_a_call_cache_that_is_not_a_database_is_one_line_before_any_work(tmp_path):
    (tmp_path / "llm_calls.sqlite").write_bytes(b"this is not a database, it was a note" * 100)
    output = run_cli("flows.cli.evaluate", tmp_path, *QUICK, expect=2)
    one_error(output, "paths.llm_cache: ")
    assert "is not a readable SQLite database" in output and "move it away or delete it" in output


@pytest.mark.slow
def test_stage_results_cut_in_half_are_computed_again_with_a_warning(finished):
    reference = (finished / "outputs").rglob("per_relation.csv").__next__().read_text()
    for result in [*(finished / "cache" / "results").iterdir(), *(finished / "cache" / "kept").iterdir()]:
        result.write_bytes(result.read_bytes()[: result.stat().st_size // 2])
    shutil.rmtree(finished / "outputs")
    output = run_cli("flows.cli.evaluate", finished, *QUICK)
    assert "is unreadable" in output and "computing it again" in output and "Traceback" not in output
    assert next((finished / "outputs").rglob("per_relation.csv")).read_text() == reference


@pytest.mark.slow
def test_a_cache_folder_copied_elsewhere_is_read_there(finished):
    shutil.copytree(finished / "cache", finished / "copied")
    output = run_cli("flows.cli.evaluate", finished, *QUICK, f"paths.cache_dir={finished}/copied")
    assert "7 of 7 stage results reused" in output and "Traceback" not in output


def test_opi_report_on_a_folder_without_a_store_creates_nothing(tmp_path):
    output = run_cli("flows.cli.report", tmp_path, "--tracking-uri", f"sqlite:///{tmp_path}/mlruns/mlflow.db",
                     expect=2)
    one_error(output, "no MLflow store at")
    assert list(tmp_path.glob("mlruns*")) == []


def test_a_negative_seed_is_refused_at_compose_time(tmp_path):
    one_error(run_cli("flows.cli.evaluate", tmp_path, "seed=-1", expect=2),
              "invalid configuration: seed must be an integer from 0 to 2**32 - 1, got -1")


@pytest.mark.slow
def test_an_experiments_sweep_replaced_on_the_command_line_is_counted_and_said(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "experiment=smoke", "setup=a_four", "dataset.limit=2",
                     "report.enabled=false")
    assert "1 configuration on" in output and "(setup=a_four replaces the sweep setup=knn,bm25)" in output
    assert "[1/1" in output and "[1/2" not in output


@pytest.mark.slow
def test_the_classifier_labels_the_gold_of_labelled_data_cross_fitted(tmp_path):
    run_cli("flows.cli.evaluate", tmp_path, "relations.gold=classifier", "dataset.limit=20", "setup=bm25")
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("opi").experiment_id])
    assert run.data.tags["gold_relation_source"] == "classifier" and 0 <= run.data.metrics["lrcr"] <= 1


@pytest.mark.slow
def test_a_run_without_relations_is_named_and_logged_without_a_classifier(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "relations.gold=none", *QUICK)
    assert "BM25 | extractive: BERTSim" in output
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("opi").experiment_id])
    assert run.info.run_name == "BM25" and run.data.tags["opi.description"] == "BM25 | extractive"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"config.yaml", "predictions.parquet",
                                                                         "metrics.json"}
    assert "dataset.split_per_relation" not in run.data.params and "classifier._target_" in run.data.params
