"""MLflow tracking: one run per configuration, a parent run per multirun (a Hydra callback), no secrets."""
from __future__ import annotations

import atexit
import logging
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from flows.owners import gone, this_process
from flows.secrets import redact_text, redact_values
from opi.schemas import ReportConfig, TrackingConfig

log = logging.getLogger("opi")
PARENT_ENV = "OPI_PARENT_RUN_ID"
# MLflow 3's UI opens an experiment of unknown kind on its GenAI traces page; ours are model-evaluation runs
KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_TAGS = {KIND_TAG: "custom_model_development"}
SECRET_WORDS = ("api_key", "apikey", "secret", "token", "password")


def is_secret(key: str) -> bool:
    return any(word in key.lower() for word in SECRET_WORDS)


def redact(config: dict[str, Any]) -> dict[str, Any]:
    """The config without secret-looking keys (an api_key never reaches MLflow, even by mistake) and without
    credentials written into URLs."""
    return {k: redact(v) if isinstance(v, dict) else redact_values(v) for k, v in config.items() if not is_secret(k)}


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        elif not is_secret(name):
            flat[name] = redact_values(value)
    return flat


def _mlflow(tracking: TrackingConfig):
    import mlflow

    uri = tracking.tracking_uri
    mlflow.set_tracking_uri(uri)
    with store_setup_lock(uri):  # two processes creating a new SQLite store at once would race its migrations
        experiment = mlflow.get_experiment_by_name(tracking.experiment)
        if experiment is None:
            location = Path(tracking.artifact_location).resolve()
            location.mkdir(parents=True, exist_ok=True)
            mlflow.create_experiment(tracking.experiment, artifact_location=location.as_uri(),
                                     tags=EXPERIMENT_TAGS)
        elif KIND_TAG not in experiment.tags:
            mlflow.MlflowClient().set_experiment_tag(experiment.experiment_id, KIND_TAG, EXPERIMENT_TAGS[KIND_TAG])
    mlflow.set_experiment(tracking.experiment)
    if uri not in _ORPHANS_CHECKED:
        _ORPHANS_CHECKED.add(uri)
        fail_orphans(mlflow.MlflowClient(), mlflow.get_experiment_by_name(tracking.experiment).experiment_id)
    return mlflow


_ORPHANS_CHECKED: set[str] = set()


@contextmanager
def store_setup_lock(uri: str):
    """An exclusive file lock beside a local SQLite store while it is created or opened (a no-op for servers)."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    from filelock import FileLock

    database = Path(uri.removeprefix("sqlite:///"))
    database.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(database.with_name(database.name + ".setup-lock")):
        yield


def run_tags(tracking: TrackingConfig) -> dict[str, str]:
    """Tags of every run OPI opens: its owner process (for fail_orphans) and the sweep's label, if any."""
    host, pid = this_process()
    return {"opi.host": host, "opi.pid": pid, **({"opi.label": tracking.label} if tracking.label else {})}


def fail_orphans(client, experiment_id: str) -> None:
    """Runs still RUNNING whose process on this machine is gone (killed, crashed) are marked FAILED, so no killed
    sweep looks unfinished-but-alive, or successful, in the UI."""
    for run in client.search_runs([experiment_id], "attributes.status = 'RUNNING'", max_results=1000):
        tags = run.data.tags
        if not tags.get("opi.pid") or not gone(tags.get("opi.host", ""), tags["opi.pid"]):
            continue  # not ours to judge, or alive: another sweep in progress
        client.set_tag(run.info.run_id, "opi.orphaned", f"process {tags['opi.pid']} ended without closing this run")
        client.set_terminated(run.info.run_id, status="FAILED")
        log.warning("MLflow run %s (%s) was left running by a process that no longer exists: marked FAILED",
                    run.info.run_id, run.info.run_name)


def log_run(tracking: TrackingConfig, run_name: str, config: dict[str, Any], metrics: dict[str, float],
            tables: dict[str, Any], tags: dict[str, str]) -> str:
    """Log one configuration's run (nested under the multirun parent when there is one); returns its id.
    ``config``: its effective settings as plain data (params and config.yaml)."""
    from mlflow.entities import Metric, Param

    mlflow = _mlflow(tracking)
    client = mlflow.MlflowClient()
    experiment_id = mlflow.get_experiment_by_name(tracking.experiment).experiment_id
    parent = os.environ.get(PARENT_ENV)
    all_tags = {**tags, **run_tags(tracking), **({"mlflow.parentRunId": parent} if parent else {})}
    run = client.create_run(experiment_id, run_name=run_name, tags=all_tags)
    try:
        now = int(time.time() * 1000)
        client.log_batch(run.info.run_id,
                         metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
                         params=[Param(k, str(v)[:6000]) for k, v in flatten(config).items()])
        with tempfile.TemporaryDirectory() as folder:
            for name, frame in tables.items():
                path = Path(folder) / name
                if name.endswith(".parquet"):
                    frame.to_parquet(path, index=False)
                else:
                    frame.to_csv(path, index=False)
            (Path(folder) / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(redact(config))))
            client.log_artifacts(run.info.run_id, folder)
    except BaseException:
        client.set_terminated(run.info.run_id, status="FAILED")
        raise
    client.set_terminated(run.info.run_id, status="FINISHED")
    return run.info.run_id


