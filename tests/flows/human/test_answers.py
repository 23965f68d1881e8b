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
    assert "design effect 1 + (m-1)*ICC" in log and "articles" in log


def test_labels_that_leave_a_configuration_without_one_are_refused_before_anything_is_logged(sweep):
    # the calibration of a configuration without labels cannot be computed: it crashed after the labels and the
    # traces' assessments were logged, leaving them at odds with the calibrated metrics of the import before
    folder, uri = sweep
    parent, _ = sweep_answers(uri)
    run_cli("flows.cli.label", folder, "answers", "export", "--tracking-uri", uri, "--n", "30",
            "--out", str(folder / "one.csv"))
    client = mlflow.MlflowClient(uri)
    key = pd.read_csv(client.download_artifacts(parent, "answer_labels/key.csv", str(folder)), dtype=str)
    givers = key.groupby("item")["configuration"].agg(frozenset)
    alone = givers[givers.map(len) == 1]  # answers only one configuration gave
    assert len(alone), "every answer was given by several configurations: nothing to test with"
    only = next(iter(alone.iloc[0]))
    sheet = pd.read_csv(folder / "one.csv", dtype=str, keep_default_na=False)
    sheet["relation"] = ["causal" if givers[item] == {only} else "" for item in sheet["item"]]
    sheet.to_csv(folder / "one.csv", index=False)

    def logged() -> tuple:
        children = client.search_runs([client.get_run(parent).info.experiment_id],
                                      f"tags.mlflow.parentRunId = '{parent}'")
        return ({run.info.run_id: run.data.metrics for run in children},
                sorted(a.path for a in client.list_artifacts(parent, "answer_labels")),
                client.get_run(parent).data.tags)

    before = logged()
    log = run_cli("flows.cli.label", folder, "answers", "import", str(folder / "one.csv"), "--tracking-uri", uri,
                  expect=2)
    (said,) = [line for line in log.splitlines() if "no labelled row is an answer of" in line]
    assert all(other in said for other in set(key["configuration"]) - {only}) and only not in said
    assert "(2 of 3 configurations)" in said and "Traceback" not in log
    assert logged() == before


def test_labels_that_all_agree_the_same_way_say_their_interval_has_no_width_for_want_of_labels(sweep):
    # every label names another relation than the gold one: the calibrated LRCR is 0 with no spread, [0, 0]
    folder, uri = sweep
    parent, answers = sweep_answers(uri)
    run_cli("flows.cli.label", folder, "answers", "export", "--tracking-uri", uri, "--n", "8",
            "--out", str(folder / "wrong.csv"))
    key = pd.read_csv(mlflow.MlflowClient(uri).download_artifacts(parent, "answer_labels/key.csv", str(folder)),
                      dtype=str).drop_duplicates("item").set_index("item")
    gold = dict(zip(answers["id"], answers["relation"]))
    sheet = pd.read_csv(folder / "wrong.csv", dtype=str, keep_default_na=False)
    sheet["relation"] = [next(r for r in LABELS if r != gold[key.loc[item, "example_id"]]) for item in sheet["item"]]
    sheet.to_csv(folder / "wrong.csv", index=False)
    log = run_cli("flows.cli.label", folder, "answers", "import", str(folder / "wrong.csv"), "--tracking-uri", uri)
    client = mlflow.MlflowClient(uri)
    for run_id in answers["run_id"].unique():
        metrics = client.get_run(run_id).data.metrics
        assert metrics["lrcr_calibrated"] == metrics["lrcr_calibrated_ci_low"] == metrics["lrcr_calibrated_ci_high"]
    (said,) = [line for line in log.splitlines() if "interval has no width" in line]
    assert "that is too few labels, not certainty" in said and said.count("extractive") == 3


def key_of(items: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"item": list(items), "generated_answer": list(items.values())})


@pytest.mark.parametrize("rows, message", [
    ([("r9", "causal")], "field 'item': 'r9' is not an item"),
    ([("r1", "causal"), ("r1", "causal")], "'r1' labelled twice"),
    ([("r1", "causl")], "field 'relation': 'causl' is not one of"),
])
def test_a_bad_row_is_named_before_anything_is_logged(tmp_path, rows, message):
    path = tmp_path / "sheet.csv"
    answers = {"r1": "a", "r2": "b"}
    sheet = pd.DataFrame(rows, columns=["item", "relation"])
    sheet.assign(generated_answer=sheet["item"].map(answers).fillna("?")).to_csv(path, index=False)
    with pytest.raises(DataError, match=message):
        read_sheet(path, key_of(answers), LABELS, ask_gold=False)


