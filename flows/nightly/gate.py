"""The nightly regression gate, as a Prefect flow: the baseline read and checked before anything is spent, the
sweep ``experiment=nightly`` run with its configurations as subflows (``flows.nightly.sweep``), its runs found again
by their ``tracking.label`` tag, then, under the promotion lock (``flows.nightly.baseline``), every configuration x
metric judged against the baseline (``opi.regression``), the verdicts logged to the sweep's parent run
(``nightly/verdicts.csv``, ``verdicts.md``, tag ``regression=true|false``) and a passing run promoted if asked. A
regression fails the flow, its state message naming what fell; a user error (bad baseline, bad override, too few
shared examples) is a ``CommandError``, said before the sweep runs wherever it can be known then."""
from __future__ import annotations

import logging
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from prefect import flow
from prefect.schedules import Cron

from flows.nightly import CHAMPION, CHAMPION_TAG, DEPLOYMENT
from flows.nightly.baseline import (Baseline, champion, existing_experiment, labelled_sweep, load_baseline, promote,
                                    promotion_lock, sweep_results, sweep_run)
from flows.nightly.sweep import logs_to_prefect, run_sweep
from flows.orchestration.server import OrchestrationError, ensure_api, prefect_api, user_api_url
from flows.run.config import compose_config, typed
from flows.base.errors import CommandError
from flows.tracking.sweeps import children, configuration_names, display_names, yardsticks
from opi.naming import matched
from opi.regression import (ALPHA, MIN_OVERLAP, TOLERANCE, UNIT, GateSettings, Judgement, NotComparable, explain,
                            ids_of, judge, markdown, overlap, write_baseline_file)
from opi.schemas import MetricsConfig, TrackingConfig
from opi.yardstick import mixed, yardstick_tags

log = logging.getLogger("opi")


class Regression(Exception):
    """Tonight's run is worse than the baseline."""


def gate_settings(tolerance: float, alpha: float, min_overlap: float, unit: str) -> GateSettings:
    try:
        return GateSettings(tolerance, alpha, min_overlap, unit)
    except ValueError as err:
        raise CommandError(f"opi-nightly: {err}") from None


@dataclass(frozen=True)
class Plan:
    """What tonight's sweep will use, composed from the same overrides (so they always agree)."""
    cfg: DictConfig

    @property
    def tracking(self) -> TrackingConfig:
        return OmegaConf.to_object(self.cfg.tracking)

    @property
    def yardstick(self) -> dict[str, str]:
        metrics: MetricsConfig = OmegaConf.to_object(self.cfg.metrics)
        return yardstick_tags(metrics.similarity)

    def example_ids(self) -> set[str]:
        """The examples tonight's sweep evaluates (its data read and checked as the sweep will)."""
        from flows.run.data import load_data

        try:
            return {example.id for example in load_data(typed(self.cfg)).examples}
        except ValueError as err:
            raise CommandError(f"invalid configuration: {err}") from None


def planned(overrides: list[str]) -> Plan:
    """Tonight's configuration from the overrides (one it cannot compose from is a one-line CommandError, before
    anything runs); the sweep's settings are Hydra's business, not these."""
    sweep_only = ("hydra.", "setup=")
    try:
        return Plan(compose_config(["experiment=nightly", *[o for o in overrides if not o.startswith(sweep_only)]]))
    except (HydraException, OmegaConfBaseException) as err:
        said = " ".join(f"{err}{f': {err.__cause__}' if err.__cause__ else ''}".split()) or type(err).__name__
        sweep = (" (the nightly sweeps over several values with hydra.sweeper.params, e.g. "
                 "\"hydra.sweeper.params.setup='knn,bm25'\")" if "Ambiguous value" in said else "")
        raise CommandError(f"invalid override for the nightly: {said}{sweep}") from None


def same_yardstick(tonight: dict[str, str], baseline: Baseline) -> None:
    """Tonight's BERTSim is judged against the baseline's only if both were measured with the same model."""
    clash = mixed({"tonight": tonight, **{f"baseline {n}": tags for n, tags in baseline.yardsticks.items()}},
                  f"tonight's sweep and the baseline ({baseline.name})")
    if clash:
        raise CommandError(clash)


