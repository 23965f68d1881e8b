import logging
from types import SimpleNamespace

import pytest
from mlflow import MlflowClient
from omegaconf import OmegaConf

from flows.tracking import parent
from flows.tracking.parent import close_if_open, MultirunParentRun, parent_name, sweep_params, swept
from flows.tracking.runs import PARENT_ENV
from opi.report import ReportSettings
from opi.schemas import ReportConfig, TrackingConfig
from tests.helpers.mlflow_stores import empty_store, experiment


def test_the_parent_is_named_by_its_experiment_and_what_the_command_line_sweeps():
    config = hydra_config({"setup": "knn,bm25"}, ["retriever.k=2,4", "dataset.limit=5",
                                                  "tracking.tracking_uri=sqlite:////tmp/x/mlflow.db"])
    assert swept(config) == {"setup": "knn,bm25", "retriever.k": "2,4"}
    assert parent_name(config, "smoke") == "smoke: retriever.k=2,4"  # the experiment's own sweep: its name says it
    assert parent_name(hydra_config({"setup": "a,b"}, ["dataset.limit=5"]), "paper_grid") == "paper_grid"
    assert parent_name(hydra_config({}, ["setup=knn,bm25", "llm.api_key=sk-abcdefghijkl,sk-mnopqrstuvwx"]),
                       "sweep") == "sweep: setup=knn,bm25"  # a secret-named setting is never in a name


KEY = "sk-Abcdefghijklmnopqrstu12345"  # key-looking (upper case, digits): redacted wherever it is shown


def hydra_config(params: dict | None, task: list[str]):
    return OmegaConf.create({"hydra": {"sweeper": {"params": params}, "overrides": {"task": task}}})


# swept


def test_the_sweepers_own_params_are_swept_as_written():
    assert swept(hydra_config({"setup": "knn,bm25", "retriever.k": "2,4"}, [])) == {"setup": "knn,bm25",
                                                                                  "retriever.k": "2,4"}
    assert swept(hydra_config(None, [])) == {}  # no sweeper params at all
    assert swept(hydra_config({}, ["dataset.limit=5"])) == {}  # a single value is no sweep


def test_the_command_line_adds_sweeps_replaces_swept_values_and_pins_swept_settings():
    config = hydra_config({"setup": "knn,bm25", "retriever.k": "2,4", "seed": "0,1"},
                          ["retriever.k=8,16", "+llm.temperature=0,0.5", "seed=3", "retriever.k2=range(1,4)"])
    assert swept(config) == {"setup": "knn,bm25", "retriever.k": "8,16", "llm.temperature": "0,0.5",
                             "retriever.k2": "range(1,4)"}  # seed=3: one value, no longer swept


def test_a_command_line_the_parser_refuses_leaves_the_sweepers_params():
    assert swept(hydra_config({"setup": "knn,bm25"}, ["retriever.k=[2,"])) == {"setup": "knn,bm25"}


# sweep_params


def test_the_parents_params_are_the_experiment_the_command_line_and_each_swept_setting():
    config = hydra_config({"setup": "knn,bm25"}, ["retriever.k=2,4"])
    params = sweep_params(config, "smoke", "retriever.k=2,4")
    assert [(p.key, p.value) for p in params] == [("experiment", "smoke"), ("overrides", "retriever.k=2,4"),
                                                  ("sweep.setup", "knn,bm25"), ("sweep.retriever.k", "2,4")]


def test_no_secret_is_a_param_and_long_values_are_cut_to_mlflows_limit():
    config = hydra_config({}, [f"llm.api_key={KEY},{KEY}x", f"llm.base_url=http://u:pw@h/a,http://u:pw@h/b",
                               "retriever.k=" + ",".join(str(k) for k in range(1, 3000))])
    params = {p.key: p.value for p in sweep_params(config, "sweep", "overrides")}
    assert "sweep.llm.api_key" not in params  # a secret-named setting is left out
    assert params["sweep.llm.base_url"] == "http://***@h/a,http://***@h/b"  # credentials in a value: redacted
    assert len(params["sweep.retriever.k"]) == 6000
    assert params["sweep.retriever.k"] == ",".join(str(k) for k in range(1, 3000))[:6000]


# parent_name


