"""People label the relations of a finished sweep's generated answers (``opi-label answers``), and each
configuration's LRCR is calibrated by them with prediction-powered inference (``opi.metrics.calibration``).

- ``export``: a blind sheet (question, article excerpt, the sentences the reader saw, the answer, a blank relation;
  the gold answer and a blank gold relation too where gold relations are the classifier's), ``--n`` answers per
  configuration drawn within relations (the same examples in every configuration); an answer several
  configurations gave is one row. The key (which configurations each row stands for) stays with the sweep's run.
- ``import``: every row checked (known item, a relation of the set, none twice, the answer as exported) before
  anything is logged; blank rows are answers not labelled. Then: the labels on the parent run, a HUMAN assessment
  ``human_relation`` on each labelled example's trace where the run has one, and on each child
  ``lrcr_calibrated`` with its interval, ``opi_1_calibrated`` with its interval, ``labels_used`` and
  ``classifier_accuracy_vs_people``; the table, raw beside calibrated, on the parent (``answer_labels/``).
  Intervals are by cluster: each answer's article (``dataset.group``), or each answer under ``report.unit=example``
  (the unit the sweep's runs were evaluated with).
- ``plan``: labels per configuration for an interval of a given half-width, inflated by the design effect
  1 + (m - 1)·ICC of answers on one article (the ICC of the residuals by article from the labels so far, else
  ``DEFAULT_ICC``).
"""
from __future__ import annotations

import logging
import random
import tempfile
from pathlib import Path

import pandas as pd

from flows.human.annotate import report_unit, sampled, unit_of
from flows.human.label import write_definitions
from flows.base.errors import CommandError
from flows.tracking.store import existing_store
from flows.tracking.sweep_report import log_sweep_summary
from flows.tracking.sweeps import child_predictions, find_sweep
from flows.tracking.traces import EXAMPLE_TAG
from opi.data import DataError
from opi.metrics.names import LRCR, OPI_1
from opi.sheets import read_sheet as read_csv_sheet, same_text
from opi.metrics.calibration import DEFAULT_ICC, calibrated_lrcr, labels_for_width
from opi.metrics.ppi import MIN_ICC_CLUSTERS, design_effect, intraclass_correlation, same_cluster_share
from opi.metrics.stats import cluster_codes, design
from opi.relations import load_relation_set

log = logging.getLogger("opi")
FOLDER = "answer_labels"
KEY, LABELS = f"{FOLDER}/key.csv", f"{FOLDER}/labels.csv"


def sweep_answers(client, parent: str) -> pd.DataFrame:
    """One row per (configuration, example) that has an answer, a gold and a predicted relation."""
    runs = child_predictions(client, parent)
    if not runs:
        raise CommandError(f"sweep {parent} has no child runs with predictions")
    frames = [frame.assign(configuration=name, run_id=run.info.run_id,
                           gold_source=run.data.tags.get("gold_relation_source", "labels"),
                           relation_set=run.data.params.get("relations.set", "paper13"),
                           report_unit=report_unit(run))
              for name, (run, frame) in runs.items()]
    answers = pd.concat(frames, ignore_index=True).rename(columns={"id": "example_id"})
    kept = answers["generated_answer"].notna() & answers["relation"].notna() & answers["predicted_relation"].notna()
    if not kept.any():
        raise CommandError(f"sweep {parent} has no answers with gold and predicted relations to label "
                           "(relations.gold=none?)")
    return answers[kept].reset_index(drop=True)


def export(client, parent: str, n: int, out: Path, seed: int) -> None:
    answers = sweep_answers(client, parent)
    chosen = sampled(answers, n, seed)
    distinct = chosen.drop_duplicates(["example_id", "generated_answer"])
    order = list(range(len(distinct)))
    random.Random(seed).shuffle(order)
    width = len(str(len(distinct)))
    distinct = distinct.iloc[order].assign(item=[f"r{i + 1:0{width}d}" for i in range(len(distinct))])
    key = chosen.merge(distinct[["item", "example_id", "generated_answer"]], on=["example_id", "generated_answer"])
    ask_gold = (answers["gold_source"] == "classifier").any()
    sheet = pd.DataFrame({"item": distinct["item"], "question": distinct["question"],
                          "article_excerpt": distinct["article_excerpt"],
                          "sentences_seen": ["\n".join(f"- {s}" for s in sentences)
                                             for sentences in distinct["sentences"]],
                          "generated_answer": distinct["generated_answer"], "relation": ""})
    if ask_gold:  # the gold relations are machine labels too: people name the gold answer's relation as well
        sheet["gold_answer"], sheet["gold_relation"] = list(distinct["answer"]), ""
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.to_csv(out, index=False)
    relation_set = load_relation_set(answers["relation_set"].iloc[0])
    definitions = write_definitions(out, relation_set)
    with tempfile.TemporaryDirectory() as folder:
        key[["item", "run_id", "configuration", "example_id", "generated_answer"]].to_csv(
            Path(folder) / "key.csv", index=False)
        sheet.to_csv(Path(folder) / "sheet.csv", index=False)
        client.log_artifacts(parent, folder, FOLDER)
    log.info("%s: %d answers to label (they stand for %d answers of %d configurations, about %d each); "
             "definitions: %s; key kept with sweep run %s", out, len(sheet), len(key), key["configuration"].nunique(),
             n, definitions, parent)