def comparable(baseline: Baseline, plan: Plan, settings: GateSettings) -> None:
    """Before the sweep: the baseline's examples and tonight's overlap enough (``min_overlap``), said if they
    differ."""
    if baseline.rows is None:
        return
    shared = overlap(plan.example_ids(), ids_of(baseline.rows))
    try:
        shared.check(settings.min_overlap)
    except NotComparable as err:
        raise CommandError(f"baseline {baseline.name}: {err}") from None
    if shared.notice():
        log.info("%s", shared.notice())


def log_verdicts(client: MlflowClient, parent: str, judgement: Judgement, baseline: Baseline) -> None:
    """``nightly/verdicts.csv`` (full names, what runs are matched by) and ``verdicts.md`` (short names, the parts
    every configuration shares said once) on tonight's parent run."""
    runs = children(client, parent)
    stable, (short, fixed) = configuration_names(runs), display_names(runs)
    shared = ", ".join(f"{part} {value}" for part, value in fixed.items())
    header = [f"Baseline: {baseline.name}", *([f"Every configuration: {shared}"] if shared else [])]
    with tempfile.TemporaryDirectory() as folder:
        judgement.table.to_csv(Path(folder) / "verdicts.csv", index=False)
        (Path(folder) / "verdicts.md").write_text(markdown(judgement, header, {
            stable[run.info.run_id]: short[run.info.run_id] for run in runs}))
        client.log_artifacts(parent, folder, "nightly")
    client.set_tag(parent, "opi.baseline_source", baseline.name)


def judged(client: MlflowClient, parent: str, baseline: Baseline, settings: GateSettings) -> Judgement:
    metrics, rows, configured = sweep_results(client, parent)
    named = matched(configured, baseline.settings_of())  # the baseline's names -> tonight's
    for theirs, ours in named.items():
        if theirs != ours:
            log.info("%s is the baseline's %s (named apart from configurations of the same kind tonight, or in the "
                     "baseline)", ours, theirs)
    baseline_rows = None if baseline.rows is None else {named.get(n, n): r for n, r in baseline.rows.items()}
    try:
        judgement = judge(metrics, {named.get(n, n): m for n, m in baseline.metrics.items()},
                          rows if baseline.rows is not None else None, baseline_rows, settings)
    except NotComparable as err:
        raise CommandError(f"baseline {baseline.name}: {err}") from None
    for note in judgement.notes:
        log.info("%s", note)
    return judgement


@dataclass(frozen=True)
class Night:
    """Tonight's sweep and how it is to be judged."""
    client: MlflowClient
    experiment_id: str
    parent: str  # the sweep's parent run
    started_with: str | None  # the champion when this night started
    requested: str  # the baseline asked for: champion, a run id or a file
    settings: GateSettings
    promote_on_pass: bool
    yardstick: dict[str, str]

    def result(self, baseline: str | None, regression: bool | None, promoted: bool) -> dict[str, Any]:
        return {"parent": self.parent, "regression": regression, "baseline": baseline, "promoted": promoted}


def decide(night: Night, baseline: Baseline | None) -> dict[str, Any]:
    """Under the promotion lock: judge tonight's sweep, promote it if asked and it passed. A champion that changed
    since this night started (a nightly that overlapped it promoted) is what it is judged against, and this night
    does not move it again."""
    now = champion(night.client, night.experiment_id)
    moved = now != night.started_with
    if moved and night.requested == CHAMPION:
        log.warning("the baseline moved while this run ran (run %s is now the champion): judging against it; this "
                    "run will not be promoted", now)
        baseline = load_baseline(night.client, night.experiment_id, CHAMPION)
        same_yardstick(night.yardstick, baseline)
    if baseline is None:
        return first_night(night)
    judgement = judged(night.client, night.parent, baseline, night.settings)
    log_verdicts(night.client, night.parent, judgement, baseline)
    regression = not judgement.failed.empty
    night.client.set_tag(night.parent, "regression", str(regression).lower())
    if regression:  # said here, where a served night's log reaches Prefect's run logs too, then failed
        said = (f"nightly run {night.parent} regressed against the baseline ({baseline.name}):\n"
                f"{explain(judgement.table)}")
        log.error("%s", said)
        raise Regression(said)
    counts = judgement.table["verdict"].value_counts()
    log.info("nightly run %s: no regression against %s (%d verdicts: %s)", night.parent, baseline.name,
             len(judgement.table), ", ".join(f"{n} {verdict}" for verdict, n in counts.items()))
    if night.promote_on_pass and moved:
        log.warning("run %s passed but is not promoted: the champion changed while it ran (now %s)", night.parent,
                    now)
    elif night.promote_on_pass:
        promote(night.client, night.experiment_id, night.parent)
    return night.result(baseline.name, False, night.promote_on_pass and not moved)