def test_the_name_is_the_experiment_alone_when_the_command_line_sweeps_nothing_new():
    assert parent_name(hydra_config({"setup": "knn,bm25"}, []), "smoke") == "smoke"
    assert parent_name(hydra_config({"setup": "knn,bm25"}, ["dataset.limit=3"]), "smoke") == "smoke"


def test_the_name_adds_each_command_line_sweep_in_order():
    config = hydra_config({"setup": "knn,bm25"}, ["retriever.k=2,4", "seed=0,1"])
    assert parent_name(config, "smoke") == "smoke: retriever.k=2,4 seed=0,1"


def test_the_name_has_no_credentials_and_at_most_120_characters():
    config = hydra_config({}, ["llm.base_url=http://u:pw@h/a,http://u:pw@h/b"])
    assert parent_name(config, "sweep") == "sweep: llm.base_url=http://***@h/a,http://***@h/b"
    long = parent_name(hydra_config({}, ["retriever.k=" + ",".join(map(str, range(1, 100)))]), "sweep")
    assert len(long) == 120 and long.startswith("sweep: retriever.k=1,2,3")


# close_if_open


def test_a_parent_left_running_is_closed_as_killed_when_stopped_and_a_finished_one_is_left(tmp_path, monkeypatch):
    monkeypatch.setattr(parent, "exiting", lambda: True)  # a signal or Ctrl-C stopped the process
    uri = empty_store(tmp_path)
    client = MlflowClient(uri)
    experiment_id = experiment(client, tmp_path)
    running, finished = (client.create_run(experiment_id).info.run_id for _ in range(2))
    client.set_terminated(finished, status="FINISHED")
    close_if_open(uri, running)
    close_if_open(uri, finished)
    assert client.get_run(running).info.status == "KILLED"
    assert "opi.failure" not in client.get_run(running).data.tags
    assert client.get_run(finished).info.status == "FINISHED"


