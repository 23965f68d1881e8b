"""Finished sweeps in the MLflow store: a sweep's parent run and its children, their names (the stable full ones
other sweeps are matched by, and the short ones people read), their predictions, and what a sweep planned against
what it has."""
from __future__ import annotations

import logging
import tempfile
from typing import Any

import pandas as pd
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from flows.base.errors import CommandError
from flows.tracking.owners import this_process
from opi.naming import Described, short_names
from opi.yardstick import MODEL_TAG, TAG

log = logging.getLogger("opi")
DESCRIPTION = "opi.description"  # a configuration run's full description: kNN | extractive | local-clf


def yardsticks(runs: list) -> dict[str, dict[str, str]]:
    """Each run's yardstick tags (``opi.yardstick``), by configuration name (``configuration_names``)."""
    names = configuration_names(runs)
    return {names[run.info.run_id]: {k: v for k, v in run.data.tags.items() if k in (TAG, MODEL_TAG)}
            for run in runs}


def description(run) -> str:
    """A configuration run's full description (``kNN | extractive | local-clf``): its ``opi.description`` tag; a
    run logged before that tag was named by it."""
    return run.data.tags.get(DESCRIPTION) or run.info.run_name


RACE_PARAMS = ("dataset.rounds", "race.")  # what a race sets: the rounds a run ran are not what names it


def naming_params(run) -> dict[str, str]:
    """The run's params that can tell configurations apart."""
    return naming_settings(run.data.params)


def naming_settings(params: dict[str, str]) -> dict[str, str]:
    """Of a configuration's params (``flows.tracking.runs.params_of``), those that can tell configurations apart."""
    return {k: v for k, v in params.items() if not k.startswith(RACE_PARAMS)}


def configuration_names(runs: list) -> dict[str, str]:
    """Run id -> a stable name that tells the configurations of a sweep apart, what other sweeps (a nightly's
    baseline) are matched by: the run's full description, and where runs share it (a sweep over a setting the
    description does not show: -m retriever.k=2,4,8), the settings in which they differ."""
    groups: dict[str, list] = {}
    for run in runs:
        groups.setdefault(description(run), []).append(run)
    names = {}
    for name, group in groups.items():
        differing = sorted(key for key in set().union(*(naming_params(run) for run in group))
                           if len({run.data.params.get(key) for run in group}) > 1)
        for run in group:
            if len(group) == 1:
                names[run.info.run_id] = name
            elif differing:
                shown = ", ".join(f"{key}={run.data.params.get(key)}" for key in differing)
                names[run.info.run_id] = f"{name} [{shown}]"
            else:  # the same configuration twice
                names[run.info.run_id] = f"{name} [run {run.info.run_id[:8]}]"
    return names


def described(run) -> Described:
    """A configuration run's parts (its ``opi.retrieval`` / ``opi.reader`` / ``opi.classifier`` tags; a run logged
    before them: the parts of its description) and its params."""
    tags = run.data.tags
    if "opi.retrieval" in tags:
        return Described(tags["opi.retrieval"], tags.get("opi.reader", ""), tags.get("opi.classifier"),
                         naming_params(run))
    retrieval, reader, classifier = (description(run).split(" | ") + ["", ""])[:3]
    return Described(retrieval, reader, classifier or None, naming_params(run))


def display_names(runs: list) -> tuple[dict[str, str], dict[str, str]]:
    """Run id -> the short name people read (``opi.naming.short_names``: "kNN", "kNN k=2"), and the parts every
    run shares ({"reader": "extractive", ...}), said once."""
    names, fixed = short_names([described(run) for run in runs])
    return {run.info.run_id: name for run, name in zip(runs, names)}, fixed


def children(client: MlflowClient, parent: str) -> list:
    return client.search_runs([client.get_run(parent).info.experiment_id], f"tags.mlflow.parentRunId = '{parent}'",
                              order_by=["attributes.start_time ASC"])


