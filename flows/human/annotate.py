"""People score a finished sweep's answers 0-3-7 (``opi-annotate``), and we measure which metric agrees with them.

The sheet's key (which configurations gave each answer) stays with the sweep's MLflow run, so the sheet itself
shows no configuration. Import logs, on the parent run: meta_evaluation/{agreement,by_configuration,places,
human_scores}.csv and metrics such as human_vs_bertsim_spearman; on each child run: human_mean and, where the LLM
judge scored every answer (``metrics=full``) and people a sample of them (``export --n``), ``extrinsic_calibrated``:
people's mean 0-3-7 score over all answers by prediction-powered inference, with its interval (by article,
the cluster-robust PPI variance; per question under ``report.unit=example``).
"""
from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pandas as pd

from flows.base.errors import CommandError
from flows.tracking.store import existing_store
from flows.tracking.sweeps import child_predictions, find_sweep
from opi.metrics.extrinsic import SCALE, annotation_sheet, export_sheet, import_sheet, scores_by_configuration
from opi.metrics.meta import agreement_table, places
from opi.metrics.names import BERTSIM
from opi.metrics.ppi import ppi_mean
from opi.metrics.stats import cluster_codes
from opi.trace_records import traced_ids

log = logging.getLogger("opi")
KEY_ARTIFACT = "annotation/key.csv"
# score column in predictions.parquet -> (name in the tables, scale maximum)
METRIC_COLUMNS = {"similarity": (BERTSIM, 1.0), "correctness": ("correctness", 1.0), "judge_score": ("judge", 7.0)}


def sweep_predictions(client, parent: str) -> pd.DataFrame:
    """Every child's predictions.parquet, one row per (example, configuration)."""
    runs = child_predictions(client, parent)
    if not runs:
        raise CommandError(f"sweep {parent} has no child runs with predictions")
    frames = [frame.assign(configuration=name, run_id=run.info.run_id, report_unit=report_unit(run))
              for name, (run, frame) in runs.items()]
    return pd.concat(frames, ignore_index=True).rename(columns={"id": "example_id", "answer": "ground_truth"})


def report_unit(run) -> str:
    """The unit of inference the run was evaluated with (its ``report.unit``; "article" before there was one)."""
    return run.data.params.get("report.unit", "article")


def unit_of(rows: pd.DataFrame) -> str:
    """The unit of inference of one configuration's rows (``report_unit``'s column; "article" without it)."""
    return str(rows["report_unit"].iloc[0]) if "report_unit" in rows and len(rows) else "article"


def sampled(answers: pd.DataFrame, n: int | None, seed: int) -> pd.DataFrame:
    """``n`` answers per configuration drawn within relations (the same examples in every configuration), or all."""
    if n is None:
        return answers
    return pd.concat([group[group["example_id"].isin(traced_ids(list(group["example_id"]), list(group["relation"]),
                                                                n, seed))]
                      for _, group in answers.groupby("configuration", sort=False)], ignore_index=True)


