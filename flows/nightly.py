"""``opi-nightly``: the nightly regression evaluation, as a Prefect flow with a baseline gate.

    opi-nightly run                         # experiment=nightly once, judged against the champion baseline
    opi-nightly run --promote               # ... and make tonight's run the champion if it passed
    opi-nightly run --baseline baselines/nightly.json   # or --baseline <parent run id>
    opi-nightly serve --cron "0 2 * * *"    # a deployment on the Prefect server in PREFECT_API_URL
    opi-nightly promote <parent run id>     # move the baseline by hand
    opi-nightly export-baseline --out baselines/nightly.json   # the champion's numbers, to commit

Anything after the options is a Hydra override for the evaluation (``llm=gpt-4o``, ``dataset.limit=50``...).
The sweep itself is ``opi-eval experiment=nightly`` in a child process (stage results come from the cache when
nothing changed); its runs are found again by the ``tracking.label`` tag. The verdicts (``opi.regression``) go to
the sweep's parent run (``nightly/verdicts.csv``, tag ``regression=true|false``). A regression fails the flow with
the list of what fell and exits 1; a user error (bad baseline, bad override) exits 2.
"""
from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import flows  # noqa: F401  (environment defaults before prefect/mlflow import)
from prefect import flow, task

log = logging.getLogger("opi")
CHAMPION_TAG = "opi.baseline"
CHAMPION = "champion"
DEPLOYMENT = "opi-nightly"


class Regression(Exception):
    """Tonight's run is worse than the baseline."""


class SweepFailed(Exception):
    """The evaluation itself did not finish (bad override, data or endpoint: its own log says which)."""


def tracking_config(overrides: list[str]):
    """The tracking settings the sweep will use (composed from the same overrides, so they always agree)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from flows.config import CONF_DIR, register_configs

    register_configs()
    sweep_only = ("hydra.", "setup=")  # sweep settings are Hydra's business, not the tracking config's
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["experiment=nightly",
                                           *[o for o in overrides if not o.startswith(sweep_only)]])
    return OmegaConf.to_object(cfg.tracking)


@task(name="nightly-sweep")
def run_sweep(overrides: list[str], label: str) -> None:
    command = [sys.executable, "-m", "flows.evaluate", "experiment=nightly", *overrides, f"tracking.label={label}"]
    code = subprocess.run(command, stdin=subprocess.DEVNULL).returncode
    if code != 0:
        raise SweepFailed(f"the nightly sweep failed (opi-eval exit code {code}); its log above says why")


def labelled_sweep(client, experiment_id: str, label: str) -> str:
    runs = client.search_runs([experiment_id], f"tags.`opi.role` = 'sweep' and tags.`opi.label` = '{label}'")
    if len(runs) != 1:
        raise RuntimeError(f"expected one sweep run labelled {label}, found {len(runs)}")
    return runs[0].info.run_id


def sweep_results(client, parent: str) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """(configuration -> metrics, configuration -> predictions) of a sweep's children."""
    from flows.report import child_predictions, children

    runs = children(client, parent)
    metrics = {run.info.run_name: dict(run.data.metrics) for run in runs}
    rows = {name: frame for name, (_, frame) in child_predictions(client, parent, runs).items()}
    return metrics, rows


def champion(client, experiment_id: str) -> str | None:
    runs = client.search_runs([experiment_id], f"tags.`{CHAMPION_TAG}` = '{CHAMPION}'",
                              order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0].info.run_id if runs else None


def load_baseline(client, experiment_id: str | None, baseline: str):
    """(name, metrics, predictions or None) for 'champion', a parent run id or a json file; None if no champion.
    ``experiment_id`` is None on a first night, when the store has no experiment (and so no run) yet."""
    from flows.report import existing_run
    from opi.data import DataError
    from opi.regression import read_baseline_file

    if baseline.endswith(".json"):
        return baseline, read_baseline_file(baseline), None
    if baseline == CHAMPION:
        run_id = champion(client, experiment_id) if experiment_id else None
        if run_id is None:
            return None
    elif experiment_id is None:
        raise DataError(f"baseline run {baseline} cannot exist: this MLflow store has no experiment yet")
    else:
        run_id = baseline
    existing_run(client, run_id, "baseline run", "give a sweep's parent run id, 'champion' or a .json baseline file")
    metrics, rows = sweep_results(client, run_id)
    if not metrics:
        raise DataError(f"baseline run {run_id} has no configuration runs under it: is it a sweep's parent run?")
    return f"run {run_id}", metrics, rows


def promote(client, experiment_id: str, parent: str) -> None:
    previous = champion(client, experiment_id)
    if previous and previous != parent:
        client.delete_tag(previous, CHAMPION_TAG)
    client.set_tag(parent, CHAMPION_TAG, CHAMPION)
    log.info("run %s is now the nightly baseline (was %s)", parent, previous or "none")


