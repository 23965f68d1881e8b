"""What a sweep's parent run gets when it ends (or from ``opi-report`` later): its children named by what varies in
the sweep, the settings they share as its params, the comparison table, the report (``opi.report``) built from the
children's predictions under ``report/``, and the descriptions MLflow shows on the run pages (``notes``)."""
from __future__ import annotations

import dataclasses
import json
import logging
import tempfile
from pathlib import Path

import pandas as pd
from mlflow import MlflowClient
from mlflow.entities import Param

from flows.orchestration import tasks
from flows.orchestration.hashing import content_hash
from flows.orchestration.kept import recalled
from flows.orchestration.files import write_atomically
from flows.tracking.race_report import RACE_NOTE, RACE_SUMMARY_TAG, raced
from flows.tracking.notes import (NOTE, Placed, fixed_line, limited, placement_notes, ranking_table, shown_metric,
                                  with_interval)
from flows.tracking.store import existing_store
from flows.base.errors import CommandError
from flows.base.store_checks import writable_folder
from flows.tracking.sweeps import (DESCRIPTION, child_predictions, children, description, display_names, find_sweep,
                                   sweep_incomplete, sweep_settings, yardsticks)
from opi.metrics.names import BERTSIM, LRCR, OPI_1
from opi.relations import load_relation_set
from opi.report import CALIBRATED, Configuration, ReportSettings, SweepReport
from opi.schemas import ReportConfig
from opi.yardstick import mixed

log = logging.getLogger("opi")
RACE_TAG = "opi.race.outcome"
RACE_METRIC_TAG = "opi.race.metric"
COLUMNS = [BERTSIM, LRCR, "lrcr_calibrated", OPI_1, "opi_1_calibrated", "opi_1_mean", "opi_2", "opi_0_5",
           "cache_hits", "seconds_total"]  # *_calibrated: after opi-label answers import
REPORT_FILES = "The whole report: `report/report.html` and `report/report.md` (this run's Artifacts)."
VIEW_TAG = "mlflow.sharedViewState."  # + key: a runs view MLflow's UI opens at ?viewStateShareKey=<key> ("Share")


NOT_RANKED = "none: different yardsticks"  # opi.ranked_by of a sweep whose runs cannot be ranked together

def comparison_table(runs: list, names: dict[str, str], ranked: bool = True) -> pd.DataFrame:
    """The children's headline metrics by their short ``names`` (and full description), best first
    (``ranked``), else in run order. In a race, a ``race`` column says how each ended, and the ones it eliminated
    come after the rest: they ran on fewer examples, so their values do not compare with the survivors'."""
    race = any(RACE_TAG in run.data.tags for run in runs)
    by = race_metric_of(runs)
    columns = [*COLUMNS, *([by] if by is not None and by not in COLUMNS else [])]
    table = pd.DataFrame([{"configuration": names[run.info.run_id], "description": description(run),
                           **({"race": race_outcome(run)} if race else {}),
                           **{c: run.data.metrics.get(c) for c in columns if c in run.data.metrics}} for run in runs])
    if table.empty or not ranked:
        return table
    table["eliminated"] = [eliminated(run) for run in runs]  # False for every run of a grid
    table = table.sort_values(["eliminated", by or ranked_metric(table)], ascending=[True, False], kind="stable")
    return table.drop(columns="eliminated").reset_index(drop=True)


def race_metric_of(runs: list) -> str | None:
    """What a raced sweep's runs ran on (None: a grid, or not logged): shown and ranked by, the race's decision."""
    return next((run.data.tags[RACE_METRIC_TAG] for run in runs if run.data.tags.get(RACE_METRIC_TAG) in
                 run.data.metrics), None)


def eliminated(run) -> bool:
    return run.data.tags.get(RACE_TAG) == "eliminated"


def race_outcome(run) -> str:
    """How a configuration ended in its sweep's race: survivor, bound, or eliminated (as worse, or as within
    race.indifference of the one that stands for it) after round r of R."""
    outcome = run.data.tags.get(RACE_TAG, "")
    rounds = run.data.tags.get("opi.race.rounds_run")
    if outcome != "eliminated" or not rounds:
        return outcome
    within = "dropped as within race.indifference" in run.data.tags.get("opi.race.against", "")
    return f"eliminated{' as within' if within else ''} after round {rounds}"