def export(client, parent: str, out: Path, seed: int, n: int | None = None) -> None:
    answers = sweep_predictions(client, parent)
    answers = sampled(answers[answers["generated_answer"].notna()], n, seed)
    sheet, key = annotation_sheet(answers, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    export_sheet(sheet, out)
    with tempfile.TemporaryDirectory() as folder:
        key.to_csv(Path(folder) / "key.csv", index=False)
        export_sheet(sheet, Path(folder) / "sheet.csv")
        client.log_artifacts(parent, folder, "annotation")
    log.info("%s: %d answers to score 0/3/7 (they stand for %d answer-configuration pairs of %d configurations); "
             "key kept with sweep run %s", out, len(sheet), len(key), key["configuration"].nunique(), parent)


def meta_evaluation(answers: pd.DataFrame, human: pd.DataFrame, edges: tuple[float, ...]) -> dict[str, pd.DataFrame]:
    """The tables: agreement of every metric with people, per-configuration means, and place-by-place rankings."""
    present = {column: spec for column, spec in METRIC_COLUMNS.items() if column in answers}
    frame = human.rename(columns={"score": "human"}).merge(
        answers[["example_id", "configuration", *present]], on=["example_id", "configuration"], how="left",
        validate="one_to_one", indicator=True)
    if (frame.pop("_merge") != "both").any():
        raise CommandError("the annotation key names answers this sweep no longer has; export the sheet again")
    frame = frame.rename(columns={column: name for column, (name, _) in present.items()})
    scales = {"human": 7.0, **{name: scale for name, scale in present.values()}}
    agreement = agreement_table(frame, "human", scales, edges)
    by_configuration = frame.groupby("configuration")[list(scales)].mean().sort_values("human", ascending=False)
    place_table = pd.DataFrame({"place": range(1, len(by_configuration) + 1)})
    for name in scales:
        if name != "human":
            view = places(by_configuration["human"], by_configuration[name])
            place_table["by_human"] = view["by_human"]
            place_table[f"by_{name}"], place_table[f"agree_{name}"] = view[f"by_{name}"], view["agree"]
    return {"human_scores": frame, "agreement": agreement, "by_configuration": by_configuration.reset_index(),
            "places": place_table}


def import_scores(client, parent: str, sheet: Path, edges: tuple[float, ...]) -> dict[str, pd.DataFrame]:
    with tempfile.TemporaryDirectory() as folder:
        try:
            key = pd.read_csv(client.download_artifacts(parent, KEY_ARTIFACT, folder), dtype=str,
                              keep_default_na=False)
        except Exception as err:
            raise CommandError(f"sweep run {parent} has no {KEY_ARTIFACT}: export its sheet first "
                            f"(opi-annotate export --sweep {parent})") from err
    answers = dict(zip(key["id"], key["generated_answer"])) if "generated_answer" in key else None
    human = scores_by_configuration(import_sheet(sheet, key["id"], answers), key)
    answers = sweep_predictions(client, parent)
    tables = meta_evaluation(answers, human, edges)
    with tempfile.TemporaryDirectory() as folder:
        for name, table in tables.items():
            table.to_csv(Path(folder) / f"{name}.csv", index=False)
        client.log_artifacts(parent, folder, "meta_evaluation")
    for row in tables["agreement"].to_dict("records"):
        for stat in ("spearman", "kendall", "pearson", "average_absolute_difference", "bracket_accuracy"):
            if pd.notna(row[stat]):
                client.log_metric(parent, f"human_vs_{row['metric']}_{stat}", float(row[stat]))
    run_ids = answers.drop_duplicates("configuration").set_index("configuration")["run_id"]
    for configuration, mean in tables["by_configuration"].set_index("configuration")["human"].items():
        client.log_metric(run_ids[configuration], "human_mean", float(mean))
    for configuration, metrics in calibrated_extrinsic(answers, human).items():
        for name, value in metrics.items():
            client.log_metric(run_ids[configuration], name, value)
    log.info("agreement with people (%d answers scored):\n%s", len(human), summary(tables))
    return tables


def summary(tables: dict[str, pd.DataFrame]) -> str:
    """The agreement and per-configuration tables as the console shows them. A format function, not "%.3f": pandas
    calls a format string on its nullable columns (the judge's and correctness scores)."""
    return (f"{tables['agreement'].to_string(index=False, float_format='{:.3f}'.format)}\n\nby configuration:\n"
            f"{tables['by_configuration'].to_string(index=False, float_format='{:.3f}'.format)}")


def calibrated_extrinsic(answers: pd.DataFrame, human: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per configuration with judge scores: the mean people's 0-3-7 score over all its answers, estimated by PPI++
    from people's scores on the sheet's answers and the LLM judge's on every answer (``extrinsic_calibrated``, its
    interval cut to the scale [0, 7], and the people's scores used). The interval is by cluster (each answer's
    article under the run's ``report.unit``): PPI's cluster-robust variance (``opi.metrics.ppi``)."""
    if "judge_score" not in answers:
        return {}
    found = {}
    for configuration, rows in answers.groupby("configuration", sort=False):
        rows = rows[rows["judge_score"].notna()].merge(human[human["configuration"] == configuration][
            ["example_id", "score"]], on="example_id", how="left")
        labelled = rows["score"].notna().to_numpy()
        if labelled.sum() < 2:
            continue
        clusters = cluster_codes(rows, unit_of(rows))
        score, judge = rows["score"].to_numpy(float), rows["judge_score"].to_numpy(float)
        estimate = ppi_mean(score[labelled], judge[labelled], judge[~labelled], clusters=clusters[labelled],
                            clusters_unlabelled=clusters[~labelled])
        found[configuration] = {"extrinsic_calibrated": estimate.value,
                                "extrinsic_calibrated_ci_low": max(estimate.low, min(SCALE)),
                                "extrinsic_calibrated_ci_high": min(estimate.high, max(SCALE)),
                                "extrinsic_labels_used": float(labelled.sum())}
    return found


def annotate(tracking_uri: str, experiment: str, sweep: str | None, command: str, path: Path, seed: int,
             edges: tuple[float, ...], n: int | None = None) -> None:
    """``opi-annotate export`` or ``import`` for a finished sweep (the latest, or ``sweep``)."""
    client = existing_store(tracking_uri)
    parent = find_sweep(client, experiment, sweep)
    if command == "export":
        export(client, parent, path, seed, n)
    else:
        import_scores(client, parent, path, edges)