def read_key(client, parent: str) -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as folder:
        try:
            return pd.read_csv(client.download_artifacts(parent, KEY, folder), dtype=str, keep_default_na=False)
        except Exception as err:
            raise CommandError(f"sweep run {parent} has no {KEY}: export its sheet first "
                               f"(opi-label answers export --sweep {parent})") from err


def read_sheet(path: Path, key: pd.DataFrame, labels: list[str], ask_gold: bool) -> pd.DataFrame:
    """The labelled rows of a filled sheet (item, relation[, gold_relation]), every row checked first; a DataError
    names the row and field. A row left blank is an answer not labelled."""
    needed = ["item", "relation", *(["gold_relation"] if ask_gold else [])]
    # the answer column too: it is what ties each row to this export
    sheet = read_csv_sheet(path, [*needed, "generated_answer"], "opi-label answers export")
    exported = dict(zip(key["item"], key["generated_answer"]))
    seen: set[str] = set()
    for row_number, row in enumerate(sheet.to_dict("records"), start=2):  # row 1 is the header
        where = f"{path}, row {row_number}"
        item = row["item"].strip()
        if item not in exported:
            raise DataError(f"{where}, field 'item': {row['item']!r} is not an item of this sweep's export")
        if item in seen:
            raise DataError(f"{where}, field 'item': {item!r} labelled twice")
        seen.add(item)
        if not same_text(exported[item], row["generated_answer"]):
            raise DataError(f"{where}, field 'generated_answer': not the answer exported as {item!r}; this sheet "
                            "belongs to another export")
        for column in needed[1:]:
            value = row[column].strip()
            if value and value not in labels:
                raise DataError(f"{where}, field {column!r}: {row[column]!r} is not one of {labels}")
        if ask_gold and bool(row["relation"].strip()) != bool(row["gold_relation"].strip()):
            raise DataError(f"{where}: label both 'relation' and 'gold_relation', or neither")
    sheet = sheet.assign(item=sheet["item"].str.strip(), relation=sheet["relation"].str.strip())
    if ask_gold:
        sheet["gold_relation"] = sheet["gold_relation"].str.strip()
    return sheet[sheet["relation"] != ""][needed].reset_index(drop=True)


def import_labels(client, tracking_uri: str, parent: str, path: Path, seed: int = 0) -> pd.DataFrame:
    key, answers = read_key(client, parent), sweep_answers(client, parent)
    ask_gold = (answers["gold_source"] == "classifier").any()
    relation_set = load_relation_set(answers["relation_set"].iloc[0])
    labelled = read_sheet(path, key, relation_set.labels, ask_gold)
    if labelled.empty:
        raise DataError(f"{path}: no row has a relation: nothing to import")
    human = key.merge(labelled, on="item")  # each label counts for every configuration that gave the answer
    human = human.rename(columns={"relation": "human_relation", "gold_relation": "human_gold_relation"})
    unlabelled = [c for c in answers["configuration"].unique() if c not in set(human["configuration"])]
    if unlabelled:
        raise DataError(f"{path}: no labelled row is an answer of {', '.join(map(str, unlabelled))} "
                        f"({len(unlabelled)} of {answers['configuration'].nunique()} configurations), and a calibrated "
                        f"LRCR needs at least one label among a configuration's answers: label rows they gave too "
                        f"(the sweep run's {KEY} lists which configurations gave each item). Nothing was logged.")
    table = calibrate(answers, human, seed)  # before anything is logged: what cannot be computed logs nothing
    with tempfile.TemporaryDirectory() as folder:
        human.to_csv(Path(folder) / "labels.csv", index=False)
        client.log_artifacts(parent, folder, FOLDER)
    assessed = log_assessments(client, tracking_uri, human)
    for row in table.to_dict("records"):
        for name, value in row.items():
            if name not in ("configuration", "run_id") and pd.notna(value):
                client.log_metric(row["run_id"], name, float(value))
    raw = {row["run_id"]: client.get_run(row["run_id"]).data.metrics for row in table.to_dict("records")}
    table.insert(1, LRCR, [raw[r].get(LRCR) for r in table["run_id"]])
    table.insert(table.columns.get_loc("opi_1_calibrated"), OPI_1, [raw[r].get(OPI_1) for r in table["run_id"]])
    table = table.sort_values("opi_1_calibrated", ascending=False).drop(columns="run_id")
    with tempfile.TemporaryDirectory() as folder:
        table.to_csv(Path(folder) / "calibrated.csv", index=False)
        (Path(folder) / "calibrated.md").write_text(table.to_markdown(index=False, floatfmt=".4f"))
        client.log_artifacts(parent, folder, FOLDER)
    log_sweep_summary(client, parent)  # the parent's comparison table: raw and calibrated, ranked by calibrated
    log.info("%d answers labelled by people (%d answer-configuration pairs; %d traces got the label); LRCR raw and "
             "calibrated, ranked by calibrated OPI-1:\n%s", len(labelled), len(human), assessed,
             table.to_string(index=False, float_format="{:.4f}".format))
    log.info("the sweep report with these columns: opi-report --sweep %s", parent)
    flat = table[table["lrcr_calibrated_ci_high"] - table["lrcr_calibrated_ci_low"] < 1e-9]
    if len(flat):
        log.warning("%s: the calibrated LRCR's interval has no width, because every one of their labels agrees "
                    "with the gold relation the same way (the spread of %s labels is 0, as a Wald interval's, and "
                    "ppi_py's, is then): that is too few labels, not certainty; label more of their answers",
                    ", ".join(map(str, flat["configuration"])), "/".join(f"{n:.0f}" for n in flat["labels_used"]))
    return table