def test_a_sheet_whose_answers_were_deleted_is_refused(tmp_path):
    # another sweep's sheet with its generated_answer column deleted cannot be tied to this export
    path = tmp_path / "sheet.csv"
    pd.DataFrame({"item": ["r1"], "relation": ["causal"]}).to_csv(path, index=False)
    with pytest.raises(DataError, match=r"missing column\(s\) \['generated_answer'\]"):
        read_sheet(path, key_of({"r1": "a"}), LABELS, ask_gold=False)


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
    """The README's grid + bounds (15 configurations x 130 answers of deeplogic-130), 40 labels a configuration.
    Each 95 % interval covers its truth with probability 0.95, so of 15 about one may miss: at most two do."""
    run_cli("flows.cli.evaluate", tmp_path, "experiment=paper_grid_bounds", "dataset=deeplogic-130",
            "report.enabled=false", "tracking.traces=none")
    answers, _ = label_and_import(tmp_path, f"sqlite:///{tmp_path}/mlflow.db", n=40)
    covered = check_calibrated(f"sqlite:///{tmp_path}/mlflow.db", answers, 40)
    print(f"\n{sum(covered)} of {len(covered)} calibrated intervals cover the simulated truth")
    assert len(covered) == 15 and sum(covered) >= 13


def test_where_gold_relations_are_machine_labels_the_sheet_needs_both_relations(tmp_path):
    path = tmp_path / "sheet.csv"
    pd.DataFrame({"item": ["r1", "r2", "r3"], "relation": ["causal", "", "causal"], "generated_answer": ["a", "b", "c"],
                  "gold_relation": ["deductive", "", ""]}).to_csv(path, index=False)
    with pytest.raises(DataError, match="row 4: label both 'relation' and 'gold_relation', or neither"):
        read_sheet(path, key_of({"r1": "a", "r2": "b", "r3": "c"}), LABELS, ask_gold=True)
    pd.DataFrame({"item": ["r1"], "relation": ["causal"], "generated_answer": ["a"]}).to_csv(path, index=False)
    with pytest.raises(DataError, match=r"missing column\(s\) \['gold_relation'\]"):
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


def test_calibrated_extrinsic_is_by_article_unless_the_run_was_per_question():
    from flows.human.annotate import calibrated_extrinsic
    from opi.metrics.ppi import ppi_mean

    answers = pd.DataFrame({"configuration": ["k"] * 8, "example_id": list("abcdefgh"),
                            "judge_score": [7, 3, 0, 7, 7, 3, 0, 3], "cluster": list("xxyyzzxy")})
    human = pd.DataFrame({"configuration": ["k"] * 4, "example_id": list("abce"), "score": [7, 0, 0, 7]})
    found = calibrated_extrinsic(answers, human)["k"]
    expected = ppi_mean([7, 0, 0, 7], [7, 3, 0, 7], [7, 3, 0, 3], clusters=list("xxyz"),
                        clusters_unlabelled=list("yzxy"))
    assert expected.clusters == 3
    assert (found["extrinsic_calibrated"], found["extrinsic_calibrated_ci_low"],
            found["extrinsic_calibrated_ci_high"]) == pytest.approx((expected.value, max(expected.low, 0),
                                                                     min(expected.high, 7)))
    per_question = calibrated_extrinsic(answers.assign(report_unit="example"), human)["k"]
    independent = ppi_mean([7, 0, 0, 7], [7, 3, 0, 7], [7, 3, 0, 3])
    assert per_question["extrinsic_calibrated_ci_high"] == pytest.approx(min(independent.high, 7))


def configuration_rows(unit: str = "article", articles: int = 12, questions: int = 4) -> pd.DataFrame:
    """One configuration's answers: ``articles`` x ``questions``, the classifier right on two thirds."""
    n = articles * questions
    relation = np.array(LABELS[:3])[np.arange(n) % 3]
    predicted = np.where(np.arange(n) % 3 == 0, np.array(LABELS[3:6])[np.arange(n) % 3], relation)
    return pd.DataFrame({"configuration": "k", "run_id": "r", "example_id": [f"e{i}" for i in range(n)],
                         "cluster": [f"a{i // questions}" for i in range(n)], "relation": relation,
                         "predicted_relation": predicted, "similarity": np.linspace(0.2, 0.8, n),
                         "report_unit": unit})


def people(rows: pd.DataFrame, every: int) -> pd.DataFrame:
    """People's relation on every ``every``-th answer: the gold one, except on the first four articles (their
    answers are wrong together)."""
    chosen = rows.iloc[::every]
    named = np.where(chosen["cluster"].isin(["a0", "a1", "a2", "a3"]), LABELS[7], chosen["relation"])
    return pd.DataFrame({"configuration": "k", "example_id": chosen["example_id"], "human_relation": named})