def test_a_parent_an_error_ended_is_failed_and_says_why(tmp_path, monkeypatch):
    from flows.base import errors

    monkeypatch.setattr(parent, "exiting", lambda: False)
    monkeypatch.setattr(errors, "_LAST_ERROR", [])
    errors.keep_last_error()
    errors.keep_last_error()  # once is enough
    logging.getLogger("opi").error("LLM endpoint problem: %s gave no answer", "http://127.0.0.1:9/v1")
    uri = empty_store(tmp_path)
    client = MlflowClient(uri)
    run_id = client.create_run(experiment(client, tmp_path)).info.run_id
    close_if_open(uri, run_id)
    run = client.get_run(run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags["opi.failure"] == "LLM endpoint problem: http://127.0.0.1:9/v1 gave no answer"
    assert run.data.tags["mlflow.note.content"] == ("**Failed.** LLM endpoint problem: http://127.0.0.1:9/v1 gave no "
                                                    "answer")
    assert sum(isinstance(h, errors._LastError) for h in logging.getLogger("opi").handlers) == 1


# the callback


@pytest.fixture
def callback_config(tmp_path, monkeypatch):
    """A multirun's config as the callback reads it, with a store of the test's own; the parent run id variable
    put back afterwards; what the callback registers to run at exit, kept."""
    monkeypatch.setenv(PARENT_ENV, "earlier")
    monkeypatch.delenv(PARENT_ENV)
    at_exit = []
    monkeypatch.setattr(parent, "atexit", SimpleNamespace(register=lambda *call: at_exit.append(call)))
    uri = empty_store(tmp_path)

    def make(enabled=True, report=False, label=None, task=("retriever.k=2,4", f"llm.api_key={KEY}")):
        return OmegaConf.create({
            "tracking": OmegaConf.structured(TrackingConfig(enabled=enabled, tracking_uri=uri, label=label,
                                                            artifact_location=str(tmp_path / "artifacts"))),
            "report": OmegaConf.structured(ReportConfig(enabled=report)),
            "metrics": {"beta": 2.0}, "seed": 7, "paths": {"cache_dir": str(tmp_path / "cache")},
            "hydra": {"sweeper": {"params": {"setup": "knn,bm25"}}, "overrides": {"task": list(task)},
                      "runtime": {"choices": {"experiment": "smoke"}}}})

    return make, MlflowClient(uri), at_exit


def test_without_tracking_the_callback_opens_no_parent(callback_config):
    make, client, at_exit = callback_config
    MultirunParentRun().on_multirun_start(make(enabled=False))
    assert PARENT_ENV not in parent.os.environ and at_exit == []
    assert client.get_experiment_by_name("opi") is None
    MultirunParentRun().on_multirun_end(make(enabled=False))  # nothing to close


def test_the_parent_is_opened_named_tagged_with_its_params_and_closed_if_the_process_stops(callback_config,
                                                                                           monkeypatch):
    make, client, at_exit = callback_config
    monkeypatch.setattr(parent, "planned", lambda: 4)
    MultirunParentRun().on_multirun_start(make(label="night-1"))
    run_id = parent.os.environ[PARENT_ENV]  # the jobs' parent
    run = client.get_run(run_id)
    assert run.info.status == "RUNNING" and run.info.run_name == "smoke: retriever.k=2,4"
    assert run.info.experiment_id == client.get_experiment_by_name("opi").experiment_id
    tags = run.data.tags
    assert tags["opi.role"] == "sweep" and tags["opi.planned_configurations"] == "4"
    assert tags["opi.label"] == "night-1" and tags["opi.pid"] == str(parent.os.getpid())
    assert run.data.params == {"experiment": "smoke", "overrides": "retriever.k=2,4 llm.api_key=***",
                               "sweep.setup": "knn,bm25", "sweep.retriever.k": "2,4"}
    assert at_exit == [(close_if_open, client.tracking_uri, run_id)]


def test_a_sweep_of_unknown_size_has_no_planned_tag(callback_config, monkeypatch):
    make, client, _ = callback_config
    monkeypatch.setattr(parent, "planned", lambda: None)
    MultirunParentRun().on_multirun_start(make(task=()))
    run = client.get_run(parent.os.environ[PARENT_ENV])
    assert "opi.planned_configurations" not in run.data.tags
    assert run.info.run_name == "smoke" and run.data.params["overrides"] == "defaults"


def test_the_parent_is_closed_finished_when_the_multirun_ends(callback_config, monkeypatch, caplog):
    make, client, _ = callback_config
    monkeypatch.setattr(parent, "planned", lambda: None)
    monkeypatch.setattr(parent, "log_sweep_report", lambda *a, **k: pytest.fail("report.enabled is false"))
    MultirunParentRun().on_multirun_start(make())
    run_id = parent.os.environ[PARENT_ENV]
    with caplog.at_level(logging.INFO, logger="opi"):
        MultirunParentRun().on_multirun_end(make())
    assert PARENT_ENV not in parent.os.environ
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and "opi.report_error" not in run.data.tags
    assert f"viewStateShareKey={run_id}" in caplog.text  # where to look: the sweep's runs in the MLflow UI
    assert "shows the 0 configurations" in caplog.text and "such as opi_1" in caplog.text  # no children: no tag


def test_a_report_that_fails_leaves_the_parent_finished_and_says_how_to_rebuild_it(callback_config, monkeypatch,
                                                                                   caplog):
    make, client, _ = callback_config
    monkeypatch.setattr(parent, "planned", lambda: None)
    asked = []

    def failing(client, run_id, settings, cache_dir):
        asked.append((run_id, settings, cache_dir))
        raise ValueError("no predictions")

    monkeypatch.setattr(parent, "log_sweep_report", failing)
    config = make(report=True)
    MultirunParentRun().on_multirun_start(config)
    run_id = parent.os.environ[PARENT_ENV]
    with caplog.at_level(logging.WARNING, logger="opi"):
        MultirunParentRun().on_multirun_end(config)
    assert asked == [(run_id, ReportSettings(ReportConfig(enabled=True), 2.0, 7), config.paths.cache_dir)]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["opi.report_error"] == "ValueError: no predictions"
    assert (f"sweep report failed (ValueError: no predictions); rebuild it with: opi-report --sweep {run_id}"
            in caplog.text)


def test_the_closing_hint_names_the_metric_the_sweeps_table_is_ranked_by():
    # a race by ndcg_at_4 or opi_2 was hinted as bertsim: only opi_1 and bertsim were passed through
    assert [parent.hint_metric(m) for m in ("opi_1", "bertsim", "ndcg_at_4", "opi_2", "opi_1_calibrated")] == \
        ["opi_1", "bertsim", "ndcg_at_4", "opi_2", "opi_1_calibrated"]
    assert parent.hint_metric(parent.NOT_RANKED) == "bertsim" and parent.NOT_RANKED == "none: different yardsticks"
