"""The sweep's parent run: a comparison table when a multirun ends, and the report (``opi.report``) built from
the children's predictions, logged under ``report/``. Also a command, for any finished sweep:

    opi-report                       # the latest sweep in mlruns/mlflow.db, report logged to its parent run
    opi-report --sweep <run id> --out report/ --resamples 5000 --alpha 0.01
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

import flows  # noqa: F401  (environment defaults before mlflow import)
import pandas as pd

log = logging.getLogger("opi")
COLUMNS = ["bertsim", "lrcr", "opi_1", "opi_1_mean", "opi_2", "opi_0_5", "cache_hits", "seconds_total"]


def children(client, parent: str) -> list:
    return client.search_runs([client.get_run(parent).info.experiment_id], f"tags.mlflow.parentRunId = '{parent}'",
                              order_by=["attributes.start_time ASC"])


def child_predictions(client, parent: str, runs: list | None = None) -> dict[str, tuple[Any, pd.DataFrame]]:
    """Configuration name -> (child run, its predictions.parquet); ``runs``: the children, if already found."""
    found = {}
    with tempfile.TemporaryDirectory() as folder:
        for run in children(client, parent) if runs is None else runs:
            try:
                path = client.download_artifacts(run.info.run_id, "predictions.parquet", folder)
            except Exception:  # a child that failed before logging: the report covers the others and says so
                log.warning("run %s (%s) has no predictions; left out of the report", run.info.run_id,
                            run.info.run_name)
                continue
            found[run.info.run_name] = (run, pd.read_parquet(path))
    return found


def existing_run(client, run_id: str, what: str, hint: str):
    """The run; for an id this store does not have, a DataError naming it instead of MLflow's traceback."""
    from mlflow.exceptions import MlflowException

    from opi.data import DataError

    try:
        return client.get_run(run_id)
    except MlflowException:
        raise DataError(f"{what} {run_id} is not in this MLflow store: {hint}") from None


def find_sweep(client, experiment: str, sweep: str | None) -> str:
    """The given parent run, or the experiment's latest sweep that has child runs."""
    from opi.data import DataError

    if sweep:
        role = existing_run(client, sweep, "--sweep", "give a sweep's parent run id (the MLflow UI shows it) or "
                            "leave --sweep out for the latest sweep").data.tags.get("opi.role")
        if role != "sweep":
            raise DataError(f"--sweep {sweep} is not a sweep's parent run (opi.role is {role!r})")
        return sweep
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise DataError(f"no MLflow experiment {experiment!r} in this store: run a sweep first (opi-eval -m ...)")
    for run in client.search_runs([found.experiment_id], "tags.`opi.role` = 'sweep'", order_by=["start_time DESC"]):
        if children(client, run.info.run_id):
            return run.info.run_id
    raise DataError(f"experiment {experiment!r} has no finished sweep with child runs: run one with opi-eval -m ...")


def comparison_table(client, parent_run_id: str) -> pd.DataFrame:
    rows = []
    for run in children(client, parent_run_id):
        rows.append({"configuration": run.info.run_name,
                     **{c: run.data.metrics.get(c) for c in COLUMNS if c in run.data.metrics}})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.sort_values("opi_1" if "opi_1" in table else "bertsim", ascending=False).reset_index(drop=True)


def log_sweep_summary(client, parent_run_id: str) -> None:
    table = comparison_table(client, parent_run_id)
    if table.empty:
        return
    with tempfile.TemporaryDirectory() as folder:
        table.to_csv(Path(folder) / "comparison.csv", index=False)
        (Path(folder) / "comparison.txt").write_text(table.to_string(index=False, float_format="%.4f"))
        client.log_artifacts(parent_run_id, folder)
    client.log_metric(parent_run_id, "configurations", len(table))
    shown = [c for c in ("configuration", "bertsim", "lrcr", "opi_1") if c in table]
    log.info("sweep of %d configurations, ranked by %s:\n%s", len(table), "OPI-1" if "opi_1" in table else "BERTSim",
             table[shown].to_string(index=False, float_format="%.4f"))


def sweep_settings(client, parent: str) -> dict[str, str]:
    """The settings a sweep ran with (the params of its first child)."""
    runs = children(client, parent)
    return dict(runs[0].data.params) if runs else {}


def sweep_incomplete(parent, found: int) -> str | None:
    """Why a sweep's report covers fewer configurations than the sweep planned (killed, failed, jobs missing)."""
    planned = parent.data.tags.get("opi.planned_configurations")
    of = f" of {planned}" if planned else ""
    if parent.info.status in ("KILLED", "FAILED"):
        return (f"it ended {parent.info.status} before it finished; {found}{of} configurations have results and "
                "this report covers only those (run the same command again to finish it)")
    if planned and found < int(planned):
        return f"only {found}{of} configurations have results; this report covers only those"
    return None


