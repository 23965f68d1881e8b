"""People's relation labels of a sweep's answers calibrate its LRCR: the sheet, its checks, and end to end with a
simulated labeller whose truth is known for every answer."""
import hashlib

import mlflow
import numpy as np
import pandas as pd
import pytest

from flows.human.answers import read_sheet
from opi.data import DataError
from opi.relations import load_relation_set
from tests.helpers.cli import run_cli

LABELS = load_relation_set("paper13").labels
FLIP = 0.3  # the simulated labeller disagrees with the classifier on 30 % of answers


def simulated(example_id: str, answer: str, predicted: str) -> str:
    """The simulated person's relation of an answer: the classifier's, flipped to another relation with probability
    FLIP, seeded by the answer (so the same answer gets the same label wherever it appears)."""
    draw = int(hashlib.sha256(f"{example_id}|{answer}".encode()).hexdigest(), 16)
    if (draw % 1000) / 1000 >= FLIP:
        return predicted
    others = [label for label in LABELS if label != predicted]
    return others[(draw // 1000) % len(others)]


def sweep_answers(uri: str) -> tuple[str, pd.DataFrame]:
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("opi")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'sweep'")
    frames = []
    for run in client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'"):
        path = client.download_artifacts(run.info.run_id, "predictions.parquet")
        frames.append(pd.read_parquet(path).assign(run_id=run.info.run_id))
    return parent.info.run_id, pd.concat(frames, ignore_index=True)


def label_and_import(folder, uri, n: int) -> tuple[pd.DataFrame, dict]:
    """Export, fill every row with the simulated labeller, import; the answers with their simulated truth."""
    parent, answers = sweep_answers(uri)
    run_cli("flows.cli.label", folder, "answers", "export", "--tracking-uri", uri, "--n", str(n),
            "--out", str(folder / "sheet.csv"))
    sheet = pd.read_csv(folder / "sheet.csv", dtype=str, keep_default_na=False)
    key = pd.read_csv(mlflow.MlflowClient(uri).download_artifacts(parent, "answer_labels/key.csv"), dtype=str)
    answers = answers[answers["generated_answer"].notna()].copy()
    # one label per distinct answer (as a person gives it), from the classifier's label of its first appearance
    first = answers.sort_values("run_id").drop_duplicates(["id", "generated_answer"])
    canonical = {(r.id, r.generated_answer): simulated(r.id, r.generated_answer, r.predicted_relation)
                 for r in first.itertuples()}
    answers["truth"] = [canonical[(r.id, r.generated_answer)] for r in answers.itertuples()]
    items = key.drop_duplicates("item").set_index("item")
    sheet["relation"] = [canonical[(items.loc[i, "example_id"], items.loc[i, "generated_answer"])]
                         for i in sheet["item"]]
    sheet.to_csv(folder / "sheet.csv", index=False)
    log = run_cli("flows.cli.label", folder, "answers", "import", str(folder / "sheet.csv"), "--tracking-uri", uri)
    return answers, {"log": log, "parent": parent, "sheet": sheet}


def check_calibrated(uri: str, answers: pd.DataFrame, n: int) -> list[bool]:
    """Every child's calibrated figures in order; whether each interval covers the simulated truth."""
    client = mlflow.MlflowClient(uri)
    covered, differs = [], []
    for run_id, rows in answers.groupby("run_id"):
        metrics = client.get_run(run_id).data.metrics
        truth = float((rows["truth"] == rows["relation"]).mean())  # simulated LRCR on every answer
        low, high = metrics["lrcr_calibrated_ci_low"], metrics["lrcr_calibrated_ci_high"]
        assert low <= metrics["lrcr_calibrated"] <= high
        assert metrics["opi_1_calibrated_ci_low"] <= metrics["opi_1_calibrated"] <= metrics["opi_1_calibrated_ci_high"]
        assert n <= metrics["labels_used"] <= len(rows)
        covered.append(low <= truth <= high)
        differs.append(abs(metrics["lrcr_calibrated"] - metrics["lrcr"]) > 1e-6)
        agreement = metrics["classifier_accuracy_vs_people"]
        assert 1 - FLIP - 0.2 <= agreement <= 1 - FLIP + 0.2
    assert any(differs)
    return covered


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("answers")
    run_cli("flows.cli.evaluate", folder, "-m", "setup=knn,bm25,s_two", "dataset.limit=90", "classifier.folds=2",
            "report.enabled=false")
    return folder, f"sqlite:///{folder}/mlflow.db"


def test_export_then_import_with_a_known_labeller_gives_intervals_that_cover_the_truth(sweep):
    folder, uri = sweep
    answers, result = label_and_import(folder, uri, n=40)
    sheet = result["sheet"]
    assert list(sheet.columns[:6]) == ["item", "question", "article_excerpt", "sentences_seen", "generated_answer",
                                       "relation"]
    assert "configuration" not in sheet and "predicted_relation" not in sheet  # blind
    assert (folder / "sheet.definitions.md").read_text().count("\n- `") == 13
    assert all(check_calibrated(uri, answers, 40))
    client = mlflow.MlflowClient(uri)
    table = pd.read_csv(client.download_artifacts(result["parent"], "answer_labels/calibrated.csv"))
    assert {"lrcr", "lrcr_calibrated", "opi_1", "opi_1_calibrated"} <= set(table.columns)
    assert list(table["opi_1_calibrated"]) == sorted(table["opi_1_calibrated"], reverse=True)
    assert "calibrated" in result["log"]


def test_plan_says_how_many_labels_reach_a_width(sweep):
    folder, uri = sweep
    log = run_cli("flows.cli.label", folder, "answers", "plan", "--tracking-uri", uri, "--width", "0.1")
    assert "labels per configuration" in log and "labels_needed" in log


def key_of(items: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"item": list(items), "generated_answer": list(items.values())})


@pytest.mark.parametrize("rows, message", [
    ([("r9", "causal")], "field 'item': 'r9' is not an item"),
    ([("r1", "causal"), ("r1", "causal")], "'r1' labelled twice"),
    ([("r1", "causl")], "field 'relation': 'causl' is not one of"),
])
def test_a_bad_row_is_named_before_anything_is_logged(tmp_path, rows, message):
    path = tmp_path / "sheet.csv"
    pd.DataFrame(rows, columns=["item", "relation"]).to_csv(path, index=False)
    with pytest.raises(DataError, match=message):
        read_sheet(path, key_of({"r1": "a", "r2": "b"}), LABELS, ask_gold=False)


def test_blank_rows_are_not_labelled_and_an_answer_from_another_export_is_refused(tmp_path):
    path = tmp_path / "sheet.csv"
    pd.DataFrame({"item": ["r1", "r2"], "generated_answer": ["a", "b"], "relation": ["causal", ""]}).to_csv(path,
                                                                                                      index=False)
    assert read_sheet(path, key_of({"r1": "a", "r2": "b"}), LABELS, False).to_dict("records") == [
        {"item": "r1", "relation": "causal"}]
    with pytest.raises(DataError, match="row 2, field 'generated_answer'"):
        read_sheet(path, key_of({"r1": "other", "r2": "b"}), LABELS, False)


@pytest.mark.slow
def test_the_readme_grid_calibrated_by_a_simulated_labeller(tmp_path):
    """The README's grid + bounds on deeplogic-v2 (15 configurations x 416 answers), 40 labels a configuration.
    Each 95 % interval covers its truth with probability 0.95, so of 15 about one may miss: at most two do."""
    run_cli("flows.cli.evaluate", tmp_path, "experiment=paper_grid_bounds", "dataset=deeplogic-v2",
            "report.enabled=false", "tracking.traces=none")
    answers, _ = label_and_import(tmp_path, f"sqlite:///{tmp_path}/mlflow.db", n=40)
    covered = check_calibrated(f"sqlite:///{tmp_path}/mlflow.db", answers, 40)
    print(f"\n{sum(covered)} of {len(covered)} calibrated intervals cover the simulated truth")
    assert len(covered) == 15 and sum(covered) >= 13


def test_where_gold_relations_are_machine_labels_the_sheet_needs_both_relations(tmp_path):
    path = tmp_path / "sheet.csv"
    pd.DataFrame({"item": ["r1", "r2", "r3"], "relation": ["causal", "", "causal"],
                  "gold_relation": ["deductive", "", ""]}).to_csv(path, index=False)
    with pytest.raises(DataError, match="row 4: label both 'relation' and 'gold_relation', or neither"):
        read_sheet(path, key_of({"r1": "a", "r2": "b", "r3": "c"}), LABELS, ask_gold=True)
    pd.DataFrame({"item": ["r1"], "relation": ["causal"]}).to_csv(path, index=False)
    with pytest.raises(DataError, match="missing column 'gold_relation'"):
        read_sheet(path, key_of({"r1": "a"}), LABELS, ask_gold=True)


def test_calibrated_extrinsic_is_ppi_of_people_s_scores_with_the_judge_on_every_answer():
    from flows.human.annotate import calibrated_extrinsic
    from opi.metrics.ppi import ppi_mean

    answers = pd.DataFrame({"configuration": ["k"] * 6, "example_id": list("abcdef"),
                            "judge_score": [7, 3, 0, 7, 7, 3]})
    human = pd.DataFrame({"configuration": ["k"] * 3, "example_id": list("abc"), "score": [7, 0, 0]})
    found = calibrated_extrinsic(answers, human)["k"]
    expected = ppi_mean([7, 0, 0], [7, 3, 0], [7, 7, 3])
    assert found["extrinsic_calibrated"] == pytest.approx(expected.value)
    assert (found["extrinsic_calibrated_ci_low"], found["extrinsic_labels_used"]) == (pytest.approx(expected.low), 3)
    assert calibrated_extrinsic(answers.drop(columns="judge_score"), human) == {}
