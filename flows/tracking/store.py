"""The MLflow store a run writes to: a client for it (no process-wide MLflow state), the experiment (created under
a file lock beside a local SQLite store, whose first use migrates it), and runs that a dead process left RUNNING."""
from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock
from mlflow import MlflowClient

from flows.run.errors import CommandError
from flows.run.store_checks import MLFLOW_FIX, intact_sqlite
from flows.tracking.owners import gone
from opi.schemas import TrackingConfig

log = logging.getLogger("opi")
KIND_TAG = "mlflow.experimentKind"
# MLflow 3's UI labels the experiment "GenAI apps & agents": its GenAI view, where users arrive, holds each
# configuration's per-example traces; the runs table stays under "Model training"
EXPERIMENT_TAGS = {KIND_TAG: "genai_development"}
EARLIER_KIND = "custom_model_development"  # what OPI set before its runs had traces


@contextmanager
def store_setup_lock(uri: str):
    """An exclusive file lock beside a local SQLite store while it is created or opened (a no-op for servers)."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    database = Path(uri.removeprefix("sqlite:///"))
    database.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(database.with_name(database.name + ".setup-lock")):
        yield


def existing_store(tracking_uri: str) -> MlflowClient:
    """A client for a store a read-only command reads (opi-report, opi-annotate, opi-nightly's baseline commands):
    one that does not exist is said in one line, not created; a damaged one too."""
    if tracking_uri.startswith("sqlite:///"):
        path = Path(tracking_uri.removeprefix("sqlite:///"))
        if not path.is_file():
            raise CommandError(f"no MLflow store at {path}: run a sweep first (opi-eval -m ...), or name the store "
                               "with --tracking-uri")
        intact_sqlite(path, "--tracking-uri", MLFLOW_FIX)
    elif tracking_uri.startswith(("file:", "/", ".")):  # a folder store, which MLflow would create
        folder = Path(tracking_uri.removeprefix("file://").removeprefix("file:"))
        if not folder.is_dir():
            raise CommandError(f"no MLflow store at {folder}: run a sweep first (opi-eval -m ...), or name the "
                               "store with --tracking-uri")
    return MlflowClient(tracking_uri)


def open_experiment(tracking: TrackingConfig, experiment: str | None = None) -> tuple[MlflowClient, str]:
    """(client, experiment id) for ``tracking``'s store and experiment (or ``experiment``), the experiment created
    if it is new; the first time in a process, runs a dead process left RUNNING there are marked FAILED."""
    name = experiment or tracking.experiment
    with store_setup_lock(tracking.tracking_uri):  # two processes creating a new SQLite store would race
        client = MlflowClient(tracking.tracking_uri)
        found = client.get_experiment_by_name(name)
        if found is None:
            location = Path(tracking.artifact_location).resolve()
            location.mkdir(parents=True, exist_ok=True)
            experiment_id = client.create_experiment(name, artifact_location=location.as_uri(), tags=EXPERIMENT_TAGS)
        else:
            experiment_id = found.experiment_id
            if found.tags.get(KIND_TAG, EARLIER_KIND) == EARLIER_KIND:
                client.set_experiment_tag(experiment_id, KIND_TAG, EXPERIMENT_TAGS[KIND_TAG])
    if (tracking.tracking_uri, experiment_id) not in _ORPHANS_CHECKED:
        _ORPHANS_CHECKED.add((tracking.tracking_uri, experiment_id))
        fail_orphans(client, experiment_id)
    return client, experiment_id


_ORPHANS_CHECKED: set[tuple[str, str]] = set()


def fail_orphans(client: MlflowClient, experiment_id: str) -> None:
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