def log_assessments(client, tracking_uri: str, human: pd.DataFrame) -> int:
    """The people's labels as HUMAN assessments on the examples' traces, where the runs have them (a label that
    cannot be written there is said once; the labels are logged on the parent run anyway). One label a trace from
    this source: a sheet imported again leaves an identical label as it is and replaces a changed one. Returns how
    many traces carry the label."""
    import mlflow
    from mlflow.entities import AssessmentSource

    mlflow.set_tracking_uri(tracking_uri)  # mlflow.log_feedback writes to the process's store: this command's
    logged, kept, replaced, failed = 0, 0, 0, 0
    for run_id, group in human.groupby("run_id"):
        by_example = labelled_traces(client, client.get_run(run_id).info.experiment_id, run_id)
        for row in group.itertuples():
            if row.example_id not in by_example:
                continue
            trace_id, earlier = by_example[row.example_id]
            try:
                if len(earlier) == 1 and earlier[0].value == row.human_relation:
                    kept += 1
                    continue
                for assessment in earlier:  # a changed label (or, from an older version, several): replaced
                    mlflow.delete_assessment(trace_id=trace_id, assessment_id=assessment.assessment_id)
                mlflow.log_feedback(trace_id=trace_id, name=HUMAN_LABEL, value=row.human_relation,
                                    source=AssessmentSource("HUMAN", LABEL_SOURCE))
                logged += 1
                replaced += bool(earlier)
            except Exception as err:
                failed += 1
                error = f"{type(err).__name__}: {err}"
    if failed:
        log.warning("%d labels could not be added to their traces (%s)", failed, error)
    if kept or replaced:
        log.info("labels on traces: %d new, %d replaced (changed), %d already there", logged - replaced, replaced,
                 kept)
    return logged + kept


HUMAN_LABEL, LABEL_SOURCE = "human_relation", "opi-label"


def labelled_traces(client, experiment_id: str, run_id: str) -> dict[str, tuple[str, list]]:
    """Example id -> (trace id, the valid ``human_relation`` labels this command logged there before) of this
    run's traces."""
    found, token = {}, None
    while True:
        page = client.search_traces(locations=[experiment_id], run_id=run_id, include_spans=False,
                                    max_results=500, page_token=token)
        for trace in page:
            if EXAMPLE_TAG in trace.info.tags:
                found[trace.info.tags[EXAMPLE_TAG]] = (trace.info.trace_id, [
                    a for a in trace.info.assessments or []
                    if a.name == HUMAN_LABEL and a.valid is not False and a.source.source_type == "HUMAN"
                    and a.source.source_id == LABEL_SOURCE])
        token = page.token
        if not token:
            return found