def eliminated_note(run, metric: str) -> str:
    """An eliminated configuration's one line: when it was dropped, its value on the examples it ran, and against
    whom, not a place among the survivors."""
    metrics = run.data.metrics
    shown = ("" if metric not in metrics else f": {shown_metric(metric)} "
             f"{with_interval(metrics[metric], metrics.get(f'{metric}_ci_low'), metrics.get(f'{metric}_ci_high'))}"
             f" on the examples of those rounds")
    against = run.data.tags.get("opi.race.against")
    return (f"{race_outcome(run)} of the race, so not ranked with the survivors{shown}"
            f"{f'; against {against}' if against else ''} (the race table: the parent run's race/race.md)")


def ranked_metric(table) -> str:
    """What a sweep is ranked by: calibrated OPI-1 (people's labels) first, then OPI-1, then BERTSim."""
    return next(c for c in ("opi_1_calibrated", OPI_1, BERTSIM) if c in table)


def yardstick_clash(runs: list, parent_run_id: str) -> str | None:
    return mixed(yardsticks(runs), f"the runs of sweep {parent_run_id}")


def name_children(client: MlflowClient, runs: list) -> tuple[dict[str, str], dict[str, str]]:
    """Each child renamed to its short name (run id -> name), its full description kept in ``opi.description``;
    and the parts every child shares."""
    names, fixed = display_names(runs)
    for run in runs:
        if DESCRIPTION not in run.data.tags:  # logged before the tag: its name was its description
            client.set_tag(run.info.run_id, DESCRIPTION, run.info.run_name)
        if run.info.run_name != names[run.info.run_id]:
            client.update_run(run.info.run_id, name=names[run.info.run_id])
    return names, fixed


def log_shared_settings(client: MlflowClient, parent_run_id: str, runs: list) -> None:
    """The settings every child shares, as the parent's params (those it does not have yet)."""
    shared = {key: value for key, value in runs[0].data.params.items()
              if all(run.data.params.get(key) == value for run in runs[1:])}
    have = client.get_run(parent_run_id).data.params
    new = [Param(key, value) for key, value in shared.items() if key not in have]
    if new:
        client.log_batch(parent_run_id, params=new)


def ranking_of_runs(runs: list, names: dict[str, str], metric: str) -> list[Placed]:
    """The children best first by ``metric``, each with the interval its run logged."""
    found = sorted((run for run in runs if metric in run.data.metrics), key=lambda run: -run.data.metrics[metric])
    return [Placed(run.info.run_id, names[run.info.run_id], run.data.metrics[metric],
                   run.data.metrics.get(f"{metric}_ci_low"), run.data.metrics.get(f"{metric}_ci_high"),
                   run.data.tags.get("opi.bound")) for run in found]


def logged_intervals(runs: list) -> dict[str, dict[str, tuple]]:
    """Run id -> metric -> (value, interval low, high) of the headline metrics each child logged."""
    return {run.info.run_id: {m: (run.data.metrics[m], run.data.metrics.get(f"{m}_ci_low"),
                                  run.data.metrics.get(f"{m}_ci_high"))
                              for m in ("opi_1_calibrated", OPI_1, BERTSIM, LRCR) if m in run.data.metrics}
            for run in runs}


def describe_ranking(client: MlflowClient, parent_run_id: str, runs: list, names: dict[str, str],
                     fixed: dict[str, str], metric: str) -> None:
    """Before the report (or without one): each child's place and the parent's ranking table, from the values
    and intervals the children logged."""
    ranking = ranking_of_runs([run for run in runs if not eliminated(run)], names, metric)
    for run_id, line in placement_notes(ranking, metric).items():
        client.set_tag(run_id, NOTE, line)
    for run in filter(eliminated, runs):
        client.set_tag(run.info.run_id, NOTE, eliminated_note(run, metric))
    level = runs[0].data.params.get("report.confidence", "0.95")
    dropped = sum(map(eliminated, runs))
    race = (f"; not ranked: the {dropped} the race eliminated, which ran on fewer examples (the race table: "
            f"race/race.md)" if dropped else "")
    text = (f"**{len(ranking)} configurations ranked by {shown_metric(metric)}** ({fixed_line(fixed)}{race}); "
            f"values with their {float(level):.0%} bootstrap intervals, not yet tested against each other: the sweep "
            f"report does (`opi-report --sweep {parent_run_id}`).\n\n"
            f"{ranking_table(ranking, logged_intervals(runs), metric)}")
    client.set_tag(parent_run_id, NOTE, limited(text))


