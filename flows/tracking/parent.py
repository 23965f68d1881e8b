"""The sweep's parent MLflow run, as a Hydra callback: opened when a multirun starts (after ``Preflight`` has
checked it) with the sweep as its params, every job a child of it, closed with the comparison table, the report and
the runs' descriptions when the multirun ends; as KILLED when the process is stopped, FAILED (saying why) when an
error ends it. Only tracking: with ``tracking=none`` it does nothing."""
from __future__ import annotations

import atexit
import logging
import os
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from mlflow import MlflowClient
from mlflow.entities import Param
from omegaconf import DictConfig, OmegaConf

from flows.base.errors import EXIT_USER_ERROR, last_error
from flows.base.progress import planned, ui_pointer
from flows.base.store_checks import tracking_server_problem
from flows.tracking.notes import NOTE, limited
from flows.tracking.race_report import log_race, read_outcome
from flows.tracking.runs import MAX_PARAM, PARENT_ENV, run_tags
from flows.tracking.store import open_experiment
from flows.tracking.sweep_report import NOT_RANKED, log_sweep_report, log_sweep_summary
from hydra_plugins.opi_sweeper import grids_of
from opi.metrics.names import BERTSIM, OPI_1
from opi.report import ReportSettings
from opi.interrupt import exiting
from opi.schemas import MAX_TAG_VALUE, ReportConfig, TrackingConfig
from opi.secrets import is_secret_name, redact_text

log = logging.getLogger("opi")


def swept(config: DictConfig) -> dict[str, str]:
    """Each swept setting and its values as the sweeper reads them (``hydra.sweeper.params``, the values of
    ``hydra.sweeper.grids`` over all grids, then the command line, whose value replaces a swept one):
    {"setup": "knn,bm25"}."""
    values = configured(config)
    try:
        parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
    except HydraException:  # the sweeper says what is wrong with it
        return values
    for override in parsed:
        if override.is_sweep_override():
            values[override.key_or_group] = override.input_line.split("=", 1)[1]
        else:
            values.pop(override.key_or_group, None)
    return values


def configured(config: DictConfig) -> dict[str, str]:
    """The swept settings of the configuration (not of the command line): its params and its grids' values."""
    values = {str(key): [str(value)] for key, value in (config.hydra.sweeper.get("params") or {}).items()}
    for grid in grids_of(config.hydra.sweeper):
        for key, value in grid.items():
            values[key] = [*values.get(key, []), *([] if value in values.get(key, []) else [value])]
    return {key: ",".join(texts) for key, texts in values.items()}


def sweep_params(config: DictConfig, experiment: str, overrides: str) -> list[Param]:
    """The sweep as the parent run's params: the experiment, the command line's overrides and each swept
    setting's values (``sweep.setup``); the settings every configuration shares are added when it ends."""
    params = {"experiment": experiment, "overrides": overrides,
              **{f"sweep.{key}": redact_text(values) for key, values in swept(config).items()
                 if not is_secret_name(key)}}
    return [Param(key, value[:MAX_PARAM]) for key, value in params.items()]


def parent_name(config: DictConfig, experiment: str) -> str:
    """The parent run's name: the experiment and what the command line sweeps (``sweep: retriever.k=2,4,8``); the
    whole command line is its ``overrides`` param."""
    varied = [f"{key}={values}" for key, values in swept(config).items()
              if not is_secret_name(key) and key not in configured(config)]
    return redact_text(" ".join([f"{experiment}:" if varied else experiment, *varied]))[:120]


def close_if_open(tracking_uri: str, run_id: str) -> None:
    """A parent still open when the process exits: KILLED when it was stopped (a signal, Ctrl-C), else FAILED, with
    the error line that ended it in its description and tag ``opi.failure``."""
    client = MlflowClient(tracking_uri)
    run = client.get_run(run_id)
    if run.info.status != "RUNNING":
        return
    stopped = exiting()
    reason = None if stopped else last_error()
    if reason:
        client.set_tag(run_id, "opi.failure", reason[:MAX_TAG_VALUE])
        before = run.data.tags.get(NOTE, "")
        client.set_tag(run_id, NOTE, limited(f"**Failed.** {reason}" + (f"\n\n{before}" if before else "")))
    client.set_terminated(run_id, status="KILLED" if stopped else "FAILED")


def hint_metric(ranked_by: str) -> str:
    """The metric the closing hint says Columns adds: the one the sweep's table is ranked by (a race's metric such
    as ndcg_at_4, opi_2, the calibrated OPI-1), bertsim where it is not ranked (``NOT_RANKED``)."""
    return BERTSIM if ranked_by == NOT_RANKED else ranked_by


class MultirunParentRun(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        tracking: TrackingConfig = OmegaConf.to_object(config.tracking)
        if not tracking.enabled:
            return
        problem = tracking_server_problem(tracking.tracking_uri)
        if problem:  # Hydra turns a callback's exception into a warning and goes on: the sweep ends here instead
            log.error("%s", problem)
            raise SystemExit(EXIT_USER_ERROR)
        client, experiment_id = open_experiment(tracking)
        overrides = redact_text(" ".join(config.hydra.overrides.task)) or "defaults"
        experiment = config.hydra.runtime.choices.get("experiment") or "sweep"
        size = planned()
        run = client.create_run(experiment_id, run_name=parent_name(config, experiment),
                                tags={"opi.role": "sweep", **run_tags(tracking),
                                      **({"opi.planned_configurations": str(size)} if size else {})})
        client.log_batch(run.info.run_id, params=sweep_params(config, experiment, overrides))
        os.environ[PARENT_ENV] = run.info.run_id
        # interrupted (Ctrl-C, an exception): the parent must not stay RUNNING; normal ends close it below first
        atexit.register(close_if_open, tracking.tracking_uri, run.info.run_id)
        log.info("MLflow parent run %s (experiment %s)", run.info.run_id, tracking.experiment)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        parent = os.environ.pop(PARENT_ENV, None)
        if parent is None:
            return
        tracking: TrackingConfig = OmegaConf.to_object(config.tracking)
        client = MlflowClient(tracking.tracking_uri)
        log_sweep_summary(client, parent)
        sweep_dir = OmegaConf.select(config, "hydra.sweep.dir")
        outcome = read_outcome(sweep_dir) if sweep_dir else None
        if outcome is not None:  # first: the report says what the race left out
            log_race(client, parent, outcome)
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
        size = int(run.data.metrics.get("configurations", 0))
        metric = hint_metric(run.data.tags.get("opi.ranked_by", OPI_1))
        log.info("%s", ui_pointer(tracking.tracking_uri, run.info.experiment_id, parent, size, metric))
