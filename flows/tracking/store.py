"""The MLflow store a run writes to: a client for it (no process-wide MLflow state), the experiment (created under
a file lock beside a local SQLite store, whose first use migrates it), and runs that a dead process left RUNNING.

A local SQLite store another process is writing is waited for, not failed on: each time MLflow takes a connection
to it, one held by another writer is waited for up to ``BUSY_WAIT_S`` (said once per wait); past that, MLflow's
"database is locked" is one line saying the store is busy, not damaged (``flows.base.errors``), and MLflow's own
logged traceback of it stays off the console."""
from __future__ import annotations

import logging
import sqlite3
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from filelock import FileLock
from mlflow import MlflowClient
from sqlalchemy import event
from sqlalchemy.pool import Pool

from flows.base import store_checks
from flows.base.errors import CommandError, from_sqlite
from flows.base.store_checks import MLFLOW_FIX, PLACES, busy, intact_sqlite, tracking_server_problem
from flows.tracking.owners import gone
from opi.schemas import TrackingConfig
from opi.memory import MEMORY
from opi.sqlite_file import sqlite_problem

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


def wait_while_busy(connection, record, proxy) -> None:
    """Pool checkout: an SQLite file another process holds (a writer's lock) is waited for, up to
    ``BUSY_WAIT_S`` with a line saying so, before MLflow uses the connection (MLflow's own wait is 20 s, and none
    when it first opens the store); the connection then waits as long by itself."""
    if not isinstance(connection, sqlite3.Connection):
        return
    if "opi.path" not in record.info:
        try:
            row = connection.execute("PRAGMA database_list").fetchone()
        except sqlite3.Error:
            return
        record.info["opi.path"] = row[2] if row else ""
    path, wait = record.info["opi.path"], store_checks.BUSY_WAIT_S
    if not path:
        return
    deadline = None
    try:
        with suppress(sqlite3.Error):
            connection.execute("PRAGMA busy_timeout=0")
        while True:
            try:
                connection.execute("SELECT count(*) FROM sqlite_master").fetchall()  # read to the end: no lock kept
                return
            except sqlite3.Error as err:
                if not busy(err):
                    return  # MLflow's own use says what it is
            if deadline is None:
                deadline = time.monotonic() + wait
                log.warning("%s is busy (another process is writing to it): waiting up to %.0f s", path, wait)
            if time.monotonic() >= deadline:
                return  # MLflow's use fails as busy: one line (flows.base.errors)
            time.sleep(0.25)
    finally:
        with suppress(sqlite3.Error):  # a connection SQLite refuses: MLflow's use of it says why
            connection.execute(f"PRAGMA busy_timeout={int(wait * 1000)}")


class StoreProblemOffConsole(logging.Filter):
    """MLflow logs the SQLAlchemy error of a full, read-only or busy store with its traceback before raising it:
    the raised error is the one line the command ends with (its traceback in the run's log file)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or not (from_sqlite(error) and sqlite_problem(error))


if not getattr(Pool, "_opi_waits_while_busy", False):
    event.listen(Pool, "checkout", wait_while_busy)
    Pool._opi_waits_while_busy = True
    logging.getLogger("mlflow.store.db.utils").addFilter(StoreProblemOffConsole())


def mlflow_store_in_use(tracking_uri: str) -> None:
    """The local SQLite store this process writes or reads, for naming it in a store error."""
    if tracking_uri.startswith("sqlite:///"):
        PLACES["tracking.tracking_uri"] = Path(tracking_uri.removeprefix("sqlite:///")).expanduser().resolve()


def existing_store(tracking_uri: str) -> MlflowClient:
    """A client for a store a read-only command reads (opi-report, opi-annotate, opi-nightly's baseline commands):
    one that does not exist is said in one line, not created; a damaged one too."""
    mlflow_store_in_use(tracking_uri)
    if tracking_uri.startswith("sqlite:///"):
        path = Path(tracking_uri.removeprefix("sqlite:///"))
        if not path.is_file():
            raise CommandError(f"no MLflow store at {path}: run a sweep first (opi-eval -m ...), or name the store "
                               "with --tracking-uri")
        intact_sqlite(path, "--tracking-uri", MLFLOW_FIX)
    elif tracking_uri.startswith(("file:", "/", ".")):  # a folder store, which MLflow would create
        folder = Path(tracking_uri.removeprefix("file://").removeprefix("file:"))
        if folder.is_file():  # a SQLite store named as a path: MLflow would take it for a folder store
            raise CommandError(f"{tracking_uri} is a file, and a path names a folder store: name a SQLite store as "
                               f"--tracking-uri sqlite:///{folder.expanduser().resolve()}")
        if not folder.is_dir():
            raise CommandError(f"no MLflow store at {folder}: run a sweep first (opi-eval -m ...), or name the "
                               "store with --tracking-uri")
    problem = tracking_server_problem(tracking_uri, "--tracking-uri")
    if problem:
        raise CommandError(problem)
    return MlflowClient(tracking_uri)


def open_experiment(tracking: TrackingConfig, experiment: str | None = None) -> tuple[MlflowClient, str]:
    """(client, experiment id) for ``tracking``'s store and experiment (or ``experiment``), the experiment created
    if it is new; the first time in a process, runs a dead process left RUNNING there are marked FAILED."""
    name = experiment or tracking.experiment
    mlflow_store_in_use(tracking.tracking_uri)
    with store_setup_lock(tracking.tracking_uri):  # two processes creating a new SQLite store would race
        client = MlflowClient(tracking.tracking_uri)
        found = client.get_experiment_by_name(name)
        if found is None:
            experiment_id = client.create_experiment(name, artifact_location=artifact_uri(tracking),
                                                     tags=EXPERIMENT_TAGS)
        else:
            experiment_id = found.experiment_id
            if found.tags.get(KIND_TAG, EARLIER_KIND) == EARLIER_KIND:
                client.set_experiment_tag(experiment_id, KIND_TAG, EXPERIMENT_TAGS[KIND_TAG])
    if MEMORY.first_time("checked experiments", (tracking.tracking_uri, experiment_id)):
        fail_orphans(client, experiment_id)
    return client, experiment_id


def artifact_uri(tracking: TrackingConfig) -> str | None:
    """A new experiment's artifact location: a folder made and given as a file URI, a URI as it is, or None for a
    tracking server's own (``--artifacts-destination``, served through it to every machine of the team)."""
    location = tracking.artifacts()
    if location is None or "://" in location:
        return location
    folder = Path(location).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder.as_uri()


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