def calibrate(answers: pd.DataFrame, human: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per configuration: raw and calibrated LRCR and OPI-1 with intervals (by cluster, under the run's
    ``report.unit``), labels used, and how often the classifier named the relation people named."""
    records = []
    for configuration, rows in answers.groupby("configuration", sort=False):
        labels = human[human["configuration"] == configuration][["example_id", "human_relation",
                                                                 *(["human_gold_relation"]
                                                                   if "human_gold_relation" in human else [])]]
        rows = rows.merge(labels, on="example_id", how="left")
        truth = rows["human_gold_relation"] if "human_gold_relation" in rows else rows["relation"]
        result = calibrated_lrcr(
            machine=(rows["predicted_relation"] == rows["relation"]).to_numpy(float),
            human=(rows["human_relation"] == truth).where(rows["human_relation"].notna()).to_numpy(float),
            relations=rows["relation"].to_numpy(str), similarity=rows["similarity"].to_numpy(float), seed=seed,
            clusters=cluster_codes(rows, unit_of(rows)))
        labelled = rows["human_relation"].notna()
        records.append({"configuration": configuration, "run_id": rows["run_id"].iloc[0], **result,
                        "classifier_accuracy_vs_people": float((rows["predicted_relation"][labelled]
                                                                == rows["human_relation"][labelled]).mean())})
    return pd.DataFrame.from_records(records)


def plan(client, parent: str, width: float) -> pd.DataFrame:
    """Human labels per configuration for a calibrated-LRCR interval of half-width ``width``: from the residual
    variance of the labels imported so far (else the worst case), inflated by the design effect of labels on one
    article (``opi.metrics.ppi.labels_needed``)."""
    answers = sweep_answers(client, parent)
    human = None
    with tempfile.TemporaryDirectory() as folder:
        try:
            human = pd.read_csv(client.download_artifacts(parent, LABELS, folder), dtype=str, keep_default_na=False)
        except Exception:
            pass
    table = pd.DataFrame.from_records([planned(configuration, rows, human, width)
                                       for configuration, rows in answers.groupby("configuration", sort=False)])
    log.info("labels per configuration for a calibrated LRCR interval of +/- %.3f (95 %%), inflated by the design "
             "effect 1 + (m-1)*ICC of labels on one article (m: labels expected on a label's article; ICC: the "
             "residuals' intra-article correlation from the labels so far, or %.1f where fewer than %d articles have "
             "two or more, or %d labels beyond one per article); reaches_width False: not even every answer does:\n%s",
             width, DEFAULT_ICC, MIN_ICC_CLUSTERS, MIN_ICC_CLUSTERS,
             table.to_string(index=False, float_format="{:.3f}".format))
    return table


def planned(configuration: str, rows: pd.DataFrame, human: pd.DataFrame | None, width: float) -> dict:
    """One configuration's row of the plan."""
    used = design(rows, unit_of(rows))
    clusters = cluster_codes(rows, used.unit)
    residual, icc, icc_from = residuals_so_far(rows.assign(cluster_code=clusters), human, configuration, used.unit)
    share = same_cluster_share(clusters)
    needed, reached = labels_for_width(width, residual, len(rows), icc=icc, same_cluster=share)
    return {"configuration": configuration, "answers": used.describe(),
            LRCR: float((rows["predicted_relation"] == rows["relation"]).mean()), "icc": icc, "icc_from": icc_from,
            "design_effect": design_effect(needed, icc, share), "labels_needed": needed, "reaches_width": reached,
            "from": "labels so far" if residual is not None else "worst case (no labels yet)"}


def residuals_so_far(rows: pd.DataFrame, human: pd.DataFrame | None, configuration: str, unit: str
                     ) -> tuple[float | None, float, str]:
    """(variance of machine - human over the labels so far, None under two; the residuals' ICC by cluster and
    where it comes from: "labels", "default" or "none" under ``unit=example``)."""
    if unit == "example":
        icc, icc_from = 0.0, "none (unit example)"
    else:
        icc, icc_from = DEFAULT_ICC, "default"
    if human is None:
        return None, icc, icc_from
    mine = rows.merge(human[human["configuration"] == configuration][["example_id", "human_relation"]],
                      on="example_id")
    if len(mine) < 2:
        return None, icc, icc_from
    residual = ((mine["predicted_relation"] == mine["relation"]).astype(float)
                - (mine["human_relation"] == mine["relation"]).astype(float))
    estimated = None if unit == "example" else intraclass_correlation(residual.to_numpy(), mine["cluster_code"])
    if estimated is not None:
        icc, icc_from = estimated, "labels"
    return float(residual.var(ddof=1)), icc, icc_from


def answers_command(tracking_uri: str, experiment: str, sweep: str | None, command: str, path: Path | None,
                    n: int, seed: int, width: float) -> None:
    client = existing_store(tracking_uri)
    parent = find_sweep(client, experiment, sweep)
    if command == "export":
        export(client, parent, n, path, seed)
    elif command == "import":
        import_labels(client, tracking_uri, parent, path, seed)
    else:
        plan(client, parent, width)
