"""The nightly regression gate, as a Prefect flow: ``opi-eval experiment=nightly`` in a child process (unchanged work
comes from the cache), its runs found again by their ``tracking.label`` tag, every configuration x metric judged
against the baseline (``opi.regression``), the verdicts logged to the sweep's parent run (``nightly/verdicts.csv``,
tag ``regression=true|false``). A regression fails the flow; a user error (bad baseline, bad override) is a
``CommandError``."""
from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from omegaconf import OmegaConf
from prefect import flow, task
from prefect.schedules import Cron

from flows.nightly import CHAMPION, CHAMPION_TAG, DEPLOYMENT
from flows.orchestration.server import OrchestrationError, ensure_api, prefect_api, user_api_url
from flows.run.config import compose_config
from flows.run.errors import CommandError
from flows.tracking.store import existing_store
from flows.tracking.sweeps import child_predictions, children, configuration_names, existing_run, yardsticks
from opi.data import DataError
from opi.regression import (ALPHA, TOLERANCE, baseline_file_yardstick, explain, failed, judge, read_baseline_file,
                            write_baseline_file)
from opi.schemas import MetricsConfig, TrackingConfig
from opi.yardstick import mixed, yardstick_tags

log = logging.getLogger("opi")


class Regression(Exception):
    """Tonight's run is worse than the baseline."""


def planned(overrides: list[str]) -> tuple[TrackingConfig, dict[str, str]]:
    """The tracking settings and the yardstick the sweep will use (composed from the same overrides, so they always
    agree)."""
    sweep_only = ("hydra.", "setup=")  # sweep settings are Hydra's business, not these
    cfg = compose_config(["experiment=nightly", *[o for o in overrides if not o.startswith(sweep_only)]])
    metrics: MetricsConfig = OmegaConf.to_object(cfg.metrics)
    return OmegaConf.to_object(cfg.tracking), yardstick_tags(metrics.similarity)


def same_yardstick(tonight: dict[str, str], baseline: dict[str, dict[str, str]], name: str) -> None:
    """Tonight's BERTSim is judged against the baseline's only if both were measured with the same model."""
    clash = mixed({"tonight": tonight, **{f"baseline {n}": tags for n, tags in baseline.items()}},
                  f"tonight's sweep and the baseline ({name})")
    if clash:
        raise CommandError(clash)


@task(name="nightly-sweep")
def run_sweep(overrides: list[str], label: str) -> None:
    command = [sys.executable, "-m", "flows.cli.evaluate", "experiment=nightly", *overrides, f"tracking.label={label}"]
    code = subprocess.run(command, stdin=subprocess.DEVNULL).returncode
    if code != 0:
        raise CommandError(f"the nightly sweep failed (opi-eval exit code {code}); its log above says why")


def labelled_sweep(client: MlflowClient, experiment_id: str, label: str) -> str:
    runs = client.search_runs([experiment_id], f"tags.`opi.role` = 'sweep' and tags.`opi.label` = '{label}'")
    if len(runs) != 1:
        raise RuntimeError(f"expected one sweep run labelled {label}, found {len(runs)}")
    return runs[0].info.run_id


def sweep_results(client: MlflowClient, parent: str) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """(configuration -> metrics, configuration -> predictions) of a sweep's children."""
    runs = children(client, parent)
    names = configuration_names(runs)
    metrics = {names[run.info.run_id]: dict(run.data.metrics) for run in runs}
    rows = {name: frame for name, (_, frame) in child_predictions(client, parent, runs).items()}
    return metrics, rows


def champion(client: MlflowClient, experiment_id: str) -> str | None:
    runs = client.search_runs([experiment_id], f"tags.`{CHAMPION_TAG}` = '{CHAMPION}'",
                              order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0].info.run_id if runs else None


def load_baseline(client: MlflowClient, experiment_id: str | None, baseline: str):
    """(name, metrics, predictions or None, yardstick tags by configuration) for 'champion', a parent run id or a
    json file; None if no champion. ``experiment_id`` is None on a first night, when the store has no experiment
    (and so no run) yet."""
    if baseline.endswith(".json"):
        try:
            return baseline, read_baseline_file(baseline), None, {"file": baseline_file_yardstick(baseline)}
        except DataError as err:
            raise CommandError(str(err)) from None
    if baseline == CHAMPION:
        run_id = champion(client, experiment_id) if experiment_id else None
        if run_id is None:
            return None
    elif experiment_id is None:
        raise CommandError(f"baseline run {baseline} cannot exist: this MLflow store has no experiment yet")
    else:
        run_id = baseline
    existing_run(client, run_id, "baseline run", "give a sweep's parent run id, 'champion' or a .json baseline file")
    metrics, rows = sweep_results(client, run_id)
    if not metrics:
        raise CommandError(f"baseline run {run_id} has no configuration runs under it: is it a sweep's parent run?")
    return f"run {run_id}", metrics, rows, yardsticks(children(client, run_id))


