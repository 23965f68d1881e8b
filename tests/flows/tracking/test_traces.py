"""Per-example traces: what a configuration run's traces hold against its predictions and metrics, pairing across
configurations, a run read whole from the cache, a process killed while writing them, two sweeps at once on one
SQLite store, and a store that refuses them."""
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from flows.tracking.traces import TraceContext, traces_key, write_traces
from tests.helpers.cli import cli_command, cli_environment, prefect_home, run_cli, start_cli, wait_for

EXAMPLES = 5


def configuration_runs(uri: str) -> list:
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("opi")
    return client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'",
                              order_by=["attributes.start_time ASC"])


def traces_of(uri: str, run) -> dict[str, mlflow.entities.Trace]:
    """The run's traces by example id."""
    client = mlflow.MlflowClient(uri)
    found = client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id, max_results=1000)
    return {trace.info.tags["opi.example_id"]: trace for trace in found}


def predictions_of(uri: str, run) -> pd.DataFrame:
    path = mlflow.MlflowClient(uri).download_artifacts(run.info.run_id, "predictions.parquet")
    return pd.read_parquet(path).set_index("id")


def assessments(trace) -> dict[str, object]:
    return {a.name: a.value for a in trace.info.assessments}


def span(trace, span_type: str):
    (found,) = [s for s in trace.data.spans if s.span_type == span_type]
    return found


@pytest.fixture(scope="module")
def traced_sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("traced")
    run_cli("flows.cli.evaluate", folder, "-m", "setup=knn,s_two", f"dataset.limit={EXAMPLES}", "classifier.folds=2",
            "report.enabled=false", "tracking.traces=all")
    return folder, f"sqlite:///{folder}/mlflow.db"


def test_each_example_s_trace_holds_its_retrieved_chunks_scores_and_verdicts(traced_sweep):
    _, uri = traced_sweep
    for run in configuration_runs(uri):
        traces, rows = traces_of(uri, run), predictions_of(uri, run)
        assert sorted(traces) == sorted(rows.index) and len(rows) == EXAMPLES
        assert run.data.metrics["traces_written"] == run.data.metrics["traces_expected"] == EXAMPLES
        for example_id, trace in traces.items():
            row, scores = rows.loc[example_id], assessments(trace)
            documents = span(trace, "RETRIEVER").outputs
            assert [d["metadata"]["chunk_id"] for d in documents] == list(row["chunk_ids"])
            assert [d["metadata"]["rank"] for d in documents] == list(range(1, len(documents) + 1))
            assert [d["metadata"]["score"] for d in documents] == pytest.approx(list(row["chunk_scores"]))
            assert scores["bertsim"] == pytest.approx(row["similarity"], abs=1e-6)
            assert scores["relation_correct"] == (row["predicted_relation"] == row["relation"])
            assert scores["expected_response"] == row["answer"] and scores["gold_relation"] == row["relation"]
            assert span(trace, "CLASSIFIER").outputs == {"relation": row["predicted_relation"]}
            assert span(trace, "READER").outputs == row["generated_answer"]
            # no per-example time is measured (stages run in batches): no span has a duration, the root says why
            root = trace.data.spans[0]
            assert {(s.start_time_ns, s.end_time_ns) for s in trace.data.spans} == {(root.start_time_ns,) * 2}
            assert trace.info.execution_duration == 0 and "opi.timing" in root.attributes
        # the run's metrics are the traces' verdicts averaged
        assert run.data.metrics["bertsim"] == pytest.approx(
            sum(assessments(t)["bertsim"] for t in traces.values()) / EXAMPLES, abs=1e-6)
        assert run.data.metrics["lrcr"] == pytest.approx(
            sum(assessments(t)["relation_correct"] for t in traces.values()) / EXAMPLES)
        assert {type(assessments(t)["relation_correct"]) for t in traces.values()} == {int}  # 1/0: MLflow averages it


def test_the_same_question_pairs_across_configurations_by_example_id(traced_sweep):
    _, uri = traced_sweep
    knn, s_two = (traces_of(uri, run) for run in configuration_runs(uri))
    assert set(knn) == set(s_two)
    for example_id in knn:
        assert knn[example_id].data.spans[0].inputs == s_two[example_id].data.spans[0].inputs
    union = {d["metadata"]["retriever"] for t in s_two.values() for d in span(t, "RETRIEVER").outputs}
    assert union <= {"kNN", "DPS"} and "kNN" in union  # an S- chunk names the member that found it