@flow(name=DEPLOYMENT, validate_parameters=False)
def nightly(overrides: list[str] | None = None, baseline: str = CHAMPION, promote_on_pass: bool = False,
            tolerance: float = 0.01, alpha: float = 0.05) -> dict[str, Any]:
    """Run the nightly configuration set, judge it against the baseline, fail on a regression."""
    import mlflow

    from opi.regression import explain, failed, judge

    overrides = list(overrides or [])
    tracking = tracking_config(overrides)
    label = f"nightly-{uuid.uuid4().hex[:12]}"
    client = mlflow.MlflowClient(tracking.tracking_uri)
    found = client.get_experiment_by_name(tracking.experiment)
    # the baseline is checked before the sweep spends anything
    reference = load_baseline(client, found.experiment_id if found else None, baseline)
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
    name, base_metrics, base_rows = reference
    metrics, rows = sweep_results(client, parent)
    verdicts = judge(metrics, base_metrics, rows, base_rows, tolerance, alpha)
    regression = not failed(verdicts).empty
    with tempfile.TemporaryDirectory() as folder:
        verdicts.to_csv(Path(folder) / "verdicts.csv", index=False)
        (Path(folder) / "verdicts.md").write_text(f"Baseline: {name}\n\n" + verdicts.to_markdown(
            index=False, floatfmt=".4f") + "\n")
        client.log_artifacts(parent, folder, "nightly")
    client.set_tag(parent, "regression", str(regression).lower())
    client.set_tag(parent, "opi.baseline_source", name)
    if regression:
        raise Regression(f"nightly run {parent} regressed against the baseline ({name}):\n{explain(verdicts)}")
    log.info("nightly run %s: no regression against %s (%d verdicts: %s)", parent, name, len(verdicts),
             verdicts["verdict"].value_counts().to_dict())
    if promote_on_pass:
        promote(client, experiment_id, parent)
    return {"parent": parent, "regression": False, "baseline": name}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from flows.entry import add_store_arguments

    parser = argparse.ArgumentParser(prog="opi-nightly", description="Nightly regression evaluation.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "serve"):
        sub = commands.add_parser(name)
        sub.add_argument("--baseline", default=CHAMPION, help="champion (default), a parent run id, or a .json file")
        sub.add_argument("--promote", action="store_true", help="make a passing run the new champion")
        sub.add_argument("--tolerance", type=float, default=0.01, help="smallest drop that can fail the night")
        sub.add_argument("--alpha", type=float, default=0.05, help="significance level of the paired test")
        sub.add_argument("overrides", nargs="*", help="Hydra overrides for the sweep, e.g. llm=gpt-4o")
        if name == "serve":
            sub.add_argument("--cron", default="0 2 * * *", help="schedule (default 02:00)")
            sub.add_argument("--timezone", default="UTC")
            sub.add_argument("--name", default=DEPLOYMENT, help="deployment name")
    move = commands.add_parser("promote", help="make a sweep the nightly baseline")
    move.add_argument("sweep", help="parent run id")
    export = commands.add_parser("export-baseline", help="write a sweep's numbers as a baseline file")
    export.add_argument("--sweep", help="parent run id (default: the champion)")
    export.add_argument("--out", type=Path, required=True)
    for sub in (move, export):
        add_store_arguments(sub)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    flows.command_start()
    from flows.entry import EXIT_USER_ERROR, console_logging
    from flows.prefect_runtime import run_flow
    from opi.data import DataError

    console_logging("httpx")
    args = parse_args(argv)
    try:
        if args.command == "run":
            run_flow(nightly, args.overrides, args.baseline, args.promote, args.tolerance, args.alpha)
        elif args.command == "serve":
            serve(args)
        else:
            manage_baseline(args)
    except Regression as err:
        log.error("%s", err)
        sys.exit(1)
    except (DataError, SweepFailed) as err:
        log.error("%s", err)
        sys.exit(EXIT_USER_ERROR)


def serve(args: argparse.Namespace) -> None:
    """Register the deployment with its cron schedule and serve it (runs start here when they are due)."""
    from prefect.schedules import Cron

    from prefect.client.orchestration import get_client

    from opi.data import DataError

    url = os.environ.get("PREFECT_API_URL")
    if not url:
        log.warning("PREFECT_API_URL is not set: the deployment lives on a temporary server that stops with this "
                    "process. For a schedule that runs, start `prefect server start` and export PREFECT_API_URL.")
    else:
        with get_client(sync_client=True) as client:
            problem = client.api_healthcheck()
        if problem is not None:
            raise DataError(f"the Prefect server at PREFECT_API_URL={url} does not answer ({problem}); start it "
                            "(prefect server start) or fix the URL")
    nightly.serve(name=args.name, schedule=Cron(args.cron, timezone=args.timezone),
                  parameters={"overrides": args.overrides, "baseline": args.baseline,
                              "promote_on_pass": args.promote, "tolerance": args.tolerance, "alpha": args.alpha},
                  tags=["opi", "nightly"], description="OPI nightly regression evaluation with a baseline gate")


def manage_baseline(args: argparse.Namespace) -> None:
    import mlflow

    from opi.data import DataError
    from opi.regression import write_baseline_file

    client = mlflow.MlflowClient(args.tracking_uri)
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        raise DataError(f"no MLflow experiment {args.experiment!r} at {args.tracking_uri}")
    if args.command == "promote":
        promote(client, experiment.experiment_id, args.sweep)
        return
    sweep = args.sweep or champion(client, experiment.experiment_id)
    if sweep is None:
        raise DataError("no champion run to export: pass --sweep <parent run id>")
    metrics, _ = sweep_results(client, sweep)
    log.info("wrote %s", write_baseline_file(args.out, metrics, f"mlflow run {sweep}"))


if __name__ == "__main__":
    main()
