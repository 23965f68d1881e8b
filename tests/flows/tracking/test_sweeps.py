"""Finding a sweep in the store, and saying why its report covers fewer configurations than it planned."""
from types import SimpleNamespace

import mlflow
import pytest

from flows.base.errors import CommandError
from flows.tracking.owners import this_process
from flows.tracking.sweeps import configuration_names, described, display_names, find_sweep, sweep_incomplete
from opi.naming import Described


def parent(status: str, planned: str | None):
    tags = {"opi.planned_configurations": planned} if planned else {}
    return SimpleNamespace(info=SimpleNamespace(status=status), data=SimpleNamespace(tags=tags))


def test_why_a_sweep_is_incomplete():
    assert sweep_incomplete(parent("FINISHED", "13"), 13) is None
    assert sweep_incomplete(parent("FINISHED", "13"), 11) == ("only 11 of 13 configurations have results; this "
                                                              "report covers only those")
    assert sweep_incomplete(parent("KILLED", "13"), 4).startswith("it ended KILLED before it finished; 4 of 13")
    assert sweep_incomplete(parent("FINISHED", None), 4) is None
    # opi-report on a sweep another process is running; the sweep's own report at its end (its process's run)
    running = parent("RUNNING", "13")
    running.data.tags.update({"opi.host": "elsewhere", "opi.pid": "12"})
    assert sweep_incomplete(running, 2) == (
        "it is still running: 2 of 13 configurations have results so far, and this report covers only those (the "
        "sweep writes its whole report when it ends)")
    assert sweep_incomplete(running, 13) is None
    running.data.tags.update(zip(("opi.host", "opi.pid"), this_process()))
    assert sweep_incomplete(running, 2) == "only 2 of 13 configurations have results; this report covers only those"
    # a race's report leaves out those it eliminated, by design: only what is missing besides them is said
    assert sweep_incomplete(parent("FINISHED", "13"), 4, eliminated=9) is None
    assert sweep_incomplete(parent("FINISHED", "13"), 4, eliminated=8).startswith("only 4 of 13 configurations")


def test_a_store_without_the_experiment_or_a_sweep_is_one_line(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    with pytest.raises(CommandError, match="no MLflow experiment 'opi' in this store: run a sweep first"):
        find_sweep(client, "opi", None)
    client.create_experiment("opi", artifact_location=str(tmp_path / "a"))
    with pytest.raises(CommandError, match="experiment 'opi' has no finished sweep with child runs"):
        find_sweep(client, "opi", None)


def test_a_newer_sweep_without_results_is_said_when_the_latest_with_results_is_taken(tmp_path, caplog):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.create_experiment("opi", artifact_location=str(tmp_path / "a"))
    finished = client.create_run(experiment, start_time=1_000, tags={"opi.role": "sweep"}).info.run_id
    client.create_run(experiment, start_time=1_001, tags={"mlflow.parentRunId": finished})
    stopped = client.create_run(experiment, start_time=2_000, tags={"opi.role": "sweep"}).info.run_id
    client.set_terminated(stopped, "KILLED")
    with caplog.at_level("WARNING", logger="opi"):
        assert find_sweep(client, "opi", None) == finished
    assert [r.getMessage() for r in caplog.records if r.name == "opi"] == [
        f"the newest sweep (run {stopped}, stopped) has no configuration's results; taking the latest sweep that "
        f"has some, run {finished} (--sweep names another)"]
    caplog.clear()
    client.create_run(experiment, start_time=3_000, tags={"opi.role": "sweep"})
    with caplog.at_level("WARNING", logger="opi"):
        assert find_sweep(client, "opi", None) == finished
    assert ", still running) has no configuration's results yet, nor 1 older sweep; taking" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="opi"):
        assert find_sweep(client, "opi", finished) == finished
    assert not [r for r in caplog.records if r.name == "opi"]


def fake_run(run_id: str, name: str, tags: dict | None = None, **params: str):
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id, run_name=name),
                           data=SimpleNamespace(params=params, tags=tags or {}))


def short_run(run_id: str, name: str, retrieval: str, reader: str, classifier: str | None, **params: str):
    """A run as OPI logs it now: a short name, its parts and full description in tags."""
    tags = {"opi.retrieval": retrieval, "opi.reader": reader,
            "opi.description": " | ".join([retrieval, reader, *([classifier] if classifier else [])]),
            **({"opi.classifier": classifier} if classifier else {})}
    return fake_run(run_id, name, tags, **params)


def test_configurations_that_share_a_name_are_told_apart_by_the_settings_they_differ_in():
    runs = [fake_run("a1", "kNN | x", **{"retriever.k": "2", "seed": "0"}),
            fake_run("a2", "kNN | x", **{"retriever.k": "8", "seed": "0"}),
            fake_run("b1", "BM25 | x", **{"retriever.k": "4"}),
            fake_run("c1", "DPS | x"), fake_run("c2", "DPS | x")]
    assert configuration_names(runs) == {"a1": "kNN | x [retriever.k=2]", "a2": "kNN | x [retriever.k=8]",
                                         "b1": "BM25 | x", "c1": "DPS | x [run c1]", "c2": "DPS | x [run c2]"}


def test_the_stable_names_come_from_the_description_whatever_the_run_is_called():
    """The nightly gate matches configurations by these: a run renamed to its short name keeps its full one."""
    before = [fake_run("a1", "kNN | extractive | local-clf", **{"retriever.k": "2"}),
              fake_run("a2", "kNN | extractive | local-clf", **{"retriever.k": "8"}),
              fake_run("b1", "BM25 | extractive | local-clf", **{"retriever.k": "4"})]
    now = [short_run("a1", "kNN k=2", "kNN", "extractive", "local-clf", **{"retriever.k": "2"}),
           short_run("a2", "kNN k=8", "kNN", "extractive", "local-clf", **{"retriever.k": "8"}),
           short_run("b1", "BM25", "BM25", "extractive", "local-clf", **{"retriever.k": "4"})]
    assert configuration_names(now) == configuration_names(before) == {
        "a1": "kNN | extractive | local-clf [retriever.k=2]", "a2": "kNN | extractive | local-clf [retriever.k=8]",
        "b1": "BM25 | extractive | local-clf"}


def test_display_names_say_what_varies_and_the_shared_parts_once():
    now = [short_run("a1", "kNN", "kNN", "extractive", "local-clf", **{"retriever.k": "2"}),
           short_run("a2", "kNN", "kNN", "extractive", "local-clf", **{"retriever.k": "8"}),
           short_run("b1", "BM25", "BM25", "gpt-4o", "local-clf", **{"retriever.k": "4"})]
    names, fixed = display_names(now)
    assert names == {"a1": "kNN · extractive k=2", "a2": "kNN · extractive k=8", "b1": "BM25 · gpt-4o"}
    assert fixed == {"classifier": "local-clf"}
    legacy = [fake_run("a1", "kNN | extractive"), fake_run("b1", "A-Four | extractive")]  # before the tags
    assert described(legacy[0]) == Described("kNN", "extractive", None, {})
    assert display_names(legacy) == ({"a1": "kNN", "b1": "A-Four"}, {"reader": "extractive"})
