"""What a sweep's parent run gets when it ends (or from ``opi-report`` later): the comparison table and the report
(``opi.report``) built from the children's predictions, logged under ``report/``."""
from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

import pandas as pd
from mlflow import MlflowClient

from flows.orchestration import tasks
from flows.orchestration.cache import cached, hashed
from flows.orchestration.prefect_adapter import was_cached
from flows.tracking.store import existing_store
from flows.run.errors import CommandError
from flows.tracking.sweeps import (child_predictions, children, configuration_names, find_sweep, sweep_incomplete,
                                   sweep_settings, yardsticks)
from opi.relations import load_relation_set
from opi.report import CALIBRATED, Configuration, ReportSettings, SweepReport, build_report
from opi.schemas import ReportConfig
from opi.yardstick import mixed

log = logging.getLogger("opi")
COLUMNS = ["bertsim", "lrcr", "lrcr_calibrated", "opi_1", "opi_1_calibrated", "opi_1_mean", "opi_2", "opi_0_5",
           "cache_hits", "seconds_total"]  # *_calibrated: after opi-label answers import


def comparison_table(runs: list, ranked: bool = True) -> pd.DataFrame:
    """The children's headline metrics, best first (``ranked``), else in run order."""
    names = configuration_names(runs)
    table = pd.DataFrame([{"configuration": names[run.info.run_id], **{c: run.data.metrics.get(c) for c in COLUMNS
                                                                       if c in run.data.metrics}} for run in runs])
    if table.empty or not ranked:
        return table
    ranked_by = next(c for c in ("opi_1_calibrated", "opi_1", "bertsim") if c in table)  # people's labels first
    return table.sort_values(ranked_by, ascending=False).reset_index(drop=True)


def yardstick_clash(runs: list, parent_run_id: str) -> str | None:
    return mixed(yardsticks(runs), f"the runs of sweep {parent_run_id}")


def log_sweep_summary(client: MlflowClient, parent_run_id: str) -> None:
    """The comparison table on the parent run, ranked unless the runs measured BERTSim with different
    yardsticks (then said once, and left in run order)."""
    runs = children(client, parent_run_id)
    clash = yardstick_clash(runs, parent_run_id)
    table = comparison_table(runs, ranked=clash is None)
    if table.empty:
        return
    with tempfile.TemporaryDirectory() as folder:
        table.to_csv(Path(folder) / "comparison.csv", index=False)
        (Path(folder) / "comparison.txt").write_text(table.to_string(index=False, float_format="%.4f"))
        client.log_artifacts(parent_run_id, folder)
    client.log_metric(parent_run_id, "configurations", len(table))
    shown = [c for c in ("configuration", "bertsim", "lrcr", "opi_1") if c in table]
    if clash:
        client.set_tag(parent_run_id, "opi.ranked_by", "none: different yardsticks")
        log.warning("%s\nsweep of %d configurations, not ranked:\n%s", clash, len(table),
                    table[shown].to_string(index=False, float_format="%.4f"))
        return
    ranked_by = next(c for c in ("opi_1_calibrated", "opi_1", "bertsim") if c in table)
    client.set_tag(parent_run_id, "opi.ranked_by", ranked_by)
    shown += ["lrcr_calibrated", "opi_1_calibrated"] if ranked_by == "opi_1_calibrated" else []
    log.info("sweep of %d configurations, ranked by %s:\n%s", len(table),
             {"opi_1_calibrated": "calibrated OPI-1", "opi_1": "OPI-1"}.get(ranked_by, "BERTSim"),
             table[shown].to_string(index=False, float_format="%.4f"))


def sweep_configurations(client: MlflowClient, parent_run_id: str, settings: ReportSettings
                         ) -> tuple[list[Configuration], list[str], ReportSettings]:
    """The children as the report reads them, the sweep's label set, and the settings completed from the runs
    (where gold relations came from; why the sweep is incomplete, if it is)."""
    every = children(client, parent_run_id)
    clash = yardstick_clash(every, parent_run_id)  # before any download
    if clash:
        raise CommandError(clash)
    runs = child_predictions(client, parent_run_id, every)
    if not runs:
        return [], [], settings
    first_child = next(iter(runs.values()))[0]
    relations = load_relation_set(first_child.data.params.get("relations.set", "paper13")).labels
    if settings.gold_source is None:
        settings = dataclasses.replace(settings, gold_source=first_child.data.tags.get("gold_relation_source"))
    if settings.scope is None:
        settings = dataclasses.replace(settings, scope=first_child.data.params.get("retrieval.scope", "article"))
    incomplete = sweep_incomplete(client.get_run(parent_run_id), len(runs))
    if incomplete:
        log.warning("sweep %s: %s", parent_run_id, incomplete)
        settings = dataclasses.replace(settings, incomplete=incomplete)
    return ([Configuration(name, run.data.tags.get("opi.kind", "single"), run.data.tags.get("opi.setup", name),
                           frame, run.data.tags.get("opi.bound"),
                           tuple(sorted((k, v) for k, v in run.data.metrics.items() if k in CALIBRATED)))
             for name, (run, frame) in runs.items()],
            relations, settings)


def built_report(configurations: list[Configuration], relations: list[str], settings: ReportSettings,
                 cache_dir: str | None) -> SweepReport:
    """The report; with ``cache_dir``, one of the same predictions and settings (a re-run sweep) is read back."""
    if cache_dir is None:
        return build_report(configurations, relations, settings)
    state = cached(tasks.sweep_report, cache_dir)(hashed(configurations), relations, settings,
                                                  tasks.code_for(tasks.sweep_report), return_state=True)
    if was_cached(state):
        log.info("sweep report: tables and tests of these predictions reused from the cache")
    return state.result()


def log_sweep_report(client: MlflowClient, parent_run_id: str, settings: ReportSettings, out: Path | None = None,
                     cache_dir: str | None = None) -> SweepReport | None:
    """Build the report from the children's predictions, log it under ``report/`` (and copy it to ``out``)."""
    configurations, relations, settings = sweep_configurations(client, parent_run_id, settings)
    if not configurations:
        log.warning("sweep %s: no child run has predictions, no report", parent_run_id)
        return None
    report = built_report(configurations, relations, settings, cache_dir)
    with tempfile.TemporaryDirectory() as folder:
        report.write(folder)
        client.log_artifacts(parent_run_id, folder, "report")
        if out is not None:
            report.write(out)
    client.log_metric(parent_run_id, f"best_{report.rank_by}", float(report.best[report.rank_by]))
    client.log_metric(parent_run_id, "distinguishable_from_best", float((report.overall["verdict"] == "lower").sum()))
    log.info("%s", report.headline().replace("**", ""))
    return report


def report_of_sweep(tracking_uri: str, experiment: str, sweep: str | None, out: Path | None, config: ReportConfig,
                    beta: float | None, seed: int | None) -> SweepReport | None:
    """``opi-report``: the report of a finished sweep (the latest, or ``sweep``) at its own β and seed unless
    given, logged to its parent run."""
    client = existing_store(tracking_uri)  # read-only: a store that is not there is not created
    parent = find_sweep(client, experiment, sweep)
    ran_with = sweep_settings(client, parent)
    beta = beta if beta is not None else float(ran_with.get("metrics.beta", 1.0))
    seed = seed if seed is not None else int(ran_with.get("seed", 0))
    log.info("report of sweep %s at β = %g, seed %d", parent, beta, seed)
    return log_sweep_report(client, parent, ReportSettings(config, beta, seed), out)