def share_view(client: MlflowClient, parent_run_id: str, metric: str | None, raced: bool = False) -> None:
    """The sweep's runs view, saved as MLflow's UI saves a shared view (key: the parent run id): its children, best
    first by ``metric`` (None: not ranked), the headline columns, every child in the charts (not MLflow's first
    10); in a race (``raced``) first how each ended and the rounds it ran (the eliminated ran on fewer examples)."""
    ranked = [metric, f"{metric}_ci_low", f"{metric}_ci_high"] if metric else []
    others = () if metric == BERTSIM else (OPI_1, BERTSIM, LRCR)  # bertsim: no gold relations, no others
    columns = [*ranked, *(m for m in others if m not in ranked)]
    race = [f"tags.`{tag}`" for tag in (RACE_TAG, "opi.race.rounds_run")] if raced else []
    state = {"searchFilter": f"tags.mlflow.parentRunId = '{parent_run_id}'", "runsHiddenMode": "SHOW_ALL",
             "selectedColumns": [*race, *(f"metrics.`{c}`" for c in columns)],
             **({"orderByKey": f"metrics.`{metric}`", "orderByAsc": False} if metric else {})}
    client.set_experiment_tag(client.get_run(parent_run_id).info.experiment_id, VIEW_TAG + parent_run_id,
                              json.dumps(state))


def log_sweep_summary(client: MlflowClient, parent_run_id: str) -> None:
    """The children named, the comparison table and the descriptions on the parent run, ranked unless the runs
    measured BERTSim with different yardsticks (then said once, and left in run order)."""
    runs = children(client, parent_run_id)
    if not runs:
        return
    names, fixed = name_children(client, runs)
    log_shared_settings(client, parent_run_id, runs)
    clash = yardstick_clash(runs, parent_run_id)
    table = comparison_table(runs, names, ranked=clash is None)
    with tempfile.TemporaryDirectory() as folder:
        table.to_csv(Path(folder) / "comparison.csv", index=False)
        (Path(folder) / "comparison.txt").write_text(table.to_string(index=False, float_format="{:.4f}".format))
        client.log_artifacts(parent_run_id, folder)
    client.log_metric(parent_run_id, "configurations", len(table))
    shown = [c for c in ("configuration", "race", BERTSIM, LRCR, OPI_1) if c in table]
    if clash:
        client.set_tag(parent_run_id, "opi.ranked_by", NOT_RANKED)
        client.set_tag(parent_run_id, NOTE, limited(f"**Not ranked**: {clash}"))
        share_view(client, parent_run_id, None)
        log.warning("%s\nsweep of %d configurations, not ranked:\n%s", clash, len(table),
                    table[shown].to_string(index=False, float_format="{:.4f}".format))
        return
    ranked_by = race_metric_of(runs) or ranked_metric(table)
    shown += [ranked_by] if ranked_by not in shown and ranked_by in table else []
    client.set_tag(parent_run_id, "opi.ranked_by", ranked_by)
    describe_ranking(client, parent_run_id, runs, names, fixed, ranked_by)
    share_view(client, parent_run_id, ranked_by, "race" in table)
    shown += ["lrcr_calibrated", "opi_1_calibrated"] if ranked_by == "opi_1_calibrated" else []
    race = " (the race's eliminated last: on fewer examples, not comparable)" if any(map(eliminated, runs)) else ""
    log.info("sweep of %d configurations (%s), ranked by %s%s:\n%s", len(table), fixed_line(fixed),
             shown_metric(ranked_by), race, table[shown].to_string(index=False, float_format="{:.4f}".format))