def child_predictions(client: MlflowClient, parent: str, runs: list | None = None
                      ) -> dict[str, tuple[Any, pd.DataFrame]]:
    """Configuration name -> (child run, its predictions.parquet); ``runs``: the children, if already found."""
    found = {}
    runs = children(client, parent) if runs is None else runs
    names = configuration_names(runs)
    with tempfile.TemporaryDirectory() as folder:
        for run in runs:
            try:
                path = client.download_artifacts(run.info.run_id, "predictions.parquet", folder)
            except Exception:  # a child that failed before logging: the report covers the others and says so
                log.warning("run %s (%s) has no predictions; left out of the report", run.info.run_id,
                            run.info.run_name)
                continue
            found[names[run.info.run_id]] = (run, pd.read_parquet(path))
    return found


def existing_run(client: MlflowClient, run_id: str, what: str, hint: str):
    """The run; for an id this store does not have, a CommandError naming it instead of MLflow's traceback."""
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise CommandError(f"{what} {run_id} is not in this MLflow store: {hint}") from None
    if run.info.lifecycle_stage == "deleted":
        raise CommandError(f"{what} {run_id} is deleted: restore it (mlflow runs restore --run-id {run_id}, with "
                           f"MLFLOW_TRACKING_URI set to this store) or {hint}")
    return run


def find_sweep(client: MlflowClient, experiment: str, sweep: str | None) -> str:
    """The given parent run, or the experiment's latest sweep that has child runs."""
    if sweep:
        role = existing_run(client, sweep, "--sweep", "give a sweep's parent run id (the MLflow UI shows it) or "
                            "leave --sweep out for the latest sweep").data.tags.get("opi.role")
        if role != "sweep":
            raise CommandError(f"--sweep {sweep} is not a sweep's parent run (opi.role is {role!r})")
        return sweep
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise CommandError(f"no MLflow experiment {experiment!r} in this store: run a sweep first (opi-eval -m ...)")
    skipped = []
    for run in client.search_runs([found.experiment_id], "tags.`opi.role` = 'sweep'", order_by=["start_time DESC"]):
        if children(client, run.info.run_id):
            if skipped:  # a newer sweep stopped (or still starting) before any configuration: not passed in silence
                log.warning("%s; taking the latest sweep that has some, run %s (--sweep names another)",
                            _without_results(skipped), run.info.run_id)
            return run.info.run_id
        skipped.append(run)
    raise CommandError(f"experiment {experiment!r} has no finished sweep with child runs: run one with opi-eval -m ...")


def _without_results(sweeps: list) -> str:
    newest = sweeps[0].info
    state = {"RUNNING": "still running", "KILLED": "stopped", "FAILED": "failed"}.get(newest.status,
                                                                                      newest.status.lower())
    older = len(sweeps) - 1
    more = f", nor {older} older sweep{'s' * (older > 1)}" if older else ""
    yet = " yet" if newest.status in ("RUNNING", "SCHEDULED") else ""
    return f"the newest sweep (run {newest.run_id}, {state}) has no configuration's results{yet}{more}"


def sweep_settings(client: MlflowClient, parent: str) -> dict[str, str]:
    """The settings a sweep ran with (the params of its first child)."""
    runs = children(client, parent)
    return dict(runs[0].data.params) if runs else {}


def sweep_incomplete(parent, found: int, eliminated: int = 0) -> str | None:
    """Why a sweep's report covers fewer configurations than the sweep planned (killed, failed, jobs missing);
    ``eliminated``: those its race dropped, which the report leaves out by design (the race table has them)."""
    planned = parent.data.tags.get("opi.planned_configurations")
    of = f" of {planned}" if planned else ""
    if parent.info.status in ("KILLED", "FAILED"):
        return (f"it ended {parent.info.status} before it finished; {found}{of} configurations have results and "
                "this report covers only those (run the same command again to finish it)")
    owner = (parent.data.tags.get("opi.host"), parent.data.tags.get("opi.pid"))
    elsewhere = parent.info.status == "RUNNING" and owner[1] is not None and owner != this_process()
    if elsewhere and (not planned or found + eliminated < int(planned)):  # not the sweep's own report, at its end
        return (f"it is still running: {found}{of} configurations have results so far, and this report covers only "
                "those (the sweep writes its whole report when it ends)")
    if planned and found + eliminated < int(planned):
        return f"only {found}{of} configurations have results; this report covers only those"
    return None