def _close_if_open(tracking_uri: str, run_id: str) -> None:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri)
    if client.get_run(run_id).info.status == "RUNNING":
        client.set_terminated(run_id, status="KILLED")


def validate_before_work(config: DictConfig) -> int | None:
    """The sweep's base configuration and its data, checked before a parent run or Prefect's server exists (a
    problem exits 2 with one line); then Prefect's temporary server boots in the background while jobs compose.
    Returns how many configurations the sweep runs (None when only Hydra's sweeper can tell)."""
    import copy

    from omegaconf import open_dict

    from flows.config import typed
    from flows.entry import EXIT_USER_ERROR, composed, run_or_explain
    from flows.evaluate import load_data, prepared
    from flows.prefect_runtime import start_prefect_server_early
    from flows.progress import start_sweep, sweep_size

    composed()
    base = copy.deepcopy(config)
    with open_dict(base):
        base.pop("hydra", None)

    try:
        checked = typed(base, list(config.hydra.overrides.task))
    except ValueError as err:
        log.error("invalid configuration: %s", err)
        raise SystemExit(EXIT_USER_ERROR) from None
    checked = run_or_explain(prepared, checked)
    size = sweep_size(list(config.hydra.overrides.task), dict(config.hydra.sweeper.params or {}))
    data = load_data(checked)
    log.info("%s configurations on %s (%d examples), reader %s, classifier %s, gold relations: %s; results to "
             "MLflow experiment %r", size or "the swept", data.report.source, len(data.examples), checked.llm.name,
             getattr(checked.classifier, "name", "custom"), checked.relations.gold, checked.tracking.experiment)
    start_sweep(size)
    run_or_explain(start_prefect_server_early)
    return size


class MultirunParentRun(Callback):
    """Opens a parent MLflow run when a multirun starts; every job becomes its child; closes it at the end."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        planned = validate_before_work(config)
        tracking: TrackingConfig = OmegaConf.to_object(config.tracking)
        if not tracking.enabled:
            return
        mlflow = _mlflow(tracking)
        overrides = redact_text(" ".join(config.hydra.overrides.task)) or "defaults"
        experiment = config.hydra.runtime.choices.get("experiment") or "sweep"
        experiment_id = mlflow.get_experiment_by_name(tracking.experiment).experiment_id
        run = mlflow.MlflowClient().create_run(experiment_id, run_name=f"{experiment} | {overrides}"[:200],
                                               tags={"opi.role": "sweep", **run_tags(tracking),
                                                     **({"opi.planned_configurations": str(planned)} if planned else {})})
        os.environ[PARENT_ENV] = run.info.run_id
        # interrupted (Ctrl-C, an exception): the parent must not stay RUNNING; normal ends close it below first
        atexit.register(_close_if_open, tracking.tracking_uri, run.info.run_id)
        log.info("MLflow parent run %s (experiment %s)", run.info.run_id, tracking.experiment)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        parent = os.environ.pop(PARENT_ENV, None)
        if parent is None:
            return
        client = _mlflow(OmegaConf.to_object(config.tracking)).MlflowClient()
        from flows.report import log_sweep_report, log_sweep_summary
        from flows.progress import ui_pointer
        from opi.report import ReportSettings

        log_sweep_summary(client, parent)
        report: ReportConfig = OmegaConf.to_object(config.report)
        if report.enabled:
            try:
                log_sweep_report(client, parent, ReportSettings(report, config.metrics.beta, config.seed),
                                 cache_dir=config.paths.cache_dir)
            except Exception as err:  # the runs are logged; a report problem must not leave the parent open
                log.warning("sweep report failed (%s: %s); rebuild it with: opi-report --sweep %s",
                            type(err).__name__, err, parent)
                client.set_tag(parent, "opi.report_error", f"{type(err).__name__}: {err}"[:500])
        client.set_terminated(parent, status="FINISHED")
        run = client.get_run(parent)
        children = int(run.data.metrics.get("configurations", 0))
        log.info("%s", ui_pointer(config.tracking.tracking_uri, run.info.experiment_id, parent, children))