def first_night(night: Night) -> dict[str, Any]:
    """No baseline yet: nothing to judge; tonight's run becomes the champion if asked."""
    night.client.set_tag(night.parent, "regression", "unknown")
    log.warning("no baseline yet (no run tagged %s=%s): nothing to compare with%s", CHAMPION_TAG, CHAMPION,
                "; promoting tonight's run" if night.promote_on_pass else "; run with --promote to set one")
    if night.promote_on_pass:
        promote(night.client, night.experiment_id, night.parent)
    return night.result(None, None, night.promote_on_pass)


@flow(name=DEPLOYMENT, validate_parameters=False)
def nightly(overrides: list[str] | None = None, baseline: str = CHAMPION, promote_on_pass: bool = False,
            tolerance: float = TOLERANCE, alpha: float = ALPHA, min_overlap: float = MIN_OVERLAP, unit: str = UNIT
            ) -> dict[str, Any]:
    """Run the nightly configuration set, judge it against the baseline, fail on a regression."""
    with logs_to_prefect():
        return gated_night(list(overrides or []), baseline, promote_on_pass,
                           gate_settings(tolerance, alpha, min_overlap, unit))


def gated_night(overrides: list[str], requested: str, promote_on_pass: bool, settings: GateSettings
                ) -> dict[str, Any]:
    plan = planned(overrides)
    tracking, yardstick = plan.tracking, plan.yardstick
    client = MlflowClient(tracking.tracking_uri)
    found = client.get_experiment_by_name(tracking.experiment)
    started_with = champion(client, found.experiment_id if found else None)
    reference = load_baseline(client, found.experiment_id if found else None, requested)  # before the sweep spends
    if reference is not None:
        same_yardstick(yardstick, reference)
        comparable(reference, plan, settings)
    label = f"nightly-{uuid.uuid4().hex[:12]}"
    run_sweep(overrides, label)
    experiment_id = client.get_experiment_by_name(tracking.experiment).experiment_id
    parent = labelled_sweep(client, experiment_id, label)
    night = Night(client, experiment_id, parent, started_with, requested, settings, promote_on_pass, yardstick)
    with promotion_lock(tracking.tracking_uri, tracking.experiment, plan.cfg.paths.cache_dir):
        return decide(night, reference)


def export_baseline(tracking_uri: str, experiment: str, sweep: str | None, out: Path) -> None:
    client, experiment_id = existing_experiment(tracking_uri, experiment)
    sweep = sweep or champion(client, experiment_id)
    if sweep is None:
        raise CommandError("no champion run to export: pass --sweep <parent run id>")
    sweep_run(client, sweep, "--sweep")
    metrics, _, _ = sweep_results(client, sweep)
    yardstick = next(iter(yardsticks(children(client, sweep)).values()), None)
    log.info("wrote %s (the numbers of run %s)", write_baseline_file(out, metrics, f"mlflow run {sweep}", yardstick),
             sweep)


def promote_by_hand(tracking_uri: str, experiment: str, sweep: str) -> None:
    from opi.schemas import PathsConfig

    client, experiment_id = existing_experiment(tracking_uri, experiment)
    sweep_run(client, sweep, "run")
    with promotion_lock(tracking_uri, experiment, PathsConfig().cache_dir):
        promote(client, experiment_id, sweep)


def serve(name: str, cron: str, timezone: str, parameters: dict[str, Any]) -> None:
    """Register the deployment with its cron schedule and serve it (runs start here when they are due). Its
    schedule and its overrides are checked first: nothing is registered that would fail when due."""
    from prefect.client.schemas.schedules import CronSchedule  # what Prefect validates the schedule as, when due

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValueError as err:  # pydantic's ValidationError is one
        said = err.errors()[0]["msg"].removeprefix("Value error, ") if hasattr(err, "errors") else str(err)
        raise CommandError(f"--cron {cron!r} --timezone {timezone!r}: {said}; e.g. --cron '0 2 * * *' --timezone "
                           f"Europe/Berlin") from None
    planned(list(parameters.get("overrides") or []))
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