def promote(client: MlflowClient, experiment_id: str, parent: str) -> None:
    previous = champion(client, experiment_id)
    if previous and previous != parent:
        client.delete_tag(previous, CHAMPION_TAG)
    client.set_tag(parent, CHAMPION_TAG, CHAMPION)
    log.info("run %s is now the nightly baseline (was %s)", parent, previous or "none")


def log_verdicts(client: MlflowClient, parent: str, verdicts, baseline_name: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        verdicts.to_csv(Path(folder) / "verdicts.csv", index=False)
        (Path(folder) / "verdicts.md").write_text(f"Baseline: {baseline_name}\n\n" + verdicts.to_markdown(
            index=False, floatfmt=".4f") + "\n")
        client.log_artifacts(parent, folder, "nightly")


@flow(name=DEPLOYMENT, validate_parameters=False)
def nightly(overrides: list[str] | None = None, baseline: str = CHAMPION, promote_on_pass: bool = False,
            tolerance: float = TOLERANCE, alpha: float = ALPHA) -> dict[str, Any]:
    """Run the nightly configuration set, judge it against the baseline, fail on a regression."""
    overrides = list(overrides or [])
    tracking, yardstick = planned(overrides)
    label = f"nightly-{uuid.uuid4().hex[:12]}"
    client = MlflowClient(tracking.tracking_uri)
    found = client.get_experiment_by_name(tracking.experiment)
    reference = load_baseline(client, found.experiment_id if found else None, baseline)  # before the sweep spends
    if reference is not None:
        same_yardstick(yardstick, reference[3], reference[0])
    run_sweep(overrides, label)
    experiment_id = client.get_experiment_by_name(tracking.experiment).experiment_id
    parent = labelled_sweep(client, experiment_id, label)
    if reference is None:
        client.set_tag(parent, "regression", "unknown")
        log.warning("no baseline yet (no run tagged %s=%s): nothing to compare with%s", CHAMPION_TAG, CHAMPION,
                    "; promoting tonight's run" if promote_on_pass else "; run with --promote to set one")
        if promote_on_pass:
            promote(client, experiment_id, parent)
        return {"parent": parent, "regression": None, "baseline": None}
    name, base_metrics, base_rows, _ = reference
    metrics, rows = sweep_results(client, parent)
    verdicts = judge(metrics, base_metrics, rows, base_rows, tolerance, alpha)
    regression = not failed(verdicts).empty
    log_verdicts(client, parent, verdicts, name)
    client.set_tag(parent, "regression", str(regression).lower())
    client.set_tag(parent, "opi.baseline_source", name)
    if regression:
        raise Regression(f"nightly run {parent} regressed against the baseline ({name}):\n{explain(verdicts)}")
    log.info("nightly run %s: no regression against %s (%d verdicts: %s)", parent, name, len(verdicts),
             verdicts["verdict"].value_counts().to_dict())
    if promote_on_pass:
        promote(client, experiment_id, parent)
    return {"parent": parent, "regression": False, "baseline": name}


def export_baseline(tracking_uri: str, experiment: str, sweep: str | None, out: Path) -> None:
    client, experiment_id = existing_experiment(tracking_uri, experiment)
    sweep = sweep or champion(client, experiment_id)
    if sweep is None:
        raise CommandError("no champion run to export: pass --sweep <parent run id>")
    metrics, _ = sweep_results(client, sweep)
    yardstick = next(iter(yardsticks(children(client, sweep)).values()), None)
    log.info("wrote %s", write_baseline_file(out, metrics, f"mlflow run {sweep}", yardstick))


def promote_by_hand(tracking_uri: str, experiment: str, sweep: str) -> None:
    client, experiment_id = existing_experiment(tracking_uri, experiment)
    promote(client, experiment_id, sweep)


def existing_experiment(tracking_uri: str, experiment: str) -> tuple[MlflowClient, str]:
    client = existing_store(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise CommandError(f"no MLflow experiment {experiment!r} at {tracking_uri}")
    return client, found.experiment_id


def serve(name: str, cron: str, timezone: str, parameters: dict[str, Any]) -> None:
    """Register the deployment with its cron schedule and serve it (runs start here when they are due)."""
    url = user_api_url()
    if not url:
        log.warning("PREFECT_API_URL is not set: the deployment lives on a temporary server that stops with this "
                    "process. For a schedule that runs, start `prefect server start` and export PREFECT_API_URL.")
    else:
        try:
            ensure_api()
        except OrchestrationError:
            raise CommandError(f"the Prefect server at PREFECT_API_URL={url} does not answer; start it (prefect "
                               "server start) or fix the URL") from None
    with prefect_api():
        nightly.serve(name=name, schedule=Cron(cron, timezone=timezone), parameters=parameters,
                      tags=["opi", "nightly"], description="OPI nightly regression evaluation with a baseline gate")