def log_sweep_report(client, parent_run_id: str, settings, out: Path | None = None, cache_dir: str | None = None):
    """Build the report from the children's predictions, log it under ``report/`` (and copy it to ``out``).
    With ``cache_dir``, a report of the same predictions and settings (a re-run sweep) is read from the cache."""
    from opi.relations import load_relation_set
    from opi.report import Configuration, build_report

    runs = child_predictions(client, parent_run_id)
    if not runs:
        log.warning("sweep %s: no child run has predictions, no report", parent_run_id)
        return None
    first_child = next(iter(runs.values()))[0]
    relations = load_relation_set(first_child.data.params.get("relations.set", "paper13")).labels
    if settings.gold_source is None:
        settings = dataclasses.replace(settings, gold_source=first_child.data.tags.get("gold_relation_source"))
    incomplete = sweep_incomplete(client.get_run(parent_run_id), len(runs))
    if incomplete:
        log.warning("sweep %s: %s", parent_run_id, incomplete)
        settings = dataclasses.replace(settings, incomplete=incomplete)
    configurations = [Configuration(name, run.data.tags.get("opi.kind", "single"), run.data.tags.get("opi.setup", name),
                                    frame, run.data.tags.get("opi.bound")) for name, (run, frame) in runs.items()]
    if cache_dir is None:
        report = build_report(configurations, relations, settings)
    else:
        from flows import tasks

        state = tasks.cached(tasks.sweep_report, cache_dir)(tasks.hashed(configurations), relations, settings,
                                                             tasks.code_version(), return_state=True)
        report = state.result()
        if state.name == "Cached":
            log.info("sweep report: tables and tests of these predictions reused from the cache")
    with tempfile.TemporaryDirectory() as folder:
        report.write(folder)
        client.log_artifacts(parent_run_id, folder, "report")
        if out is not None:
            report.write(out)
    best = report.best
    client.log_metric(parent_run_id, f"best_{report.rank_by}", float(best[report.rank_by]))
    client.log_metric(parent_run_id, "distinguishable_from_best",
                      float((report.overall["verdict"] == "lower").sum()))
    log.info("%s", report.headline().replace("**", ""))
    return report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from flows.entry import add_store_arguments
    from opi.schemas import ReportConfig

    defaults = ReportConfig()
    parser = argparse.ArgumentParser(prog="opi-report", description="Build the report of a finished sweep.")
    add_store_arguments(parser)
    parser.add_argument("--sweep", help="parent run id of the sweep (default: the latest sweep)")
    parser.add_argument("--out", type=Path, help="also write the report to this folder")
    parser.add_argument("--beta", type=float, help="the OPI β to rank by (default: the sweep's metrics.beta)")
    parser.add_argument("--confidence", type=float, default=defaults.confidence)
    parser.add_argument("--resamples", type=int, default=defaults.resamples)
    parser.add_argument("--alpha", type=float, default=defaults.alpha)
    parser.add_argument("--permutations", type=int, default=defaults.permutations)
    parser.add_argument("--seed", type=int, help="bootstrap and permutation seed (default: the sweep's seed)")
    args = parser.parse_args(argv)
    try:
        ReportConfig(True, args.confidence, args.resamples, args.alpha, args.permutations)
        if args.beta is not None and args.beta <= 0:
            raise ValueError(f"--beta must be > 0, got {args.beta}")
    except ValueError as err:
        parser.error(str(err))
    return args


def main(argv: list[str] | None = None) -> None:
    flows.command_start()
    import mlflow

    from flows.entry import EXIT_USER_ERROR, console_logging
    from opi.data import DataError
    from opi.report import ReportSettings
    from opi.schemas import ReportConfig

    console_logging("matplotlib")
    args = parse_args(argv)
    client = mlflow.MlflowClient(args.tracking_uri)
    try:
        parent = find_sweep(client, args.experiment, args.sweep)
        ran_with = sweep_settings(client, parent)
        beta = args.beta if args.beta is not None else float(ran_with.get("metrics.beta", 1.0))
        seed = args.seed if args.seed is not None else int(ran_with.get("seed", 0))
        config = ReportConfig(True, args.confidence, args.resamples, args.alpha, args.permutations)
        log.info("report of sweep %s at β = %g, seed %d", parent, beta, seed)
        log_sweep_report(client, parent, ReportSettings(config, beta, seed), args.out)
    except DataError as err:
        log.error("%s", err)
        sys.exit(EXIT_USER_ERROR)


if __name__ == "__main__":
    main()