def test_a_configuration_read_whole_from_the_cache_gets_its_traces_too(traced_sweep):
    folder, uri = traced_sweep
    boot_lock = prefect_home(folder) / ".opi-server-boot.lock"  # a temporary server that starts booting takes it
    assert boot_lock.exists()  # the sweep's
    boot_lock.unlink()
    log = run_cli("flows.cli.evaluate", folder, "setup=knn", f"dataset.limit={EXAMPLES}", "classifier.folds=2",
                  "tracking.traces=3", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert "the configuration's whole result, one read" in log
    imported = {line.rsplit("|", 1)[-1].strip() for line in log.splitlines() if line.startswith("import time:")}
    assert "mlflow" in imported and "flows.run.configuration" in imported
    assert not {name for name in imported if name.split(".")[0] == "prefect"}  # nothing to orchestrate: no Prefect
    assert not boot_lock.exists()  # ... and no server booted beside it (on 2 cores that slows the command 1-2 s)
    first, again = configuration_runs(uri)[0], configuration_runs(uri)[-1]
    traces = traces_of(uri, again)
    assert len(traces) == again.data.metrics["traces_written"] == 3
    first_traces = traces_of(uri, first)
    for example_id, trace in traces.items():
        assert span(trace, "RETRIEVER").outputs == span(first_traces[example_id], "RETRIEVER").outputs


@pytest.mark.slow  # two more commands (~20 s); the default run stays near 8 minutes
def test_a_cached_configuration_links_the_traces_of_the_run_that_computed_it(traced_sweep):
    folder, uri = traced_sweep
    same = ("flows.cli.evaluate", folder, "setup=knn", f"dataset.limit={EXAMPLES}", "classifier.folds=2",
            "tracking.traces=all")
    run_cli(*same)
    first, again = configuration_runs(uri)[0], configuration_runs(uri)[-1]
    assert again.data.tags["opi.traces.from_run"] == first.info.run_id
    assert again.data.tags["opi.traces.key"] == first.data.tags["opi.traces.key"]
    assert again.data.metrics["traces_linked"] == again.data.metrics["traces_written"] == EXAMPLES
    assert first.data.metrics["traces_linked"] == 0
    # the run's Traces tab lists the very traces the first run wrote: nothing written again
    linked, written = traces_of(uri, again), traces_of(uri, first)
    assert {i: t.info.trace_id for i, t in linked.items()} == {i: t.info.trace_id for i, t in written.items()}
    # a trace deleted from the first run: its traces are no longer whole, so the next run writes its own
    client = mlflow.MlflowClient(uri)
    client.delete_traces(first.info.experiment_id, trace_ids=[next(iter(written.values())).info.trace_id])
    client.set_tag(again.info.run_id, "opi.traces.key", "gone")  # nor may the linking run stand in for it
    run_cli(*same)
    latest = configuration_runs(uri)[-1]
    assert "opi.traces.from_run" not in latest.data.tags and latest.data.metrics["traces_linked"] == 0
    assert latest.data.metrics["traces_written"] == EXAMPLES
    assert not {t.info.trace_id for t in traces_of(uri, latest).values()} & {t.info.trace_id for t in written.values()}


def test_traces_are_matched_on_the_result_the_examples_and_the_names_they_carry():
    context = TraceContext("1", "r1", "kNN | x | y", "kNN", "extractive", "local-clf", ("CODE", "local-clf"),
                           ("HUMAN", "dataset labels"), ("LLM_JUDGE", "m"), "m", 4, False)
    key = traces_key("configuration-a", context, ["a", "b"])
    elsewhere = TraceContext(**{**vars(context), "experiment_id": "2", "run_id": "r2", "result_from_cache": True})
    assert traces_key("configuration-a", elsewhere, ["a", "b"]) == key  # the same traces in another run
    assert traces_key("configuration-b", context, ["a", "b"]) != key
    assert traces_key("configuration-a", context, ["a"]) != key
    assert traces_key("configuration-a", TraceContext(**{**vars(context), "k": 8}), ["a", "b"]) != key
    assert traces_key(None, context, ["a"]) is None  # a vector store's result: never matched


@pytest.fixture
def process_tracking_uri():
    """write_traces sets MLflow's process-wide tracking URI: put it back after the test (conftest puts back the
    MLFLOW_TRACKING_URI it also sets)."""
    before = mlflow.get_tracking_uri()
    yield
    mlflow.set_tracking_uri(before)


def test_a_store_that_refuses_traces_costs_the_run_nothing_but_a_count(tmp_path, process_tracking_uri):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("e")
    run = client.create_run(experiment)
    rows = pd.DataFrame({"id": ["a"], "question": ["q"], "answer": ["g"], "relation": ["deductive"],
                         "generated_answer": ["x"], "predicted_relation": ["deductive"], "similarity": [0.5],
                         "answer_found": [1.0]})
    records = {"a": {"documents": [], "sentences": [], "evidence": [], "reader": None, "classifier_reply": None}}
    context = TraceContext("999", run.info.run_id, "kNN | x | y", "kNN", "extractive", "local-clf",
                           ("CODE", "local-clf"), ("HUMAN", "dataset labels"), ("LLM_JUDGE", "m"), "m", 4, False)
    count = write_traces(uri, context, rows, records, ["a"])  # experiment 999 does not exist
    assert (count.expected, count.written, count.failed) == (1, 0, 1)


@pytest.mark.slow
def test_a_process_killed_while_writing_traces_leaves_the_metrics_and_the_next_run_completes(tmp_path):
    examples = ["dataset.limit=60", "classifier.folds=2", "setup=knn"]
    run_cli("flows.cli.evaluate", tmp_path, *examples, "tracking.traces=none")  # the result, cached
    database = tmp_path / "mlflow.db"

    def traces_stored() -> int:
        with sqlite3.connect(database) as connection:
            return connection.execute("SELECT COUNT(*) FROM trace_info").fetchone()[0]

    process, log = start_cli(tmp_path, *examples, "tracking.traces=all")
    try:
        wait_for(lambda: traces_stored() > 0 or process.poll() is not None, 300, "the first trace")
        assert process.poll() is None, log.read_text()[-3000:]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    uri = f"sqlite:///{database}"
    killed = configuration_runs(uri)[-1]
    assert 0 < traces_stored() < 60 and killed.info.status == "RUNNING"
    assert {"bertsim", "lrcr", "opi_1"} <= set(killed.data.metrics)  # logged before the traces
    assert "predictions.parquet" in {a.path for a in mlflow.MlflowClient(uri).list_artifacts(killed.info.run_id)}
    run_cli("flows.cli.evaluate", tmp_path, *examples, "tracking.traces=all")
    after = {run.info.run_id: run for run in configuration_runs(uri)}
    assert after[killed.info.run_id].info.status == "FAILED"  # the dead process's run, said as such
    last = configuration_runs(uri)[-1]
    assert last.info.status == "FINISHED" and last.data.metrics["traces_written"] == 60
    assert len(traces_of(uri, last)) == 60
    assert last.data.metrics["bertsim"] == killed.data.metrics["bertsim"]


@pytest.mark.slow
def test_two_sweeps_at_once_on_one_sqlite_store_lose_nothing(tmp_path):
    sweeps = []
    for setups, cache in (("knn,bm25", "cache-a"), ("tfidf,dps", "cache-b")):
        command = cli_command("flows.cli.evaluate", tmp_path, "-m", f"setup={setups}", "dataset.limit=24",
                              "classifier.folds=2", "report.enabled=false", "tracking.traces=all",
                              f"hydra.sweep.dir={tmp_path}/{cache}-multirun", cache=cache)
        log = open(tmp_path / f"{cache}.log", "w")
        sweeps.append((subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                                        env=cli_environment(tmp_path / cache if False else tmp_path)), log))
    for process, log in sweeps:
        assert process.wait(timeout=1200) == 0, Path(log.name).read_text()[-3000:]
        log.close()
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    runs = configuration_runs(uri)
    assert sorted(run.data.tags["opi.setup"] for run in runs) == ["BM25", "DPS", "TF-IDF", "kNN"]
    for run in runs:
        assert run.info.status == "FINISHED" and {"bertsim", "lrcr", "opi_1"} <= set(run.data.metrics)
        assert run.data.metrics["traces_written"] == 24 and run.data.metrics["traces_failed"] == 0
        assert len(traces_of(uri, run)) == 24