def sweep_configurations(client: MlflowClient, parent_run_id: str, settings: ReportSettings,
                         runs: list | None = None, eliminated: int = 0
                         ) -> tuple[list[Configuration], list[str], ReportSettings]:
    """The children (``runs``, if already found) as the report reads them, by their short names, the sweep's label
    set, and the settings completed from the runs (the parts they share, where gold relations came from; why the
    sweep is incomplete, if it is; ``eliminated``: how many its race dropped, left out of ``runs`` by design)."""
    every = children(client, parent_run_id) if runs is None else runs
    clash = yardstick_clash(every, parent_run_id)  # before any download
    if clash:
        raise CommandError(clash)
    found = child_predictions(client, parent_run_id, every)
    if not found:
        return [], [], settings
    names, fixed = display_names(every)  # over every child: the names its runs show
    first_child = next(iter(found.values()))[0]
    relations = load_relation_set(first_child.data.params.get("relations.set", "paper13")).labels
    settings = dataclasses.replace(settings, fixed=tuple(fixed.items()))
    if settings.gold_source is None:
        settings = dataclasses.replace(settings, gold_source=first_child.data.tags.get("gold_relation_source"))
    if settings.scope is None:
        settings = dataclasses.replace(settings, scope=first_child.data.params.get("retrieval.scope", "article"))
    parent = client.get_run(parent_run_id)
    incomplete = sweep_incomplete(parent, len(found), eliminated)
    if incomplete:
        log.warning("sweep %s: %s", parent_run_id, incomplete)
        settings = dataclasses.replace(settings, incomplete=incomplete)
    if RACE_SUMMARY_TAG in parent.data.tags:
        settings = dataclasses.replace(settings, raced=(
            f"a race in which {parent.data.tags[RACE_SUMMARY_TAG]}; this report compares the survivors and the "
            f"bounds, on the same examples, and leaves out the {eliminated} eliminated early (the race table: the "
            "parent run's race/race.md)"))
    return [configuration(run, names[run.info.run_id], frame) for run, frame in found.values()], relations, settings


def configuration(run, name: str, predictions: pd.DataFrame) -> Configuration:
    """A child as the report reads it: its short name, its identity tags, its predictions and calibrated values."""
    tags = run.data.tags
    return Configuration(name, tags.get("opi.kind", "single"), tags.get("opi.setup", name), predictions,
                         tags.get("opi.bound"),
                         tuple(sorted((k, v) for k, v in run.data.metrics.items() if k in CALIBRATED)))


def content_key(configurations: list[Configuration]) -> str:
    """The configurations' content as a key: their names, kinds and predictions as text. Pickling DataFrames (the
    default hash) depends on the process's state, not only on their values: a warm sweep's report was missed."""
    return content_hash([(c.name, c.kind, c.setup, c.bound, c.calibrated,
                          c.predictions.to_json(orient="split", default_handler=str, double_precision=15))
                         for c in configurations])


def built_report(configurations: list[Configuration], relations: list[str], settings: ReportSettings,
                 cache_dir: str | None) -> tuple[SweepReport, dict[str, bytes] | None]:
    """The report and its figures; with ``cache_dir``, those of the same predictions and settings (a re-run sweep)
    are read back, kept whole (``flows.orchestration.kept``: no Prefect task run outside a flow, so a warm sweep
    imports no Prefect): the paired tests are most of a warm sweep's report, and drawing the figures ~1 s (pyplot's
    import, then rendering)."""
    stage = tasks.sweep_report
    if cache_dir is None:
        return stage.fn(configurations, relations, settings), None
    key = content_hash(content_key(configurations), relations, settings, stage.code())
    report, reused = recalled(cache_dir, f"report-{key}", lambda: stage.fn(configurations, relations, settings))
    if reused:
        log.info("sweep report: tables and tests of these predictions reused from the cache")
    figures, _ = recalled(cache_dir, f"report-figures-{key}", report.figures)
    return report, figures


def ranking_of_report(report: SweepReport, ids: dict[str, str]) -> list[Placed]:
    """The report's ranking (``overall``, best first) with its intervals and verdicts; ``ids``: name -> run id."""
    key = report.rank_by
    return [Placed(ids[row["configuration"]], row["configuration"], row[key], row.get(f"{key}_ci_low"),
                   row.get(f"{key}_ci_high"), row.get("bound") if isinstance(row.get("bound"), str) else None,
                   row.get("verdict"), row.get("p_adjusted"))
            for row in report.overall.to_dict("records")]


