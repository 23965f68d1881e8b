"""The nightly's baseline in MLflow: the champion (the sweep run tagged ``opi.baseline=champion``), another sweep's
parent run or a committed file of numbers; promotion, under a file lock so that of two nightlies that overlap one
decides (and promotes) at a time."""
from __future__ import annotations

import contextlib
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
from filelock import FileLock, Timeout
from mlflow import MlflowClient
from mlflow.entities import ViewType

from flows.nightly import CHAMPION, CHAMPION_TAG
from flows.base.errors import CommandError
from flows.tracking.store import existing_store
from flows.tracking.sweeps import (child_predictions, children, configuration_names, existing_run, naming_params,
                                   yardsticks)
from opi.data import DataError
from opi.naming import bracketed
from opi.regression import baseline_file_yardstick, read_baseline_file

log = logging.getLogger("opi")


@dataclass(frozen=True)
class Baseline:
    name: str  # "run <id>" or the file's path
    metrics: dict[str, dict[str, float]]  # configuration -> metrics
    rows: dict[str, pd.DataFrame] | None  # configuration -> per-example predictions (None: a file of numbers)
    yardsticks: dict[str, dict[str, str]]  # configuration (or "file") -> yardstick tags
    run_id: str | None = None
    settings: dict[str, dict[str, str]] | None = None  # configuration -> its settings (a file: its name's brackets)

    def settings_of(self) -> dict[str, dict[str, str]]:
        return self.settings if self.settings is not None else {name: bracketed(name)[1] for name in self.metrics}


def sweep_results(client: MlflowClient, parent: str
                  ) -> tuple[dict[str, dict[str, float]], dict[str, Any], dict[str, dict[str, str]]]:
    """(configuration -> metrics, configuration -> predictions, configuration -> settings) of a sweep's
    children."""
    runs = children(client, parent)
    names = configuration_names(runs)
    metrics = {names[run.info.run_id]: dict(run.data.metrics) for run in runs}
    rows = {name: frame for name, (_, frame) in child_predictions(client, parent, runs).items()}
    return metrics, rows, {names[run.info.run_id]: naming_params(run) for run in runs}


def labelled_sweep(client: MlflowClient, experiment_id: str, label: str) -> str:
    runs = client.search_runs([experiment_id], f"tags.`opi.role` = 'sweep' and tags.`opi.label` = '{label}'")
    if len(runs) != 1:
        raise RuntimeError(f"expected one sweep run labelled {label}, found {len(runs)}")
    return runs[0].info.run_id


def champion(client: MlflowClient, experiment_id: str | None) -> str | None:
    if experiment_id is None:
        return None
    runs = client.search_runs([experiment_id], f"tags.`{CHAMPION_TAG}` = '{CHAMPION}'",
                              order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0].info.run_id if runs else None


def deleted_champion(client: MlflowClient, experiment_id: str | None) -> None:
    """A champion that was deleted does not make a first night: the gate would pass everything unjudged."""
    if experiment_id is None:
        return
    gone = client.search_runs([experiment_id], f"tags.`{CHAMPION_TAG}` = '{CHAMPION}'", ViewType.DELETED_ONLY,
                              max_results=1, order_by=["attributes.start_time DESC"])
    if gone:
        run_id = gone[0].info.run_id
        raise CommandError(f"the champion sweep {run_id} is deleted, so there is no baseline to judge tonight "
                           f"against: restore it (mlflow runs restore --run-id {run_id}, with MLFLOW_TRACKING_URI "
                           f"set to this store), promote another (opi-nightly promote <parent run id>), or, to start "
                           f"again without one, remove it for good (mlflow gc) and run with --promote")


def load_baseline(client: MlflowClient, experiment_id: str | None, baseline: str) -> Baseline | None:
    """'champion', a parent run id or a json file; None if no champion. ``experiment_id`` is None on a first night,
    when the store has no experiment (and so no run) yet."""
    if baseline.endswith(".json"):
        try:
            return Baseline(baseline, read_baseline_file(baseline), None, {"file": baseline_file_yardstick(baseline)})
        except DataError as err:
            raise CommandError(str(err)) from None
    if baseline == CHAMPION:
        run_id = champion(client, experiment_id)
        if run_id is None:
            deleted_champion(client, experiment_id)
            return None
    elif experiment_id is None:
        raise CommandError(f"baseline run {baseline} cannot exist: this MLflow store has no experiment yet")
    else:
        run_id = baseline
    existing_run(client, run_id, "baseline run", "give a sweep's parent run id, 'champion' or a .json baseline file")
    metrics, rows, settings = sweep_results(client, run_id)
    if not metrics:
        raise CommandError(f"baseline run {run_id} has no configuration runs under it: is it a sweep's parent run?")
    return Baseline(f"run {run_id}", metrics, rows, yardsticks(children(client, run_id)), run_id, settings)


def sweep_run(client: MlflowClient, run_id: str, what: str) -> None:
    """A sweep's parent run of this store, or a one-line CommandError."""
    role = existing_run(client, run_id, what, "give a sweep's parent run id (the MLflow UI shows it)").data.tags.get(
        "opi.role")
    if role != "sweep":
        raise CommandError(f"{what} {run_id} is not a sweep's parent run (opi.role is {role!r})")


def promote(client: MlflowClient, experiment_id: str, parent: str) -> None:
    previous = champion(client, experiment_id)
    if previous and previous != parent:
        client.delete_tag(previous, CHAMPION_TAG)
    client.set_tag(parent, CHAMPION_TAG, CHAMPION)
    log.info("run %s is now the nightly baseline (was %s)", parent, previous or "none")


def existing_experiment(tracking_uri: str, experiment: str) -> tuple[MlflowClient, str]:
    client = existing_store(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise CommandError(f"no MLflow experiment {experiment!r} at {tracking_uri}")
    return client, found.experiment_id


def lock_file(tracking_uri: str, experiment: str, cache_dir: str | Path) -> Path:
    """The promotion lock of an experiment: beside a local SQLite store (as its setup lock), in the stage cache's
    lock folder for any other store."""
    key = hashlib.sha256(f"{tracking_uri}\n{experiment}".encode()).hexdigest()[:16]
    if tracking_uri.startswith("sqlite:///"):
        database = Path(tracking_uri.removeprefix("sqlite:///"))
        return database.with_name(f"{database.name}.nightly-{key}.lock")
    return Path(cache_dir) / "locks" / f"nightly-{key}.lock"


@contextlib.contextmanager
def promotion_lock(tracking_uri: str, experiment: str, cache_dir: str | Path) -> Iterator[None]:
    """Held from reading the champion to promoting: an operating-system lock (``filelock``), released by the system
    if its holder dies."""
    path = lock_file(tracking_uri, experiment, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path, thread_local=False)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        log.info("another nightly of experiment %r is deciding: waiting for it (%s)", experiment, path)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