def test_calibrate_uses_the_articles_of_the_run_s_unit():
    from flows.human.answers import calibrate
    from opi.metrics.calibration import calibrated_lrcr

    rows, seed = configuration_rows(), 4
    human = people(rows, 2)
    merged = rows.merge(human, on=["configuration", "example_id"], how="left")
    arguments = dict(machine=(merged["predicted_relation"] == merged["relation"]).to_numpy(float),
                     human=(merged["human_relation"] == merged["relation"]).where(merged["human_relation"].notna())
                     .to_numpy(float), relations=merged["relation"].to_numpy(str),
                     similarity=merged["similarity"].to_numpy(float), seed=seed)
    for unit, clusters in (("article", merged["cluster"].to_numpy()), ("example", None)):
        found = calibrate(rows.assign(report_unit=unit), human, seed).iloc[0]
        expected = calibrated_lrcr(**arguments, clusters=clusters)
        assert {name: found[name] for name in expected} == pytest.approx(expected)
    by_article, by_example = (calibrate(rows.assign(report_unit=u), human, seed).iloc[0] for u in ("article",
                                                                                                   "example"))
    assert by_article["lrcr_calibrated_ci_low"] != by_example["lrcr_calibrated_ci_low"]


def test_plan_inflates_by_the_design_effect_of_the_labels_so_far_or_the_default():
    from flows.human.answers import planned
    from opi.metrics.calibration import DEFAULT_ICC, labels_for_width
    from opi.metrics.ppi import design_effect, intraclass_correlation, same_cluster_share

    rows = configuration_rows()  # 12 articles x 4 answers: k = 12·4·3/(48·47) = 3/47
    assert same_cluster_share(rows["cluster"]) == pytest.approx(3 / 47)
    none_yet = planned("k", rows, None, 0.1)
    assert (none_yet["icc"], none_yet["icc_from"], none_yet["from"]) == (DEFAULT_ICC, "default",
                                                                         "worst case (no labels yet)")
    assert none_yet["answers"] == "12 articles, 48 questions"
    assert (none_yet["labels_needed"], none_yet["reaches_width"]) == labels_for_width(0.1, None, 48, 0.05,
                                                                                       DEFAULT_ICC, 3 / 47)
    human = people(rows, 2)  # 24 labels, two on each of the 12 articles: ICC estimated from them
    found = planned("k", rows, human, 0.3)
    labelled = rows.merge(human, on="example_id")
    residual = ((labelled["predicted_relation"] == labelled["relation"]).astype(float)
                - (labelled["human_relation"] == labelled["relation"]).astype(float))
    icc = intraclass_correlation(residual, labelled["cluster"])
    assert (found["icc"], found["icc_from"]) == (pytest.approx(icc), "labels") and 0 < icc < 1
    needed, reached = labels_for_width(0.3, residual.var(ddof=1), 48, 0.05, icc, 3 / 47)
    assert (found["labels_needed"], found["reaches_width"]) == (needed, reached)
    assert found["design_effect"] == pytest.approx(design_effect(needed, icc, 3 / 47))
    few = planned("k", rows, people(rows, 4), 0.3)  # 12 labels, one an article: too few for an ICC
    assert (few["icc"], few["icc_from"], few["from"]) == (DEFAULT_ICC, "default", "labels so far")
    per_question = planned("k", rows.assign(report_unit="example"), human, 0.3)
    assert (per_question["design_effect"], per_question["icc_from"]) == (1.0, "none (unit example)")


def test_importing_labels_again_keeps_one_label_a_trace_and_a_changed_label_replaces_the_old(tmp_path):
    from flows.human.answers import log_assessments
    from flows.tracking.traces import EXAMPLE_TAG

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("labels")
    with mlflow.start_run() as run:
        for example in ("e1", "e2"):
            with mlflow.start_span(name="example"):
                mlflow.update_current_trace(tags={EXAMPLE_TAG: example})
    mlflow.flush_trace_async_logging()
    client = mlflow.MlflowClient(uri)
    human = pd.DataFrame({"run_id": run.info.run_id, "example_id": ["e1", "e2", "e3"],  # e3: no trace
                          "human_relation": ["causal", "temporal", "causal"]})

    def labels() -> dict[str, list]:
        traces = client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id)
        return {t.info.tags[EXAMPLE_TAG]: sorted(a.value for a in t.info.assessments if a.name == "human_relation")
                for t in traces}

    for _ in range(3):  # the same sheet, imported three times: one label a trace
        assert log_assessments(client, uri, human) == 2
    assert labels() == {"e1": ["causal"], "e2": ["temporal"]}
    changed = human.assign(human_relation=["causal", "comparative", "causal"])
    assert log_assessments(client, uri, changed) == 2
    assert labels() == {"e1": ["causal"], "e2": ["comparative"]}