def describe_report(client: MlflowClient, parent_run_id: str, report: SweepReport, names: dict[str, str]) -> None:
    """The report's verdict and ranking table as the parent's description; each child's place and verdict."""
    ids = {name: run_id for run_id, name in names.items()}
    for run_id, line in placement_notes(ranking_of_report(report, ids), report.rank_by).items():
        client.set_tag(run_id, NOTE, line)
    before = client.get_run(parent_run_id).data.tags.get(NOTE, "")
    race = before.split("\n\n", 1)[0] if before.startswith(RACE_NOTE) else None  # the race's verdict stays first
    client.set_tag(parent_run_id, NOTE, limited("\n\n".join(filter(None, [race, report.summary_markdown(),
                                                                          REPORT_FILES]))))


def log_sweep_report(client: MlflowClient, parent_run_id: str, settings: ReportSettings, out: Path | None = None,
                     cache_dir: str | None = None) -> SweepReport | None:
    """Build the report from the children's predictions, log it under ``report/`` (and copy it to ``out``), its
    verdict and ranking the runs' descriptions."""
    # a race's eliminated configurations ran on fewer examples: its report compares the survivors and the bounds (the
    # race table shows the rest, flows.tracking.race_report)
    every = children(client, parent_run_id)
    runs = [run for run in every if run.data.tags.get(RACE_TAG, "survivor") in ("survivor", "bound")]
    configurations, relations, settings = sweep_configurations(client, parent_run_id, settings, runs,
                                                               sum(map(eliminated, every)))
    if not configurations:
        log.warning("sweep %s: no child run has predictions, no report", parent_run_id)
        return None
    report, figures = built_report(configurations, relations, settings, cache_dir)
    with tempfile.TemporaryDirectory() as folder:
        report.write(folder, figures)
        client.log_artifacts(parent_run_id, folder, "report")
        if out is not None:
            report.write(out, figures)
    client.log_metric(parent_run_id, f"best_{report.rank_by}", float(report.best[report.rank_by]))
    names, _ = name_children(client, runs)
    describe_report(client, parent_run_id, report, names)
    log.info("%s", report.headline().replace("**", ""))
    return report


def where_written(client: MlflowClient, parent_run_id: str, out: Path | None) -> str:
    """Where ``opi-report`` wrote: the parent run, its report's artifact address, and the local copy if any."""
    run = client.get_run(parent_run_id)
    artifacts = f"{run.info.artifact_uri.rstrip('/')}/report"
    local = f"; copied to {Path(out).resolve()}" if out is not None else ""
    return (f"report logged to the sweep's parent run {parent_run_id} (experiment {run.info.experiment_id}) at "
            f"{artifacts} (report.html, report.md, tables and plots; in the MLflow UI: the run's Artifacts, "
            f"report/){local}")


def report_of_sweep(tracking_uri: str, experiment: str, sweep: str | None, out: Path | None, config: ReportConfig,
                    beta: float | None, seed: int | None) -> SweepReport | None:
    """``opi-report``: the report of a finished sweep (the latest, or ``sweep``) at its own β and seed unless
    given, logged to its parent run; says where it wrote."""
    client = existing_store(tracking_uri)  # a store that is not there is not created
    parent = find_sweep(client, experiment, sweep)
    if out is not None:  # before the work
        writable_folder(Path(out), "--out")
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise CommandError(f"--out {out}: cannot make that folder ({err.strerror or err})") from None
    ran_with = sweep_settings(client, parent)
    beta = beta if beta is not None else float(ran_with.get("metrics.beta", 1.0))
    seed = seed if seed is not None else int(ran_with.get("seed", 0))
    log.info("report of sweep %s at β = %g, seed %d", parent, beta, seed)
    report = log_sweep_report(client, parent, ReportSettings(config, beta, seed), out)
    race = raced(client, parent)
    if report is None and race is None:
        raise CommandError(f"sweep {parent}: no configuration of it has results, so there is nothing to report (it "
                           "failed or was stopped before one finished: its opi-eval command, run again, resumes it)")
    if report is not None:
        log.info("%s", where_written(client, parent, out))
    if race is not None:  # a race: its report compares the survivors; the race says what happened to the rest
        log.info("%s\n(the race table: the parent run's race/race.md%s)", race.split("\n\n")[1],
                 f", copied to {Path(out).resolve() / 'race.md'}" if out is not None else "")
        if out is not None:
            Path(out).mkdir(parents=True, exist_ok=True)
            write_atomically(Path(out) / "race.md", lambda path: path.write_text(race))
    return report
